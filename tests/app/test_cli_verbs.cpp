// The CLI's verb table (app/cli/verbs.cpp) against what users see: `attnscope --help` lists every
// verb of the table, in its order, with its description; every verb's --help works; the README's
// list of verbs is the table's.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "app/cli/commands.h"
#include "tests/app/image_compare.h"

namespace attn {
namespace {

// The verb the GUI adds beside the table (app/gui/gui_app.h), in builds with the desktop app.
constexpr const char* kGuiVerb = "gui";

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const cli::Verb& v : cli::verbs()) names.push_back(v.name);
  return names;
}

// The "Subcommands:" block of CLI11's help: {name, description} per line.
std::vector<std::pair<std::string, std::string>> listed_verbs(const std::string& help) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(help);
  bool on = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Subcommands:")) {
      on = true;
    } else if (on && line.find_first_not_of(' ') == std::string::npos) {
      break;
    } else if (on) {
      std::smatch m;
      if (std::regex_match(line, m, std::regex(R"(\s+(\S+)\s+(.*\S)\s*)")))
        out.emplace_back(m[1], m[2]);
      else if (std::regex_match(line, m, std::regex(R"(\s+(\S+)\s*)")))
        out.emplace_back(m[1], "");
    }
  }
  return out;
}

TEST(CliVerbs, TableIsWellFormed) {
  ASSERT_GE(cli::verbs().size(), 11u);
  std::set<std::string> seen;
  for (const cli::Verb& v : cli::verbs()) {
    EXPECT_TRUE(seen.insert(v.name).second) << "verb listed twice: " << v.name;
    EXPECT_TRUE(std::regex_match(v.name, std::regex("[a-z][a-z0-9-]*"))) << v.name;
    EXPECT_NE(v.name, std::string(kGuiVerb)) << "gui is the GUI's verb, added beside the table";
    const std::string d = v.description;
    EXPECT_FALSE(d.empty()) << v.name;
    EXPECT_EQ(d.find('\n'), std::string::npos) << v.name << ": the description is one line";
    // Each command declares its options on a fresh subcommand without clashing names.
    CLI::App app;
    auto command = v.make();
    ASSERT_NE(command, nullptr) << v.name;
    EXPECT_NO_THROW(command->add_options(*app.add_subcommand(v.name, v.description))) << v.name;
  }
}

TEST(CliVerbs, HelpListsTheTableInOrder) {
  std::string out;
  ASSERT_EQ(test::run_command(std::string(ATTN_CLI) + " --help", &out), 0) << out;
  auto listed = listed_verbs(out);
  if (!listed.empty() && listed.back().first == kGuiVerb) listed.pop_back();
  ASSERT_EQ(listed.size(), cli::verbs().size()) << out;
  for (size_t i = 0; i < listed.size(); ++i) {
    const cli::Verb& v = cli::verbs()[i];
    EXPECT_EQ(listed[i].first, v.name) << out;
    // CLI11 wraps nothing here, so the whole description is on the verb's line.
    EXPECT_EQ(listed[i].second, v.description) << out;
  }
}

TEST(CliVerbs, EveryVerbHelpExitsZero) {
  for (const cli::Verb& v : cli::verbs()) {
    std::string out;
    EXPECT_EQ(test::run_command(std::string(ATTN_CLI) + " " + v.name + " --help", &out), 0)
        << v.name << ":\n"
        << out;
    EXPECT_NE(out.find(v.description), std::string::npos) << v.name << ":\n" << out;
    EXPECT_NE(out.find("--help"), std::string::npos) << v.name << ":\n" << out;
  }
}

// README.md, "Command line": the paragraph that starts "Verbs" names each verb in backticks.
TEST(CliVerbs, ReadmeListsTheTable) {
  const std::string readme = test::read_all(std::string(ATTN_TEST_SOURCE_DIR) + "/README.md");
  const size_t section = readme.find("### Command line");
  ASSERT_NE(section, std::string::npos) << "README.md has no \"### Command line\" section";
  const size_t start = readme.find("\nVerbs", section);
  ASSERT_NE(start, std::string::npos) << "no paragraph starting \"Verbs\" under Command line";
  const std::string paragraph = readme.substr(start, readme.find("\n\n", start + 1) - start);
  std::vector<std::string> named;
  const std::regex word("`([a-z][a-z0-9-]*)`");
  for (auto it = std::sregex_iterator(paragraph.begin(), paragraph.end(), word);
       it != std::sregex_iterator(); ++it)
    named.push_back((*it)[1]);
  std::vector<std::string> expected = table_names();
  expected.push_back(kGuiVerb);
  EXPECT_EQ(named, expected) << paragraph;
}

}  // namespace
}  // namespace attn
