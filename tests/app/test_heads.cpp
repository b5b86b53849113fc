// Head roles (app/core/heads/head_roles.h) on hand-made attention patterns with known scores, the
// atlas (head_atlas.h) on the default text model against the probes its model card recorded
// (assets/models/default-text/phenomena.json, measured in PyTorch by measure_text.py), bootstrap
// interval coverage, shards that merge to the single run, the dataset reader's errors, the role
// metrics of the head grid, and the `heads` verb.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/sweep.h"
#include "app/core/analysis/views.h"
#include "app/core/datasets/dataset_analysis.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/heads/atlas_shard.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/head_roles.h"
#include "app/core/heads/interventions.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/metrics.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;
using core::HeadRows;
using core::role_scores;

// Softmax heads without modifiers take a fast path for their role rows (one f32 GEMM per block,
// the result's log-sum-exp, the layout's kept keys) and the previous-token metric: the scores
// equal those from probability_block's double-precision rows, with grouped-query heads, causal and
// not, dense, static and dynamic patterns, and a modified variant taking the general path.
TEST(HeadRoles, SoftmaxRowsFastPathMatchesTheGeneralOne) {
  std::mt19937 rng(5);
  for (bool causal : {true, false})
    for (const char* spec : {"dense", "window(size=16)", "topk(k=8)", "dense+alibi"}) {
      const Problem p = random_problem(4, 2, 150, 150, 16, causal, 21);
      std::vector<int32_t> ids(150);
      for (auto& t : ids) t = int32_t(rng() % 7);  // repeats, so duplicate/induction are defined
      auto backend = make_backend("cpu");
      const Variant v = make_variant(spec);
      const Result r = run(v, p, *backend);
      for (int h = 0; h < p.n_heads; ++h) {
        const core::RoleScores fast = core::panel_role_scores(v, p, r, h, &ids);
        HeadRows rows;
        rows.n_q = p.n_q;
        rows.n_k = p.n_k;
        rows.causal = p.causal;
        rows.ids = &ids;
        rows.row = [&](int i, std::vector<double>& scratch) {
          probability_block(v, p, r, h, i, i + 1, 0, p.n_k, scratch);
          return scratch.data();
        };
        rows.out_norm.resize(size_t(p.n_q));
        rows.value_norm.resize(size_t(p.n_k));
        for (int i = 0; i < p.n_q; ++i) {
          double s = 0;
          for (int e = 0; e < p.d; ++e) s += double(r.o_row(h, i)[e]) * r.o_row(h, i)[e];
          rows.out_norm[size_t(i)] = std::sqrt(s);
        }
        for (int k = 0; k < p.n_k; ++k) {
          double s = 0;
          for (int e = 0; e < p.d; ++e) s += double(p.v_row(h, k)[e]) * p.v_row(h, k)[e];
          rows.value_norm[size_t(k)] = std::sqrt(s);
        }
        const core::RoleScores slow = role_scores(rows);
        // The previous-token head metric takes the same fast path, one entry per row.
        const Metrics none;
        const double prev =
            core::head_metrics()[size_t(core::head_metric_index("prev_token"))].value(
                {v, p, r, h, none, nullptr});
        double prev_slow = 0;
        std::vector<double> e;
        for (int i = 1; i < p.n_q; ++i) {
          probability_row(v, p, r, h, i, i - 1, i, e);
          prev_slow += e[0];
        }
        EXPECT_NEAR(prev, prev_slow / (p.n_q - 1), 1e-6) << spec << " head " << h;
        ASSERT_EQ(fast.value.size(), slow.value.size());
        for (size_t i = 0; i < slow.value.size(); ++i) {
          SCOPED_TRACE(std::string(spec) + " head " + std::to_string(h) + " role " +
                       core::head_roles()[i].name);
          if (std::isnan(slow.value[i]))
            EXPECT_TRUE(std::isnan(fast.value[i]));
          else
            EXPECT_NEAR(fast.value[i], slow.value[i], 1e-5);
        }
      }
    }
}

// One pass over a head's rows (panel_head(): the head grid's path) gives what the separate passes
// give: compare() of the head's slices, panel_role_scores() and the previous-token metric; a
// modified variant, and a precision other than the reference's, take the separate passes.
TEST(HeadRoles, OnePassOverAHeadMatchesTheSeparatePasses) {
  std::mt19937 rng(9);
  for (bool causal : {true, false})
    for (const char* spec : {"dense", "window(size=16)", "topk(k=8)"}) {
      const Problem p = random_problem(4, 2, 150, 150, 16, causal, 23);
      std::vector<int32_t> ids(150);
      for (auto& t : ids) t = int32_t(rng() % 7);
      auto backend = make_backend("cpu");
      const Variant v = make_variant(spec);
      const Result ref = run(make_variant("dense"), p, *backend);
      const Result r = run(v, p, *backend);
      for (int h = 0; h < p.n_heads; ++h) {
        SCOPED_TRACE(std::string(spec) + (causal ? " causal" : " bidirectional") + " head " +
                     std::to_string(h));
        SoftmaxRows scratch;
        const auto one = core::panel_head(v, p, r, ref, h, &ids, h % 2 ? &scratch : nullptr);
        ASSERT_TRUE(one.has_value());
        const Metrics m =
            compare(v, head_problem(p, h), head_result(r, p, h), head_result(ref, p, h));
        EXPECT_NEAR(one->metrics.rel_error, m.rel_error, 1e-12);
        EXPECT_EQ(one->metrics.density, m.density);
        EXPECT_NEAR(one->metrics.mass_recall, m.mass_recall, 1e-6);
        EXPECT_NEAR(one->metrics.row_kl, m.row_kl, 1e-5);
        for (size_t i = 0; i < m.entropy.size(); ++i)
          ASSERT_NEAR(one->metrics.entropy[i], m.entropy[i], 1e-5) << i;
        const core::RoleScores roles = core::panel_role_scores(v, p, r, h, &ids);
        for (size_t i = 0; i < roles.value.size(); ++i) {
          if (std::isnan(roles.value[i]))
            EXPECT_TRUE(std::isnan(one->roles.value[i])) << core::head_roles()[i].name;
          else
            EXPECT_NEAR(one->roles.value[i], roles.value[i], 1e-9) << core::head_roles()[i].name;
        }
        EXPECT_EQ(one->roles.offset, roles.offset);
        const Metrics none;
        const double prev =
            core::head_metrics()[size_t(core::head_metric_index("prev_token"))].value(
                {v, p, r, h, none, nullptr});
        EXPECT_NEAR(one->previous_token, prev, 1e-6);
      }
    }
  const Problem p = random_problem(2, 2, 40, 40, 16, true, 5);
  auto backend = make_backend("cpu");
  const Result ref = run(make_variant("dense"), p, *backend);
  const Variant alibi = make_variant("dense+alibi");
  EXPECT_FALSE(core::panel_head(alibi, p, run(alibi, p, *backend), ref, 0, nullptr));
  Result bf16 = ref;
  bf16.stats.precision = Precision::Bf16;
  EXPECT_FALSE(core::panel_head(make_variant("dense"), p, bf16, ref, 0, nullptr));
}

// A causal pattern f32 [n, n] from a rule giving each row's weights (normalised here).
std::vector<float> pattern(int n, const std::function<double(int t, int k)>& w) {
  std::vector<float> p(size_t(n) * n, 0.0f);
  for (int t = 0; t < n; ++t) {
    double s = 0;
    for (int k = 0; k <= t; ++k) s += w(t, k);
    for (int k = 0; k <= t; ++k) p[size_t(t) * n + k] = float(w(t, k) / s);
  }
  return p;
}

TEST(HeadRoles, HandMadePatternsHaveTheirScores) {
  const int n = 8;
  // Previous token (the first query attends to itself).
  const auto prev = pattern(n, [](int t, int k) { return t == 0 || k == t - 1 ? 1.0 : 0.0; });
  core::RoleScores r = role_scores(core::pattern_rows(prev.data(), n, n));
  EXPECT_DOUBLE_EQ(r.get("previous_token"), 1.0);
  EXPECT_NEAR(r.get("sink"), 1.0 / 7, 1e-12);  // only query 1's previous token is the first
  EXPECT_DOUBLE_EQ(r.get("offset"), 1.0);
  EXPECT_EQ(r.offset, 1);
  double harmonic = 0;
  for (int t = 1; t < n; ++t) harmonic += 1.0 / t;
  EXPECT_NEAR(r.get("distance"), harmonic / 7, 1e-12);
  EXPECT_TRUE(std::isnan(r.get("duplicate_token")));  // no ids given
  EXPECT_TRUE(std::isnan(r.get("no_op")));            // no norms given

  // Sink: everything on the first token.
  const auto sink = pattern(n, [](int, int k) { return k == 0 ? 1.0 : 0.0; });
  HeadRows rows = core::pattern_rows(sink.data(), n, n);
  rows.out_norm.assign(n, 0.0);  // the sink's value writes nothing
  rows.value_norm.assign(n, 2.0);
  r = role_scores(rows, {2});
  EXPECT_DOUBLE_EQ(r.get("sink"), 1.0);
  EXPECT_DOUBLE_EQ(r.get("previous_token"), 0.0);
  EXPECT_DOUBLE_EQ(r.get("distance"), 1.0);
  EXPECT_NEAR(r.get("offset"), 1.0 / 7, 1e-12);  // one query per offset
  EXPECT_DOUBLE_EQ(r.get("long_range"), 0.0);    // the first token is the sink's, not far mass
  EXPECT_DOUBLE_EQ(r.get("no_op"), 1.0);
  rows.out_norm.assign(n, 1.0);  // half the mean value norm: half a no-op
  EXPECT_DOUBLE_EQ(role_scores(rows).get("no_op"), 0.5);

  // Uniform rows.
  const auto uni = pattern(n, [](int, int) { return 1.0; });
  r = role_scores(core::pattern_rows(uni.data(), n, n));
  double s = 0, p = 0;
  for (int t = 1; t < n; ++t) s += 1.0 / (t + 1) / 7;
  for (int t = 2; t < n; ++t) p += 1.0 / (t + 1) / 6;
  EXPECT_NEAR(r.get("sink"), s, 1e-7);
  EXPECT_NEAR(r.get("previous_token"), p, 1e-7);
  EXPECT_NEAR(r.get("distance"), 0.5, 1e-7);  // the mean of 0..t over t is t/2

  // Long range: always 5 tokens back (from query 5 on), D = 3.
  const auto far = pattern(n, [](int t, int k) { return t < 5 ? (k == t) : (k == t - 5); });
  r = role_scores(core::pattern_rows(far.data(), n, n), {3});
  // Queries with keys beyond D (first token excepted) are 5, 6, 7; query 5's far mass is on
  // the first token.
  EXPECT_NEAR(r.get("long_range"), 2.0 / 3, 1e-7);
}

// Distance, offset and long-range come from vectorised range sums: they equal the definitions
// evaluated key by key, on random rows with fewer queries than keys, causal and bidirectional.
TEST(HeadRoles, RangeSumsMatchTheDefinitionsKeyByKey) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (const bool causal : {true, false}) {
    const int nq = 97, nk = 131, off = nk - nq, D = 9;
    std::vector<float> pat(size_t(nq) * nk, 0.0f);
    for (int i = 0; i < nq; ++i) {
      const int kend = causal ? off + i + 1 : nk;
      float z = 0;
      for (int k = 0; k < kend; ++k) z += pat[size_t(i) * nk + k] = u(rng) * u(rng);
      for (int k = 0; k < kend; ++k) pat[size_t(i) * nk + k] /= z;
    }
    double dist = 0, longr = 0;
    int dist_rows = 0, long_rows = 0;
    std::vector<double> at(size_t(2 * nk), 0.0);
    for (int i = 0; i < nq; ++i) {
      const int t = off + i;
      const float* row = pat.data() + size_t(i) * nk;
      const int reach = causal ? t : std::max(t, nk - 1 - t);
      const int kend = causal ? t + 1 : nk;
      if (t >= 1 && reach > 0) {
        double e = 0;
        for (int k = 0; k < kend; ++k)
          e += double(row[k]) * std::abs(t - k), at[size_t(t - k + nk)] += row[k];
        dist += e / reach;
        ++dist_rows;
      }
      double m = 0;
      bool any = false;
      for (int k = 1; k < kend; ++k)
        if (std::abs(t - k) > D) m += row[k], any = true;
      if (t >= 1 && any) longr += m, ++long_rows;
    }
    const core::RoleScores r = role_scores(core::pattern_rows(pat.data(), nq, nk, causal), {D});
    EXPECT_NEAR(r.get("distance"), dist / dist_rows, 1e-12) << causal;
    EXPECT_NEAR(r.get("long_range"), longr / long_rows, 1e-12) << causal;
    const auto best = std::max_element(at.begin(), at.end());
    EXPECT_NEAR(r.get("offset"), *best / dist_rows, 1e-12) << causal;
    EXPECT_EQ(r.offset, int(best - at.begin()) - nk) << causal;
  }
}

TEST(HeadRoles, InductionAndDuplicateOnARepeatedSequence) {
  // BOS a b c a b c: the second copy attends to the token after the earlier occurrence.
  const std::vector<int32_t> ids = {9, 1, 2, 3, 1, 2, 3};
  const int n = 7;
  const auto ind = pattern(n, [](int t, int k) { return t >= 4 ? k == t - 2 : k == t; });
  HeadRows rows = core::pattern_rows(ind.data(), n, n);
  rows.ids = &ids;
  core::RoleScores r = role_scores(rows);
  EXPECT_DOUBLE_EQ(r.get("induction"), 1.0);
  EXPECT_DOUBLE_EQ(r.get("duplicate_token"), 0.0);
  rows.repeat_start = 1;
  rows.repeat_period = 3;
  r = role_scores(rows);
  EXPECT_DOUBLE_EQ(r.get("induction"), 1.0);
  EXPECT_DOUBLE_EQ(r.get("duplicate_token"), 0.0);
  EXPECT_TRUE(std::isnan(r.get("retrieval")));  // no copy steps marked
  // Copy steps at queries 4 and 5 (copying tokens 2 and 3): the head's top key is the copied
  // token at both; a third step whose copied token the head does not attend to makes it 2/3.
  rows.copy_source = {-1, -1, -1, -1, 2, 3, -1};
  EXPECT_DOUBLE_EQ(role_scores(rows).get("retrieval"), 1.0);
  rows.copy_source[6] = 1;
  EXPECT_NEAR(role_scores(rows).get("retrieval"), 2.0 / 3, 1e-12);
  rows.copy_source.clear();
  const auto dup = pattern(n, [](int t, int k) { return t >= 4 ? k == t - 3 : k == t; });
  rows = core::pattern_rows(dup.data(), n, n);
  rows.ids = &ids;
  r = role_scores(rows);
  EXPECT_DOUBLE_EQ(r.get("duplicate_token"), 1.0);
  EXPECT_DOUBLE_EQ(r.get("induction"), 0.0);
  // R repeating a token inside itself: the positional (protocol) score ignores it, the token
  // rule counts both occurrences.
  const std::vector<int32_t> twice = {9, 1, 1, 3, 1, 1, 3};
  rows.ids = &twice;
  rows.repeat_start = 1;
  rows.repeat_period = 3;
  EXPECT_DOUBLE_EQ(role_scores(rows).get("duplicate_token"), 1.0);
  rows.repeat_period = 0;
  EXPECT_LT(role_scores(rows).get("duplicate_token"), 1.0);
}

TEST(HeadRoles, BadInputsAreRefused) {
  const auto p = pattern(4, [](int, int) { return 1.0; });
  HeadRows rows = core::pattern_rows(p.data(), 4, 4);
  const std::vector<int32_t> three = {1, 2, 3};
  rows.ids = &three;
  EXPECT_THROW(role_scores(rows), Error);
  rows.ids = nullptr;
  rows.repeat_period = 3;  // 2 x 3 does not fit in 4 tokens
  EXPECT_THROW(role_scores(rows), Error);
  try {
    core::head_role_index("copy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("previous_token"), std::string::npos);
  }
  EXPECT_THROW(role_scores(HeadRows{}), Error);
}

// The role table is the one place a role lives: each entry's detector gives role_scores' value,
// and a role with a grid id is that head-grid metric, reading its own score.
TEST(HeadRoles, TableDrivesTheScoresAndTheGridMetrics) {
  const auto& roles = core::head_roles();
  const int n = 12;
  const auto p = pattern(n, [](int i, int k) { return k <= i ? 1.0 + (i + k) % 3 : 0.0; });
  HeadRows rows = core::pattern_rows(p.data(), n, n);
  const core::RoleScores all = role_scores(rows);
  std::vector<double> scratch;
  std::set<std::string> names, grid_ids;
  for (size_t r = 0; r < roles.size(); ++r) {
    EXPECT_TRUE(names.insert(roles[r].name).second) << roles[r].name;
    ASSERT_TRUE(roles[r].detector) << roles[r].name;
    EXPECT_FALSE(roles[r].title.empty() || roles[r].definition.empty()) << roles[r].name;
    // The entry's detector alone, fed the rows, gives the table-wide pass's score.
    auto d = roles[r].detector(rows, {});
    for (int i = 0; i < n; ++i) d->add({i, i, i + 1, rows.row(i, scratch)});
    const double v = d->score();
    if (std::isnan(all.value[r])) {
      EXPECT_TRUE(std::isnan(v)) << roles[r].name;
    } else {
      EXPECT_DOUBLE_EQ(std::clamp(v, 0.0, 1.0), all.value[r]) << roles[r].name;
    }
    if (!roles[r].grid_id.empty()) {
      EXPECT_TRUE(grid_ids.insert(roles[r].grid_id).second) << roles[r].grid_id;
    }
  }
  // Distinct scores per role, read back through the grid metrics.
  core::RoleScores marked;
  for (size_t r = 0; r < roles.size(); ++r) marked.value.push_back(0.01 * double(r + 1));
  const Variant v = make_variant("dense");
  const Problem prob;
  const Result res;
  const Metrics met;
  const core::HeadMetricInput in{v, prob, res, 0, met, &marked};
  size_t on_grid = 0;
  for (size_t r = 0; r < roles.size(); ++r) {
    if (roles[r].grid_id.empty()) continue;
    ++on_grid;
    const core::HeadMetric& m =
        core::head_metrics()[size_t(core::head_metric_index(roles[r].grid_id))];
    EXPECT_EQ(m.title, roles[r].title);
    EXPECT_EQ(m.label, roles[r].grid_label);
    EXPECT_DOUBLE_EQ(m.value(in), marked.value[r]) << roles[r].name;
  }
  // The grid's table ends with the roles' metrics, in the roles' order.
  const auto& metrics = core::head_metrics();
  ASSERT_GE(metrics.size(), on_grid);
  size_t at = metrics.size() - on_grid;
  for (const core::HeadRole& role : roles) {
    if (!role.grid_id.empty()) {
      EXPECT_EQ(metrics[at++].name, role.grid_id);
    }
  }
}

// Percentile intervals of the mean cover the true mean about 95% of the time.
TEST(HeadAtlas, BootstrapIntervalsCoverTheMean) {
  std::mt19937_64 g(5);
  std::normal_distribution<double> dist(0.3, 0.1);
  int covered = 0;
  const int trials = 200;
  for (int i = 0; i < trials; ++i) {
    std::vector<double> x(40);
    for (double& v : x) v = dist(g);
    const auto [lo, hi] = core::bootstrap_ci(x, 400, 100 + i);
    EXPECT_LT(lo, hi);
    covered += lo <= 0.3 && 0.3 <= hi;
  }
  EXPECT_GE(covered, int(0.88 * trials));
  EXPECT_LE(covered, int(0.995 * trials));
  const auto [a, b] = core::bootstrap_ci({0.5, std::nan("")}, 100, 1);
  EXPECT_EQ(a, 0.5);  // one value: no spread
  EXPECT_EQ(b, 0.5);
}

const nlohmann::json& card() {
  static const nlohmann::json j = nlohmann::json::parse(
      std::ifstream(models::resolve_model_dir("default-text") + "/phenomena.json"));
  return j;
}

// The atlas on the card's own probe inputs gives the card's per-head numbers.
TEST(HeadAtlas, ReproducesTheModelCardProbes) {
  REQUIRE_MODEL("default-text");
  const auto model = core::cached_model("default-text");
  const nlohmann::json& probes = card()["probes"];
  core::AtlasInput in;
  in.windows.push_back(probes["text"]["input_ids"].get<std::vector<int32_t>>());
  in.repeats.push_back(probes["induction"]["input_ids"].get<std::vector<int32_t>>());
  in.repeat_start = 1;
  in.repeat_length = probes["induction"]["random_length"];
  const core::HeadAtlas a = core::head_atlas(*model, "default-text", in);
  for (int l = 0; l < a.n_layers; ++l)
    for (int h = 0; h < a.n_heads; ++h) {
      EXPECT_NEAR(a.mean_of("previous_token", l, h),
                  double(probes["text"]["previous_token_per_head"][l][h]), 1e-3)
          << "L" << l << "H" << h;
      EXPECT_NEAR(a.mean_of("sink", l, h), double(probes["text"]["sink_per_head"][l][h]), 1e-3)
          << "L" << l << "H" << h;
      EXPECT_NEAR(a.mean_of("induction", l, h),
                  double(probes["induction"]["induction_per_head"][l][h]), 1e-3)
          << "L" << l << "H" << h;
    }
  EXPECT_NEAR(a.text_loss, double(probes["text"]["heldout_loss"]), 1e-3);
  // The roles the card names.
  EXPECT_GT(a.mean_of("previous_token", 0, 3), 0.85);
  EXPECT_EQ(a.offset[3], 1);
  EXPECT_GT(a.mean_of("offset", 0, 3), 0.85);
}

// The protocol over held-out KJV (the streaming reproduction's excerpt): the card's best heads.
TEST(HeadAtlas, HeldOutTextGivesTheCardsHeads) {
  REQUIRE_MODEL("default-text");
  const std::string path =
      std::string(ATTN_TEST_SOURCE_DIR) + "/docs/repro/streaming/kjv_heldout.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  const auto model = core::cached_model("default-text");
  core::AtlasOptions o;
  o.repeat_sequences = 8;
  o.bootstrap = 200;
  const core::AtlasInput in = core::atlas_input(*model, {text}, o);
  ASSERT_EQ(in.windows.size(), 32u);
  EXPECT_EQ(in.windows[0].size(), 256u);
  EXPECT_EQ(in.windows[0][0], *model->config().bos_token_id);
  EXPECT_EQ(in.repeats[0].size(), 101u);
  const core::HeadAtlas a = core::head_atlas(*model, "default-text", in, o);
  const double card_prev = card()["previous_token"]["best"][2];
  const double card_sink = card()["sink"]["best_layer_ge_1"][2];
  EXPECT_NEAR(a.mean_of("previous_token", 0, 3), card_prev, 0.03);
  EXPECT_NEAR(a.mean_of("sink", 1, 2), card_sink, 0.06);
  EXPECT_LE(a.lo_of("previous_token", 0, 3), a.mean_of("previous_token", 0, 3));
  EXPECT_GE(a.hi_of("previous_token", 0, 3), a.mean_of("previous_token", 0, 3));
  for (size_t r = 0; r < a.roles.size(); ++r)
    for (float x : a.mean[r])
      if (!std::isnan(x)) {
        EXPECT_GE(x, 0.0f) << a.roles[r];
        EXPECT_LE(x, 1.0f) << a.roles[r];
      }
  const nlohmann::json j = core::atlas_json(a);
  EXPECT_EQ(j["roles"][0]["name"], "previous_token");
  EXPECT_EQ(j["roles"][0]["best"]["layer"], 0);
  EXPECT_EQ(j["roles"][0]["best"]["head"], 3);
}

// The head grid's role metrics are the role detectors on the panel's own rows.
void expect_same_grids(const std::vector<std::vector<float>>& a,
                       const std::vector<std::vector<float>>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(a[r].size(), b[r].size()) << what;
    for (size_t i = 0; i < a[r].size(); ++i) {
      if (std::isnan(a[r][i])) {
        EXPECT_TRUE(std::isnan(b[r][i])) << what << " role " << r << " head " << i;
      } else {
        EXPECT_NEAR(a[r][i], b[r][i], 1e-5) << what << " role " << r << " head " << i;
      }
    }
  }
}

// Shards written to JSON, read back and merged give the single run's atlas and ablation scan:
// the same means, intervals (resampled in index order), offsets and loss; a missing, doubled or
// foreign shard is refused by name.
TEST(HeadAtlas, ShardsMergeToTheSingleRun) {
  REQUIRE_MODEL("default-text");
  const auto model = core::cached_model("default-text");
  core::AtlasOptions o;
  o.window = 48;
  o.windows = 7;
  o.repeat_length = 12;
  o.repeat_sequences = 5;
  o.bootstrap = 200;
  const std::string text =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters. And God said, Let there be light: and there was light. And God "
      "saw the light, that it was good: and God divided the light from the darkness.";
  const core::AtlasInput in = core::atlas_input(*model, {text}, o);
  ASSERT_EQ(in.windows.size(), 7u);
  const auto mode = models::HeadEdit::Mean;
  const core::HeadAtlas one = core::head_atlas(*model, "default-text", in, o);
  const core::AblationScan scan_one =
      core::ablation_scan(*model, in.windows, mode, 0, o.bootstrap, o.seed, true);

  const int n = 3, items = int(in.windows.size() + in.repeats.size());
  std::vector<core::AtlasShard> shards;
  for (int i = n - 1; i >= 0; --i) {  // out of order: the merge sorts
    const std::vector<int> mine = core::shard_items(items, {i, n});
    const std::vector<int> wins = core::shard_items(int(in.windows.size()), {i, n});
    core::AtlasShard s;
    s.atlas = core::collect_atlas(*model, "default-text", in, o, &mine);
    s.ablation = core::ablation_samples(*model, in.windows, mode, 0, true, &wins);
    const nlohmann::json j = nlohmann::json::parse(core::atlas_shard_json(s).dump());
    shards.push_back(core::atlas_shard_from_json(j, "shard" + std::to_string(i)));
  }
  const core::AtlasShard m = core::merge_atlas_shards(shards);
  const core::HeadAtlas merged = core::summarize_atlas(m.atlas, o.bootstrap);
  expect_same_grids(one.mean, merged.mean, "mean");
  expect_same_grids(one.lo, merged.lo, "lo");
  expect_same_grids(one.hi, merged.hi, "hi");
  EXPECT_EQ(one.samples, merged.samples);
  EXPECT_EQ(one.offset, merged.offset);
  EXPECT_NEAR(one.text_loss, merged.text_loss, 1e-9);
  EXPECT_EQ(merged.windows, 7);
  EXPECT_EQ(merged.repeats, 5);
  ASSERT_TRUE(m.ablation.has_value());
  const core::AblationScan scan = core::summarize_ablation(*m.ablation, o.bootstrap, o.seed);
  EXPECT_EQ(scan.mode, "corpus-mean");
  EXPECT_EQ(scan.windows, 7);
  EXPECT_NEAR(scan.loss, scan_one.loss, 1e-9);
  expect_same_grids({scan_one.delta, scan_one.lo, scan_one.hi}, {scan.delta, scan.lo, scan.hi},
                    "ablation");

  // A shard missing, given twice, from another protocol, or without the others' ablation.
  EXPECT_THROW(core::merge_atlas_shards({shards[0], shards[1]}), Error);
  EXPECT_THROW(core::merge_atlas_shards({shards[0], shards[1], shards[2], shards[2]}), Error);
  core::AtlasShard other = shards[0];
  other.atlas.seed += 1;
  EXPECT_THROW(core::merge_atlas_shards({other, shards[1], shards[2]}), Error);
  core::AtlasShard bare = shards[0];
  bare.ablation.reset();
  EXPECT_THROW(core::merge_atlas_shards({bare, shards[1], shards[2]}), Error);
  // Malformed files name themselves.
  nlohmann::json j = core::atlas_shard_json(shards[0]);
  j["samples"][0]["scores"]["previous_token"].erase(0);
  try {
    core::atlas_shard_from_json(j, "cut.json");
    ADD_FAILURE() << "a short score row was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.json"), std::string::npos) << e.what();
  }
  j = core::atlas_shard_json(shards[0]);
  j["samples"][0]["scores"]["copying"] = j["samples"][0]["scores"]["previous_token"];
  EXPECT_THROW(core::atlas_shard_from_json(j, "role.json"), Error);
  EXPECT_THROW(core::atlas_shard_from_json({{"kind", "attnscope-patch-shard"}}, "p.json"), Error);
  j = core::atlas_shard_json(shards[0]);
  j["samples"][0]["index"] = 99;
  EXPECT_THROW(core::atlas_shard_from_json(j, "index.json"), Error);
  // An item outside the input is refused before any forward pass.
  const std::vector<int> outside = {items};
  EXPECT_THROW(core::collect_atlas(*model, "default-text", in, o, &outside), Error);
}

TEST(HeadAtlas, HeadGridShowsTheRoles) {
  REQUIRE_MODEL("default-text");
  core::Session s;
  s.model.id = "default-text";
  s.input.kind = "text";
  s.input.text =
      "And God said, Let there be light: and there was light. And God said, Let there "
      "be light: and there was light.";
  s.variants = {"window(size=4)"};
  const auto a = core::analyze(s, "");
  const core::HeadGrid dense = core::head_grid(*a, 0), win = core::head_grid(*a, 1);
  const auto& sink = dense.metric("first_token");
  const auto& ind = dense.metric("induction");
  for (int l = 0; l < a->n_layers(); ++l) {
    const Problem& p = a->problem(l);
    for (int h = 0; h < a->n_heads(); ++h) {
      const core::RoleScores r = core::panel_role_scores(*a->panels[0].variant, p,
                                                         a->panels[0].result(l), h, &a->input.ids);
      EXPECT_NEAR(sink[size_t(l * a->n_heads() + h)], r.get("sink"), 1e-6);
      EXPECT_NEAR(ind[size_t(l * a->n_heads() + h)], r.get("induction"), 1e-6);
    }
  }
  // A 4-token window sees the first token from queries 1-3 only.
  for (float x : win.metric("first_token")) EXPECT_LE(x, 3.0 / (a->n_tokens() - 1) + 1e-6);
  EXPECT_GT(dense.metric("offset_conc")[3], 0.8f);  // L0H3, the previous-token head
}

TEST(TextDataset, ReadsJsonlAndFoldersAndNamesBadLines) {
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "text_dataset";
  fs::remove_all(dir);
  fs::create_directories(dir / "folder");
  std::ofstream(dir / "ok.jsonl") << "{\"text\": \"a b\"}\n\n{\"text\": \"c\", \"id\": 2}\n";
  const auto ok = core::read_text_dataset((dir / "ok.jsonl").string());
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[1].text, "c");
  EXPECT_NE(ok[1].source.find("ok.jsonl:3"), std::string::npos);
  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"a\"}\n{\"text\": 3}\n";
  std::ofstream(dir / "broken.jsonl") << "{\"text\": \"a\"}\n{\"text\": \"b\"\n";
  for (const char* name : {"bad.jsonl", "broken.jsonl"}) {
    try {
      core::read_text_dataset((dir / name).string());
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Format);
      EXPECT_NE(std::string(e.what()).find(std::string(name) + ":2"), std::string::npos)
          << e.what();
    }
  }
  std::ofstream(dir / "folder" / "b.txt") << "second";
  std::ofstream(dir / "folder" / "a.txt") << "first";
  std::ofstream(dir / "folder" / "skip.md") << "not text";
  const auto folder = core::read_text_dataset((dir / "folder").string());
  ASSERT_EQ(folder.size(), 2u);
  EXPECT_EQ(folder[0].text, "first");
  EXPECT_THROW(core::read_text_dataset((dir / "missing.jsonl").string()), Error);
}

struct CliRun {
  int status = -1;
  std::string out;
};
CliRun cli(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " " + args + " 2>&1", &r.out);
  return r;
}

TEST(HeadAtlas, HeadsCommand) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "heads_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "d.jsonl") << "{\"text\": \"In the beginning God created the heaven and "
                                    "the earth.\"}\n{\"text\": \"And the earth was without "
                                    "form, and void.\"}\n";
  const CliRun r = cli("heads --model default-text --dataset " + (dir / "d.jsonl").string() +
                       " --repeats 4 --json " + (dir / "h.json").string() + " --figure " +
                       (dir / "h.png").string() + " --ablate-each zero --ablation-figure " +
                       (dir / "a.svg").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("previous_token"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "h.json"));
  EXPECT_EQ(j["protocol"]["text_windows"], 2);
  EXPECT_EQ(j["roles"].size(), core::head_roles().size());
  EXPECT_EQ(j["roles"][0]["mean"].size(), 2u);
  EXPECT_TRUE(fs::exists(dir / "h.png"));
  EXPECT_TRUE(fs::exists(dir / "a.svg"));
  EXPECT_EQ(j["ablation"]["mode"], "zero");
  EXPECT_EQ(j["ablation"]["delta_loss"].size(), 2u);
  const CliRun lone =
      cli("heads --model default-text --text hi --ablation-figure " + (dir / "b.png").string());
  EXPECT_EQ(lone.status, 2) << lone.out;
  const CliRun role = cli("heads --model default-text --text hi --roles copying");
  EXPECT_EQ(role.status, 2) << role.out;
  EXPECT_NE(role.out.find("induction"), std::string::npos) << role.out;
  const CliRun vision = cli("heads --model default-vision --text hi");
  EXPECT_EQ(vision.status, 2) << vision.out;
  const CliRun none = cli("heads --model default-text --repeats 0");
  EXPECT_EQ(none.status, 2) << none.out;
  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"ok\"}\nnot json\n";
  const CliRun bad = cli("heads --model default-text --dataset " + (dir / "bad.jsonl").string());
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("bad.jsonl:2"), std::string::npos) << bad.out;
}

// `heads --shard i/n --json` twice and `heads --merge` write the JSON of one run.
TEST(HeadAtlas, HeadsCommandShardsAndMerges) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "heads_shards";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream d(dir / "d.jsonl");
  for (int i = 0; i < 5; ++i)
    d << "{\"text\": \"And God called the light Day, and the darkness " << i
      << " he called Night. And the evening and the morning were the first day.\"}\n";
  d.close();
  const std::string base = "heads --model default-text --dataset " + (dir / "d.jsonl").string() +
                           " --repeats 3 --repeat-length 10 --bootstrap 100 --ablate-each zero";
  const CliRun one = cli(base + " --json " + (dir / "one.json").string());
  ASSERT_EQ(one.status, 0) << one.out;
  for (int i = 0; i < 2; ++i) {
    const CliRun r = cli(base + " --shard " + std::to_string(i) + "/2 --json " +
                         (dir / ("s" + std::to_string(i) + ".json")).string());
    ASSERT_EQ(r.status, 0) << r.out;
  }
  const CliRun m = cli("heads --bootstrap 100 --merge " + (dir / "s1.json").string() + " " +
                       (dir / "s0.json").string() + " --json " + (dir / "m.json").string() +
                       " --figure " + (dir / "m.svg").string());
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_TRUE(fs::exists(dir / "m.svg"));
  nlohmann::json a = nlohmann::json::parse(std::ifstream(dir / "one.json"));
  nlohmann::json b = nlohmann::json::parse(std::ifstream(dir / "m.json"));
  a.erase("seconds");
  b.erase("seconds");
  EXPECT_EQ(test::json_difference(a, b, 1e-5), "");
  EXPECT_EQ(b["ablation"]["windows"], 5);
  // Usage: a shard without --json, a figure of a shard, a merge with a model, a lone shard.
  EXPECT_EQ(cli(base + " --shard 0/2").status, 2);
  EXPECT_EQ(cli(base + " --shard 0/2 --json x.json --figure " + (dir / "x.png").string()).status,
            2);
  EXPECT_EQ(cli("heads --model default-text --merge " + (dir / "s0.json").string()).status, 2);
  const CliRun lone = cli("heads --merge " + (dir / "s0.json").string());
  EXPECT_EQ(lone.status, 1) << lone.out;
  EXPECT_NE(lone.out.find("missing"), std::string::npos) << lone.out;
}

// One corpus, one plain baseline: `heads` printed a token-weighted loss over its windows beside
// its ablation scan's window mean (3.6220 and 3.6339 on one corpus), and `analyze --dataset` a
// record mean of records without BOS. All are now the mean over windows (records) of each one's
// mean over its predicted tokens (core::kLossScope); records that start with BOS (which `heads`
// adds) give `analyze --dataset` the very same windows, and so the same number.
TEST(HeadAtlas, OneCorpusGivesOnePlainBaselineAcrossVerbs) {
  REQUIRE_MODEL("default-text");
  const auto model = core::cached_model("default-text");
  const std::vector<std::string> texts = {
      "<|endoftext|>In the beginning God created the heaven and the earth.",
      "<|endoftext|>And the earth was without form, and void; and darkness was upon the face of "
      "the deep. And the Spirit of God moved upon the face of the waters.",
      "<|endoftext|>And God said, Let there be light: and there was light.",
      "<|endoftext|>And God saw the light, that it was good: and God divided the light from the "
      "darkness. And God called the light Day, and the darkness he called Night. And the evening "
      "and the morning were the first day."};
  core::AtlasOptions o;
  o.window = 256;
  o.repeat_sequences = 0;
  o.bootstrap = 50;
  const core::AtlasInput in = core::atlas_input(*model, texts, o);
  ASSERT_EQ(in.windows.size(), texts.size());
  const core::HeadAtlas atlas = core::head_atlas(*model, "default-text", in, o);
  const core::AblationScan scan =
      core::ablation_scan(*model, in.windows, models::HeadEdit::Mean, 0, o.bootstrap, o.seed);
  // The windows differ in length: a token-weighted mean would differ from the window mean.
  double tokens = 0;
  for (const auto& w : in.windows) tokens += double(w.size() - 1);
  EXPECT_GT(atlas.predicted_tokens, 0);
  EXPECT_EQ(atlas.predicted_tokens, int(tokens));
  EXPECT_NEAR(atlas.text_loss, scan.loss, 1e-6) << "heads: two baselines in one output";

  std::vector<core::DatasetItem> items;
  for (size_t i = 0; i < texts.size(); ++i) {
    core::DatasetItem it;
    it.name = "corpus:" + std::to_string(i + 1);
    it.input.text = texts[i];
    items.push_back(it);
  }
  core::Session s;
  s.model.id = "default-text";
  core::DatasetAnalysisOptions dopt;
  dopt.bootstrap = 50;
  const core::DatasetAnalysis d = core::analyze_dataset(s, "", items, dopt);
  ASSERT_FALSE(d.panels.empty());
  EXPECT_NEAR(d.panels[0].loss.mean, atlas.text_loss, 1e-5) << "analyze --dataset against heads";
  // Each says what it averages.
  const nlohmann::json aj = core::atlas_json(atlas), sj = core::ablation_json(scan);
  EXPECT_NE(aj.value("text_loss_scope", "").find(core::kLossScope), std::string::npos);
  EXPECT_NE(sj.value("loss_scope", "").find(core::kLossScope), std::string::npos);
}

// "Sink" names one rule: the `sink` role scores the first-token mass and the head grid ranks
// heads by the same number under that name; the grid's max-token mass is named apart.
TEST(HeadRoles, TheSinkRoleAndTheGridRankHeadsByOneDefinition) {
  REQUIRE_MODEL("default-text");
  const auto& roles = core::head_roles();
  size_t sink = roles.size();
  for (size_t r = 0; r < roles.size(); ++r)
    if (roles[r].name == "sink") sink = r;
  ASSERT_LT(sink, roles.size());
  EXPECT_EQ(roles[sink].grid_id, "first_token");
  EXPECT_NE(roles[sink].definition.find("first-token mass"), std::string::npos);
  // One input both ways: BOS + text in the atlas (one window), the same ids in the analysis.
  const std::string text =
      "<|endoftext|>The keeper of the lighthouse wrote every evening in a small book. The sea "
      "was calm, and the light turned all night.";
  const auto model = core::cached_model("default-text");
  core::AtlasOptions o;
  o.repeat_sequences = 0;
  o.bootstrap = 0;
  const core::HeadAtlas atlas =
      core::head_atlas(*model, "default-text", core::atlas_input(*model, {text}, o), o);
  core::Session s;
  s.model.id = "default-text";
  s.input.text = text;
  const auto a = core::analyze(s, "");
  const core::HeadGrid g = core::head_grid(*a, 0);
  const std::vector<float>& grid = g.metric("first_token");
  for (size_t i = 0; i < grid.size(); ++i)
    EXPECT_NEAR(grid[i], atlas.mean[sink][i], 1e-4) << "head " << i;
  // The same numbers, so the same ranking.
  auto best = [](const std::vector<float>& v) {
    return int(std::max_element(v.begin(), v.end()) - v.begin());
  };
  EXPECT_EQ(best(grid), best(atlas.mean[sink]));
}

}  // namespace
}  // namespace attn
