// .npy bytes (parse_npy): header dict, dtype, shape, version 1/2/3, data length. An array that
// parses converts to f32 and survives a serialise / parse round trip unchanged.
#include "models/formats/npy.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::refuse_only_with_attn_error([&] {
    const models::NpyArray a = models::parse_npy({data, size}, "fuzz.npy");
    const std::vector<float> f = a.to_f32();
    fuzz::check(f.size() == a.numel(), "to_f32 size differs from numel");
    const models::NpyArray b = models::parse_npy(serialize_npy(a), "round trip");
    fuzz::check(b.dtype == a.dtype && b.shape == a.shape && b.data == a.data,
                "serialize_npy / parse_npy round trip changed the array");
  });
  return 0;
}
