// The sweep grammar (expand_sweep: "a..b:xF", "a..b:+S", "a|b|c" inside a spec), shard strings
// (parse_shard: "i/n") and trade-off tables (parse_tradeoff_csv). Every expanded spec parses; a
// table that parses prints and parses back to as many rows.
#include "app/core/sweep.h"
#include "compute/spec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  if (size <= 4096) {
    fuzz::refuse_only_with_attn_error([&] {
      for (const std::string& s : core::expand_sweep(text)) {
        try {
          (void)parse_spec(s);
        } catch (const attn::Error& e) {
          fuzz::broken("expanded spec '" + s + "' does not parse: " + e.what());
        }
      }
    });
    fuzz::refuse_only_with_attn_error([&] {
      const core::Shard shard = core::parse_shard(text);
      (void)core::shard_items(100, shard);
    });
  }
  fuzz::refuse_only_with_attn_error([&] {
    const auto rows = core::parse_tradeoff_csv(text, "fuzz.csv");
    std::vector<core::SweepRow> again;
    try {
      again = core::parse_tradeoff_csv(core::tradeoff_csv(rows), "round trip");
    } catch (const attn::Error& e) {
      fuzz::broken(std::string("tradeoff_csv output does not parse: ") + e.what());
    }
    fuzz::check(again.size() == rows.size(), "trade-off table round trip changed the row count");
    (void)core::merge_sweep_rows({rows});
  });
  return 0;
}
