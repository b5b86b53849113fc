// KV-cache policies: parsing and canonical specs, every eviction decision against a naive
// re-implementation of its rule over a simulated stream (GQA groups, budgets larger than the
// stream, zero sinks, sinks > window), kv_h2o against the h2o pattern it must match, and the
// storage precisions against exhaustive references.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "compute/error.h"
#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_policy.h"
#include "compute/kv/kv_precision.h"
#include "compute/layout.h"
#include "compute/problem.h"
#include "compute/registry.h"

namespace attn {
namespace {

// ---- parsing ----

TEST(KvPolicy, SpecsParseToCanonicalText) {
  EXPECT_EQ(make_kv_policy("kv_full").spec, "kv_full(reposition=true)");
  const KvPolicy s = make_kv_policy("kv_streaming(window=8)");
  EXPECT_EQ(s.spec, "kv_streaming(sinks=4,window=8,reposition=true)");
  EXPECT_EQ(s.evict_id, "kv_streaming");
  EXPECT_EQ(s.keep_after(0, 2), 11);
  const KvPolicy q =
      make_kv_policy("kv_quant(bits=2,group=16,v_axis=channel)+kv_h2o(budget=9,recent=3)");
  EXPECT_EQ(q.spec,
            "kv_h2o(budget=9,recent=3,reposition=true)+kv_quant(bits=2,group=16,k_axis=channel,"
            "v_axis=channel)");
  EXPECT_EQ(q.storage->channel_group(false), 16);  // V per channel
  EXPECT_EQ(q.storage->channel_group(true), 16);   // K per channel
  EXPECT_EQ(make_kv_policy("kv_fp8(format=e5m2)").spec, "kv_fp8(format=e5m2)");
  float big = 1000;  // e5m2 rounds it to 1024, e4m3 would saturate at 448
  make_kv_policy("kv_fp8(format=e5m2)").storage->store_rows(&big, 1, 1, true);
  EXPECT_EQ(big, round_fp8(1000, false));
  EXPECT_EQ(make_kv_policy("kv_recent(window=4,reposition=false)").reposition, false);
  EXPECT_EQ(make_kv_policy(make_kv_policy("kv_snapkv(budget=64)").spec).spec,
            make_kv_policy("kv_snapkv(budget=64)").spec);
}

TEST(KvPolicy, BadSpecsSayWhatIsWrong) {
  const auto message = [](const std::string& spec, ErrorCode code) {
    try {
      make_kv_policy(spec);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << spec << ": " << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << spec << " was accepted";
    return std::string();
  };
  EXPECT_NE(message("kv_strem(window=4)", ErrorCode::UnknownVariant).find("kv_streaming"),
            std::string::npos);
  EXPECT_NE(message("kv_recent(window=0)", ErrorCode::BadParameter).find("window"),
            std::string::npos);
  EXPECT_NE(message("kv_h2o(budget=4,recent=8)", ErrorCode::BadParameter).find("recent"),
            std::string::npos);
  EXPECT_NE(message("kv_recent+kv_tova", ErrorCode::InvalidArgument).find("two eviction"),
            std::string::npos);
  EXPECT_NE(message("kv_fp16+kv_bf16", ErrorCode::InvalidArgument).find("two precision"),
            std::string::npos);
  EXPECT_NE(message("kv_fp8(format=e3m4)", ErrorCode::BadParameter).find("e4m3"),
            std::string::npos);
  EXPECT_NE(message("kv_quant(bits=3)", ErrorCode::BadParameter).find("2, 4 or 8"),
            std::string::npos);
  EXPECT_NE(message("kv_snapkv(budget=8,window=8)", ErrorCode::BadParameter).find("window"),
            std::string::npos);
  EXPECT_NE(message("kv_snapkv(budget=64,kernel=4)", ErrorCode::BadParameter).find("odd"),
            std::string::npos);
  EXPECT_NE(message("kv_tova(budget=abc)", ErrorCode::InvalidArgument).find("not a number"),
            std::string::npos);
  message("kv_recent(size=4)", ErrorCode::BadParameter);
  message("kv_recent(window=4", ErrorCode::InvalidArgument);
}

TEST(KvPolicy, EnumParametersAreWordsInVariantSpecsToo) {
  ParamSpec e{"format", ParamSpec::Type::Enum, 0, 1, 0, "", {"e4m3", "e5m2"}};
  EXPECT_EQ(param_from_text(&e, "e5m2", "x.format"), 1);
  EXPECT_EQ(param_to_text(e, 1), "e5m2");
  EXPECT_THROW(param_from_text(&e, "1", "x.format"), Error);
}

TEST(KvPolicy, PyramidBudgetsFallWithDepthAndAverageTheBudget) {
  const int L = 8, budget = 160, window = 32;
  double sum = 0;
  int prev = 1 << 30;
  for (int l = 0; l < L; ++l) {
    const int b = pyramid_layer_keep(budget, window, 20, l, L);
    EXPECT_LT(b, prev);
    prev = b;
    sum += b;
  }
  EXPECT_NEAR(sum / L, budget - window, 4.0);  // integer steps round the ends
  EXPECT_EQ(pyramid_layer_keep(budget, window, 20, 0, 1), budget - window);
}

// ---- eviction against naive rules over a simulated stream ----

struct Stream {
  int G = 1, T = 60;
  std::mt19937 rng{7};
  // Random probabilities over n entries for G heads and nq queries (rows sum to 1).
  std::vector<float> probs(int nq, int n) {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> p(size_t(G) * nq * n);
    for (size_t r = 0; r < size_t(G) * nq; ++r) {
      float s = 0;
      for (int e = 0; e < n; ++e) s += p[r * n + e] = std::pow(u(rng), 4.0f);
      for (int e = 0; e < n; ++e) p[r * n + e] /= s;
    }
    return p;
  }
};

// Runs `policy` over a stream of T tokens (a prefill of `prefill` tokens, then one per step),
// calling check(t, held) with the stream positions each pass attended over.
template <typename Check>
void simulate(const KvPolicy& policy, Stream& s, int prefill, Check check,
              std::function<void(const KvHeadState&, const std::vector<float>&, int nq,
                                 const std::vector<int>& keep)>
                  on_keep = {}) {
  KvHeadState st;
  int t = 0;
  bool first = true;
  while (t < s.T) {
    const int nq = first ? std::max(1, prefill) : 1;
    for (int i = 0; i < nq; ++i) {
      st.pos.push_back(t + i);
      st.acc.push_back(0.0);
    }
    t += nq;
    check(t - 1, st.pos);
    const std::vector<float> pr = s.probs(nq, int(st.pos.size()));
    const KvHeadState before = st;
    const std::vector<int> keep = kv_keep(policy, 0, 1, st, pr.data(), s.G, nq, first);
    if (on_keep) on_keep(before, pr, nq, keep);
    ASSERT_TRUE(std::is_sorted(keep.begin(), keep.end()));
    KvHeadState next;
    for (int e : keep) {
      next.pos.push_back(st.pos[size_t(e)]);
      next.acc.push_back(st.acc[size_t(e)]);
    }
    st = next;
    first = false;
  }
}

TEST(KvEvict, RecentAndStreamingSeeExactlyTheirWindows) {
  for (int prefill : {0, 1, 5, 30}) {
    for (const auto& sw :
         std::vector<std::pair<int, int>>{{0, 1}, {0, 7}, {4, 7}, {9, 3}, {2, 200}}) {
      // Named copies, not structured bindings: clang 14 (the fuzz build) cannot capture those.
      const int sinks = sw.first, window = sw.second;
      Stream s;
      const KvPolicy p =
          make_kv_policy(sinks == 0 && window == 7 ? "kv_recent(window=7)"
                                                   : "kv_streaming(sinks=" + std::to_string(sinks) +
                                                         ",window=" + std::to_string(window) + ")");
      const int pre = prefill;
      simulate(p, s, prefill, [&](int t, const std::vector<int32_t>& held) {
        std::vector<int32_t> want;
        const int from = t < pre ? 0 : 0;  // a prefill attends in full (causally)
        for (int j = from; j <= t; ++j)
          if (t < pre || j < sinks || j >= t - window + 1) want.push_back(j);
        EXPECT_EQ(held, want) << p.spec << " prefill " << pre << " at token " << t;
      });
    }
  }
}

// The h2o pattern is the definition kv_h2o(budget, recent) must reproduce, token by token.
TEST(KvEvict, H2oKeepsTheKeysOfTheH2oPattern) {
  for (auto [budget, recent] : std::vector<std::pair<int, int>>{{8, 3}, {5, 1}, {6, 6}, {100, 4}}) {
    const int T = 70, d = 16;
    const Problem prob = random_problem(1, 1, T, T, d, true, 11);
    const Variant v = make_variant("h2o(heavy=" + std::to_string(budget - recent) +
                                   ",recent=" + std::to_string(recent - 1) + ")");
    const Layout lay = v.pattern()->select(prob, nullptr, nullptr);
    const KvPolicy p = make_kv_policy("kv_h2o(budget=" + std::to_string(budget) +
                                      ",recent=" + std::to_string(recent) + ")");
    KvHeadState st;
    std::vector<int32_t> want;
    for (int t = 0; t < T; ++t) {
      st.pos.push_back(t);
      st.acc.push_back(0.0);
      layout_row_keys(lay, prob, 0, t, want);
      ASSERT_EQ(st.pos, want) << p.spec << " at token " << t;
      // This step's probabilities over the cache, as the model would compute them.
      const int n = int(st.pos.size());
      std::vector<double> sc(static_cast<size_t>(n));
      double mx = -1e300, sum = 0;
      for (int e = 0; e < n; ++e) {
        double dot = 0;
        for (int c = 0; c < d; ++c)
          dot += double(prob.q_row(0, t)[c]) * prob.k_row(0, st.pos[size_t(e)])[c];
        sc[size_t(e)] = dot * prob.effective_scale();
        mx = std::max(mx, sc[size_t(e)]);
      }
      for (double& x : sc) sum += x = std::exp(x - mx);
      std::vector<float> pr(static_cast<size_t>(n));
      for (int e = 0; e < n; ++e) pr[size_t(e)] = float(sc[size_t(e)] / sum);
      const std::vector<int> keep = kv_keep(p, 0, 1, st, pr.data(), 1, 1, t == 0);
      KvHeadState next;
      for (int e : keep) {
        next.pos.push_back(st.pos[size_t(e)]);
        next.acc.push_back(st.acc[size_t(e)]);
      }
      st = next;
    }
  }
}

// Naive H2O and TOVA for a GQA group: one eviction at a time, scanning for the minimum.
TEST(KvEvict, H2oAndTovaMatchNaiveOneAtATimeEvictionInGqaGroups) {
  for (int G : {1, 2, 4})
    for (int prefill : {1, 12}) {
      for (int budget : {1, 5, 16, 500}) {
        Stream s;
        s.G = G;
        const KvPolicy tova = make_kv_policy("kv_tova(budget=" + std::to_string(budget) + ")");
        std::set<int32_t> naive;
        simulate(
            tova, s, prefill,
            [&](int t, const std::vector<int32_t>& held) {
              naive.insert(t);
              if (t < prefill) return;
              EXPECT_EQ(held, std::vector<int32_t>(naive.begin(), naive.end())) << tova.spec;
            },
            [&](const KvHeadState& before, const std::vector<float>& pr, int nq,
                const std::vector<int>&) {
              const int n = int(before.pos.size());
              naive = std::set<int32_t>(before.pos.begin(), before.pos.end());
              std::map<int32_t, double> score;
              for (int e = 0; e < n; ++e)
                for (int g = 0; g < G; ++g)
                  score[before.pos[size_t(e)]] += pr[(size_t(g) * nq + nq - 1) * n + e];
              while (int(naive.size()) > budget - 1) {
                int32_t worst = -1;
                for (int32_t j : naive)
                  if (worst < 0 || score[j] <= score[worst]) worst = j;  // ties: the newer
                naive.erase(worst);
              }
            });
      }
      for (const auto& br : std::vector<std::pair<int, int>>{{6, 2}, {9, 9}, {400, 3}}) {
        const int budget = br.first, recent = br.second;
        Stream s;
        s.G = G;
        const KvPolicy h2o = make_kv_policy("kv_h2o(budget=" + std::to_string(budget) +
                                            ",recent=" + std::to_string(recent) + ")");
        std::set<int32_t> naive;
        std::map<int32_t, double> acc;
        int next = 0;
        simulate(
            h2o, s, prefill,
            [&](int t, const std::vector<int32_t>& held) {
              for (; next <= t; ++next) naive.insert(next);
              EXPECT_EQ(held, std::vector<int32_t>(naive.begin(), naive.end())) << h2o.spec;
            },
            [&](const KvHeadState& before, const std::vector<float>& pr, int nq,
                const std::vector<int>&) {
              const int n = int(before.pos.size());
              const int32_t t = before.pos.back();
              for (int e = 0; e < n; ++e)
                for (int g = 0; g < G; ++g)
                  for (int q = 0; q < nq; ++q)
                    acc[before.pos[size_t(e)]] += pr[(size_t(g) * nq + q) * n + e];
              auto heavy_count = [&] {
                int c = 0;
                for (int32_t j : naive) c += j < t + 2 - recent;
                return c;
              };
              while (heavy_count() > budget - recent) {
                int32_t worst = -1;
                for (int32_t j : naive)
                  if (j < t + 2 - recent && (worst < 0 || acc[j] <= acc[worst])) worst = j;
                naive.erase(worst);
              }
            });
      }
    }
}

TEST(KvEvict, SnapKvAndPyramidKvCompressThePromptOnceByPooledWindowScores) {
  for (int G : {1, 2})
    for (const std::string spec :
         {"kv_snapkv(budget=20,window=6,kernel=3)", "kv_snapkv(budget=200,window=6,kernel=5)",
          "kv_pyramidkv(budget=20,window=4,kernel=1,beta=4)"}) {
      const KvPolicy p = make_kv_policy(spec);
      const int window = int(p.evict_params.at("window")),
                kernel = int(p.evict_params.at("kernel"));
      for (int layer : {0, 3}) {
        Stream s;
        s.G = G;
        const int prefill = 40, L = 4;
        KvHeadState st;
        for (int t = 0; t < prefill; ++t) st.pos.push_back(t), st.acc.push_back(0);
        const std::vector<float> pr = s.probs(prefill, prefill);
        const std::vector<int> keep = kv_keep(p, layer, L, st, pr.data(), G, prefill, true);
        // Naive: window rows' column sums, max-pooled, top by score (ties: the older key).
        const int target = p.keep_after(layer, L);
        std::vector<int> want;
        if (prefill <= target) {
          want.resize(prefill);
          std::iota(want.begin(), want.end(), 0);
        } else {
          const int pre = prefill - window;
          std::vector<double> raw(static_cast<size_t>(pre), 0.0), pooled(static_cast<size_t>(pre));
          for (int e = 0; e < pre; ++e)
            for (int g = 0; g < G; ++g)
              for (int q = prefill - window; q < prefill; ++q)
                raw[size_t(e)] += pr[(size_t(g) * prefill + q) * prefill + e];
          for (int e = 0; e < pre; ++e) {
            pooled[size_t(e)] = -1;
            for (int j = e - kernel / 2; j <= e + kernel / 2; ++j)
              if (j >= 0 && j < pre)
                pooled[size_t(e)] = std::max(pooled[size_t(e)], raw[size_t(j)]);
          }
          std::vector<int> order(static_cast<size_t>(pre));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](int a, int b) { return pooled[size_t(a)] > pooled[size_t(b)]; });
          want.assign(order.begin(), order.begin() + (target - window));
          for (int e = pre; e < prefill; ++e) want.push_back(e);
          std::sort(want.begin(), want.end());
        }
        EXPECT_EQ(keep, want) << spec << " layer " << layer;
        // Decoding afterwards evicts nothing.
        KvHeadState after;
        for (int e : keep) after.pos.push_back(e), after.acc.push_back(0);
        after.pos.push_back(prefill);
        after.acc.push_back(0);
        const std::vector<float> step = s.probs(1, int(after.pos.size()));
        EXPECT_EQ(kv_keep(p, layer, L, after, step.data(), G, 1, false).size(), after.pos.size());
      }
    }
}

TEST(KvEvict, QuestPicksThePagesWithTheHighestBound) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int G : {1, 3})
    for (auto [page, k, n] :
         std::vector<std::tuple<int, int, int>>{{4, 3, 37}, {8, 2, 64}, {5, 100, 23}, {1, 5, 17}}) {
      const int d = 8;
      const KvPolicy p =
          make_kv_policy("kv_quest(page=" + std::to_string(page) + ",k=" + std::to_string(k) + ")");
      std::vector<float> q(size_t(G) * d), keys(size_t(n) * d);
      for (float& x : q) x = nd(rng);
      for (float& x : keys) x = nd(rng);
      const std::vector<int> got = kv_select(p, q.data(), G, keys.data(), n, d);
      const int pages = (n + page - 1) / page;
      std::vector<std::pair<double, int>> bound;
      for (int pg = 0; pg + 1 < pages; ++pg) {
        double b = 0;
        for (int g = 0; g < G; ++g)
          for (int c = 0; c < d; ++c) {
            double best = -1e300;
            for (int e = pg * page; e < std::min(n, (pg + 1) * page); ++e)
              best = std::max(best, double(q[size_t(g) * d + c]) * keys[size_t(e) * d + c]);
            b += best;  // max over the page of q_c k_c is the bound's channel term
          }
        bound.push_back({-b, pg});
      }
      std::sort(bound.begin(), bound.end());
      std::set<int> chosen{pages - 1};
      for (int i = 0; i < std::min(int(bound.size()), k - 1); ++i)
        chosen.insert(bound[size_t(i)].second);
      std::vector<int> want;
      for (int pg : chosen)
        for (int e = pg * page; e < std::min(n, (pg + 1) * page); ++e) want.push_back(e);
      EXPECT_EQ(got, want) << p.spec << " G " << G << " n " << n;
      EXPECT_EQ(got.back(), n - 1) << "the newest entry is always attended";
    }
}

// ---- storage precisions ----

// Every finite value of an FP8 format, by decoding all 256 codes.
std::vector<float> fp8_values(bool e4m3) {
  std::vector<float> v;
  const int mant = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  for (int code = 0; code < 128; ++code) {
    const int e = code >> mant, m = code & ((1 << mant) - 1);
    if (e4m3 && code == 127) continue;  // NaN
    if (!e4m3 && e == 31) continue;     // inf / NaN
    const float x = e == 0 ? std::ldexp(float(m), 1 - bias - mant)
                           : std::ldexp(float((1 << mant) + m), e - bias - mant);
    v.push_back(x);
    v.push_back(-x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(KvPrecision, Fp8RoundsToTheNearestCodeTiesToEvenAndSaturates) {
  std::mt19937 rng(5);
  for (bool e4m3 : {true, false}) {
    const std::vector<float> codes = fp8_values(e4m3);
    EXPECT_EQ(codes.back(), e4m3 ? 448.0f : 57344.0f);
    std::uniform_real_distribution<float> exp_dist(-22.0f, 17.0f);
    for (int i = 0; i < 20000; ++i) {
      const float x = (i % 2 ? -1.0f : 1.0f) * std::exp2(exp_dist(rng));
      const float r = round_fp8(x, e4m3);
      const float clamped = std::clamp(x, codes.front(), codes.back());
      double best = 1e300;
      for (float c : codes) best = std::min(best, std::fabs(double(c) - clamped));
      EXPECT_EQ(std::fabs(double(r) - clamped), best) << x;
      EXPECT_TRUE(std::find(codes.begin(), codes.end(), r) != codes.end()) << x << " -> " << r;
    }
    EXPECT_EQ(round_fp8(1e9f, e4m3), codes.back());
    EXPECT_TRUE(std::isnan(round_fp8(NAN, e4m3)));
  }
  EXPECT_EQ(round_fp8(1.0625f, true), 1.0f);   // halfway: to the even mantissa
  EXPECT_EQ(round_fp8(1.1875f, true), 1.25f);  // halfway: to the even mantissa
}

TEST(KvPrecision, Fp16AndBf16MatchTheirBitLevelDefinitions) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (!std::isfinite(x)) continue;
    // bf16: the float whose low 16 bits are zero nearest to x (ties: even).
    const float b = round_bf16(x);
    EXPECT_EQ(std::bit_cast<uint32_t>(b) & 0xFFFFu, 0u);
    const uint32_t u = std::bit_cast<uint32_t>(x), lo = u & 0xFFFF0000u;
    const float down = std::bit_cast<float>(lo), up = std::bit_cast<float>(lo + 0x10000u);
    const double dd = std::fabs(double(x) - down), du = std::fabs(double(x) - up);
    if (std::isfinite(up)) {
      if (dd != du)
        EXPECT_EQ(b, dd < du ? down : up) << x;
      else
        EXPECT_EQ(std::bit_cast<uint32_t>(b) & 0x10000u, 0u) << x;
    }
    // fp16: exact for values it holds, within half a spacing otherwise.
    const float h = round_fp16(x);
    if (std::fabs(x) < 65504.0f) {
      const int e = std::max(int(std::floor(std::log2(std::fabs(double(x))))), -14);
      EXPECT_LE(std::fabs(double(h) - x), std::ldexp(1.0, e - 11) * 1.0000001) << x;
      EXPECT_EQ(round_fp16(h), h);
    }
  }
  EXPECT_EQ(round_fp16(1.0f + 1.0f / 2048), 1.0f);  // halfway to 1 + 2^-10: even
  EXPECT_EQ(round_fp16(70000.0f), INFINITY);
  EXPECT_EQ(round_fp16(std::ldexp(1.0f, -25)), 0.0f);  // half the smallest subnormal: to even 0
}

TEST(KvPrecision, GroupQuantisationStaysWithinHalfAStep) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int bits : {2, 4, 8})
    for (int n : {1, 2, 7, 32, 129}) {
      std::vector<float> x(size_t(n) * 3);
      for (float& v : x) v = nd(rng);
      const std::vector<float> orig = x;
      quantise_group(x.data() + 1, n, 3, bits);  // every third value, from the second
      float lo = 1e30f, hi = -1e30f;
      for (int i = 0; i < n; ++i)
        lo = std::min(lo, orig[size_t(i) * 3 + 1]), hi = std::max(hi, orig[size_t(i) * 3 + 1]);
      const double step = (double(hi) - lo) / ((1 << bits) - 1);
      std::set<float> levels;
      for (int i = 0; i < n; ++i) {
        EXPECT_LE(std::fabs(double(x[size_t(i) * 3 + 1]) - orig[size_t(i) * 3 + 1]),
                  step / 2 + 1e-5)
            << bits << " bits, n " << n;
        levels.insert(x[size_t(i) * 3 + 1]);
        EXPECT_EQ(x[size_t(i) * 3], orig[size_t(i) * 3]) << "values outside the group untouched";
      }
      EXPECT_LE(int(levels.size()), 1 << bits);
    }
  std::vector<float> flat(5, 2.5f);
  quantise_group(flat.data(), 5, 1, 2);
  for (float v : flat) EXPECT_EQ(v, 2.5f);
}

TEST(KvPrecision, BytesPerElementFollowThePrecision) {
  EXPECT_EQ(make_kv_policy("kv_full").key_bytes_per_element(64), 4);
  EXPECT_EQ(make_kv_policy("kv_bf16").key_bytes_per_element(64), 2);
  EXPECT_EQ(make_kv_policy("kv_fp8").value_bytes_per_element(64), 1);
  // The cache stores each group's minimum and scale in f32 (4 bytes each), so that an element
  // decodes to exactly what quantise_group leaves.
  EXPECT_DOUBLE_EQ(make_kv_policy("kv_quant(bits=2,group=32)").key_bytes_per_element(64),
                   0.25 + 8.0 / 32);
}

}  // namespace
}  // namespace attn
