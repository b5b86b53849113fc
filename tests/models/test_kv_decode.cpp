// Decoding under KV-cache policies on real (small, random-weight) checkpoints: what each step
// attends over is what the policy says, with the positions it says. The first layer's keys
// depend on their token and position alone, so its attention at every step must equal a direct
// forward pass over the kept tokens with explicit positions (slots when re-positioning, stream
// positions otherwise); rotary (Llama, Qwen2 with GQA) and learned-position (GPT-2) models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "arch_test_util.h"
#include "compute/error.h"
#include "models/arch/hooks.h"
#include "models/arch/kv_cache.h"
#include "models/arch/model.h"

namespace attn {
namespace {

using test::golden_dir;

std::vector<int32_t> random_ids(const models::Model& m, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, m.info().vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& x : ids) x = u(rng);
  return ids;
}

struct Case {
  const char* model;
  const char* policy;
};

class KvDecode : public ::testing::TestWithParam<Case> {};

TEST_P(KvDecode, FirstLayerAttendsOverTheKeptTokensAtTheirPositions) {
  const Case c = GetParam();
  auto model = models::load_model(golden_dir(c.model));
  const models::ModelInfo& info = model->info();
  const bool rotary = info.family == models::Family::Llama;
  const int T = std::min(40, info.max_tokens), H = info.n_heads, Hkv = info.n_kv_heads;
  const int G = H / Hkv;
  const std::vector<int32_t> ids = random_ids(*model, T, 21);
  models::KvCache cache(make_kv_policy(c.policy));
  cache.record = true;
  std::vector<int32_t> given(static_cast<size_t>(T));  // learned positions each token received
  double worst = 0;
  int evicted_steps = 0;
  for (int t = 0; t < T; ++t) {
    given[size_t(t)] = kv_input_positions(cache, 1, info.max_tokens)[0];
    models::Capture cap(models::HookSelection::parse("blocks.0.attn.pattern"));
    model->decode({ids[size_t(t)]}, cache, {.capture = &cap});
    const auto& step = cap.layers[0].pattern;  // f32 [H, 1, nk]
    for (int g = 0; g < Hkv; ++g) {
      std::vector<int32_t> kept;  // what layer 0's KV head g attended over at step t
      if (t > 0) kept = cache.history[size_t(t) - 1].kept[0][size_t(g)];
      kept.push_back(t);
      const int nk = int(kept.size());
      ASSERT_EQ(step.size(), size_t(H) * nk) << c.policy << " step " << t;
      evicted_steps += g == 0 && nk < t + 1;
      models::ModelInput in;
      for (int32_t j : kept) {
        in.ids.push_back(ids[size_t(j)]);
        in.positions.push_back(rotary ? (cache.policy.reposition ? int32_t(in.positions.size()) : j)
                                      : given[size_t(j)]);
      }
      models::Capture direct(models::HookSelection::parse("blocks.0.attn.pattern"));
      model->forward(in, {.capture = &direct});
      const auto& want = direct.layers[0].pattern;  // f32 [H, nk, nk]
      for (int h = g * G; h < (g + 1) * G; ++h)
        for (int j = 0; j < nk; ++j) {
          const double a = step[size_t(h) * nk + j];
          const double b = want[(size_t(h) * nk + nk - 1) * nk + j];
          worst = std::max(worst, std::fabs(a - b));
          ASSERT_NEAR(a, b, 2e-6) << c.model << " " << c.policy << " step " << t << " head " << h
                                  << " entry " << j << " (token " << kept[size_t(j)] << ")";
        }
    }
  }
  EXPECT_GT(evicted_steps, 0) << "the stream must be long enough to evict";
  std::printf("[kv] %-6s %-52s max |p - direct| %.2g\n", c.model, cache.policy.spec.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, KvDecode,
    ::testing::Values(
        Case{"gpt2", "kv_streaming(sinks=2,window=5)"},
        Case{"gpt2", "kv_streaming(sinks=2,window=5,reposition=false)"},
        Case{"gpt2", "kv_h2o(budget=7,recent=3)"}, Case{"llama", "kv_streaming(sinks=2,window=5)"},
        Case{"llama", "kv_streaming(sinks=2,window=5,reposition=false)"},
        Case{"llama", "kv_tova(budget=6)"}, Case{"qwen2", "kv_h2o(budget=7,recent=3)"},
        Case{"qwen2", "kv_recent(window=4,reposition=false)"}, Case{"qwen2", "kv_tova(budget=5)"}),
    [](const auto& info) {
      std::string s = std::string(info.param.model) + "_" + info.param.policy;
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

double max_rel(const float* a, const float* b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// Streams `ids` under `policy` (prefill then steps) and returns the logits f32 [T, V].
std::vector<float> stream(const models::Model& m, const std::vector<int32_t>& ids, int prefill,
                          models::KvCache& cache) {
  const int V = m.info().vocab;
  std::vector<float> out;
  const models::ModelOutput p =
      m.decode(std::vector<int32_t>(ids.begin(), ids.begin() + prefill), cache);
  out.insert(out.end(), p.logits.begin(), p.logits.end());
  for (size_t t = size_t(prefill); t < ids.size(); ++t) {
    const models::ModelOutput s = m.decode({ids[t]}, cache);
    EXPECT_EQ(int(s.logits.size()), V);
    out.insert(out.end(), s.logits.begin(), s.logits.end());
  }
  return out;
}

TEST(KvDecodePolicies, PrecisionsStayCloseToF32AndCountTheirBytes) {
  for (const char* name : {"llama", "gpt2"}) {
    auto model = models::load_model(golden_dir(name));
    const int V = model->info().vocab, T = std::min(40, model->info().max_tokens);
    const std::vector<int32_t> ids = random_ids(*model, T, 5);
    models::KvCache full;
    const std::vector<float> ref = stream(*model, ids, 8, full);
    double prev_err = 0;
    // Bounds for these tiny random models (head dimension 8 to 32): a loose check that each
    // precision is wired, plus the ordering fewer bits -> larger error.
    const std::vector<std::pair<const char*, double>> cases = {{"kv_fp16", 5e-3},
                                                               {"kv_quant(bits=8,group=8)", 0.06},
                                                               {"kv_quant(bits=4,group=8)", 0.6},
                                                               {"kv_quant(bits=2,group=8)", 4.0}};
    for (const auto& [spec, bound] : cases) {
      models::KvCache c(make_kv_policy(spec));
      const std::vector<float> got = stream(*model, ids, 8, c);
      double err = 0;
      for (int t = 0; t < T; ++t)
        err = std::max(err, max_rel(got.data() + size_t(t) * V, ref.data() + size_t(t) * V, V));
      EXPECT_GE(err, prev_err * 0.5) << name << " " << spec << ": fewer bits, not closer";
      EXPECT_LT(err, bound) << name << " " << spec;
      EXPECT_GT(err, 0) << name << " " << spec << " changed nothing";
      prev_err = err;
      EXPECT_LT(c.bytes(), full.bytes()) << spec;
      EXPECT_EQ(c.entries(), full.entries());
      std::printf("[kv] %-6s %-28s max rel logit error %.3g, %.0f of %.0f bytes\n", name, spec, err,
                  c.bytes(), full.bytes());
    }
  }
}

// The cache's own bytes, read in place by the decode kernel (compute/kv/kv_attend.h), give the
// logits the same cache gives through the attention backend (every layer hooked, so every step
// gathers its rows decoded to f32 and rotated): rotary (Llama, Qwen2 with GQA) and
// learned-position (GPT-2) models, each storage format, alone and under eviction.
TEST(KvDecodePolicies, InPlaceStepsReadTheStoredFormatAsTheBackendDoes) {
  const char* specs[] = {"kv_full",
                         "kv_bf16",
                         "kv_fp16",
                         "kv_fp8",
                         "kv_fp8(format=e5m2)",
                         "kv_quant(bits=4,group=8)",
                         "kv_quant(bits=2,group=3,k_axis=token,v_axis=channel)",
                         "kv_streaming(sinks=2,window=6)+kv_quant(bits=4,group=4)",
                         "kv_h2o(budget=9,recent=3)+kv_fp8",
                         "kv_recent(window=5,reposition=false)+kv_bf16",
                         "kv_tova(budget=7)+kv_quant(bits=8,group=5,v_axis=channel)",
                         "kv_quest(page=4,k=2)+kv_quant(bits=4,group=4)"};
  for (const char* name : {"llama", "qwen2", "gpt2"}) {
    auto model = models::load_model(golden_dir(name));
    const int V = model->info().vocab, T = std::min(40, model->info().max_tokens);
    const std::vector<int32_t> ids = random_ids(*model, T, 17);
    for (const char* spec : specs) {
      models::KvCache in_place(make_kv_policy(spec)), gathered(make_kv_policy(spec));
      const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 8);
      model->decode(prompt, in_place);
      model->decode(prompt, gathered);
      double worst = 0;
      for (int t = 8; t < T; ++t) {
        const models::ModelOutput a = model->decode({ids[size_t(t)]}, in_place);
        models::Capture cap(models::HookSelection::parse("blocks.*.attn.out"));
        const models::ModelOutput b = model->decode({ids[size_t(t)]}, gathered, {.capture = &cap});
        ASSERT_EQ(int(a.logits.size()), V);
        worst = std::max(worst, max_rel(a.logits.data(), b.logits.data(), V));
      }
      EXPECT_LT(worst, 1e-4) << name << " " << spec;
      EXPECT_EQ(in_place.entries(), gathered.entries()) << name << " " << spec;
      EXPECT_EQ(in_place.bytes(), gathered.bytes()) << name << " " << spec;
      std::printf("[kv] %-6s %-58s in place vs gathered: max rel logit diff %.2g\n", name, spec,
                  worst);
    }
  }
}

// What a cache reports is what its rows allocated, in the format's size: float formats exactly
// their element size times the rows allocated (plus each head's record), int codes less than f32;
// an evicting cache stops growing once its rows are allocated (released rows, f32 copies and group
// scales are reused).
TEST(KvDecodePolicies, CacheBytesAreItsRowsAllocationInTheFormatsSize) {
  auto model = models::load_model(golden_dir("llama"));
  const models::ModelInfo& info = model->info();
  const std::vector<int32_t> ids = random_ids(*model, 120, 23);
  const std::string evict = "kv_streaming(sinks=2,window=20)";
  // Bytes of a float format's cache: K and V of every layer, each KV head its record and
  // capacity rows of head_dim elements.
  const auto float_bytes = [&](const models::KvCache& c, int element_bytes) {
    return 2.0 * info.n_layers * info.n_kv_heads *
           (sizeof(KvRows::Head) + double(c.capacity) * info.head_dim * element_bytes);
  };
  for (const auto& [piece, element_bytes] :
       std::vector<std::pair<std::string, int>>{{"", 4},
                                                {"+kv_bf16", 2},
                                                {"+kv_fp16", 2},
                                                {"+kv_fp8", 1},
                                                {"+kv_quant(bits=8,group=4)", 0},
                                                {"+kv_quant(bits=4,group=4)", 0}}) {
    models::KvCache c(make_kv_policy(evict + piece));
    double at_60 = 0;
    model->decode({ids[0]}, c);
    for (size_t t = 1; t < ids.size(); ++t) {
      model->decode({ids[t]}, c);
      if (t == 60) at_60 = c.bytes();
    }
    double rows = 0;
    for (const models::KvLayer& L : c.layers) rows += double(L.k.bytes() + L.v.bytes());
    EXPECT_EQ(c.bytes(), rows) << piece << ": the cache's bytes are its rows'";
    EXPECT_EQ(c.bytes(), at_60) << piece << ": an evicting cache stops growing";
    if (element_bytes > 0) {
      EXPECT_EQ(c.bytes(), float_bytes(c, element_bytes)) << piece;
    } else {
      EXPECT_LT(c.bytes(), float_bytes(c, 4)) << piece;
    }
    std::printf("[kv] llama %-28s %.0f bytes (capacity %d rows)\n", piece.c_str(), c.bytes(),
                c.capacity);
  }
}

TEST(KvDecodePolicies, PromptCompressionKeepsItsBudgetPerLayer) {
  auto model = models::load_model(golden_dir("qwen2"));
  const int L = model->info().n_layers;
  const std::vector<int32_t> ids = random_ids(*model, 40, 8);
  for (const char* spec : {"kv_snapkv(budget=12,window=4,kernel=3)",
                           "kv_pyramidkv(budget=12,window=4,kernel=3,beta=2)"}) {
    models::KvCache c(make_kv_policy(spec));
    model->decode(std::vector<int32_t>(ids.begin(), ids.begin() + 30), c);
    for (int l = 0; l < L; ++l)
      EXPECT_EQ(c.layers[size_t(l)].len, c.policy.keep_after(l, L)) << spec;
    if (c.policy.evict_id == "kv_pyramidkv") {
      EXPECT_GT(c.layers[0].len, c.layers[size_t(L) - 1].len);
    }
    for (int t = 30; t < 40; ++t) model->decode({ids[size_t(t)]}, c);
    for (int l = 0; l < L; ++l)
      EXPECT_EQ(c.layers[size_t(l)].len, c.policy.keep_after(l, L) + 10) << "decoding appends";
  }
  // Quest evicts nothing and attends to k pages.
  models::KvCache q(make_kv_policy("kv_quest(page=4,k=2)"));
  model->decode(std::vector<int32_t>(ids.begin(), ids.begin() + 20), q);
  models::Capture cap(models::HookSelection::parse("blocks.1.attn.pattern"));
  model->decode({ids[20]}, q, {.capture = &cap});
  EXPECT_EQ(q.layers[1].len, 21);
  EXPECT_EQ(cap.layers[1].pattern.size(), size_t(model->info().n_heads) * (4 + 1));
}

TEST(KvDecodePolicies, LearnedPositionsStreamPastTheContextOnlyWhenRepositioning) {
  auto model = models::load_model(golden_dir("gpt2"));
  const int ctx = model->info().max_tokens;
  const std::vector<int32_t> ids = random_ids(*model, ctx + 20, 4);
  models::KvCache ok(make_kv_policy("kv_streaming(sinks=4,window=16)"));
  stream(*model, ids, 1, ok);
  EXPECT_EQ(ok.length, ctx + 20);
  for (const char* spec :
       {"kv_full", "kv_quest(page=8,k=2)", "kv_recent(window=16,reposition=false)"}) {
    models::KvCache c(make_kv_policy(spec));
    try {
      stream(*model, ids, 1, c);
      FAIL() << spec << " must stop at the context";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("context of " + std::to_string(ctx)), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(c.length, ctx) << spec << ": the refused step leaves the cache as it was";
  }
}

}  // namespace
}  // namespace attn
