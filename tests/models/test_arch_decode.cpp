// Incremental decoding with a KV cache: a prefill and then one token per step give the logits of a
// full forward pass over every token so far (GPT-2: learned positions; Llama and Qwen2: RoPE with
// grouped-query attention), hooks see each step's queries over the whole cache, and models or
// lengths that cannot decode say so.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>

#include "arch_test_util.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/hooks.h"
#include "models/arch/model.h"
#include "models/arch/substitution.h"

namespace attn {
namespace {

using test::golden_dir;
using test::golden_ints;
using test::max_rel_error;

constexpr double kTol = 1e-5;

std::span<const float> row(const models::ModelOutput& o, int r) {
  return {o.logits.data() + size_t(r) * o.n_logits, size_t(o.n_logits)};
}

class Decode : public ::testing::TestWithParam<const char*> {};

TEST_P(Decode, PrefillThenStepsEqualAFullForwardPass) {
  const std::string name = GetParam();
  auto model = models::load_model(golden_dir(name));
  const std::vector<int32_t> ids = golden_ints(name, "golden_ids");
  const int n = int(ids.size());
  ASSERT_GE(n, 4);
  const models::ModelOutput full = model->forward({.ids = ids});
  // Prefill in two chunks (the second attends over the first through the cache), then steps.
  for (int prefill : {1, n / 2}) {
    models::KvCache cache;
    const int first = std::max(1, prefill / 2);
    const models::ModelOutput a =
        model->decode(std::vector<int32_t>(ids.begin(), ids.begin() + first), cache);
    ASSERT_EQ(a.n_tokens, first);
    for (int r = 0; r < first; ++r)
      EXPECT_LE(max_rel_error(row(a, r), row(full, r)), kTol) << name << " prefill row " << r;
    if (prefill > first) {
      const models::ModelOutput b =
          model->decode(std::vector<int32_t>(ids.begin() + first, ids.begin() + prefill), cache);
      for (int r = 0; r < prefill - first; ++r)
        EXPECT_LE(max_rel_error(row(b, r), row(full, first + r)), kTol)
            << name << " second chunk row " << r;
    }
    EXPECT_EQ(cache.length, prefill);
    double worst = 0;
    for (int t = prefill; t < n; ++t) {
      const models::ModelOutput s = model->decode({ids[size_t(t)]}, cache);
      ASSERT_EQ(s.n_tokens, 1);
      const double err = max_rel_error(row(s, 0), row(full, t));
      worst = std::max(worst, err);
      EXPECT_LE(err, kTol) << name << " step at token " << t;
    }
    EXPECT_EQ(cache.length, n);
    std::printf("[decode] %-6s prefill %2d + %2d steps: max rel error %.3g\n", name.c_str(),
                prefill, n - prefill, worst);
  }
}

TEST_P(Decode, HooksSeeEachStepOverTheWholeCache) {
  const std::string name = GetParam();
  auto model = models::load_model(golden_dir(name));
  const std::vector<int32_t> ids = golden_ints(name, "golden_ids");
  const int n = int(ids.size()), H = model->info().n_heads;
  models::Capture full_cap(models::HookSelection::parse("blocks.0.attn.pattern"));
  model->forward({.ids = ids}, {.capture = &full_cap});
  const auto& fp = full_cap.layers[0].pattern;  // f32 [H, n, n]
  models::KvCache cache;
  model->decode(std::vector<int32_t>(ids.begin(), ids.end() - 1), cache);
  models::Capture step_cap(models::HookSelection::parse("blocks.0.attn.pattern"));
  model->decode({ids.back()}, cache, {.capture = &step_cap});
  const auto& sp = step_cap.layers[0].pattern;  // f32 [H, 1, n]
  ASSERT_EQ(sp.size(), size_t(H) * size_t(n));
  for (int h = 0; h < H; ++h)
    for (int j = 0; j < n; ++j)
      EXPECT_NEAR(sp[size_t(h) * n + j], fp[(size_t(h) * n + (n - 1)) * n + j], 1e-6)
          << name << " head " << h << " key " << j;
}

// A variant substituted into every layer attends, at each step, to what it would in a full pass
// over the tokens so far: a window is positional, so the step's logits equal that row.
TEST_P(Decode, SubstitutedVariantStepsEqualTheFullSubstitutedPass) {
  const std::string name = GetParam();
  auto model = models::load_model(golden_dir(name));
  const std::vector<int32_t> ids = golden_ints(name, "golden_ids");
  const int n = int(ids.size());
  const Variant v = make_variant("window(size=3)");
  auto backend = make_backend("cpu");
  const models::Substitution sub{&v, backend.get()};
  const models::ModelOutput full = model->forward({.ids = ids}, {.substitution = &sub});
  models::KvCache cache;
  model->decode({ids[0]}, cache, {.substitution = &sub});
  for (int t = 1; t < n; ++t) {
    const models::ModelOutput s = model->decode({ids[size_t(t)]}, cache, {.substitution = &sub});
    ASSERT_FALSE(s.substituted.empty());
    EXPECT_LE(max_rel_error(row(s, 0), row(full, t)), kTol) << name << " step " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Causal, Decode, ::testing::Values("gpt2", "llama", "qwen2"));

TEST(Decode, LearnedPositionsStopAtTheContext) {
  auto model = models::load_model(golden_dir("gpt2"));
  const int ctx = int(model->info().max_tokens);
  ASSERT_GT(ctx, 1);
  models::KvCache cache;
  model->decode(std::vector<int32_t>(size_t(ctx), 1), cache);
  try {
    model->decode({1}, cache);
    FAIL() << "decoding past n_positions must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("context of " + std::to_string(ctx)), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length, ctx) << "a refused step leaves the cache as it was";
}

TEST(Decode, EncodersAndVisionModelsSayTheyCannotDecode) {
  for (const char* name : {"bert", "vit"}) {
    auto model = models::load_model(golden_dir(name));
    models::KvCache cache;
    try {
      model->decode({1, 2}, cache);
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported) << name;
      EXPECT_NE(std::string(e.what()).find("causal language model"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace attn
