// Image datasets (app/core/datasets/image_dataset.h) and the dataset-level evaluation of a vision
// model (dataset_eval.h): folders of class folders and loose images written here, malformed IDX
// pairs, the default vision model over all 10,000 Fashion-MNIST test images against the accuracy
// its model card recorded in PyTorch, and `attnscope sweep --dataset`.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/core/analysis/analysis.h"
#include "app/core/datasets/dataset_eval.h"
#include "app/core/datasets/image_dataset.h"
#include "compute/error.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

const char* kFashion = "/usr/share/datasets/fashion-mnist";

// A binary PGM of side n whose pixels are all `v`.
void write_pgm(const fs::path& p, int n, uint8_t v) {
  std::ofstream f(p, std::ios::binary);
  f << "P5\n" << n << " " << n << "\n255\n";
  f << std::string(size_t(n) * n, char(v));
}

void write_idx_gz(const fs::path& p, const std::vector<uint32_t>& dims, size_t payload) {
  std::vector<uint8_t> b = {0, 0, 8, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.resize(b.size() + payload, 1);
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, b.data(), unsigned(b.size()));
  gzclose(f);
}

TEST(ImageDataset, ClassFoldersLooseImagesAndErrors) {
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "image_dataset";
  fs::remove_all(dir);
  fs::create_directories(dir / "classes" / "cat");
  fs::create_directories(dir / "classes" / "ant");
  fs::create_directories(dir / "classes" / "empty");
  write_pgm(dir / "classes" / "cat" / "b.pgm", 5, 200);
  write_pgm(dir / "classes" / "cat" / "a.pgm", 5, 100);
  write_pgm(dir / "classes" / "ant" / "x.pgm", 7, 50);
  std::ofstream(dir / "classes" / "ant" / "notes.txt") << "not an image";
  const core::ImageDataset d = core::read_image_dataset((dir / "classes").string(), 3);
  EXPECT_EQ(d.classes, (std::vector<std::string>{"ant", "cat"}));  // name order, empty skipped
  ASSERT_EQ(d.records.size(), 3u);
  EXPECT_EQ(d.records[0].label, 0);
  EXPECT_EQ(d.records[1].label, 1);
  EXPECT_NE(d.records[1].source.find("a.pgm"), std::string::npos);
  EXPECT_EQ(d.records[1].image.channels, 3);
  EXPECT_EQ(d.records[1].image.data[0], 100);
  EXPECT_EQ(core::read_image_dataset((dir / "classes").string(), 1, 2).records.size(), 2u);
  EXPECT_TRUE(core::is_image_dataset((dir / "classes").string()));

  fs::create_directories(dir / "loose");
  write_pgm(dir / "loose" / "only.pgm", 4, 9);
  const core::ImageDataset loose = core::read_image_dataset((dir / "loose").string(), 1);
  ASSERT_EQ(loose.records.size(), 1u);
  EXPECT_EQ(loose.records[0].label, -1);

  fs::create_directories(dir / "none");
  EXPECT_THROW(core::read_image_dataset((dir / "none").string(), 1), Error);
  EXPECT_FALSE(core::is_image_dataset((dir / "none").string()));
  EXPECT_THROW(core::read_image_dataset((dir / "missing").string(), 1), Error);
  write_pgm(dir / "loose" / "broken.png", 4, 9);  // PGM bytes under a PNG name still decode
  std::ofstream(dir / "loose" / "zbad.png") << "not a png";
  try {
    core::read_image_dataset((dir / "loose").string(), 1);
    ADD_FAILURE() << "an undecodable image was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zbad.png"), std::string::npos) << e.what();
  }

  // IDX pairs: the counts must agree, the labels file must be there.
  fs::create_directories(dir / "idx");
  write_idx_gz(dir / "idx" / "t10k-images-idx3-ubyte.gz", {3, 2, 2}, 12);
  EXPECT_THROW(core::read_image_dataset((dir / "idx").string(), 1), Error);  // no labels
  write_idx_gz(dir / "idx" / "t10k-labels-idx1-ubyte.gz", {4}, 4);
  try {
    core::read_image_dataset((dir / "idx").string(), 1);
    ADD_FAILURE() << "3 images with 4 labels were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Format);
    EXPECT_NE(std::string(e.what()).find("3 images"), std::string::npos) << e.what();
  }
  write_idx_gz(dir / "idx" / "t10k-labels-idx1-ubyte.gz", {3}, 3);
  const core::ImageDataset idx = core::read_image_dataset((dir / "idx").string(), 3);
  ASSERT_EQ(idx.records.size(), 3u);
  EXPECT_EQ(idx.records[2].label, 1);
  EXPECT_EQ(idx.records[2].image.width, 2);
  EXPECT_THROW(core::read_image_dataset((dir / "idx").string() + ":train", 1), Error);
}

// The default vision model over the whole Fashion-MNIST test set: dense gives exactly the test
// accuracy its model card measured in PyTorch (88.34%), on one thread or two; a top-k keeping
// every token agrees with dense everywhere; a sparser one keeps less and says so.
TEST(DatasetEval, DefaultVisionReproducesItsModelCardAccuracy) {
  REQUIRE_MODEL("default-vision");
  if (!fs::exists(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  const auto model = core::cached_model("default-vision");
  const core::ImageDataset d = core::read_image_dataset(kFashion, model->preprocessor().channels);
  ASSERT_EQ(d.records.size(), 10000u);
  core::DatasetEvalOptions two;
  two.threads = 2;
  const core::DatasetEval dense = core::evaluate_image_dataset(*model, d, "dense", nullptr, two);
  EXPECT_EQ(dense.labelled, 10000);
  EXPECT_NEAR(dense.accuracy, 0.8834, 1e-9);
  // The bootstrap interval: around the accuracy, about as wide as the binomial one
  // (2 x 1.96 x sqrt(p (1 - p) / n) = 0.0126 here); no dense baseline, no drop interval.
  EXPECT_LT(dense.accuracy_lo, dense.accuracy);
  EXPECT_GT(dense.accuracy_hi, dense.accuracy);
  EXPECT_NEAR(dense.accuracy_hi - dense.accuracy_lo, 0.0126, 0.002);
  EXPECT_TRUE(std::isnan(dense.drop_lo));
  EXPECT_DOUBLE_EQ(dense.density, 1.0);
  EXPECT_GT(dense.attention_flops, 0);
  core::ImageDataset first;
  first.records.assign(d.records.begin(), d.records.begin() + 500);
  core::DatasetEvalOptions one;
  one.threads = 1;
  const core::DatasetEval serial =
      core::evaluate_image_dataset(*model, first, "dense", nullptr, one);
  EXPECT_TRUE(
      std::equal(serial.predicted.begin(), serial.predicted.end(), dense.predicted.begin()));
  const std::vector<int32_t> dense500(dense.predicted.begin(), dense.predicted.begin() + 500);
  const core::DatasetEval all =
      core::evaluate_image_dataset(*model, first, "topk(k=64)", &dense500, two);
  EXPECT_DOUBLE_EQ(all.agreement, 1.0);  // 50 tokens: every key kept
  const core::DatasetEval few =
      core::evaluate_image_dataset(*model, first, "topk(k=4)", &dense500, two);
  EXPECT_LT(few.density, 0.1);
  EXPECT_LT(few.agreement, 1.0);
  EXPECT_LT(few.accuracy, serial.accuracy);
  // The paired drop from dense: its interval holds the measured drop, above zero here.
  EXPECT_LE(few.drop_lo, serial.accuracy - few.accuracy);
  EXPECT_GE(few.drop_hi, serial.accuracy - few.accuracy);
  EXPECT_GT(few.drop_lo, 0);
  EXPECT_LE(few.accuracy_lo, few.accuracy);
  const core::TradeoffPoint pt = core::dataset_point(few);
  EXPECT_EQ(pt.pattern, "topk");
  EXPECT_DOUBLE_EQ(pt.accuracy, few.accuracy);
  EXPECT_DOUBLE_EQ(pt.accuracy_hi, few.accuracy_hi);
  EXPECT_DOUBLE_EQ(pt.density, few.density);
  EXPECT_THROW(core::evaluate_image_dataset(*core::cached_model("default-text"), first, "dense",
                                            nullptr, two),
               Error);
  EXPECT_THROW(core::evaluate_image_dataset(*model, first, "topk(k=", nullptr, two), Error);
}

TEST(DatasetEval, SweepCommandWritesTheAccuracyTable) {
  REQUIRE_MODEL("default-vision");
  if (!fs::exists(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  const fs::path dir = fs::path(ATTN_TEST_WORK_DIR) / "sweep_dataset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = (dir / "acc.csv").string();
  std::string text;
  const int status =
      test::run_command(std::string(ATTN_CLI) + " sweep --model default-vision --dataset " +
                            kFashion + " --limit 300 --variant \"topk(k=4|64)\" --quiet --out " +
                            out + " --json --figure " + (dir / "acc.png").string(),
                        &text);
  ASSERT_EQ(status, 0) << text;
  EXPECT_GT(fs::file_size(dir / "acc.png"), 10000u);  // the accuracy-vs-density plot
  std::ifstream f(out);
  std::string header, line;
  std::getline(f, header);
  EXPECT_EQ(header.rfind("index,spec,records,labelled,accuracy,accuracy_lo,accuracy_hi,"
                         "accuracy_drop,drop_lo,drop_hi,agreement_with_dense",
                         0),
            0u);
  std::vector<std::string> lines;
  while (std::getline(f, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("0,\"dense\",300,300,", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2].rfind("2,\"topk(k=64)\",300,300,", 0), 0u) << lines[2];
  const auto j = nlohmann::json::parse(text.substr(text.find('[')));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_DOUBLE_EQ(j[2]["agreement_with_dense"].get<double>(), 1.0);
  EXPECT_TRUE(j[0]["drop_interval"][0].is_null());  // the baseline has no drop
  EXPECT_LE(j[1]["accuracy_interval"][0].get<double>(), j[1]["accuracy"].get<double>());
  // Two shards (each runs dense beside its share) merge to the single run's table, timings aside.
  const auto table = [](const std::string& path) {
    std::vector<core::DatasetRow> rows = core::parse_dataset_csv(
        std::string(std::istreambuf_iterator<char>(std::ifstream(path).rdbuf()), {}), path);
    for (auto& r : rows) r.eval.seconds = 0;
    return core::dataset_csv(rows);
  };
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(test::run_command(
                  std::string(ATTN_CLI) + " sweep --model default-vision --dataset " + kFashion +
                  " --limit 300 --variant \"topk(k=4|64)\" --quiet --shard " + std::to_string(i) +
                  "/2 --out " + (dir / ("s" + std::to_string(i) + ".csv")).string()),
              0);
  EXPECT_EQ(table((dir / "s1.csv").string()).find("topk(k=64)"), std::string::npos);
  ASSERT_EQ(test::run_command(std::string(ATTN_CLI) + " sweep --quiet --merge " +
                              (dir / "s0.csv").string() + " " + (dir / "s1.csv").string() +
                              " --out " + (dir / "merged.csv").string() + " --figure " +
                              (dir / "merged.png").string()),
            0);
  EXPECT_EQ(table((dir / "merged.csv").string()), table(out));
  EXPECT_TRUE(fs::exists(dir / "merged.png"));
  // A missing shard, or shards of different data, are named.
  std::string missing;
  EXPECT_NE(test::run_command(std::string(ATTN_CLI) + " sweep --merge " +
                                  (dir / "s0.csv").string() + " --out " + (dir / "m2.csv").string(),
                              &missing),
            0);
  EXPECT_NE(missing.find("is missing"), std::string::npos) << missing;
  std::vector<core::DatasetRow> a = core::parse_dataset_csv(
      std::string(std::istreambuf_iterator<char>(std::ifstream(dir / "s0.csv").rdbuf()), {}), "s0");
  std::vector<core::DatasetRow> b = core::parse_dataset_csv(
      std::string(std::istreambuf_iterator<char>(std::ifstream(dir / "s1.csv").rdbuf()), {}), "s1");
  b[0].eval.accuracy += 0.01;
  try {
    core::merge_dataset_rows({a, b});
    ADD_FAILURE() << "shards of different data merged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not the same dataset or model"), std::string::npos);
  }
  EXPECT_THROW(core::parse_dataset_csv(core::dataset_csv(a) + "3,\"x\",1,1,0.5\n", "t.csv"), Error);
  EXPECT_THROW(core::parse_dataset_csv("spec,records\n", "t.csv"), Error);
  // A text model, or an input beside the dataset: usage errors.
  std::string msg;
  EXPECT_NE(test::run_command(std::string(ATTN_CLI) + " sweep --model default-text --dataset " +
                                  kFashion + " --variant \"topk(k=4)\" --out " + out,
                              &msg),
            0);
  EXPECT_NE(msg.find("text model"), std::string::npos) << msg;
  EXPECT_EQ(test::run_command(std::string(ATTN_CLI) + " sweep --model default-vision --dataset " +
                              kFashion + " --text hi --variant \"topk(k=4)\" --out " + out + ""),
            2);
}

}  // namespace
}  // namespace attn
