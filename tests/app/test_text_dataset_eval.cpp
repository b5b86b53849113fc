// A language model over a text dataset (app/core/datasets/text_dataset_eval.h): the loss, its rise
// over dense paired by record, KL and agreement against forward passes run here one record at a
// time, bad records named, and `attnscope sweep --dataset` on a JSONL file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/core/analysis/analysis.h"
#include "app/core/datasets/text_dataset_eval.h"
#include "app/core/heads/interventions.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/substitution.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::vector<core::TextRecord> records() {
  return {{"r:1", "In the beginning God created the heaven and the earth."},
          {"r:2",
           "And the earth was without form, and void; and darkness was upon the face of "
           "the deep. And the Spirit of God moved upon the face of the waters."},
          {"r:3", "And God said, Let there be light: and there was light."},
          {"r:4",
           "And God saw the light, that it was good: and God divided the light from the "
           "darkness."}};
}

TEST(TextDatasetEval, LossRiseKlAndAgreementMatchRecordByRecordPasses) {
  REQUIRE_MODEL("default-text");
  const auto model = core::cached_model("default-text");
  const core::EncodedRecords enc = core::encode_records(*model, records());
  const std::vector<std::string> names = {"r:1", "r:2", "r:3", "r:4"};
  const core::TextDatasetEval dense =
      core::evaluate_text_dataset(*model, enc, names, "dense", nullptr);
  const core::TextDatasetEval win =
      core::evaluate_text_dataset(*model, enc, names, "window(size=6)", &dense);
  // The same numbers from plain and substituted forward passes here.
  const Variant v = make_variant("window(size=6)");
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  double loss_d = 0, loss_w = 0, kl = 0, top1 = 0;
  int64_t tokens = 0;
  for (const auto& ids : enc.ids) {
    models::ModelInput in;
    in.ids = ids;
    tokens += int64_t(ids.size());
    const models::ModelOutput d = model->forward(in);
    models::Substitution sub{&v, cpu.get(), {}, {}, {}};
    models::ForwardOptions fo;
    fo.substitution = &sub;
    const models::ModelOutput w = model->forward(in, fo);
    loss_d += core::next_token_loss(d, ids) / 4;
    loss_w += core::next_token_loss(w, ids) / 4;
    const models::EndToEnd e = end_to_end(model->info(), in, d, w);
    kl += e.mean_kl / 4;
    top1 += e.top1_agreement / 4;
  }
  EXPECT_EQ(dense.records, 4);
  EXPECT_EQ(dense.tokens, tokens);
  EXPECT_NEAR(dense.loss, loss_d, 1e-5);
  EXPECT_NEAR(win.loss, loss_w, 1e-5);
  EXPECT_NEAR(win.next_token_kl, kl, 1e-5);
  EXPECT_NEAR(win.top1_agreement, top1, 1e-9);
  EXPECT_GT(win.loss, dense.loss);
  EXPECT_LT(win.density, 0.9);
  EXPECT_DOUBLE_EQ(dense.density, 1.0);
  EXPECT_DOUBLE_EQ(dense.next_token_kl, 0.0);
  // Intervals: around the mean; the paired rise's holds the measured rise; none for dense.
  EXPECT_LE(dense.loss_lo, dense.loss);
  EXPECT_GE(dense.loss_hi, dense.loss);
  EXPECT_LE(win.rise_lo, win.loss - dense.loss);
  EXPECT_GE(win.rise_hi, win.loss - dense.loss);
  EXPECT_TRUE(std::isnan(dense.rise_lo));
  // The table and the figure's points.
  const std::string csv = core::text_dataset_csv({{0, dense}, {1, win}});
  EXPECT_EQ(
      csv.rfind("index,spec,records,tokens,loss,loss_lo,loss_hi,loss_rise,rise_lo,rise_hi,", 0),
      0u);
  EXPECT_NE(csv.find("\n1,\"window(size=6)\",4,"), std::string::npos) << csv;
  const core::TradeoffPoint pt = core::text_dataset_point(win);
  EXPECT_DOUBLE_EQ(pt.loss, win.loss);
  EXPECT_NEAR(pt.perplexity, std::exp(win.loss), 1e-9);
  // Bad inputs: a one-token record is named; a vision model and an empty dataset are refused.
  core::EncodedRecords one = enc;
  one.ids[2].resize(1);
  try {
    core::evaluate_text_dataset(*model, one, names, "dense", nullptr);
    ADD_FAILURE() << "a one-token record was evaluated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r:3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(core::evaluate_text_dataset(*model, {}, {}, "dense", nullptr), Error);
  if (test::have_model("default-vision")) {
    EXPECT_THROW(core::evaluate_text_dataset(*core::cached_model("default-vision"), enc, names,
                                             "dense", nullptr),
                 Error);
  }
}

TEST(TextDatasetEval, SweepCommandWritesTheLossTable) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "sweep_text_dataset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "corpus.jsonl");
    for (const core::TextRecord& r : records())
      f << nlohmann::json{{"text", r.text}}.dump() << "\n";
  }
  const std::string out = (dir / "loss.csv").string();
  std::string text;
  ASSERT_EQ(test::run_command(std::string(ATTN_CLI) + " sweep --model default-text --dataset " +
                                  (dir / "corpus.jsonl").string() +
                                  " --variant \"window(size=4|16)\" --quiet --json --out " + out +
                                  " --figure " + (dir / "loss.png").string(),
                              &text),
            0)
      << text;
  EXPECT_GT(fs::file_size(dir / "loss.png"), 10000u);
  std::ifstream f(out);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(f, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1].rfind("0,\"dense\",4,", 0), 0u) << lines[1];
  const auto j = nlohmann::json::parse(text.substr(text.find('[')));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_GT(j[1]["loss_rise"].get<double>(),
            j[2]["loss_rise"].get<double>());  // narrower hurts more
  EXPECT_TRUE(j[0]["rise_interval"][0].is_null());
  // Two shards (each runs dense beside its share) merge to the single run's table, timings
  // aside; a missing shard is named.
  const auto table = [](const std::string& path) {
    std::ifstream in(path);
    std::vector<core::TextDatasetRow> rows =
        core::parse_text_dataset_csv(std::string(std::istreambuf_iterator<char>(in), {}), path);
    for (auto& r : rows) r.eval.seconds = 0;
    return core::text_dataset_csv(rows);
  };
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(
        test::run_command(std::string(ATTN_CLI) + " sweep --model default-text --dataset " +
                          (dir / "corpus.jsonl").string() +
                          " --variant \"window(size=4|16)\" --quiet --shard " + std::to_string(i) +
                          "/2 --out " + (dir / ("s" + std::to_string(i) + ".csv")).string()),
        0);
  ASSERT_EQ(test::run_command(std::string(ATTN_CLI) + " sweep --quiet --merge " +
                              (dir / "s0.csv").string() + " " + (dir / "s1.csv").string() +
                              " --out " + (dir / "merged.csv").string() + " --figure " +
                              (dir / "merged.png").string()),
            0);
  EXPECT_EQ(table((dir / "merged.csv").string()), table(out));
  EXPECT_TRUE(fs::exists(dir / "merged.png"));
  std::string missing;
  EXPECT_NE(test::run_command(std::string(ATTN_CLI) + " sweep --merge " +
                                  (dir / "s0.csv").string() + " --out " + (dir / "m.csv").string(),
                              &missing),
            0);
  EXPECT_NE(missing.find("is missing"), std::string::npos) << missing;
  EXPECT_THROW(core::parse_text_dataset_csv("index,spec\n", "t.csv"), Error);
}

}  // namespace
}  // namespace attn
