// One command-line grammar across the verbs (app/cli/options.h): every verb's --help is walked
// and the concepts several verbs share must be spelt, typed and documented alike; old spellings
// still run, with a deprecation note; `--json` without a file gives stdout the JSON alone.
#include <gtest/gtest.h>

#include <QImage>
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {

struct CliRun {
  int status = -1;
  std::string out;
};

// stdout and stderr together.
CliRun cli(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " " + args, &r.out);
  return r;
}
// stdout alone.
CliRun cli_stdout(const std::string& args) {
  CliRun r;
  r.status =
      test::run_command("{ " + std::string(ATTN_CLI) + " " + args + " 2>/dev/null; }", &r.out);
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every verb `attnscope --help` lists.
std::vector<std::string> verbs() {
  const std::string top = cli("--help").out;
  std::vector<std::string> out;
  std::istringstream in(top.substr(top.find("Subcommands:")));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string verb;
    if (!(words >> verb) || line.find_first_not_of(' ') != 2) continue;
    if (std::all_of(verb.begin(), verb.end(), [](char c) { return std::islower(c) || c == '-'; }))
      out.push_back(verb);
  }
  return out;
}

// A verb's options: each long name ("--model") -> its help (the line and its continuations).
std::map<std::string, std::string> options_of(const std::string& verb) {
  std::map<std::string, std::string> out;
  std::istringstream in(cli(verb + " --help").out);
  std::string line, last;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos) {
      last.clear();
      continue;
    }
    if (line[first] != '-') {
      if (!last.empty() && first > 2) out[last] += " " + line.substr(first);
      continue;
    }
    const size_t at = line.find("--", first);
    if (at == std::string::npos) continue;
    last = line.substr(at, line.find_first_of(" ,=", at) - at);
    out[last] = line;
  }
  return out;
}

TEST(CliGrammar, SharedConceptsAreSpeltAlikeInEveryVerb) {
  const std::vector<std::string> all = verbs();
  ASSERT_GE(all.size(), 13u);
  int with_variant = 0, with_json = 0, with_model = 0, with_figure = 0;
  for (const std::string& verb : all) {
    const auto o = options_of(verb);
    SCOPED_TRACE(verb);
    // Old spellings are hidden: the help lists one spelling per concept.
    for (const char* old : {"--variants", "--n", "--nq", "--kv-heads"})
      EXPECT_EQ(o.count(old), 0u) << old;
    if (o.count("--variant")) {
      ++with_variant;
      EXPECT_TRUE(has(o.at("--variant"), "-v,--variant")) << o.at("--variant");
    }
    for (const char* list : {"--heads", "--layers"}) {
      if (o.count(list)) {
        EXPECT_TRUE(has(o.at(list), "LIST")) << o.at(list);
      }
    }
    if (o.count("--ids")) {
      EXPECT_TRUE(has(o.at("--ids"), "spaces or commas")) << o.at("--ids");
    }
    if (o.count("--json")) {
      ++with_json;
      EXPECT_TRUE(has(o.at("--json"), "[FILE]")) << o.at("--json");
    }
    if (o.count("--model")) {
      ++with_model;
      EXPECT_FALSE(has(o.at("--model"), "REQUIRED")) << o.at("--model");
      EXPECT_TRUE(has(o.at("--model"),
                      "default: default-vision for image inputs, else "
                      "default-text"))
          << o.at("--model");
    }
    const bool draws = o.count("--figure") || o.count("--timeline") || o.count("--out");
    if (draws && verb != "sweep") ++with_figure;
    if (draws) {
      for (const char* size : {"--width", "--height", "--dpi"}) EXPECT_EQ(o.count(size), 1u) << size;
    }
    if (o.count("--quiet")) {
      EXPECT_TRUE(has(o.at("--quiet"), "-q,--quiet")) << o.at("--quiet");
    }
  }
  EXPECT_GE(with_variant, 5);
  EXPECT_GE(with_json, 10);
  EXPECT_GE(with_model, 8);
  EXPECT_GE(with_figure, 8);
}

TEST(CliGrammar, OldSpellingsStillRunWithANote) {
  const CliRun run = cli("run -n 32 --heads 2 --kv-heads 1 --n 48 -v dense --no-metrics");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(has(run.out, "note: --heads is deprecated here; use --n-heads")) << run.out;
  EXPECT_TRUE(has(run.out, "note: --kv-heads is deprecated here; use --n-kv-heads")) << run.out;
  EXPECT_TRUE(has(run.out, "note: --n is deprecated here; use -n/--tokens")) << run.out;
  const CliRun same = cli("run --tokens 48 --n-heads 2 --n-kv-heads 1 -v dense --no-metrics");
  EXPECT_EQ(same.status, 0) << same.out;
  EXPECT_FALSE(has(same.out, "deprecated")) << same.out;

  REQUIRE_MODEL("default-text");
  const CliRun old =
      cli("analyze --text 'In the beginning' --no-end-to-end "
          "--variants 'window(size=2);dense'");
  EXPECT_EQ(old.status, 0) << old.out;
  EXPECT_TRUE(has(old.out, "note: --variants is deprecated here; use -v/--variant")) << old.out;
  const CliRun now =
      cli("analyze --text 'In the beginning' --no-end-to-end "
          "-v 'window(size=2)' --variant dense");
  EXPECT_EQ(now.status, 0) << now.out;
  // The same two variants either way (the tables agree but for the note).
  EXPECT_TRUE(has(old.out, "window(size=2)") && has(now.out, "window(size=2)")) << now.out;
  const CliRun semi =
      cli("analyze --text 'In the beginning' --no-end-to-end "
          "-v 'window(size=2); dense'");
  EXPECT_EQ(semi.status, 0) << semi.out;
  EXPECT_FALSE(has(semi.out, "deprecated")) << semi.out;
}

TEST(CliGrammar, JsonWithoutAFileIsStdoutAlone) {
  for (const std::string& args :
       {std::string("variants --json"), std::string("variants --kv --json -"),
        std::string("run -n 32 -v dense -v 'window(size=8)' --json"),
        std::string("precision -n 16 --n-heads 1 -d 8 --json")}) {
    const CliRun r = cli_stdout(args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << args << "\n" << r.out;
  }
  // The table a verb prints went to stderr instead.
  const CliRun both = cli("run -n 32 -v dense --json");
  EXPECT_TRUE(has(both.out, "dense")) << both.out;
}

TEST(CliGrammar, ModelDefaultsAlikeInEveryVerb) {
  REQUIRE_MODEL("default-text");
  for (const std::string& args :
       {std::string("analyze --text 'In the beginning' --no-end-to-end"),
        std::string("stream --text 'In the beginning God created' --max-tokens 4"),
        std::string("generate --prompt 'In the' --max-new-tokens 2 --seed 1"),
        std::string("qk --text 'In the beginning God created'"),
        std::string("attribute --text 'In the beginning' --method attention"),
        std::string("heads --repeats 2 --repeat-length 8 --bootstrap 0")}) {
    const CliRun r = cli(args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
    EXPECT_FALSE(has(r.out, "required")) << args << "\n" << r.out;
  }
}

TEST(CliGrammar, FigureSizeIsTheSameOptionsInEveryVerb) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_grammar_size");
  const std::string png = dir + "/stream.png";
  const CliRun r = cli("stream --text 'In the beginning God created the heaven' --figure " + png +
                       " --width 800 --height 500 --dpi 100");
  ASSERT_EQ(r.status, 0) << r.out;
  const QImage image(QString::fromStdString(png));
  EXPECT_EQ(image.width(), 800);
  EXPECT_EQ(image.height(), 500);
}

// Without a terminal (a log file, CI), progress is at most one line per ~5 s plus the last one;
// it was one line per record.
TEST(CliGrammar, ProgressWithoutATerminalIsThrottled) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_grammar_progress");
  {
    std::ofstream f(dir + "/texts.jsonl");
    for (int i = 0; i < 40; ++i)
      f << R"({"text": "And God said, Let there be light: record )" << i << R"("})"
        << "\n";
  }
  const CliRun r = cli("analyze --dataset " + dir + "/texts.jsonl --bootstrap 10 --no-end-to-end");
  ASSERT_EQ(r.status, 0) << r.out;
  int progress = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("analyze: ", 0) == 0 && has(line, "/40 ")) ++progress;
  EXPECT_GE(progress, 1) << r.out;
  EXPECT_LE(progress, 4) << r.out;  // 40 lines before
  EXPECT_TRUE(has(r.out, "analyze: 40/40")) << r.out;
  EXPECT_EQ(cli("analyze --dataset " + dir + "/texts.jsonl --bootstrap 10 --no-end-to-end -q")
                .out.find("analyze: 1/40"),
            std::string::npos);
}

}  // namespace
}  // namespace attn
