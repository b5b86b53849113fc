// Interventions (app/core/heads/interventions.h, models/arch/intervention.h): zero and mean
// ablation of heads and activation patching over heads and positions against an independent float64
// NumPy implementation (tests/ref/make_intervention_goldens.py) on the tiny random GPT-2 and Llama
// (GQA, llama3 RoPE) checkpoints, the hook seeing the edited values, bad inputs, and the CLI
// (`analyze --ablate --dump`, `patch`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/report.h"
#include "app/core/export/figure_data.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "models/formats/npy.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::string golden_dir(const std::string& model) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/tests/ref/goldens/" + model;
}
std::string iv_dir(const std::string& model) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/tests/ref/goldens/interventions/" + model;
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::vector<int32_t> ids;
  for (float x : models::read_npy(path).to_f32()) ids.push_back(int32_t(x));
  return ids;
}

models::ModelOutput forward(const models::Model& m, const std::vector<int32_t>& ids,
                            const models::Intervention* iv, models::Capture* cap = nullptr) {
  models::ModelInput in;
  in.ids = ids;
  models::ForwardOptions fo;
  fo.intervention = iv;
  fo.capture = cap;
  return m.forward(in, fo);
}

// Largest |a - b| over the logits, against the golden's f8 values.
double max_diff(const FloatBuffer& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double d = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    d = std::max(d, std::abs(double(got[i]) - double(want[i])));
  return d;
}

class InterventionGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(InterventionGolden, AblationMatchesFloat64Reference) {
  const std::string name = GetParam();
  const auto model = core::cached_model(golden_dir(name));
  const models::ModelInfo& info = model->info();
  const std::vector<int32_t> ids = read_ids(iv_dir(name) + "/ids.npy");
  for (int l = 0; l < info.n_layers; ++l)
    for (int h = 0; h < info.n_heads; ++h)
      for (const char* mode : {"zero", "mean"}) {
        const models::Intervention iv = core::ablation({{l, h}}, core::ablation_mode(mode));
        const auto want = models::read_npy(iv_dir(name) + "/" + mode + "_" + std::to_string(l) +
                                           "_" + std::to_string(h) + ".npy")
                              .to_f32();
        EXPECT_LT(max_diff(forward(*model, ids, &iv).logits, want), 1e-5)
            << name << " " << mode << " " << models::head_name(l, h);
      }
  // Several heads at once.
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(iv_dir(name) + "/patch.json"));
  std::vector<std::pair<int, int>> heads;
  for (const auto& p : meta["multi"]) heads.push_back({int(p[0]), int(p[1])});
  const models::Intervention multi = core::ablation(heads, models::HeadEdit::Zero);
  EXPECT_LT(max_diff(forward(*model, ids, &multi).logits,
                     models::read_npy(iv_dir(name) + "/zero_multi.npy").to_f32()),
            1e-5);
  // The plain pass is unchanged by an empty intervention (up to the threads' summation order).
  const models::Intervention none;
  const models::ModelOutput a = forward(*model, ids, nullptr), b = forward(*model, ids, &none);
  EXPECT_LT(max_diff(a.logits, std::vector<float>(b.logits.begin(), b.logits.end())), 1e-6);
}

TEST_P(InterventionGolden, PatchingMatchesFloat64Reference) {
  const std::string name = GetParam();
  const auto model = core::cached_model(golden_dir(name));
  const std::vector<int32_t> clean = read_ids(iv_dir(name) + "/ids.npy");
  const std::vector<int32_t> corrupt = read_ids(iv_dir(name) + "/corrupt_ids.npy");
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(iv_dir(name) + "/patch.json"));
  for (const char* over : {"heads", "positions", "patterns"}) {
    core::PatchOptions o;
    o.over = over;
    const core::PatchResult r =
        core::activation_patching(*model, clean, corrupt, meta["target"], meta["foil"], o);
    EXPECT_NEAR(r.ld_clean, double(meta["ld_clean"]), 1e-5);
    EXPECT_NEAR(r.ld_corrupt, double(meta["ld_corrupt"]), 1e-5);
    const auto want = models::read_npy(iv_dir(name) + "/patch_" + over + ".npy").to_f32();
    ASSERT_EQ(r.effect.size(), want.size()) << over;
    EXPECT_EQ(r.rows, model->info().n_layers);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(r.effect[i], want[i], 1e-5) << name << " " << over << " cell " << i;
    // One cell alone (the app's click) gives the grid's value, and the runs' top tokens.
    const int l = r.rows - 1, j = r.cols - 1;
    const core::PatchCell c =
        core::patch_cell(*model, clean, corrupt, meta["target"], meta["foil"], over, l, j);
    EXPECT_NEAR(c.effect, want[size_t(l) * r.cols + j], 1e-5) << name << " " << over;
    EXPECT_NEAR(c.ld_clean, double(meta["ld_clean"]), 1e-5);
    ASSERT_EQ(c.top_patched.size(), 5u);
    EXPECT_GE(c.top_clean[0].second, c.top_clean[4].second);
    EXPECT_THROW(
        core::patch_cell(*model, clean, corrupt, meta["target"], meta["foil"], over, r.rows, 0),
        Error);
  }
}

// Pattern patching's edit: a head attending with a given pattern P computes P V with this pass's
// values (float64 here from the captured V), the captured pattern shows P, the head's own pattern
// changes nothing, one position edits one row, and bad patterns are refused.
TEST_P(InterventionGolden, PatternEditAttendsWithTheGivenPattern) {
  const std::string name = GetParam();
  const auto model = core::cached_model(golden_dir(name));
  const models::ModelInfo& info = model->info();
  const std::vector<int32_t> ids = read_ids(iv_dir(name) + "/ids.npy");
  const int N = int(ids.size()), d = info.head_dim, L = 1, H = info.n_heads - 1;
  models::Capture plain(models::HookSelection::parse("blocks.*.attn.pattern"));
  const models::ModelOutput base = forward(*model, ids, nullptr, &plain);
  // The head's own pattern: the same logits.
  models::Intervention own;
  models::HeadEdit e;
  e.mode = models::HeadEdit::Pattern;
  e.layer = L;
  e.head = H;
  const auto& pat = plain.layers[size_t(L)].pattern;
  e.values.assign(pat.begin() + ptrdiff_t(size_t(H) * N * N),
                  pat.begin() + ptrdiff_t(size_t(H + 1) * N * N));
  own.heads.push_back(e);
  EXPECT_LT(max_diff(forward(*model, ids, &own).logits,
                     std::vector<float>(base.logits.begin(), base.logits.end())),
            1e-5);
  // A random causal pattern (rows sum to 1).
  std::vector<float> P(size_t(N) * N, 0.0f);
  uint32_t seed = 99;
  for (int t = 0; t < N; ++t) {
    double sum = 0;
    for (int j = 0; j <= t; ++j) {
      seed = seed * 1664525u + 1013904223u;
      P[size_t(t) * N + j] = float((seed >> 8) % 1000 + 1);
      sum += P[size_t(t) * N + j];
    }
    for (int j = 0; j <= t; ++j) P[size_t(t) * N + j] = float(P[size_t(t) * N + j] / sum);
  }
  models::Intervention iv;
  e.values = P;
  iv.heads.push_back(e);
  models::Capture cap(
      models::HookSelection::parse("blocks.1.attn.v,blocks.1.attn.out,blocks.1.attn.pattern"));
  forward(*model, ids, &iv, &cap);
  const models::LayerCapture& lc = cap.layers[size_t(L)];
  ASSERT_TRUE(lc.has_problem);
  const Problem& pr = lc.problem;
  double worst = 0, worst_p = 0;
  for (int t = 0; t < N; ++t) {
    for (int c = 0; c < d; ++c) {
      double want = 0;
      for (int j = 0; j < N; ++j) want += double(P[size_t(t) * N + j]) * pr.v_row(H, j)[c];
      worst = std::max(worst, std::abs(want - lc.out[(size_t(H) * N + t) * d + c]));
    }
    for (int j = 0; j < N; ++j)
      worst_p = std::max(worst_p, double(std::abs(lc.pattern[(size_t(H) * N + t) * N + j] -
                                                  P[size_t(t) * N + j])));
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(worst_p, 0.0);
  // One position: only that query's row changes; the rows before it keep the head's own.
  iv.heads[0].position = N - 1;
  models::Capture one(models::HookSelection::parse("blocks.1.attn.pattern"));
  forward(*model, ids, &iv, &one);
  const auto& op = one.layers[size_t(L)].pattern;
  for (int j = 0; j < N; ++j) {
    EXPECT_EQ(op[(size_t(H) * N + N - 1) * N + j], P[size_t(N - 1) * N + j]);
    EXPECT_EQ(op[(size_t(H) * N + 0) * N + j], pat[(size_t(H) * N + 0) * N + j]);
  }
  // Bad patterns: the wrong size, a NaN.
  models::Intervention bad = iv;
  bad.heads[0].values.resize(size_t(N) * (N - 1));
  EXPECT_THROW(forward(*model, ids, &bad), Error);
  bad = iv;
  bad.heads[0].values[3] = std::nanf("");
  EXPECT_THROW(forward(*model, ids, &bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, InterventionGolden, ::testing::Values("gpt2", "llama"));

// Resample ablation of the corrupt run from the clean one is head patching: the float64
// reference's patching effects come back.
TEST(Interventions, ResampleAblationIsPatchingFromTheOtherInput) {
  const auto model = core::cached_model(golden_dir("gpt2"));
  const std::vector<int32_t> clean = read_ids(iv_dir("gpt2") + "/ids.npy");
  const std::vector<int32_t> corrupt = read_ids(iv_dir("gpt2") + "/corrupt_ids.npy");
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(iv_dir("gpt2") + "/patch.json"));
  const int32_t t = meta["target"], f = meta["foil"];
  const double span = double(meta["ld_clean"]) - double(meta["ld_corrupt"]);
  const int H = model->info().n_heads, N = int(clean.size());
  // Outputs (resample) and attention patterns (pattern patching) taken from the clean input.
  for (const bool pattern : {false, true}) {
    const auto want =
        models::read_npy(iv_dir("gpt2") + (pattern ? "/patch_patterns.npy" : "/patch_heads.npy"))
            .to_f32();
    for (int l = 0; l < model->info().n_layers; ++l)
      for (int h = 0; h < H; ++h) {
        const models::Intervention iv =
            core::resample_ablation(*model, {{l, h}}, clean, N, 0, pattern);
        const models::ModelOutput out = forward(*model, corrupt, &iv);
        const float* last = out.logits.data() + size_t(N - 1) * out.n_logits;
        const double effect = (double(last[t]) - last[f] - double(meta["ld_corrupt"])) / span;
        EXPECT_NEAR(effect, want[size_t(l * H + h)], 1e-5)
            << models::head_name(l, h) << " " << pattern;
      }
  }
  std::vector<int32_t> shorter(clean.begin(), clean.end() - 1);
  try {
    core::resample_ablation(*model, {{0, 0}}, shorter, N);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 10 tokens, the input 11"), std::string::npos)
        << e.what();
  }
}

// ablate_heads(), `analyze --ablate`'s core: the ablated pass is run_intervention()'s with the
// edits ablation() builds, its hooks dump as dump_forward() writes them, resampling from the
// input itself changes nothing, and a source of another length runs nothing.
TEST(Interventions, AblateHeadsRunsTheAblatedPass) {
  const auto model = core::cached_model(golden_dir("gpt2"));
  const std::vector<int32_t> ids = read_ids(iv_dir("gpt2") + "/ids.npy");
  core::HeadAblationRequest r;
  r.heads = {{0, 1}, {1, 0}};
  r.use_ids = true;
  r.ids = ids;
  r.hooks = "blocks.0.attn.out";
  for (const char* mode : {"zero", "mean"}) {
    r.mode = mode;
    const core::HeadAblation a = core::ablate_heads(*model, r);
    EXPECT_EQ(a.heads, "L0H1,L1H0");
    EXPECT_EQ(a.input.ids, ids);
    EXPECT_EQ(a.input.labels.size(), ids.size());
    EXPECT_FALSE(a.length_mismatch);
    const models::Intervention iv = core::ablation(r.heads, core::ablation_mode(mode));
    const models::ModelOutput want = forward(*model, ids, &iv);
    ASSERT_EQ(a.run.edited.logits.size(), want.logits.size());
    for (size_t i = 0; i < want.logits.size(); ++i)
      ASSERT_EQ(a.run.edited.logits[i], want.logits[i]) << mode << " " << i;
    EXPECT_GT(a.run.effect.mean_kl, 0.0) << mode;
    ASSERT_NE(a.run.capture, nullptr);
  }
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "ablate_heads_dump";
  fs::remove_all(dir);
  r.mode = "zero";
  const core::HeadAblation a = core::ablate_heads(*model, r);
  const std::vector<std::string> files = core::dump_head_ablation(dir.string(), a, r.hooks);
  EXPECT_TRUE(fs::exists(dir / "blocks.0.attn.out.npy"));
  EXPECT_FALSE(fs::exists(dir / "blocks.1.attn.out.npy"));
  EXPECT_EQ(models::read_npy((dir / "logits.npy").string()).to_f32().size(),
            a.run.edited.logits.size());
  EXPECT_FALSE(files.empty());

  core::HeadAblationRequest s;
  s.heads = {{0, 1}};
  s.mode = "resample";
  s.text = "the cat sat on the mat";
  s.source_text = s.text;
  const core::HeadAblation same = core::ablate_heads(*model, s);
  EXPECT_FALSE(same.length_mismatch);
  EXPECT_LT(same.run.effect.mean_kl, 1e-9);
  s.source_text = "the cat";
  const size_t n = core::encode_for_model(*model, s.text).ids.size();
  const size_t m = core::encode_for_model(*model, s.source_text).ids.size();
  ASSERT_NE(n, m);
  const core::HeadAblation other = core::ablate_heads(*model, s);
  EXPECT_TRUE(other.length_mismatch);
  EXPECT_EQ(other.source_tokens, m);
  EXPECT_EQ(other.input.ids.size(), n);
  EXPECT_EQ(other.run.edited.n_tokens, 0);
}

// The single-head ablation scan: loss differences of the ablated passes; a corpus mean over one
// window is that window's mean; over two windows it differs from each window's own mean.
TEST(Interventions, AblationScanMeasuresLossRises) {
  const auto model = core::cached_model(golden_dir("llama"));
  const std::vector<int32_t> a = read_ids(iv_dir("llama") + "/ids.npy");
  const std::vector<int32_t> b = read_ids(iv_dir("llama") + "/corrupt_ids.npy");
  const core::AblationScan zero = core::ablation_scan(*model, {a}, models::HeadEdit::Zero, 0, 0);
  const double base = core::next_token_loss(forward(*model, a, nullptr), a);
  EXPECT_NEAR(zero.loss, base, 1e-6);  // the threads may sum in another order
  const models::Intervention iv = core::ablation({{1, 2}}, models::HeadEdit::Zero);
  EXPECT_NEAR(zero.delta[size_t(1 * 4 + 2)],
              core::next_token_loss(forward(*model, a, &iv), a) - base, 1e-5);
  const core::AblationScan mean = core::ablation_scan(*model, {a}, models::HeadEdit::Mean, 0, 0);
  const core::AblationScan corpus =
      core::ablation_scan(*model, {a}, models::HeadEdit::Mean, 0, 0, 1, true);
  EXPECT_EQ(corpus.mode, "corpus-mean");
  for (size_t i = 0; i < mean.delta.size(); ++i) EXPECT_NEAR(corpus.delta[i], mean.delta[i], 1e-5);
  const core::AblationScan two =
      core::ablation_scan(*model, {a, b}, models::HeadEdit::Mean, 0, 0, 1, true);
  const core::AblationScan own = core::ablation_scan(*model, {a, b}, models::HeadEdit::Mean, 0, 0);
  double differ = 0;
  for (size_t i = 0; i < own.delta.size(); ++i)
    differ = std::max(differ, double(std::abs(two.delta[i] - own.delta[i])));
  EXPECT_GT(differ, 1e-4);
  EXPECT_THROW(core::ablation_scan(*model, {a}, models::HeadEdit::Replace), Error);
  EXPECT_THROW(core::ablation_scan(*model, {}, models::HeadEdit::Zero), Error);
}

// Over a dataset of pairs: the mean of the pairs' effects, with intervals around it.
TEST(Interventions, PatchingOverADatasetAveragesThePairs) {
  const auto model = core::cached_model(golden_dir("llama"));
  const std::vector<int32_t> clean = read_ids(iv_dir("llama") + "/ids.npy");
  const std::vector<int32_t> corrupt = read_ids(iv_dir("llama") + "/corrupt_ids.npy");
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(iv_dir("llama") + "/patch.json"));
  const int32_t t = meta["target"], f = meta["foil"];
  // The pair and its mirror (corrupt as clean, target and foil swapped: patching then measures
  // what the corrupt run's head takes away from the clean answer).
  const core::PatchResult one = core::activation_patching(*model, clean, corrupt, t, f);
  const core::PatchResult mirror = core::activation_patching(*model, corrupt, clean, f, t);
  const core::PatchResult both = core::patch_dataset(
      *model, {{clean, corrupt, t, f, "a"}, {corrupt, clean, f, t, "b"}}, {}, 200);
  EXPECT_EQ(both.records, 2);
  ASSERT_EQ(both.lo.size(), both.effect.size());
  for (size_t i = 0; i < both.effect.size(); ++i) {
    EXPECT_NEAR(both.effect[i], (one.effect[i] + mirror.effect[i]) / 2, 1e-6);
    EXPECT_LE(both.lo[i], both.effect[i] + 1e-6);
    EXPECT_GE(both.hi[i], both.effect[i] - 1e-6);
  }
  EXPECT_NEAR(both.ld_clean, (one.ld_clean + mirror.ld_clean) / 2, 1e-9);
  // A pair that cannot be patched is named.
  try {
    core::patch_dataset(*model, {{clean, clean, t, f, "pairs.jsonl:7"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pairs.jsonl:7: "), std::string::npos) << e.what();
  }
  // Shards (every other pair) through their file format merge to the single run exactly.
  const std::vector<core::PatchRecord> four = {{clean, corrupt, t, f, "a", 0},
                                               {corrupt, clean, f, t, "b", 1},
                                               {clean, corrupt, t, f, "c", 2},
                                               {corrupt, clean, f, t, "d", 3}};
  const core::PatchResult single = core::patch_dataset(*model, four, {}, 200);
  std::vector<core::PatchShard> shards;
  for (int k = 0; k < 2; ++k) {
    const std::vector<core::PatchRecord> mine = {four[size_t(k)], four[size_t(k + 2)]};
    const core::PatchShard sh{"llama", "pairs.jsonl", "heads", core::patch_runs(*model, mine)};
    shards.push_back(core::patch_shard_from_json(
        nlohmann::json::parse(core::patch_shard_json(sh).dump()), "s" + std::to_string(k)));
  }
  const core::PatchShard merged = core::merge_patch_shards({shards[1], shards[0]});
  ASSERT_EQ(merged.runs.size(), 4u);
  EXPECT_EQ(merged.runs[2].name, "c");
  const core::PatchResult joined = core::summarize_patch_runs(merged.runs, 200);
  // Equal to rounding: each forward pass sums across threads in its own order.
  for (size_t i = 0; i < single.effect.size(); ++i) {
    EXPECT_NEAR(joined.effect[i], single.effect[i], 1e-5);
    EXPECT_NEAR(joined.lo[i], single.lo[i], 1e-5);
    EXPECT_NEAR(joined.hi[i], single.hi[i], 1e-5);
  }
  EXPECT_NEAR(joined.ld_clean, single.ld_clean, 1e-5);
  EXPECT_THROW(core::merge_patch_shards({shards[0], shards[0]}), Error);
  core::PatchShard other = shards[1];
  other.over = "positions";
  EXPECT_THROW(core::merge_patch_shards({shards[0], other}), Error);
  nlohmann::json bad = core::patch_shard_json(shards[0]);
  bad["runs"][0]["effect"].erase(0);
  try {
    core::patch_shard_from_json(bad, "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  core::PatchOptions pos;
  pos.over = "positions";
  std::vector<int32_t> shorter(clean.begin(), clean.end() - 1);
  EXPECT_THROW(core::patch_dataset(
                   *model, {{clean, corrupt, t, f, "a"}, {shorter, shorter, t, f, "b"}}, pos),
               Error);
}

// The hook blocks.L.attn.out shows the ablated head, and mean ablation puts one row everywhere.
TEST(Interventions, CapturedOutputIsTheEditedOne) {
  const auto model = core::cached_model(golden_dir("llama"));
  const std::vector<int32_t> ids = read_ids(iv_dir("llama") + "/ids.npy");
  const int d = model->info().head_dim, N = int(ids.size());
  models::Capture plain(models::HookSelection::parse("blocks.1.attn.out"));
  forward(*model, ids, nullptr, &plain);
  models::Capture zero(models::HookSelection::parse("blocks.1.attn.out"));
  const models::Intervention z = core::ablation({{1, 2}}, models::HeadEdit::Zero);
  forward(*model, ids, &z, &zero);
  models::Capture mean(models::HookSelection::parse("blocks.1.attn.out"));
  const models::Intervention m = core::ablation({{1, 2}}, models::HeadEdit::Mean);
  forward(*model, ids, &m, &mean);
  const auto& p = plain.layers[1].out;
  for (int h = 0; h < 4; ++h)
    for (int t = 0; t < N; ++t)
      for (int e = 0; e < d; ++e) {
        const size_t i = (size_t(h) * N + t) * d + e;
        if (h != 2) {
          EXPECT_EQ(zero.layers[1].out[i], p[i]);
          continue;
        }
        EXPECT_EQ(zero.layers[1].out[i], 0.0f);
        double mu = 0;
        for (int s = 0; s < N; ++s) mu += p[(size_t(h) * N + s) * d + e] / N;
        EXPECT_NEAR(mean.layers[1].out[i], mu, 1e-6);
      }
}

TEST(Interventions, BadInputsSayWhatIsWrong) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(core::parse_heads("0.3, L1H2,1.0"),
            (std::vector<std::pair<int, int>>{{0, 3}, {1, 2}, {1, 0}}));
  EXPECT_NE(message([] { core::parse_heads("0.x"); }).find("'0.x' is not a head"),
            std::string::npos);
  EXPECT_NE(message([] { core::parse_heads(""); }).find("not a head"), std::string::npos);
  EXPECT_NE(message([] { core::ablation_mode("half"); }).find("zero, mean"), std::string::npos);
  const auto model = core::cached_model(golden_dir("gpt2"));
  EXPECT_NE(message([&] {
              core::check_heads({{2, 0}}, model->info());
            }).find("L2H0"),
            std::string::npos);
  const std::vector<int32_t> ids = read_ids(iv_dir("gpt2") + "/ids.npy");
  std::vector<int32_t> shorter(ids.begin(), ids.end() - 1);
  const std::string len = message([&] { core::activation_patching(*model, ids, shorter, 1, 2); });
  EXPECT_NE(len.find("clean has 11, corrupt 10"), std::string::npos) << len;
  EXPECT_NE(message([&] {
              core::PatchOptions o;
              o.over = "layers";
              core::activation_patching(*model, ids, ids, 1, 2, o);
            }).find("heads, positions"),
            std::string::npos);
  EXPECT_NE(message([&] {
              core::activation_patching(*model, ids, ids, 1, 2);
            }).find("same logit difference"),
            std::string::npos);
  EXPECT_NE(message([&] {
              core::activation_patching(*model, ids, shorter, 1, 99999);
            }).find("same number of tokens"),
            std::string::npos);
  models::Intervention wrong;
  wrong.heads.push_back({models::HeadEdit::Replace, 0, 1, -1, std::vector<float>(3)});
  EXPECT_NE(message([&] { forward(*model, ids, &wrong); }).find("the two runs must have"),
            std::string::npos);
  models::Intervention far;
  far.heads.push_back({models::HeadEdit::Zero, 0, 7, -1, {}});
  EXPECT_NE(message([&] { forward(*model, ids, &far); }).find("L0H7"), std::string::npos);
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

// `analyze --ablate --dump`: logits.npy is the ablated pass's, as the core computes it.
TEST(Interventions, AnalyzeAblateDumpsTheAblatedPass) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "ablate_dump";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = "In the beginning God created the heaven and the earth.";
  const CliRun r = cli("analyze --model default-text --text '" + text +
                       "' --ablate L0H3 --ablate-mode zero --dump " + dir.string() +
                       " --hooks blocks.0.attn.out --json " + (dir / "a.json").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("zero ablation of L0H3"), std::string::npos) << r.out;
  const auto model = core::cached_model("default-text");
  models::ModelInput in;
  in.ids = read_ids((dir / "ids.npy").string());
  const models::Intervention iv = core::ablation({{0, 3}}, models::HeadEdit::Zero);
  const models::ModelOutput want = forward(*model, in.ids, &iv);
  const models::NpyArray got = models::read_npy((dir / "logits.npy").string());
  ASSERT_EQ(got.shape, (std::vector<int64_t>{int64_t(in.ids.size()), model->info().vocab}));
  const std::vector<float> g = got.to_f32();
  EXPECT_LT(max_diff(want.logits, g), 1e-5);
  const auto out = models::read_npy((dir / "blocks.0.attn.out.npy").string()).to_f32();
  const int d = model->info().head_dim, N = int(in.ids.size());
  for (int t = 0; t < N; ++t) EXPECT_EQ(out[(size_t(3) * N + t) * d], 0.0f);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "a.json"));
  EXPECT_EQ(j["ablate"], "L0H3");
  EXPECT_NE(double(j["perplexity_ablated"]), double(j["perplexity_plain"]));
  // Usage errors: exit 2 naming the problem.
  const CliRun bad = cli("analyze --model default-text --text hi --ablate 5.0");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("L5H0 is outside the model"), std::string::npos) << bad.out;
  const CliRun both =
      cli("analyze --model default-text --text hi --ablate 0.0 -v 'window(size=4)'");
  EXPECT_EQ(both.status, 2) << both.out;
  const CliRun mode = cli("analyze --model default-text --text hi --ablate 0.0 --ablate-mode x");
  EXPECT_EQ(mode.status, 2) << mode.out;
  const CliRun resample =
      cli("analyze --model default-text --text 'And God said' --ablate 0.3 "
          "--ablate-mode resample --resample-text 'And Moses said' --json " +
          (dir / "r.json").string());
  EXPECT_EQ(resample.status, 0) << resample.out;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir / "r.json"))["mode"], "resample");
  const CliRun no_source =
      cli("analyze --model default-text --text hi --ablate 0.3 --ablate-mode resample");
  EXPECT_EQ(no_source.status, 2) << no_source.out;
  const CliRun shorter =
      cli("analyze --model default-text --text 'And God said' --ablate 0.3 "
          "--ablate-mode resample --resample-text 'And'");
  EXPECT_EQ(shorter.status, 2) << shorter.out;
  EXPECT_NE(shorter.out.find("--resample-text is 1 tokens but the input is 3: resample needs the "
                             "same length"),
            std::string::npos)
      << shorter.out;
  // Pattern patching from the other text: a different pass than resampling the output.
  const CliRun pattern =
      cli("analyze --model default-text --text 'And God said' --ablate 0.3 "
          "--ablate-mode pattern --resample-text 'And Moses said' --json " +
          (dir / "p.json").string());
  EXPECT_EQ(pattern.status, 0) << pattern.out;
  const nlohmann::json pj = nlohmann::json::parse(std::ifstream(dir / "p.json"));
  EXPECT_EQ(pj["mode"], "pattern");
  EXPECT_NE(double(pj["next_token_kl"]),
            double(nlohmann::json::parse(std::ifstream(dir / "r.json"))["next_token_kl"]));
  EXPECT_EQ(cli("analyze --model default-text --text hi --ablate 0.3 --ablate-mode pattern").status,
            2);
}

// A session's ablation: the analysis core runs every pass on the ablated model (the GUI's
// Interventions dock and `analyze --session` both go through it), and reports its effect.
TEST(Interventions, SessionAblationRunsTheWholeAnalysisOnTheAblatedModel) {
  REQUIRE_MODEL("default-text");
  core::Session s;
  s.input.text = "In the beginning God created the heaven and the earth. And the earth was";
  s.variants = {"window(size=8)"};
  core::Options o;
  o.verify_hashes = false;
  const auto plain = core::analyze(s, "", o);
  s.ablation.heads = {"L0H3", "L1H2"};
  s.ablation.mode = "mean";
  EXPECT_NE(core::heavy_key(s), core::heavy_key(plain->session));
  const auto a = core::analyze(s, "", o);
  const auto model = core::cached_model("default-text");
  const models::Intervention iv = core::ablation({{0, 3}, {1, 2}}, models::HeadEdit::Mean);
  const core::InterventionRun r = core::run_intervention(*model, a->input, iv);
  // The dense pass is the ablated one, and the effect is the ablated model against the plain.
  // The analysis runs its reference kernel (flash) in the pass, run_intervention() the model's
  // own dense product: the logits agree to f32 rounding of their size.
  const std::vector<float> edited(r.edited.logits.begin(), r.edited.logits.end());
  float largest = 0;
  for (float x : edited) largest = std::max(largest, std::abs(x));
  EXPECT_LT(max_diff(a->dense_out().logits, edited), 2e-6 * (1 + largest));
  ASSERT_TRUE(a->ablation_effect);
  EXPECT_NEAR(a->ablation_effect->mean_kl, r.effect.mean_kl, 1e-6);
  EXPECT_NEAR(a->ablation_effect->ppl_variant, r.effect.ppl_variant, 1e-4);
  EXPECT_NEAR(a->ablation_effect->ppl_dense, plain->panels[0].e2e->ppl_dense, 1e-4);
  EXPECT_GT(a->ablation_effect->mean_kl, 0);
  // Layer 0's queries and keys come before the ablated output; layer 1's after it.
  EXPECT_EQ(a->problem(0).q, plain->problem(0).q);
  EXPECT_NE(a->problem(1).q, plain->problem(1).q);
  // The variant's end-to-end substitution runs inside the ablated model too: its dense-relative
  // perplexity starts from the ablated model's.
  ASSERT_TRUE(a->panels[1].e2e);
  EXPECT_NEAR(a->panels[1].e2e->ppl_dense, r.effect.ppl_variant, 1e-4);
  models::ModelInput in = a->input;
  models::Substitution sub{a->panels[1].variant.get(), nullptr, {}, {}, {}};
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  sub.backend = cpu.get();
  models::ForwardOptions fo;
  fo.substitution = &sub;
  fo.intervention = &iv;
  const models::ModelOutput both = model->forward(in, fo);
  EXPECT_NEAR(a->panels[1].e2e->ppl_variant,
              end_to_end(model->info(), in, r.edited, both).ppl_variant, 1e-4);
  // The report names the ablation and its effect.
  const nlohmann::json j = core::analysis_json(*a);
  EXPECT_EQ(j["ablation"]["heads"], nlohmann::json({"L0H3", "L1H2"}));
  EXPECT_EQ(j["ablation"]["mode"], "mean");
  EXPECT_NEAR(double(j["ablation"]["effect"]["next_token_kl_mean"]), r.effect.mean_kl, 1e-6);
  // So does a figure of it.
  const std::string subtitle = core::collect_figure(*a, core::View::Heatmap).subtitle;
  EXPECT_NE(subtitle.find("L0H3, L1H2 mean-ablated"), std::string::npos) << subtitle;
  // Heads the model lacks, and inputs without a model, are refused by name.
  s.ablation.heads = {"L7H0"};
  EXPECT_THROW(
      {
        try {
          core::open(s, "", o);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("L7H0 is outside the model"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  s.ablation.heads = {"L0H0"};
  s.input.kind = "synthetic";
  s.input.synthetic_tokens = 64;
  EXPECT_THROW(core::open(s, "", o), Error);
}

TEST(Interventions, PatchCommand) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "patch_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const CliRun r =
      cli("patch --model default-text --clean 'And God said, Let there be light' --corrupt 'And "
          "Moses said, Let there be light' --target ' and' --foil ' upon' --over heads --json " +
          (dir / "p.json").string() + " --figure " + (dir / "p.png").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "p.json"));
  EXPECT_EQ(j["effect"].size(), 2u);
  EXPECT_EQ(j["effect"][0].size(), 4u);
  EXPECT_TRUE(fs::exists(dir / "p.png"));
  // Pattern patching: the same grid shape, its own caption, other effects than head outputs'.
  const CliRun pat =
      cli("patch --model default-text --clean 'And God said, Let there be light' --corrupt 'And "
          "Moses said, Let there be light' --target ' and' --foil ' upon' --over patterns --json " +
          (dir / "a.json").string() + " --figure " + (dir / "a.svg").string());
  ASSERT_EQ(pat.status, 0) << pat.out;
  const nlohmann::json ja = nlohmann::json::parse(std::ifstream(dir / "a.json"));
  EXPECT_EQ(ja["over"], "patterns");
  ASSERT_EQ(ja["effect"].size(), 2u);
  ASSERT_EQ(ja["effect"][0].size(), 4u);
  EXPECT_NE(ja["effect"], j["effect"]);
  std::ifstream svg(dir / "a.svg");
  const std::string svg_text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(svg_text.find("attention patterns patched"), std::string::npos);
  // A dataset in two shards merges to the single run's JSON.
  {
    std::ofstream pairs(dir / "pairs.jsonl");
    for (const char* who : {"Moses", "Aaron", "Pharaoh"})
      pairs << nlohmann::json{{"clean", "And God said, Let there be light"},
                              {"corrupt", std::string("And ") + who + " said, Let there be light"},
                              {"target", " and"},
                              {"foil", " upon"}}
                   .dump()
            << "\n";
  }
  const std::string ds = "patch --model default-text --dataset " + (dir / "pairs.jsonl").string() +
                         " --bootstrap 100 --json ";
  ASSERT_EQ(cli(ds + (dir / "all.json").string()).status, 0);
  ASSERT_EQ(cli(ds + (dir / "s0.json").string() + " --shard 0/2").status, 0);
  ASSERT_EQ(cli(ds + (dir / "s1.json").string() + " --shard 1/2").status, 0);
  const CliRun merged =
      cli("patch --bootstrap 100 --merge " + (dir / "s1.json").string() + " " +
          (dir / "s0.json").string() + " --json " + (dir / "merged.json").string());
  ASSERT_EQ(merged.status, 0) << merged.out;
  EXPECT_EQ(test::json_difference(nlohmann::json::parse(std::ifstream(dir / "merged.json")),
                                  nlohmann::json::parse(std::ifstream(dir / "all.json"))),
            "");
  EXPECT_EQ(cli("patch --model default-text --merge " + (dir / "s0.json").string()).status, 2);
  EXPECT_EQ(cli(ds + (dir / "x.json").string() + " --shard 2/2").status, 2);
  const CliRun len =
      cli("patch --model default-text --clean 'And God said' --corrupt 'And the Lord God said' "
          "--target ' and' --foil ' upon'");
  EXPECT_EQ(len.status, 2) << len.out;
  EXPECT_NE(len.out.find("same length"), std::string::npos) << len.out;
  const CliRun two =
      cli("patch --model default-text --clean 'And God said' --corrupt 'And Moses said' "
          "--target ' Pharaohs' --foil ' upon'");
  EXPECT_EQ(two.status, 2) << two.out;
  EXPECT_NE(two.out.find("not one"), std::string::npos) << two.out;
}

}  // namespace
}  // namespace attn
