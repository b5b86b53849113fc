// A sharded checkpoint's model.safetensors.index.json (SafetensorsCheckpoint::open on the
// folder): weight_map entries, shard paths (absolute, "..", missing, repeated), tensors mapped to
// the wrong shard. The folder holds two valid shards written at start-up.
#include <cstring>
#include <vector>

#include "models/formats/safetensors.h"
#include "models/formats/safetensors_writer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

namespace {

std::vector<uint8_t> bytes_of(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 37 + 11);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::vector<uint8_t> f32 = bytes_of(6 * 4), f16 = bytes_of(4 * 2), bf16 = bytes_of(4 * 2),
                             i64 = bytes_of(3 * 8);
  const std::string dir = fuzz::scratch_dir();
  models::write_safetensors(
      dir + "/model-00001-of-00002.safetensors",
      {{"a.weight", models::DType::F32, {2, 3}, f32}, {"b.bias", models::DType::F16, {4}, f16}});
  models::write_safetensors(
      dir + "/model-00002-of-00002.safetensors",
      {{"c.weight", models::DType::BF16, {2, 2}, bf16}, {"d.ids", models::DType::I64, {3}, i64}},
      {{"format", "pt"}});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::write_scratch("model.safetensors.index.json", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    const models::SafetensorsCheckpoint ck =
        models::SafetensorsCheckpoint::open(fuzz::scratch_dir());
    for (const std::string& name : ck.names()) {
      const models::TensorView& t = ck.tensor(name);
      fuzz::check(t.to_f32().size() == t.numel(), "to_f32 size differs for " + name);
    }
  });
  return 0;
}
