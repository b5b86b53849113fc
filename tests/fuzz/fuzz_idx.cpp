// IDX bytes (read_idx), plain or gzip: magic, element type, dimensions, data length, the gzip
// stream. A file that reads holds exactly the product of its dimensions in bytes.
#include "models/formats/idx.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("in.idx", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    const models::IdxArray a = models::read_idx(path);
    size_t count = 1;
    for (int64_t d : a.shape) count *= size_t(d);
    fuzz::check(!a.shape.empty() && a.shape.size() <= 4, "an IDX array with 0 or > 4 dimensions");
    fuzz::check(a.data.size() == count, "IDX data length differs from its dimensions");
  });
  return 0;
}
