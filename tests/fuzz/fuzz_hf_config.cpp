// config.json (load_hf_config): every family's key spellings and defaults, rope_scaling,
// id2label, token ids, integers written as floats.
#include "models/formats/hf_config.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("config.json", {data, size});
  fuzz::refuse_only_with_attn_error([&] { (void)models::load_hf_config(path); });
  return 0;
}
