// README.md's lists against the tables they quote, so that they cannot go stale: the head-grid
// metrics (app/core/heads/head_metrics.cpp), the head roles (head_roles.cpp) and the
// approximations with their kinds (compute/registry.cpp).
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "app/core/attribution/attribution.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/head_roles.h"
#include "compute/approximation.h"
#include "compute/registry.h"
#include "tests/app/image_compare.h"

namespace attn {
namespace {

std::string readme() {
  return test::read_all(std::string(ATTN_TEST_SOURCE_DIR) + "/README.md");
}

// The README's text from `start` up to (not including) `end`; a test failure when either is
// missing.
std::string between(const std::string& text, const std::string& start, const std::string& end) {
  const size_t a = text.find(start);
  if (a == std::string::npos) {
    ADD_FAILURE() << "README.md no longer has \"" << start << "\"";
    return "";
  }
  const size_t b = text.find(end, a + start.size());
  if (b == std::string::npos) {
    ADD_FAILURE() << "README.md has no \"" << end << "\" after \"" << start << "\"";
    return "";
  }
  return text.substr(a, b - a);
}

// The identifiers in backticks, in order (file names and options are left out).
std::vector<std::string> backticked(const std::string& text) {
  std::vector<std::string> out;
  const std::regex word("`([a-z][a-z0-9_]*)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  return out;
}

std::set<std::string> approximations(Approximation::Kind kind) {
  std::set<std::string> out;
  for (const PieceInfo& p : registry_pieces())
    if (p.kind == PieceKind::Approximation &&
        make_variant(p.info.id).approximation()->kind() == kind)
      out.insert(p.info.id);
  return out;
}

// "Methods come from one table (`attribution.cpp`: ...)" under Attention beside attribution.
TEST(ReadmeLists, AttributionMethodsAreTheMethodTable) {
  const std::string text = between(readme(), "Methods come from one table", ")");
  std::vector<std::string> ids;
  for (const core::AttributionMethod& m : core::attribution_methods()) ids.push_back(m.id);
  EXPECT_EQ(backticked(text), ids) << text;
}

// "Per-head metrics come from one table (`head_metrics.cpp`: ...)" under Layout.
TEST(ReadmeLists, GridMetricsAreTheMetricTable) {
  const std::string text = between(readme(), "Per-head metrics come from one table", ").");
  EXPECT_EQ(backticked(text), core::head_metric_names()) << text;
}

// "`heads` scores every layer x head ... on each role of the role table: ..., each with its
// definition".
TEST(ReadmeLists, HeadRolesAreTheRoleTable) {
  const std::string text = between(readme(), "on each role of the role table", "each with its");
  std::vector<std::string> roles;
  for (const core::HeadRole& r : core::head_roles()) roles.push_back(r.name);
  EXPECT_EQ(backticked(text), roles) << text;
  // "the roles with a grid metric (all but ...)": the roles without one.
  const std::string grid = between(readme(), "the roles with a grid metric", ") are");
  std::vector<std::string> without;
  for (const core::HeadRole& r : core::head_roles())
    if (r.grid_id.empty()) without.push_back(r.name);
  EXPECT_EQ(backticked(grid), without) << grid;
}

// "### Approximate attention": the example block names every approximation, the *Replacing*
// bullet the Replace kinds and the *Wrapping* bullet the Wrap kinds.
TEST(ReadmeLists, ApproximationsAreTheRegistry) {
  const std::string text = readme();
  const std::string block = between(text, "are an **approximation** part of the variant", "\n- ");
  std::set<std::string> all = approximations(Approximation::Kind::Replace), in_block;
  for (const std::string& id : approximations(Approximation::Kind::Wrap)) all.insert(id);
  const std::regex piece("([a-z][a-z0-9_]*)(\\(|\\s|$)");
  for (auto it = std::sregex_iterator(block.begin(), block.end(), piece);
       it != std::sregex_iterator(); ++it)
    if (all.count((*it)[1])) in_block.insert((*it)[1]);
  EXPECT_EQ(in_block, all) << block;

  auto listed = [&](const std::string& bullet, const std::string& end) {
    std::set<std::string> ids;
    for (const std::string& id : backticked(between(text, bullet, end)))
      if (all.count(id)) ids.insert(id);
    return ids;
  };
  EXPECT_EQ(listed("- *Replacing* ones", "- *Wrapping* ones"),
            approximations(Approximation::Kind::Replace));
  EXPECT_EQ(listed("- *Wrapping* ones", "\n\n"), approximations(Approximation::Kind::Wrap));
}

}  // namespace
}  // namespace attn
