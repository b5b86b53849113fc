// The KV-cache policy table (compute/kv/kv_pieces.h): its ids are exactly what the parser
// accepts, every piece builds from its defaults and keeps within its budget over a stream, and
// the README's list of pieces is the table's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "compute/error.h"
#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"
#include "compute/kv/kv_policy.h"

namespace attn {
namespace {

bool is_eviction(const VariantInfo& info) {
  return info.family == kKvEvictionFamily;
}

TEST(KvTable, IdsAreExactlyWhatTheParserAccepts) {
  const std::vector<const KvPieceFactory*>& table = kv_piece_table();
  ASSERT_EQ(table.size(), kv_pieces().size());
  std::vector<std::string> ids;
  for (size_t i = 0; i < table.size(); ++i) {
    const VariantInfo info = table[i]->info();
    EXPECT_EQ(info.id, kv_pieces()[i].id);
    // One kind per entry, and the family says which.
    EXPECT_NE(table[i]->eviction == nullptr, table[i]->storage == nullptr) << info.id;
    EXPECT_EQ(is_eviction(info), table[i]->eviction != nullptr) << info.id;
    if (!is_eviction(info)) {
      EXPECT_EQ(info.family, kKvPrecisionFamily) << info.id;
    }
    EXPECT_FALSE(info.display_name.empty() || info.source.empty() || info.description.empty());
    if (is_eviction(info)) {
      ASSERT_FALSE(info.params.empty()) << info.id;
      EXPECT_EQ(info.params.back().name, "reposition") << info.id;
    }
    ids.push_back(info.id);
    // Each id alone parses, to itself.
    const KvPolicy p = make_kv_policy(info.id);
    EXPECT_EQ(is_eviction(info) ? p.evict_id : p.storage_id, info.id);
    EXPECT_EQ(p.spec.substr(0, info.id.size()), info.id) << p.spec;
    EXPECT_EQ(make_kv_policy(p.spec).spec, p.spec);
  }
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "duplicate id";
  // Evictions first, then precisions (the display order the CLI prints).
  EXPECT_TRUE(std::is_partitioned(kv_pieces().begin(), kv_pieces().end(), is_eviction));
  // Anything else is refused, and the message lists the table.
  try {
    make_kv_policy("kv_sliding(window=4)");
    ADD_FAILURE() << "an id outside the table was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::UnknownVariant);
    EXPECT_NE(std::string(e.what()).find("(known: " + join_names(ids) + ")"), std::string::npos)
        << e.what();
  }
}

TEST(KvTable, DefaultPolicyIsFullF32) {
  const KvPolicy d;
  EXPECT_EQ(d.evict_id, "kv_full");
  EXPECT_TRUE(d.storage_id.empty());
  EXPECT_FALSE(d.evict->evicts());
  EXPECT_TRUE(d.storage->exact());
  EXPECT_EQ(d.key_bytes_per_element(64), 4);
  EXPECT_EQ(d.keep_after(0, 1), -1);
}

// Random attention rows over n entries for G heads and nq queries (each row sums to 1).
std::vector<float> random_probs(std::mt19937& rng, int G, int nq, int n) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(size_t(G) * nq * n);
  for (size_t r = 0; r < size_t(G) * nq; ++r) {
    float s = 0;
    for (int e = 0; e < n; ++e) s += p[r * n + e] = u(rng) * u(rng);
    for (int e = 0; e < n; ++e) p[r * n + e] /= s;
  }
  return p;
}

// Every eviction piece at its defaults, over a stream longer than its budget in four layers of
// two-head groups: kept entries are valid, ascending indices; an evicting piece never holds more
// than keep_after() and, once the stream has passed its budget, holds exactly that (after the
// prefill only, for the prompt compressors); a piece that does not evict keeps everything.
TEST(KvTable, EveryEvictionPieceKeepsWithinItsBudgetAtItsDefaults) {
  const int L = 4, G = 2;
  for (const VariantInfo& info : kv_pieces()) {
    if (!is_eviction(info)) continue;
    SCOPED_TRACE(info.id);
    const KvPolicy p = make_kv_policy(info.id);
    int longest = 0;
    for (int l = 0; l < L; ++l) longest = std::max(longest, p.keep_after(l, L));
    const bool once = p.prefill_only();
    const int prefill = once ? longest + 40 : 8, T = longest + 60;
    std::mt19937 rng(11);
    std::vector<KvHeadState> st(static_cast<size_t>(L));
    int t = 0;
    for (bool first = true; t < T; first = false) {
      const int nq = first ? prefill : 1;
      for (KvHeadState& s : st)
        for (int i = 0; i < nq; ++i) {
          s.pos.push_back(t + i);
          s.acc.push_back(0.0);
        }
      t += nq;
      for (int l = 0; l < L; ++l) {
        KvHeadState& s = st[size_t(l)];
        const int n = int(s.pos.size());
        const std::vector<float> pr = random_probs(rng, G, nq, n);
        const std::vector<int> keep = kv_keep(p, l, L, s, pr.data(), G, nq, first);
        ASSERT_TRUE(std::is_sorted(keep.begin(), keep.end()));
        ASSERT_TRUE(std::adjacent_find(keep.begin(), keep.end()) == keep.end());
        ASSERT_TRUE(keep.empty() || (keep.front() >= 0 && keep.back() < n));
        const int bound = p.keep_after(l, L);
        if (!p.evict->evicts()) {
          EXPECT_EQ(int(keep.size()), n);
          EXPECT_EQ(bound, -1);
        } else if (!once || first) {
          ASSERT_GT(bound, 0);
          EXPECT_LE(int(keep.size()), bound) << "layer " << l << " at token " << t;
          if (n > bound) {
            EXPECT_EQ(int(keep.size()), bound) << "layer " << l << " at " << t;
          }
        } else {
          EXPECT_EQ(int(keep.size()), n) << "decoding appends after the one compression";
        }
        KvHeadState next;
        for (int e : keep) {
          next.pos.push_back(s.pos[size_t(e)]);
          next.acc.push_back(s.acc[size_t(e)]);
        }
        s = next;
      }
    }
    // Selecting pieces attend to a subset that always holds the newest entry.
    const int n = 300, d = 8;
    std::vector<float> q(size_t(G) * d), keys(size_t(n) * d);
    std::normal_distribution<float> z;
    for (float& x : q) x = z(rng);
    for (float& x : keys) x = z(rng);
    const std::vector<int> sel = kv_select(p, q.data(), G, keys.data(), n, d);
    ASSERT_FALSE(sel.empty());
    EXPECT_TRUE(std::is_sorted(sel.begin(), sel.end()));
    EXPECT_EQ(sel.back(), n - 1);
    if (!p.evict->selects())
      EXPECT_EQ(int(sel.size()), n);
    else
      EXPECT_LT(int(sel.size()), n);
  }
}

// Every precision piece at its defaults: a row it stores token by token comes back rounded (close,
// not equal), one it groups per channel is left for store_channel, and it counts fewer bytes
// than f32.
TEST(KvTable, EveryPrecisionPieceRoundsAndCountsFewerBytes) {
  for (const VariantInfo& info : kv_pieces()) {
    if (is_eviction(info)) continue;
    SCOPED_TRACE(info.id);
    const KvPolicy p = make_kv_policy(info.id);
    EXPECT_FALSE(p.storage->exact());
    EXPECT_LT(p.key_bytes_per_element(64), 4);
    EXPECT_LT(p.value_bytes_per_element(64), 4);
    std::mt19937 rng(5);
    std::normal_distribution<float> z;
    for (bool key : {true, false}) {
      const int n = 4, d = 64;
      std::vector<float> x(size_t(n) * d);
      for (float& v : x) v = z(rng);
      std::vector<float> y = x;
      p.storage->store_rows(y.data(), n, d, key);
      if (p.storage->channel_group(key) > 0) {
        EXPECT_EQ(y, x) << "per-channel groups wait for store_channel";
        std::vector<float> col(x.begin(), x.begin() + p.storage->channel_group(key));
        const std::vector<float> before = col;
        p.storage->store_channel(col.data(), int(col.size()));
        EXPECT_NE(col, before);
        continue;
      }
      EXPECT_NE(y, x) << (key ? "K" : "V");
      double err = 0;
      for (size_t i = 0; i < x.size(); ++i) err = std::max(err, double(std::fabs(y[i] - x[i])));
      EXPECT_LT(err, 0.5) << (key ? "K" : "V");
    }
  }
}

// The README's list of pieces ("### Decoding with KV-cache policies": `kv_id(param,...)` items,
// eviction pieces before "a storage precision") is the table's, with each piece's parameters
// (reposition, which every eviction piece takes, is described apart).
TEST(KvTable, ReadmeListsTheTable) {
  std::ifstream in(std::string(ATTN_TEST_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found under " << ATTN_TEST_SOURCE_DIR;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const size_t section = readme.find("### Decoding with KV-cache policies");
  ASSERT_NE(section, std::string::npos);
  const size_t storage = readme.find("a storage precision", section);
  const size_t end = readme.find("e.g.", storage);
  ASSERT_NE(storage, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  // `kv_id` or `kv_id(a,b=x|y,c)` -> "kv_id(a,b,c)".
  const auto listed = [](const std::string& text) {
    std::vector<std::string> out;
    const std::regex item("`(kv_[a-z0-9_]+)(?:\\(([^)`]*)\\))?`");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), item);
         it != std::sregex_iterator(); ++it) {
      std::string names;
      std::stringstream params((*it)[2].str());
      for (std::string p; std::getline(params, p, ',');)
        names += (names.empty() ? "" : ",") + p.substr(0, p.find('='));
      out.push_back((*it)[1].str() + "(" + names + ")");
    }
    return out;
  };
  std::vector<std::string> evictions, precisions;
  for (const VariantInfo& info : kv_pieces()) {
    std::string names;
    for (const ParamSpec& s : info.params)
      if (s.name != "reposition") names += (names.empty() ? "" : ",") + s.name;
    (is_eviction(info) ? evictions : precisions).push_back(info.id + "(" + names + ")");
  }
  EXPECT_EQ(listed(readme.substr(section, storage - section)), evictions);
  EXPECT_EQ(listed(readme.substr(storage, end - storage)), precisions);
}

}  // namespace
}  // namespace attn
