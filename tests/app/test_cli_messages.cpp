// The CLI front end as a user meets it, through the real `attnscope` binary: exit codes (0 ok,
// 1 runtime error, 2 usage error; the rule is app/cli/usage.h), one-line messages that name the
// known choices and suggest the closest one, and table columns that say which KL and which
// sparsity they show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compute/error.h"
#include "models/arch/default_models.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out;  // stdout and stderr together
};

CliRun cli(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " " + args, &r.out);
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int lines(const std::string& text) {
  return int(std::count(text.begin(), text.end(), '\n'));
}

// A usage error: exit 2 and a one-line message holding every one of `parts`.
void expect_usage(const std::string& args, const std::vector<std::string>& parts) {
  const CliRun r = cli(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
  EXPECT_EQ(lines(r.out), 1) << args << "\n" << r.out;
  for (const std::string& p : parts) EXPECT_TRUE(has(r.out, p)) << args << "\n" << r.out;
}

// A runtime failure: exit 1 and a message holding every one of `parts`.
void expect_runtime(const std::string& args, const std::vector<std::string>& parts) {
  const CliRun r = cli(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.out;
  for (const std::string& p : parts) EXPECT_TRUE(has(r.out, p)) << args << "\n" << r.out;
}

std::string sample_image() {
  const std::string src = std::string(ATTN_TEST_SOURCE_DIR) + "/assets/images/bag_1.png";
  if (fs::exists(src)) return src;
  try {
    return models::resolve_model_dir("default-vision") + "/../images/bag_1.png";
  } catch (const Error&) {
    return "";
  }
}

TEST(CliMessages, ClosestName) {
  const std::vector<std::string> pieces = {"dense", "window", "sinks_window", "topk"};
  EXPECT_EQ(closest_name("windw", pieces), "window");
  EXPECT_EQ(closest_name("Window", pieces), "window");
  EXPECT_EQ(closest_name("tokp", pieces), "topk");  // a swap of neighbours is one edit
  EXPECT_EQ(closest_name("frobnicate", pieces), "");
  EXPECT_EQ(closest_name("cuda", {"reference", "cpu", "vulkan"}), "");
  EXPECT_EQ(did_you_mean("sise", {"size"}), ": did you mean size?");
  EXPECT_EQ(did_you_mean("default-txt", models::default_model_names()),
            ": did you mean default-text?");
  EXPECT_EQ(join_names({"a", "b"}), "a, b");
}

TEST(CliMessages, HelpFooterStatesTheExitCodes) {
  const CliRun r = cli("--help");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "Exit codes: 0 ok; 1 runtime error")) << r.out;
  EXPECT_TRUE(has(r.out, "2 usage error")) << r.out;
}

TEST(CliMessages, UnknownCommandIsNamedWithTheVerbs) {
  expect_usage("frobnicate", {"unknown command 'frobnicate'", "analyze", "run", "demo", "sweep",
                              "render", "variants"});
  EXPECT_FALSE(has(cli("frobnicate").out, "did you mean")) << "nothing is close to frobnicate";
  EXPECT_FALSE(has(cli("frobnicate").out, "A subcommand is required"));
  expect_usage("anlyze --text hi", {"unknown command 'anlyze': did you mean analyze?"});
  expect_usage("rnu -v dense", {"did you mean run?"});
  EXPECT_EQ(cli("analyze --help").status, 0);
  EXPECT_EQ(cli("--version").status, 0);
}

// Every verb, walked from `attnscope --help`: the first options of its own --help, misspelt (two
// neighbours swapped), are usage errors that suggest an option; a figure format nobody writes
// is a usage error too.
TEST(CliMessages, MisspeltOptionsOfEveryVerbSuggestOne) {
  expect_usage("analyze --modle default-text",
               {"unknown option '--modle' of analyze", "did you mean --model?"});
  expect_usage("stream --model default-text --ids 1 2 --polcy kv_full", {"did you mean --policy?"});
  const std::string top = cli("--help").out;
  const size_t at = top.find("Subcommands:");
  ASSERT_NE(at, std::string::npos) << top;
  std::istringstream verbs(top.substr(at));
  std::string line;
  int walked = 0;
  while (std::getline(verbs, line)) {
    std::istringstream words(line);
    std::string verb;
    if (!(words >> verb) || verb == "Subcommands:" || verb == "Exit" || verb[0] == '-') continue;
    if (!std::all_of(verb.begin(), verb.end(), [](char c) { return std::islower(c); })) continue;
    const CliRun help = cli(verb + " --help");
    if (help.status != 0) continue;
    std::istringstream opts(help.out);
    std::string l;
    int tried = 0;
    while (std::getline(opts, l) && tried < 3) {
      const size_t dash = l.find("--");
      if (dash == std::string::npos || l.find_first_not_of(' ') != dash) continue;
      std::string name = l.substr(dash, l.find_first_of(" ,=", dash) - dash);
      if (name == "--help" || name.size() < 6) continue;
      size_t i = 3;  // swap the first two different neighbours after "--x"
      while (i + 1 < name.size() && name[i] == name[i + 1]) ++i;
      if (i + 1 >= name.size()) continue;
      std::swap(name[i], name[i + 1]);
      expect_usage(verb + " " + name,
                   {"unknown option '" + name + "' of " + verb, "did you mean --"});
      ++tried;
    }
    ++walked;
  }
  EXPECT_GE(walked, 12) << top;
  expect_usage("render --session s.attnscope.json --out x.gif", {"--out", "unknown figure format"});
}

// Token ids read the same in every verb, with spaces or commas between them.
TEST(CliMessages, IdsTakeSpacesOrCommasInEveryVerb) {
  REQUIRE_MODEL("default-text");
  for (const char* verb : {"analyze --no-end-to-end", "stream", "attribute --method attention"}) {
    const CliRun commas = cli(std::string(verb) + " --model default-text --ids 5,6,7,8");
    const CliRun spaces = cli(std::string(verb) + " --model default-text --ids 5 6 7 8");
    EXPECT_EQ(commas.status, 0) << verb << "\n" << commas.out;
    EXPECT_EQ(spaces.status, 0) << verb << "\n" << spaces.out;
  }
  const CliRun g = cli("generate --model default-text --ids 5,6 --max-new-tokens 2 --seed 1");
  EXPECT_EQ(g.status, 0) << g.out;
}

TEST(CliMessages, VariantSpecsAreUsageErrors) {
  expect_usage("run -n 32 -v windw",
               {"unknown variant piece 'windw': did you mean window?", "known: dense, window"});
  expect_usage("run -n 32 -v 'window(sise=32)'",
               {"unknown parameter 'sise': did you mean size?", "(known: size)"});
  expect_usage("run -n 32 -v 'window(size=4'", {"malformed variant spec", "window(size=4"});
  expect_usage("run -n 32 -v 'window(size=0)'", {"out of range"});
  expect_usage("run -n 32 -v 'window+topk'", {"two patterns"});
  expect_usage("run -n 32 -v frobnicate", {"unknown variant piece 'frobnicate' (known: dense"});
  EXPECT_FALSE(has(cli("run -n 32 -v frobnicate").out, "did you mean"));
  expect_usage("analyze --model default-text --text hi -v 'dense;windw(size=4)'",
               {"-v/--variant: unknown variant piece 'windw': did you mean window?"});
  expect_usage("analyze --model default-text --text hi -v ' ; '",
               {"-v/--variant lists no variant"});
}

TEST(CliMessages, RunOptionsThatConflictAreUsageErrors) {
  expect_usage("run -n 32 -v dense --backend cuda",
               {"unknown backend 'cuda'", "known: reference, cpu"});
  expect_usage("run -n 32 -v dense --backend cpuu", {"did you mean cpu?"});
  expect_usage("run -n 32 -v dense --n-heads 4 --n-kv-heads 3",
               {"not a multiple of --n-kv-heads 3"});
  expect_usage("run -n 32 --queries 64 -v dense", {"--queries 64 exceeds -n 32"});
  expect_usage("run -n 32 -v dense --precision b16",
               {"--precision: precision 'b16' is not one of f32, bf16, f16", "did you mean bf16?"});
  expect_usage("run -n 32", {"--variant is required"});  // CLI11's own check: still exit 2
}

TEST(CliMessages, AnalyzeInputsAreUsageErrors) {
  expect_usage("analyze", {"give exactly one input"});
  expect_usage("analyze --model default-text", {"give exactly one input"});
  expect_usage("analyze --model default-text --text hi --ids 1,2", {"give exactly one input"});
  expect_usage("analyze --model default-text --text ''", {"--text is empty"});
  expect_usage("analyze --tensors some/dir --text hi", {"--tensors does not go with"});
  expect_usage("analyze --tensors some/dir --model default-text", {"without a model"});
  expect_usage("analyze --tensors some/dir --dump out", {"--dump needs a model"});
  expect_usage("analyze --model default-text --text hi --image-size 32",
               {"--image-size applies to --image"});
  expect_usage("analyze --model default-text --text hi --backend gpu",
               {"unknown backend 'gpu'", "known: reference"});
}

TEST(CliMessages, AnalyzeAgainstTheModelAreUsageErrors) {
  REQUIRE_MODEL("default-text");
  expect_usage("analyze --model default-text --text hi --layers 0,7",
               {"--layers: layer 7 is out of range", "layers (0.."});
  expect_usage("analyze --model default-text --text hi --heads 99",
               {"--heads: head 99 is out of range", "query heads (0.."});
  expect_usage("analyze --model default-text --ids 1,999999999",
               {"token id 999999999", "outside the vocabulary"});
  expect_usage("analyze --model default-text --text hi --dump out --hooks blocks.40.attn.q",
               {"--hooks:", "blocks.40"});
  const std::string img = sample_image();
  if (!img.empty() && fs::exists(img))
    expect_usage("analyze --model default-text --image " + img,
                 {"--model default-text is a text model, but the input is an image"});
  if (test::have_model("default-vision"))
    expect_usage("analyze --model default-vision --text hello",
                 {"--model default-vision is a vision model, but the input is text"});
}

TEST(CliMessages, MissingFilesAreRuntimeErrors) {
  const std::string dir = test::fresh_dir("cli_messages_runtime");
  // A misspelled model name is a folder that does not exist: exit 1, with the embedded names.
  expect_runtime("analyze --model default-txt --text hi",
                 {"model 'default-txt'", "did you mean default-text?",
                  "embedded models: default-text, teaching-text, default-vision"});
  expect_runtime("analyze --model " + dir + "/nomodel --text hi", {dir + "/nomodel"});
  expect_runtime("analyze --tensors " + dir + "/none", {dir + "/none"});
  std::ofstream(dir + "/q.npy") << "not an npy file";
  std::ofstream(dir + "/k.npy") << "not an npy file";
  std::ofstream(dir + "/v.npy") << "not an npy file";
  expect_runtime("analyze --tensors " + dir, {"q.npy"});
  expect_runtime("run -n 32 -v dense --json " + dir + "/no/such/dir/out.json", {"cannot write"});
  REQUIRE_MODEL("default-text");
  expect_runtime("analyze --model default-text --text-file " + dir + "/none.txt", {"none.txt"});
}

// The data rows of a printed table: cells split on runs of two or more spaces, by header name.
std::vector<std::map<std::string, std::string>> table_rows(const std::string& out,
                                                           const std::string& first_header) {
  auto cells = [](const std::string& line) {
    std::vector<std::string> c;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size()) break;
      size_t end = line.find("  ", i);
      if (end == std::string::npos) end = line.size();
      c.push_back(line.substr(i, end - i));
      i = end;
    }
    return c;
  };
  std::stringstream ss(out);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  bool in_table = false;
  while (std::getline(ss, line)) {
    if (!in_table) {
      if (line.rfind(first_header, 0) == 0) {
        header = cells(line);
        in_table = true;
        std::getline(ss, line);  // the rule under the header
      }
      continue;
    }
    const std::vector<std::string> c = cells(line);
    if (c.size() != header.size()) break;
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < c.size(); ++k) row[header[k]] = c[k];
    rows.push_back(row);
  }
  return rows;
}

TEST(CliMessages, RunTableSeparatesKeptEntriesFromComputedWork) {
  const CliRun r =
      cli("run -n 64 --n-heads 2 -v 'window(size=16)' -v 'window(size=32)' -v "
          "'window(size=64)'");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = table_rows(r.out, "variant");
  ASSERT_EQ(rows.size(), 4u) << r.out;
  for (const char* col : {"kept", "computed", "row KL", "pred GFLOP", "counted GFLOP"})
    EXPECT_EQ(rows[0].count(col), 1u) << col << "\n" << r.out;
  EXPECT_EQ(rows[0].count("KL"), 0u) << "a bare KL column says neither which KL" << r.out;
  EXPECT_EQ(rows[0].count("density"), 0u) << r.out;
  // On 64 tokens the three windows compute the same blocks but keep different entries.
  EXPECT_EQ(rows[0].at("kept"), "1.0000");
  EXPECT_EQ(rows[0].at("computed"), "1.0000");
  EXPECT_LT(std::stod(rows[1].at("kept")), std::stod(rows[2].at("kept")));
  EXPECT_LT(std::stod(rows[2].at("kept")), std::stod(rows[3].at("kept")));
  EXPECT_EQ(rows[1].at("computed"), rows[2].at("computed"));
  EXPECT_EQ(rows[2].at("computed"), rows[3].at("computed"));
  // One footnote line says which is which.
  EXPECT_TRUE(has(r.out, "\nkept: share of visible entries kept; computed: counted flops"))
      << r.out;
  EXPECT_TRUE(has(r.out, "row KL: each head's attention rows vs dense")) << r.out;
}

TEST(CliMessages, DemoTableNamesItsColumns) {
  const CliRun r = cli("demo -n 64");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = table_rows(r.out, "variant");
  ASSERT_GT(rows.size(), 10u) << r.out;
  for (const char* col : {"kept", "computed", "row KL"})
    EXPECT_EQ(rows[0].count(col), 1u) << col << "\n" << r.out;
  EXPECT_TRUE(has(r.out, "\nkept: share of visible entries kept")) << r.out;
}

TEST(CliMessages, AnalyzeTableNamesBothKls) {
  REQUIRE_MODEL("default-text");
  const CliRun r =
      cli("analyze --model default-text --text 'The cat sat on the mat.' -v "
          "'window(size=4)' --threads 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = table_rows(r.out, "variant");
  ASSERT_EQ(rows.size(), 1u) << r.out;
  for (const char* col : {"kept", "row KL", "next-token KL", "top-1 agree"})
    EXPECT_EQ(rows[0].count(col), 1u) << col << "\n" << r.out;
  EXPECT_FALSE(has(r.out, "e2e KL")) << r.out;
  EXPECT_NE(rows[0].at("row KL"), rows[0].at("next-token KL")) << r.out;
  EXPECT_TRUE(has(r.out, "next-token KL: the model's next-token distributions")) << r.out;
}

// `analyze --timings`: disjoint stages that add up to no more than the whole, with the dense
// reference's kernels counted inside the forward pass that ran them.
TEST(CliMessages, AnalyzeTimingsAreDisjointStages) {
  REQUIRE_MODEL("default-text");
  const fs::path json = fs::temp_directory_path() / "attnscope_timings.json";
  const CliRun r =
      cli("analyze --model default-text --text 'the cat sat on the mat' -v "
          "'window(size=4)' --timings --json " +
          json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "open_rest")) << r.out;
  const nlohmann::json t = nlohmann::json::parse(std::ifstream(json))["timings"];
  double stages = 0;
  for (const char* k : {"load_seconds", "forward_seconds", "open_rest_seconds", "variants_seconds",
                        "metrics_seconds", "end_to_end_seconds", "report_seconds"}) {
    ASSERT_TRUE(t.contains(k)) << k;
    EXPECT_GE(double(t[k]), 0.0) << k;
    stages += double(t[k]);
  }
  EXPECT_LE(stages, double(t["total_seconds"]) + 1e-3);
  EXPECT_GT(double(t["dense_kernels_seconds"]), 0.0);
  EXPECT_LE(double(t["dense_kernels_seconds"]), double(t["forward_seconds"]));
  fs::remove(json);
}

}  // namespace
}  // namespace attn
