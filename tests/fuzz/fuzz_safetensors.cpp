// One .safetensors file (SafetensorsCheckpoint::open): header length, JSON header, dtypes, shapes,
// data offsets, metadata. Every tensor of a file that opens converts to f32 and its typed view
// either works or is refused with attn::Error.
#include "models/formats/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("model.safetensors", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    const models::SafetensorsCheckpoint ck = models::SafetensorsCheckpoint::open(path);
    for (const std::string& name : ck.names()) {
      const models::TensorView& t = ck.tensor(name);
      fuzz::check(t.to_f32().size() == t.numel(), "to_f32 size differs for " + name);
      fuzz::refuse_only_with_attn_error([&] { (void)t.f32(); });
    }
  });
  return 0;
}
