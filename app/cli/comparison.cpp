#include "app/cli/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/cli/table.h"
#include "compute/registry.h"

namespace attn::cli {

Comparison compare_variants(const Problem& p, const std::vector<std::string>& specs,
                            Backend& backend, bool metrics, const RunOptions& opt) {
  Comparison c;
  Variant dense = make_variant("dense");
  // The reference row is dense in f32; with a reduced precision, dense in that precision comes
  // next, so its error and speed against f32 show beside the variants'.
  RunOptions f32 = opt;
  f32.precision = Precision::F32;
  Result ref = run(dense, p, backend, f32);
  std::vector<Variant> variants;
  for (const auto& s : specs) variants.push_back(make_variant(s));  // fail fast on bad specs
  c.rows.push_back({dense.spec(), ref.stats, {}, false});
  if (metrics) {
    c.rows[0].metrics = compare(dense, p, ref, ref);
    c.rows[0].has_metrics = true;
  } else {
    ref = Result{};  // only its stats are needed: its output and layout go before the variants run
  }
  if (opt.precision != Precision::F32) variants.insert(variants.begin(), dense);
  for (const Variant& v : variants) {
    Result r = run(v, p, backend, opt);
    ComparisonRow row{v.spec(), r.stats, {}, false};
    if (metrics) {
      row.metrics = compare(v, p, r, ref);
      row.has_metrics = true;
    }
    c.rows.push_back(std::move(row));
  }
  return c;
}

void print_comparison(const Problem& p, const Comparison& c) {
  std::printf("problem: %d heads (%d kv), %d queries x %d keys, d = %d, %s\n", p.n_heads,
              p.n_kv_heads, p.n_q, p.n_k, p.d, p.causal ? "causal" : "bidirectional");
  // Two measures of sparsity, not to be confused: "kept" counts the score entries the variant
  // keeps, "computed" the work the kernels did, which covers whole blocks.
  Table t({"variant", "backend", "precision", "kept", "computed", "rel.err", "recall", "row KL",
           "pred GFLOP", "counted GFLOP", "select ms", "kernel ms", "wall ms", "GFLOP/s",
           "speedup"});
  const double dense_s = c.rows[0].stats.wall_seconds;
  const double dense_flops = c.rows[0].stats.counted.flops;
  for (const auto& r : c.rows) {
    const Stats& s = r.stats;
    const double secs = s.wall_seconds;
    std::string speedup = fixed(dense_s / secs, 2);
    speedup += 'x';
    t.add({r.spec, s.backend, precision_name(s.precision), fixed(s.density, 4),
           fixed(dense_flops > 0 ? s.counted.flops / dense_flops : std::nan(""), 4),
           r.has_metrics ? sci(r.metrics.rel_error) : "-",
           r.has_metrics ? fixed(r.metrics.mass_recall, 4) : "-",
           r.has_metrics ? sci(r.metrics.row_kl) : "-", fixed(s.predicted.flops / 1e9, 3),
           fixed(s.counted.flops / 1e9, 3), fixed(s.select_seconds * 1e3, 2),
           fixed(s.kernel_seconds * 1e3, 2), fixed(secs * 1e3, 2),
           fixed(s.counted.flops / 1e9 / secs, 1), speedup});
  }
  t.print();
  std::printf(
      "kept: share of visible entries kept; computed: counted flops vs dense, in whole kernel "
      "blocks (on a short input window 16/32/64 compute the same blocks but keep different "
      "entries); row KL: each head's attention rows vs dense; wall: select + kernel + run "
      "bookkeeping\n");
  if (c.rows[0].has_metrics && !c.rows[0].metrics.sinks.empty()) {
    std::printf("sink tokens (mean received mass > 0.3):");
    for (int j : c.rows[0].metrics.sinks)
      std::printf(" %d (%.2f)", j, c.rows[0].metrics.sink_score[j]);
    std::printf("\n");
  }
}

nlohmann::json comparison_json(const Problem& p, const Comparison& c) {
  nlohmann::json j;
  j["problem"] = {{"heads", p.n_heads}, {"kv_heads", p.n_kv_heads}, {"n_q", p.n_q}, {"n_k", p.n_k},
                  {"d", p.d},           {"causal", p.causal}};
  for (const auto& r : c.rows) {
    const Stats& s = r.stats;
    nlohmann::json row = {{"variant", r.spec},
                          {"backend", s.backend},
                          {"precision", precision_name(s.precision)},
                          {"density", s.density},
                          {"kept_entries", s.kept_entries},
                          {"predicted_flops", s.predicted.flops},
                          {"predicted_bytes", s.predicted.bytes},
                          {"counted_flops", s.counted.flops},
                          {"counted_bytes", s.counted.bytes},
                          {"select_seconds", s.select_seconds},
                          {"kernel_seconds", s.kernel_seconds},
                          {"wall_seconds", s.wall_seconds}};
    if (r.has_metrics) {
      const Metrics& m = r.metrics;
      row["rel_error"] = m.rel_error;
      row["mass_recall"] = m.mass_recall;
      row["row_kl"] = std::isnan(m.row_kl) ? nlohmann::json(nullptr) : nlohmann::json(m.row_kl);
      row["sinks"] = m.sinks;
      std::vector<double> top(m.sink_score.begin(),
                              m.sink_score.begin() + std::min<size_t>(16, m.sink_score.size()));
      row["sink_score_first16"] = top;
    }
    j["variants"].push_back(row);
  }
  return j;
}

}  // namespace attn::cli
