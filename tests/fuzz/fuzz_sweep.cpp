// The sweep grammar (expand_sweep: "a..b:xF", "a..b:+S", "a|b|c" inside a spec), shard strings
// (parse_shard: "i/n") and trade-off tables (parse_tradeoff_csv). Expanded specs parse; a
// table that parses prints and parses back to as many rows.
#include "app/core/analysis/sweep.h"
#include "compute/spec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  if (size <= 4096) {
    fuzz::refuse_only_with_attn_error([&] {
      // The first 256 expanded specs and the last (a grid runs to 10,000 variants of up to 4 KB
      // each: parsing them all would spend seconds per input on one code path).
      const std::vector<std::string> specs = core::expand_sweep(text);
      for (size_t i = 0; i < specs.size(); ++i) {
        if (i >= 256 && i + 1 < specs.size()) continue;
        try {
          (void)parse_spec(specs[i]);
        } catch (const attn::Error& e) {
          fuzz::broken("expanded spec '" + specs[i] + "' does not parse: " + e.what());
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
