// Session files (load_session): format tag, version, every field's type and range, the GUI's
// extra state. A session that loads survives session_to_json / session_from_json unchanged.
#include "app/core/session/session.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("fuzz.attnscope.json", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    const core::Session s = core::load_session(path);
    const nlohmann::json j = core::session_to_json(s);
    core::Session again;
    try {
      again = core::session_from_json(j, "round trip");
    } catch (const attn::Error& e) {
      fuzz::broken(std::string("a loaded session does not read back: ") + e.what());
    }
    fuzz::check(core::session_to_json(again) == j, "session JSON round trip changed the session");
    (void)core::resolve_session_path(path, s.input.image);
    (void)core::resolve_session_path(path, s.input.tensors);
  });
  return 0;
}
