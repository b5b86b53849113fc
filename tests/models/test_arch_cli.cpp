// `attnscope analyze` end to end: JSON report, hook dumps read back, raw tensors, and bad input
// reported with exit code 1 (bad files) or 2 (a bad command line) and a message naming what is
// wrong.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "arch_test_util.h"
#include "models/arch/default_models.h"
#include "models/formats/npy.h"
#include "test_util.h"

namespace attn {
namespace {

using nlohmann::json;
using test::golden_dir;

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr together
};

CliRun run_cli(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(ATTN_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

json read_json(const std::string& path) {
  return json::parse(std::ifstream(path));
}

TEST(ArchCli, AnalyzeTextWritesJsonAndDump) {
  const auto dir = test::scratch_dir();
  const std::string out = (dir / "a.json").string(), dump = (dir / "dump").string();
  const CliRun r = run_cli("analyze --model " + golden_dir("gpt2") +
                           " --text 'the cat sat on the mat and the dog ran' -v "
                           "'dense; window(size=3);topk(k=2)' --json " +
                           out + " --dump " + dump);
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = read_json(out);
  EXPECT_EQ(j["model"]["family"], "gpt2");
  const int n = j["input"]["n_tokens"];
  EXPECT_EQ(int(j["input"]["ids"].size()), n);
  ASSERT_EQ(j["variants"].size(), 3u);
  EXPECT_EQ(j["variants"][1]["spec"], "window(size=3)");
  const json& l0 = j["variants"][1]["layers"][0];
  EXPECT_EQ(l0["heads"].size(), 2u);
  EXPECT_LT(double(l0["density"]), 1.0);
  EXPECT_GT(double(l0["rel_error"]), 0.0);
  EXPECT_DOUBLE_EQ(double(j["variants"][0]["layers"][1]["rel_error"]), 0.0);  // dense vs dense
  const json& e2e = j["variants"][2]["end_to_end"];
  EXPECT_EQ(int(e2e["next_token_kl"].size()), n);
  EXPECT_GT(double(e2e["next_token_kl_mean"]), 0.0);
  EXPECT_TRUE(e2e["perplexity_dense"].is_number());
  EXPECT_EQ(j["dense"]["layers"].size(), 2u);
  EXPECT_EQ(int(j["dense"]["layers"][0]["resid_token_norm"].size()), n);

  // Dumped hooks read back with the documented shapes.
  const models::NpyArray pat = models::read_npy(dump + "/blocks.1.attn.pattern.npy");
  EXPECT_EQ(pat.shape, (std::vector<int64_t>{2, n, n}));
  const std::vector<float> p = pat.to_f32();
  for (int row = 0; row < 2 * n; ++row) {
    double s = 0;
    for (int c = 0; c < n; ++c) s += p[size_t(row) * n + c];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  EXPECT_EQ(models::read_npy(dump + "/logits.npy").shape, (std::vector<int64_t>{n, 291}));
  EXPECT_EQ(models::read_npy(dump + "/ids.npy").dtype, models::DType::I32);
  EXPECT_EQ(models::read_npy(dump + "/blocks.0.resid.npy").shape, (std::vector<int64_t>{n, 16}));

  // The dump is a raw-tensor source: dense vs dense on layer 1 is exact.
  const std::string out2 = (dir / "t.json").string();
  const CliRun t = run_cli("analyze --tensors " + dump +
                           " --tensors-layer 1 -v "
                           "'dense;window(size=3)' --json " +
                           out2);
  ASSERT_EQ(t.status, 0) << t.output;
  const json jt = read_json(out2);
  EXPECT_EQ(jt["tensors"]["n_k"], n);
  EXPECT_EQ(jt["tensors"]["labels"][1], "Ġcat");
  EXPECT_DOUBLE_EQ(double(jt["variants"][0]["layers"][0]["rel_error"]), 0.0);
  EXPECT_DOUBLE_EQ(double(jt["variants"][1]["layers"][0]["rel_error"]),
                   double(j["variants"][1]["layers"][1]["rel_error"]));
}

TEST(ArchCli, AnalyzeIdsWithChosenLayersAndHeads) {
  const auto out = (test::scratch_dir() / "l.json").string();
  const CliRun r = run_cli("analyze --model " + golden_dir("llama") +
                           " --ids 1,17,4,60,33 -v 'window(size=2)' --layers 1 --heads "
                           "0,3 --backend reference --json " +
                           out);
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = read_json(out);
  EXPECT_EQ(j["substitution"]["layers"], json({1}));
  EXPECT_EQ(j["substitution"]["heads"], json({0, 3}));
  EXPECT_EQ(j["model"]["kv_heads"], 2);
  EXPECT_EQ(j["variants"][0]["layers"][0]["heads"].size(), 4u);
}

TEST(ArchCli, AnalyzeImage) {
  const auto out = (test::scratch_dir() / "v.json").string();
  const CliRun r =
      run_cli("analyze --model " + golden_dir("vit") + " --image " + golden_dir("vit") +
              "/image.png -v 'window(size=2)' --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = read_json(out);
  EXPECT_EQ(j["input"]["kind"], "image");
  EXPECT_EQ(j["input"]["n_tokens"], 17);
  EXPECT_TRUE(j["variants"][0]["end_to_end"]["class_agree"].is_boolean());
  EXPECT_TRUE(j["variants"][0]["end_to_end"]["cls_cosine"].is_number());
  EXPECT_TRUE(j["dense"]["class_name"].is_string());
}

TEST(ArchCli, TruncationNoticeIsVisible) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the dog ";
  const CliRun r =
      run_cli("analyze --model " + golden_dir("gpt2") + " --text '" + text + "' --no-end-to-end");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("notice: input has 81 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("only the first 32"), std::string::npos) << r.output;
}

TEST(ArchCli, BadInputExitsWithAClearMessage) {
  const auto dir = test::scratch_dir();
  test::write_text(dir / "bad.txt", "caf\xE9 au lait");  // Latin-1, not UTF-8
  test::write_text(dir / "empty.txt", "");
  test::write_text(dir / "not.png", "no pixels here");
  test::write_text(dir / "huge.pgm", "P5\n20000 20000\n255\n");
  const std::string gpt2 = golden_dir("gpt2"), vit = golden_dir("vit");
  const struct {
    std::string args, expect;
  } cases[] = {
      {"--model " + gpt2 + " --text-file " + (dir / "empty.txt").string(), "is empty"},
      {"--model " + gpt2 + " --text-file " + (dir / "bad.txt").string(), "bad.txt"},
      {"--model " + gpt2 + " --text-file " + (dir / "none.txt").string(), "none.txt"},
      {"--model " + vit + " --image " + (dir / "not.png").string(), "not an image"},
      {"--model " + vit + " --image " + (dir / "huge.pgm").string(), "20000x20000"},
      {"--model /nonexistent --text x", "/nonexistent"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_cli("analyze " + c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  }
  // Mistakes in the command line itself are usage errors (exit 2), also with a message.
  const struct {
    std::string args, expect;
  } usage[] = {
      {"--model " + gpt2 + " --text ''", "--text is empty"},
      {"--model " + vit + " --text hello", "vision model"},
      {"--model " + gpt2 + " --ids 1,5000", "outside the vocabulary"},
      {"--model " + gpt2 + " --ids 1 --text x", "exactly one input"},
      {"--model " + gpt2 + " --text x -v 'nosuch(size=2)'", "nosuch"},
  };
  for (const auto& c : usage) {
    const CliRun r = run_cli("analyze " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(ArchCli, DefaultModelNamesResolve) {
  EXPECT_EQ(models::resolve_model_dir("some/dir"), "some/dir");
  EXPECT_TRUE(models::is_default_model_name("default-vision"));
  const auto root = test::scratch_dir();
  std::filesystem::create_directories(root / "default-text");
  test::write_text(root / "default-text" / "config.json", "{}");
  setenv("ATTNSCOPE_MODELS", root.c_str(), 1);
  EXPECT_EQ(models::resolve_model_dir("default-text"), (root / "default-text").string());
  // default-vision is not under ATTNSCOPE_MODELS: either the source tree has it, or the error
  // lists every place looked at.
  try {
    const std::string d = models::resolve_model_dir("default-vision");
    EXPECT_TRUE(std::filesystem::exists(d + "/config.json"));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find(root.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("share/attnscope/models"), std::string::npos);
  }
  unsetenv("ATTNSCOPE_MODELS");
}

}  // namespace
}  // namespace attn
