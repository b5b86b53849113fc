// `attnscope attribute` through the real binary: the JSON and the .npy dump hold what the core
// computed, usage mistakes (bad targets, unknown methods, a method the variant cannot do) exit 2
// with one line, and a missing model exits 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/formats/npy.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out;
};

CliRun cli(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " attribute " + args, &r.out);
  return r;
}

CliRun test_cli_qk(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " qk " + args, &r.out);
  return r;
}

std::string work(const std::string& name) {
  const fs::path d = fs::path(ATTN_TEST_WORK_DIR) / "attribute";
  fs::create_directories(d);
  return (d / name).string();
}

const char* kText = "--model default-text --text 'The keeper lit the lamp. The keeper'";

TEST(CliAttribute, JsonAndDumpHoldEveryMethod) {
  REQUIRE_MODEL("default-text");
  const std::string json = work("a.json"), dump = work("dump"), figure = work("a.svg");
  fs::remove_all(dump);
  fs::remove(figure);
  const CliRun r =
      cli(std::string(kText) + " --method all --ig-steps 16 --faithfulness --steps 4 " +
          "--random-orders 1 --json " + json + " --dump " + dump + " --figure " + figure);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("kendall tau"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deletion AOPC"), std::string::npos) << r.out;
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  const int units = int(j["units"]["labels"].size());
  ASSERT_EQ(j["methods"].size(), 9u);
  EXPECT_EQ(j["faithfulness"]["curves"].size(), 10u);  // nine methods and the random orders
  for (const auto& m : j["methods"]) {
    const std::string id = m["id"];
    const models::NpyArray a = models::read_npy(dump + "/" + id + "/attribution.npy");
    ASSERT_EQ(a.shape, (std::vector<int64_t>{units})) << id;
    const std::vector<float> v = a.to_f32();
    for (int u = 0; u < units; ++u)
      EXPECT_NEAR(v[size_t(u)], m["scores"][size_t(u)].get<double>(), 1e-6) << id;
  }
  const int N = j["tokens"], L = 4;
  const models::NpyArray maps = models::read_npy(dump + "/rollout/maps.npy");
  EXPECT_EQ(maps.shape.size(), 3u);
  EXPECT_EQ(maps.shape[1], N);
  EXPECT_EQ(maps.shape[2], N);
  EXPECT_GE(maps.shape[0], 1);
  (void)L;
  EXPECT_TRUE(fs::exists(dump + "/flow/maps.npy"));
  EXPECT_TRUE(fs::exists(dump + "/attention/heads.npy"));
  // The figure names every method and the curves' panel.
  const std::string svg = test::read_all(figure);
  for (const auto& m : j["methods"])
    EXPECT_NE(svg.find(m["id"].get<std::string>()), std::string::npos);
  EXPECT_NE(svg.find("Deletion"), std::string::npos);
  EXPECT_NE(svg.find("Rank agreement"), std::string::npos);
}

void expect_usage(const std::string& args, const std::string& words);

TEST(CliAttribute, ImagesTakeClassTargetsAndPatchGrids) {
  REQUIRE_MODEL("default-vision");
  const std::string image = std::string(ATTN_TEST_SOURCE_DIR) + "/assets/images/bag_1.png";
  const std::string dump = work("vision");
  fs::remove_all(dump);
  const CliRun r =
      cli("--model default-vision --image " + image +
          " --method rollout,grad_input --target-class 0 --baseline mean --dump " + dump);
  ASSERT_EQ(r.status, 0) << r.out;
  const models::NpyArray a = models::read_npy(dump + "/rollout/attribution.npy");
  ASSERT_EQ(a.shape.size(), 2u);  // the patch grid
  EXPECT_GT(a.shape[0] * a.shape[1], 1);
  // An unknown class, by index or by name, and token targets on an image: usage errors.
  const std::string img = "--model default-vision --image " + image + " --method rollout";
  expect_usage(img + " --target-class 99", "classes");
  expect_usage(img + " --target-class Unicorn", "not a class index or name");
  expect_usage(img + " --target-id 3", "images take --target-class");
  expect_usage(img + " --occlusion delete", "--occlusion delete is for text");
  expect_usage(img + " --baseline token", "--baseline token is for text");
}

void expect_usage(const std::string& args, const std::string& words) {
  const CliRun r = cli(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(words), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(CliAttribute, UsageMistakesExitTwo) {
  REQUIRE_MODEL("default-text");
  const std::string t = kText;
  expect_usage(t + " --target-pos 400", "outside the input's");
  expect_usage(t + " --target-id 99999999", "outside the vocabulary");
  expect_usage(t + " --method rollout,saliency", "unknown attribution method 'saliency'");
  expect_usage(t + " --method grad_input --variant sigmoid", "sigmoid");
  expect_usage(t + " --baseline mean", "--baseline mean is for images");
  expect_usage(t + " --target-class 1", "--target-class is for images");
  expect_usage("--model default-text --image x.png", "text model");
  expect_usage(t + " --layers 0", "--layers and --heads choose where --variant runs");
  expect_usage(t + " --matmul f16", "--matmul");
}

// --matmul bf16 runs every pass's matrix products in bf16 and says so in the JSON; integrated
// gradients stay complete against the bf16 z values and rank the tokens as f32 does.
TEST(CliAttribute, Bf16MatmulsAreNamedAndStayComplete) {
  REQUIRE_MODEL("default-text");
  nlohmann::json j[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    const std::string json = work(bf16 ? "bf16.json" : "f32.json");
    const CliRun r = cli(std::string(kText) + " --method integrated_gradients --ig-steps 64 " +
                         (bf16 ? "--matmul bf16 " : "") + "--json " + json);
    ASSERT_EQ(r.status, 0) << r.out;
    std::ifstream f(json);
    j[bf16] = nlohmann::json::parse(f);
  }
  EXPECT_EQ(j[0]["matmul"], "f32");
  EXPECT_EQ(j[1]["matmul"], "bf16");
  const double z32 = j[0]["target"]["z"], z16 = j[1]["target"]["z"];
  EXPECT_NE(z16, z32);  // the products were rounded
  EXPECT_NEAR(z16, z32, 0.03 * std::abs(z32) + 0.03);
  const auto& m32 = j[0]["methods"][0];
  const auto& m16 = j[1]["methods"][0];
  double s = 0, d2 = 0, r2 = 0;
  for (size_t u = 0; u < m16["scores"].size(); ++u) {
    const double a = m16["scores"][u], b = m32["scores"][u];
    s += a;
    d2 += (a - b) * (a - b);
    r2 += b * b;
  }
  const double dz = m16["z_difference"];
  EXPECT_NEAR(s, dz, 0.01 * std::abs(dz));
  EXPECT_LT(std::sqrt(d2 / r2), 0.1);
}

TEST(CliAttribute, MissingModelIsARuntimeError) {
  const CliRun r = cli("--model /nonexistent/model --text hi");
  EXPECT_EQ(r.status, 1) << r.out;
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(CliQk, MapJsonFigureAndUsageErrors) {
  REQUIRE_MODEL("default-text");
  const std::string json = work("qk.json"), figure = work("qk.png");
  fs::remove(figure);
  const CliRun r = test_cli_qk(
      "--model default-text --text 'The keeper lit the lamp.' --text "
      "'The lamp lit the keeper.' --layer 1 --head 2 --json " +
      json + " --figure " + figure);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rank fidelity"), std::string::npos);
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_GT(j["points"].size(), 10u);
  EXPECT_EQ(j["points"].back()["input"], 1);
  EXPECT_TRUE(fs::exists(figure));
  EXPECT_EQ(test_cli_qk("--model default-text --text hi --layer 99").status, 2);
  EXPECT_EQ(test_cli_qk("--model default-text --text hi --method umap").status, 2);
  EXPECT_EQ(test_cli_qk("--model default-text").status, 2);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(CliAttribute, DatasetShardsMergeToTheSingleRun) {
  REQUIRE_MODEL("default-text");
  const std::string data = work("texts.jsonl");
  {
    std::ofstream f(data);
    for (const char* t : {"The keeper lit the lamp.", "The sea was calm that night.",
                          "In the beginning was the word.", "And the lamp burned till dawn."})
      f << nlohmann::json({{"text", t}}).dump() << "\n";
  }
  const std::string common =
      "--model default-text --dataset " + data + " --method attention,rollout,occlusion";
  const std::string one = work("d.json"), s0 = work("s0.json"), s1 = work("s1.json"),
                    merged = work("m.json");
  ASSERT_EQ(cli(common + " --json " + one).status, 0);
  ASSERT_EQ(cli(common + " --shard 0/2 --json " + s0).status, 0);
  ASSERT_EQ(cli(common + " --shard 1/2 --json " + s1).status, 0);
  const CliRun m = cli("--merge " + s0 + " " + s1 + " --json " + merged);
  ASSERT_EQ(m.status, 0) << m.out;
  auto summary = [](const std::string& p) {
    std::ifstream f(p);
    return nlohmann::json::parse(f)["summary"];
  };
  EXPECT_EQ(summary(one), summary(merged));
  EXPECT_EQ(summary(one)["records"], 4);
  EXPECT_EQ(cli(common + " --text hi").status, 2);
  EXPECT_EQ(cli(common + " --shard 0/2").status, 2);     // a shard writes to --json
  EXPECT_EQ(cli("--merge " + s0 + " " + s0).status, 2);  // a record twice
}

}  // namespace
}  // namespace attn
