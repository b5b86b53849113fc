// `analyze --dataset` (app/core/datasets/dataset_analysis.h): every number over a dataset is the
// mean of what the single-input analysis gives record by record, with an interval around it; the
// ablation's corpus mean equals the per-input mean on a one-record dataset; image accuracy
// against labels; bad datasets named; the CLI writes its JSON and figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"
#include "app/core/datasets/dataset_analysis.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "compute/error.h"
#include "models/arch/text_input.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::vector<core::DatasetItem> text_items() {
  const char* texts[] = {
      "In the beginning God created the heaven and the earth.",
      "And the earth was without form, and void; and darkness was upon the face of the deep.",
      "And God said, Let there be light: and there was light.",
      "And God saw the light, that it was good: and God divided the light from the darkness.",
      "And God called the light Day, and the darkness he called Night."};
  std::vector<core::DatasetItem> items;
  for (int i = 0; i < 5; ++i) {
    core::DatasetItem it;
    it.name = "r:" + std::to_string(i + 1);
    it.input.text = texts[i];
    items.push_back(it);
  }
  return items;
}

// Equal to rounding (a forward pass sums across threads in its own order), or both NaN (a
// value no record has).
bool same(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(a)) || (std::isnan(a) && std::isnan(b));
}

core::Session text_session() {
  core::Session s;
  s.model.id = "default-text";
  s.variants = {"window(size=4)", "topk(k=8)"};
  return s;
}

TEST(DatasetAnalysis, EveryNumberIsTheMeanOfTheRecordsAnalyses) {
  REQUIRE_MODEL("default-text");
  const core::Session s = text_session();
  const auto items = text_items();
  core::DatasetAnalysisOptions o;
  o.bootstrap = 300;
  int64_t calls = 0;
  o.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 5);
  };
  const core::DatasetAnalysis d = core::analyze_dataset(s, "", items, o);
  EXPECT_EQ(calls, 5);
  ASSERT_EQ(d.records, 5);
  ASSERT_EQ(d.panels.size(), 3u);
  const int LH = d.n_layers * d.n_heads;
  const int ent = core::head_metric_index("entropy"), prev = core::head_metric_index("prev_token");
  // Independently: each record analysed alone, averaged here.
  std::vector<std::vector<double>> entropy(3, std::vector<double>(size_t(LH), 0.0));
  std::vector<double> prev_tok(size_t(LH), 0.0), loss(3, 0.0), density(3, 0.0), kl(3, 0.0);
  for (const core::DatasetItem& it : items) {
    core::Session rs = s;
    rs.input = it.input;
    const auto a = core::analyze(rs, "");
    for (int p = 0; p < 3; ++p) {
      const core::HeadGrid g = core::head_grid(*a, p);
      for (int i = 0; i < LH; ++i)
        entropy[size_t(p)][size_t(i)] += g.values[size_t(ent)][size_t(i)] / 5;
      const core::TradeoffPoint t = core::tradeoff_point(*a, p);
      density[size_t(p)] += t.density / 5;
      if (p > 0) {
        loss[size_t(p)] += std::log(a->panels[size_t(p)].e2e->ppl_variant) / 5;
        kl[size_t(p)] += a->panels[size_t(p)].e2e->mean_kl / 5;
      } else {
        loss[0] += core::next_token_loss(a->dense_out(), a->input.ids) / 5;
        for (int i = 0; i < LH; ++i) prev_tok[size_t(i)] += g.values[size_t(prev)][size_t(i)] / 5;
      }
    }
  }
  for (int p = 0; p < 3; ++p) {
    const core::PanelSummary& ps = d.panels[size_t(p)];
    EXPECT_EQ(ps.spec, p == 0 ? "dense" : s.variants[size_t(p - 1)]);
    for (int i = 0; i < LH; ++i) {
      EXPECT_NEAR(ps.mean[size_t(ent)][size_t(i)], entropy[size_t(p)][size_t(i)], 1e-4);
      EXPECT_LE(ps.lo[size_t(ent)][size_t(i)], ps.mean[size_t(ent)][size_t(i)] + 1e-6);
      EXPECT_GE(ps.hi[size_t(ent)][size_t(i)], ps.mean[size_t(ent)][size_t(i)] - 1e-6);
    }
    EXPECT_NEAR(ps.loss.mean, loss[size_t(p)], 1e-5) << ps.spec;
    EXPECT_NEAR(ps.density.mean, density[size_t(p)], 1e-9) << ps.spec;
    EXPECT_EQ(ps.loss.n, 5);
    EXPECT_LE(ps.loss.lo, ps.loss.mean);
    EXPECT_GE(ps.loss.hi, ps.loss.mean);
    if (p > 0) {
      EXPECT_NEAR(ps.next_token_kl.mean, kl[size_t(p)], 1e-6);
      EXPECT_NEAR(ps.loss_rise.mean, loss[size_t(p)] - loss[0], 1e-5);
      EXPECT_LE(ps.loss_rise.lo, ps.loss_rise.mean);
      EXPECT_GE(ps.loss_rise.hi, ps.loss_rise.mean);
    } else {
      EXPECT_TRUE(std::isnan(ps.loss_rise.mean));
      EXPECT_DOUBLE_EQ(ps.density.mean, 1.0);
    }
  }
  for (int i = 0; i < LH; ++i)
    EXPECT_NEAR(d.panels[0].mean[size_t(prev)][size_t(i)], prev_tok[size_t(i)], 1e-4);
  EXPECT_LT(d.panels[1].density.mean, 0.9);
  // JSON and figures.
  const nlohmann::json j = core::dataset_analysis_json(d);
  EXPECT_EQ(j["records"], 5);
  EXPECT_EQ(j["panels"][1]["spec"], "window(size=4)");
  EXPECT_EQ(j["panels"][0]["heads"]["entropy"]["mean"].size(), size_t(d.n_layers));
  EXPECT_NEAR(j["panels"][2]["loss"]["mean"].get<double>(), d.panels[2].loss.mean, 1e-9);
  const core::FigureData g = core::dataset_analysis_grid(d, "prev_token", 0);
  ASSERT_EQ(g.values.panels.size(), 1u);
  EXPECT_EQ(g.values.panels[0].lo.size(), size_t(LH));
  const core::FigureData t = core::dataset_analysis_tradeoff(d);
  ASSERT_EQ(t.tradeoff.size(), 3u);
  EXPECT_EQ(t.settings.tradeoff_y, "loss");
  EXPECT_DOUBLE_EQ(t.tradeoff[1].loss_lo, d.panels[1].loss.lo);
  EXPECT_THROW(core::dataset_analysis_grid(d, "no_such_metric", 0), Error);
  EXPECT_THROW(core::dataset_analysis_grid(d, "entropy", 3), Error);
}

TEST(DatasetAnalysis, AblationOverTheDatasetUsesTheCorpusMean) {
  REQUIRE_MODEL("default-text");
  core::Session s;
  s.model.id = "default-text";
  s.ablation.heads = {"L0H3"};
  s.ablation.mode = "zero";
  const auto items = text_items();
  core::DatasetAnalysisOptions o;
  o.bootstrap = 100;
  const core::DatasetAnalysis z = core::analyze_dataset(s, "", items, o);
  // Zero ablation: the single-input analysis's effect, averaged.
  double rise = 0, kl = 0;
  for (const core::DatasetItem& it : items) {
    core::Session rs = s;
    rs.input = it.input;
    const auto a = core::analyze(rs, "");
    rise += (core::next_token_loss(a->dense_out(), a->input.ids) -
             std::log(a->ablation_effect->ppl_dense)) /
            5;
    kl += a->ablation_effect->mean_kl / 5;
  }
  EXPECT_EQ(z.ablation_heads, "L0H3");
  EXPECT_NEAR(z.ablation_loss_rise.mean, rise, 1e-5);
  EXPECT_NEAR(z.ablation_kl.mean, kl, 1e-6);
  EXPECT_GT(std::abs(z.ablation_loss_rise.mean), 1e-3);  // the previous-token head matters
  EXPECT_NEAR(z.ablation_loss.mean - z.plain_loss.mean, z.ablation_loss_rise.mean, 1e-9);
  // Mean ablation: on one record the corpus mean is the input's own mean.
  s.ablation.mode = "mean";
  const std::vector<core::DatasetItem> one = {items[1]};
  const core::DatasetAnalysis m = core::analyze_dataset(s, "", one, o);
  core::Session rs = s;
  rs.input = items[1].input;
  const auto a = core::analyze(rs, "");
  EXPECT_NEAR(m.ablation_loss.mean, core::next_token_loss(a->dense_out(), a->input.ids), 1e-5);
  EXPECT_EQ(core::dataset_analysis_json(m)["ablation"]["mode"], "corpus-mean");
  // Over five records the corpus mean differs from each record's own mean.
  const core::DatasetAnalysis m5 = core::analyze_dataset(s, "", items, o);
  double own = 0;
  for (const core::DatasetItem& it : items) {
    core::Session r5 = s;
    r5.input = it.input;
    const auto b = core::analyze(r5, "");
    own += core::next_token_loss(b->dense_out(), b->input.ids) / 5;
  }
  EXPECT_GT(std::abs(m5.ablation_loss.mean - own), 1e-4);
  // The corpus mean itself, against a float64 sum of the captured head outputs.
  const auto model = core::cached_model("default-text");
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& it : items) seqs.push_back(encode_for_model(*model, it.input.text, it.name).ids);
  const auto means = core::head_output_means(*model, seqs);
  const int d = model->info().head_dim;
  std::vector<double> sum(size_t(d), 0.0);
  double count = 0;
  for (const auto& ids : seqs) {
    models::Capture cap(models::HookSelection::parse("blocks.0.attn.out"));
    models::ForwardOptions fo;
    fo.capture = &cap;
    models::ModelInput in;
    in.ids = ids;
    model->forward(in, fo);
    for (size_t t = 0; t < ids.size(); ++t)
      for (int e = 0; e < d; ++e) sum[size_t(e)] += cap.layers[0].out[(3 * ids.size() + t) * d + e];
    count += double(ids.size());
  }
  for (int e = 0; e < d; ++e)
    EXPECT_NEAR(means[size_t(3)][size_t(e)], sum[size_t(e)] / count, 1e-5);
  // Resample needs one other input: refused over a dataset.
  s.ablation.mode = "resample";
  EXPECT_THROW(core::analyze_dataset(s, "", items, o), Error);
}

TEST(DatasetAnalysis, ImageAccuracyAgainstLabelsAndBadRecordsNamed) {
  REQUIRE_MODEL("default-vision");
  const auto model = core::cached_model("default-vision");
  const int ch = model->preprocessor().channels;
  std::mt19937 rng(7);
  std::vector<core::DatasetItem> items;
  for (int i = 0; i < 6; ++i) {
    core::DatasetItem it;
    it.name = "img:" + std::to_string(i);
    it.input.kind = "image";
    it.input.image = it.name;
    it.image.height = it.image.width = 28;
    it.image.channels = ch;
    it.image.data.resize(size_t(28 * 28 * ch));
    for (auto& px : it.image.data) px = uint8_t(rng() % 256);
    it.label = i % 3;
    items.push_back(it);
  }
  core::Session s;
  s.model.id = "default-vision";
  s.variants = {"window(size=8)"};
  core::DatasetAnalysisOptions o;
  o.bootstrap = 100;
  const core::DatasetAnalysis d = core::analyze_dataset(s, "", items, o);
  double acc = 0, agree = 0;
  for (const core::DatasetItem& it : items) {
    core::Session rs = s;
    rs.input = it.input;
    core::Options ao;
    ao.image = &it.image;
    const auto a = core::analyze(rs, "", ao);
    acc += (a->predicted_class() == it.label) / 6.0;
    agree += a->panels[1].e2e->class_agree / 6.0;
  }
  EXPECT_NEAR(d.panels[0].accuracy.mean, acc, 1e-12);
  EXPECT_NEAR(d.panels[1].class_agreement.mean, agree, 1e-12);
  EXPECT_TRUE(std::isnan(d.panels[0].loss.mean));
  EXPECT_EQ(core::dataset_analysis_tradeoff(d).settings.tradeoff_y, "accuracy");
  // An image of the wrong channel count is named; so is an empty dataset.
  items[4].image.channels = ch == 1 ? 3 : 1;
  items[4].image.data.resize(size_t(28 * 28 * items[4].image.channels));
  try {
    core::analyze_dataset(s, "", items, o);
    ADD_FAILURE() << "a bad record was analysed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("img:4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(core::analyze_dataset(s, "", {}, o), Error);
  // A text record for a vision model is named too.
  std::vector<core::DatasetItem> text = {text_items()[0]};
  EXPECT_THROW(core::analyze_dataset(s, "", text, o), Error);
}

// Shards: every n-th record each, samples through JSON, merged: the single run's numbers (the
// intervals resample the same records in the same order). Corpus means come from the whole
// dataset in every shard.
TEST(DatasetAnalysis, ShardsMergeToTheSingleRun) {
  REQUIRE_MODEL("default-text");
  core::Session s = text_session();
  s.ablation.heads = {"L1H2"};
  s.ablation.mode = "mean";
  std::vector<core::DatasetItem> all = text_items();
  for (size_t i = 0; i < all.size(); ++i) all[i].index = int64_t(i);
  core::DatasetAnalysisOptions o;
  o.bootstrap = 200;
  const core::DatasetAnalysis whole = core::analyze_dataset(s, "", all, o);
  o.mean_over = &all;
  std::vector<core::DatasetSamples> shards;
  for (int k = 0; k < 2; ++k) {
    std::vector<core::DatasetItem> mine;
    for (size_t i = size_t(k); i < all.size(); i += 2) mine.push_back(all[i]);
    core::DatasetSamples x = core::collect_dataset(s, "", mine, o);
    x.dataset = "corpus";
    // Through the file format.
    const nlohmann::json j = nlohmann::json::parse(core::dataset_samples_json(x).dump());
    ASSERT_TRUE(core::is_dataset_samples_json(j));
    shards.push_back(core::dataset_samples_from_json(j, "shard" + std::to_string(k)));
  }
  // Shards in either order.
  const core::DatasetSamples merged = core::merge_dataset_samples({shards[1], shards[0]});
  EXPECT_EQ(merged.index, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  const core::DatasetAnalysis m = core::summarize_dataset(merged, 200);
  ASSERT_EQ(m.panels.size(), whole.panels.size());
  EXPECT_EQ(m.records, 5);
  for (size_t p = 0; p < m.panels.size(); ++p) {
    EXPECT_TRUE(same(m.panels[p].loss.mean, whole.panels[p].loss.mean));
    EXPECT_TRUE(same(m.panels[p].loss.lo, whole.panels[p].loss.lo));
    EXPECT_TRUE(same(m.panels[p].loss.hi, whole.panels[p].loss.hi));
    EXPECT_TRUE(same(m.panels[p].loss_rise.hi, whole.panels[p].loss_rise.hi));
    for (size_t k = 0; k < m.panels[p].mean.size(); ++k)
      for (size_t i = 0; i < m.panels[p].mean[k].size(); ++i) {
        EXPECT_TRUE(same(m.panels[p].mean[k][i], whole.panels[p].mean[k][i])) << p << " " << k;
        EXPECT_TRUE(same(m.panels[p].hi[k][i], whole.panels[p].hi[k][i])) << p << " " << k;
      }
  }
  EXPECT_TRUE(same(m.ablation_loss_rise.mean, whole.ablation_loss_rise.mean));
  EXPECT_TRUE(same(m.ablation_kl.lo, whole.ablation_kl.lo));
  // A record twice, another variant list, a damaged file: named.
  EXPECT_THROW(core::merge_dataset_samples({shards[0], shards[0]}), Error);
  core::DatasetSamples other = shards[1];
  other.panels[1].spec = "window(size=5)";
  EXPECT_THROW(core::merge_dataset_samples({shards[0], other}), Error);
  nlohmann::json bad = core::dataset_samples_json(shards[0]);
  bad["panels"][0]["loss"].erase(0);
  try {
    core::dataset_samples_from_json(bad, "bad.json");
    ADD_FAILURE() << "a damaged shard was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  bad = core::dataset_samples_json(shards[0]);
  bad.erase("index");
  EXPECT_THROW(core::dataset_samples_from_json(bad, "bad.json"), Error);
  EXPECT_THROW(core::dataset_samples_from_json(nlohmann::json::object(), "x.json"), Error);
}

TEST(DatasetAnalysis, AnalyzeCommandOverAJsonlDataset) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "analyze_dataset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "corpus.jsonl");
    for (const core::DatasetItem& it : text_items())
      f << nlohmann::json{{"text", it.input.text}}.dump() << "\n";
  }
  const std::string base = std::string(ATTN_CLI) + " analyze --model default-text --dataset " +
                           (dir / "corpus.jsonl").string() + " --quiet --bootstrap 200";
  std::string text;
  ASSERT_EQ(
      test::run_command(base + " -v \"window(size=4)\" --limit 4 --json " +
                            (dir / "a.json").string() + " --figure " + (dir / "loss.png").string(),
                        &text),
      0)
      << text;
  EXPECT_NE(text.find("loss [95% CI]"), std::string::npos) << text;
  std::ifstream jf(dir / "a.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["records"], 4);
  EXPECT_GT(j["panels"][1]["loss_rise"]["mean"].get<double>(), 0.0);
  EXPECT_GT(fs::file_size(dir / "loss.png"), 10000u);
  ASSERT_EQ(test::run_command(base + " --ablate L0H3 --ablate-mode mean --figure " +
                                  (dir / "prev.svg").string() + " --figure-metric prev_token",
                              &text),
            0)
      << text;
  EXPECT_NE(text.find("ablated: L0H3 (corpus mean)"), std::string::npos) << text;
  EXPECT_GT(fs::file_size(dir / "prev.svg"), 2000u);
  // Bad command lines: a one-input option beside --dataset, resample, a bad JSONL line.
  EXPECT_EQ(test::run_command(base + " --text hi", &text), 2) << text;
  EXPECT_EQ(test::run_command(base + " --ablate L0H3 --ablate-mode resample", &text), 2) << text;
  EXPECT_NE(
      test::run_command(base + " --figure-metric nope --figure " + (dir / "x.png").string(), &text),
      0);
  {
    std::ofstream f(dir / "bad.jsonl");
    f << "{\"text\": \"fine\"}\n{\"text\": 3}\n";
  }
  EXPECT_NE(
      test::run_command(std::string(ATTN_CLI) + " analyze --model default-text --quiet --dataset " +
                            (dir / "bad.jsonl").string(),
                        &text),
      0);
  EXPECT_NE(text.find("bad.jsonl:2"), std::string::npos) << text;
  EXPECT_EQ(test::run_command(std::string(ATTN_CLI) + " analyze --model default-text --text hi "
                                                      "--limit 3",
                              &text),
            2)
      << text;
  // Three shards merge to the single run's JSON (timings aside).
  const std::string one = base + " -v \"window(size=4)\" --json ";
  ASSERT_EQ(test::run_command(one + (dir / "all.json").string(), &text), 0) << text;
  std::string files;
  for (int k = 0; k < 3; ++k) {
    const std::string f = (dir / ("s" + std::to_string(k) + ".json")).string();
    ASSERT_EQ(test::run_command(one + f + " --shard " + std::to_string(k) + "/3", &text), 0)
        << text;
    files += " " + f;
  }
  ASSERT_EQ(test::run_command(std::string(ATTN_CLI) + " analyze --quiet --bootstrap 200 --merge" +
                                  files + " --json " + (dir / "merged.json").string() +
                                  " --figure " + (dir / "merged.png").string(),
                              &text),
            0)
      << text;
  nlohmann::json want = nlohmann::json::parse(std::ifstream(dir / "all.json"));
  nlohmann::json got = nlohmann::json::parse(std::ifstream(dir / "merged.json"));
  want.erase("seconds");
  got.erase("seconds");
  EXPECT_EQ(test::json_difference(got, want), "");
  EXPECT_GT(fs::file_size(dir / "merged.png"), 10000u);
  // Usage: --shard without --json; --merge beside --dataset; a missing shard file.
  EXPECT_EQ(test::run_command(base + " --shard 0/2", &text), 2) << text;
  EXPECT_EQ(test::run_command(base + " --merge" + files, &text), 2) << text;
  EXPECT_NE(test::run_command(
                std::string(ATTN_CLI) + " analyze --merge " + (dir / "none.json").string(), &text),
            0);
}

}  // namespace
}  // namespace attn
