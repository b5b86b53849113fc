// .npz archives (read_npz): the zip directory, stored and deflated entries, entry names and
// sizes, and the .npy inside each entry.
#include "models/formats/npy.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("fuzz.npz", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    for (const auto& [name, array] : models::read_npz(path)) {
      fuzz::check(array.to_f32().size() == array.numel(), "to_f32 size differs for " + name);
    }
  });
  return 0;
}
