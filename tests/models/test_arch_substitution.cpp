// Substitution: a compute-core variant computes the attention of chosen layers/heads inside the
// forward pass, and end_to_end() measures the effect on logits.
#include <cmath>
#include <functional>
#include <random>

#include "arch_test_util.h"
#include "compute/backend.h"
#include "compute/metrics.h"
#include "compute/registry.h"
#include "models/arch/model.h"
#include "models/arch/substitution.h"
#include "test_util.h"

namespace attn {
namespace {

using test::golden_dir;
using test::golden_ints;
using test::max_rel_error;

models::ModelInput gpt2_input() {
  models::ModelInput in;
  in.ids = golden_ints("gpt2", "golden_ids");
  return in;
}

TEST(ArchSubstitution, DenseVariantReproducesTheModel) {
  for (const char* name : {"gpt2", "llama", "bert"}) {
    auto model = models::load_model(golden_dir(name));
    models::ModelInput in;
    in.ids = golden_ints(name, "golden_ids");
    const models::ModelOutput base = model->forward(in);
    const Variant v = make_variant("dense");
    auto backend = make_backend("cpu");
    models::Substitution sub{&v, backend.get()};
    const models::ModelOutput out = model->forward(in, {.substitution = &sub});
    EXPECT_LE(max_rel_error(out.logits, base.logits), 1e-5) << name;
    ASSERT_EQ(int(out.substituted.size()), model->info().n_layers);
    EXPECT_EQ(int(out.substituted[0].heads.size()), model->info().n_heads);
    EXPECT_DOUBLE_EQ(out.substituted[0].stats.density, 1.0);
    const models::EndToEnd e = end_to_end(model->info(), in, base, out);
    EXPECT_TRUE(e.has_tokens);
    EXPECT_LT(e.mean_kl, 1e-9);
    EXPECT_DOUBLE_EQ(e.top1_agreement, 1.0);
    if (model->info().causal) {
      EXPECT_TRUE(std::isnan(e.cls_cosine));  // position 0 never changes in a causal LM
    } else {
      EXPECT_NEAR(e.cls_cosine, 1.0, 1e-9);
    }
  }
}

TEST(ArchSubstitution, WindowInOneHeadChangesOnlyThatHead) {
  auto model = models::load_model(golden_dir("gpt2"));
  const models::ModelInput in = gpt2_input();
  const int n = int(in.ids.size());
  models::Capture base_cap(models::HookSelection::parse("blocks.0.attn.out,blocks.0.attn.q"));
  const models::ModelOutput base = model->forward(in, {.capture = &base_cap});

  const Variant v = make_variant("window(size=2)");
  auto backend = make_backend("reference");
  models::Substitution sub{&v, backend.get(), {0}, {1}};
  models::Capture cap(models::HookSelection::parse("blocks.0.attn.out,blocks.0.attn.pattern"));
  const models::ModelOutput out = model->forward(in, {.capture = &cap, .substitution = &sub});
  ASSERT_EQ(out.substituted.size(), 1u);
  EXPECT_EQ(out.substituted[0].layer, 0);
  EXPECT_EQ(out.substituted[0].heads, std::vector<int>{1});
  EXPECT_LT(out.substituted[0].stats.density, 1.0);

  const int d = model->info().head_dim;
  const auto& o0 = base_cap.layers[0].out;
  const auto& o1 = cap.layers[0].out;
  // Head 0 is untouched; head 1 is exactly the variant run on that head of the captured problem.
  for (size_t i = 0; i < size_t(n) * d; ++i) EXPECT_FLOAT_EQ(o1[i], o0[i]);
  Problem head1 = *base_cap.problem(0);
  head1.n_heads = head1.n_kv_heads = 1;
  head1.q.assign(head1.q.begin() + n * d, head1.q.begin() + 2 * n * d);
  head1.k.assign(base_cap.problem(0)->k.begin() + n * d,
                 base_cap.problem(0)->k.begin() + 2 * n * d);
  head1.v.assign(base_cap.problem(0)->v.begin() + n * d,
                 base_cap.problem(0)->v.begin() + 2 * n * d);
  const Result r = run(v, head1, *backend);
  const std::vector<float> got(o1.begin() + n * d, o1.begin() + 2 * n * d);
  EXPECT_LE(relative_error(got, r.o), 1e-6);
  EXPECT_GT(relative_error(got, std::vector<float>(o0.begin() + n * d, o0.begin() + 2 * n * d)),
            1e-3);
  // The captured pattern of the substituted head is the variant's: zero outside the window.
  const auto& pat = cap.layers[0].pattern;
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      const float p = pat[(size_t(1) * n + i) * n + j];
      if (j < i - 1 || j > i) {
        EXPECT_EQ(p, 0.0f) << i << "," << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }

  const models::EndToEnd e = end_to_end(model->info(), in, base, out);
  EXPECT_GT(e.mean_kl, 0.0);
  EXPECT_EQ(e.kl[0], 0.0f);  // the first token sees only itself either way
  EXPECT_GE(e.max_kl, e.mean_kl);
  EXPECT_TRUE(std::isfinite(e.ppl_dense));
  EXPECT_TRUE(std::isfinite(e.ppl_variant));
}

TEST(ArchSubstitution, EndToEndMetricsByHand) {
  models::ModelInfo info;
  info.causal = true;
  models::ModelInput in;
  in.ids = {0, 1, 2};
  models::ModelOutput a, b;
  a.n_tokens = b.n_tokens = 3;
  a.n_logits = b.n_logits = 3;
  a.logits = {0, 0, 0, /**/ 1, 2, 3, /**/ 5, 0, 0};
  b.logits = {0, 0, 0, /**/ 3, 2, 1, /**/ 5, 0, 0};
  const models::EndToEnd e = end_to_end(info, in, a, b);
  // Row 1: p = softmax(1,2,3), q = softmax(3,2,1); KL(p||q) = sum p (log p - log q).
  const double z = std::exp(1) + std::exp(2) + std::exp(3);
  const double p[3] = {std::exp(1) / z, std::exp(2) / z, std::exp(3) / z};
  const double kl1 = p[0] * (1 - 3) + p[1] * 0 + p[2] * (3 - 1);
  EXPECT_NEAR(e.kl[1], kl1, 1e-6);
  EXPECT_NEAR(e.kl[0], 0, 1e-12);
  EXPECT_NEAR(e.mean_kl, kl1 / 3, 1e-6);
  EXPECT_NEAR(e.top1_agreement, 2.0 / 3.0, 1e-12);
  // Perplexity: position 0 predicts id 1 (uniform: log 3), position 1 predicts id 2.
  const double nll_a = std::log(3.0) + (std::log(z) - 3);
  const double nll_b = std::log(3.0) + (std::log(z) - 1);
  EXPECT_NEAR(e.ppl_dense, std::exp(nll_a / 2), 1e-9);
  EXPECT_NEAR(e.ppl_variant, std::exp(nll_b / 2), 1e-9);
  models::ModelOutput c = a;
  c.n_tokens = 2;
  EXPECT_ATTN_ERROR(end_to_end(info, in, a, c), ErrorCode::InvalidArgument, "differ");
}

// Two runs' next-token logits over n positions and v tokens, with random ids: the dense run's
// normal (sigma 3), the variant's each plus perturb(position, rng), from one generator.
struct LogitsPair {
  models::ModelInput in;
  models::ModelOutput a, b;
};
LogitsPair logits_pair(int n, int v, uint32_t seed,
                       const std::function<float(size_t, std::mt19937&)>& perturb) {
  LogitsPair x;
  x.a.n_tokens = x.b.n_tokens = n;
  x.a.n_logits = x.b.n_logits = v;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (int t = 0; t < n; ++t) x.in.ids.push_back(int32_t(rng() % v));
  for (size_t i = 0; i < size_t(n) * v; ++i) {
    x.a.logits.push_back(g(rng));
    x.b.logits.push_back(x.a.logits.back() + perturb(i / v, rng));
  }
  return x;
}

// A vocabulary of GPT-2's size and logits of a trained model's spread: every per-token KL and the
// perplexities agree with a plain double-precision evaluation of the definitions.
TEST(ArchSubstitution, EndToEndMatchesDoublePrecisionOnALargeVocabulary) {
  models::ModelInfo info;
  info.causal = true;
  const int n = 23, v = 50257;
  std::normal_distribution<float> noise(0.0f, 0.2f);
  // Tokens 0-2 identical (KL 0); the others perturbed, more with t.
  LogitsPair x = logits_pair(n, v, 5, [&](size_t t, std::mt19937& rng) {
    return t < 3 ? 0.0f : noise(rng) * float(t) / n;
  });
  const models::ModelInput& in = x.in;
  const models::ModelOutput &a = x.a, &b = x.b;
  const models::EndToEnd e = end_to_end(info, in, a, b);
  double nll_a = 0, nll_b = 0;
  for (int t = 0; t < n; ++t) {
    const float* x = a.logits.data() + size_t(t) * v;
    const float* y = b.logits.data() + size_t(t) * v;
    double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0;
    for (int i = 0; i < v; ++i) mx = std::max(mx, double(x[i])), my = std::max(my, double(y[i]));
    for (int i = 0; i < v; ++i) sx += std::exp(x[i] - mx), sy += std::exp(y[i] - my);
    const double lx = mx + std::log(sx), ly = my + std::log(sy);
    double kl = 0;
    for (int i = 0; i < v; ++i) kl += std::exp(x[i] - lx) * ((x[i] - lx) - (y[i] - ly));
    if (t < 3)
      EXPECT_EQ(e.kl[size_t(t)], 0.0f) << t;
    else
      EXPECT_NEAR(e.kl[size_t(t)], kl, 1e-6 * kl + 1e-12) << t;
    if (t + 1 < n) nll_a += lx - x[in.ids[size_t(t) + 1]], nll_b += ly - y[in.ids[size_t(t) + 1]];
  }
  EXPECT_NEAR(e.ppl_dense, std::exp(nll_a / (n - 1)), 1e-9 * std::exp(nll_a / (n - 1)));
  EXPECT_NEAR(e.ppl_variant, std::exp(nll_b / (n - 1)), 1e-9 * std::exp(nll_b / (n - 1)));
  // One output against itself (the dense row of a report) takes a shortcut with the same values.
  const models::EndToEnd self = end_to_end(info, in, a, a);
  for (int t = 0; t < n; ++t) EXPECT_EQ(self.kl[size_t(t)], 0.0f);
  EXPECT_EQ(self.top1_agreement, 1.0);
  EXPECT_EQ(self.ppl_dense, e.ppl_dense);
  EXPECT_EQ(self.ppl_variant, e.ppl_dense);
}

// The same comparison fed the variant's logits in uneven blocks of vocabulary columns (as a
// substituted pass hands them over without keeping them): every value as from one block, and
// blocks out of order or missing are refused.
TEST(ArchSubstitution, EndToEndStreamTakesTheLogitsInBlocks) {
  models::ModelInfo info;
  info.causal = true;
  const int n = 17, v = 9001;
  std::normal_distribution<float> noise(0.0f, 0.5f);
  LogitsPair x = logits_pair(n, v, 8, [&](size_t, std::mt19937& rng) { return noise(rng); });
  // (references, not a structured binding: lambdas below capture them)
  models::ModelInput& in = x.in;
  models::ModelOutput &a = x.a, &b = x.b;
  // The variant's largest logit of a row late in the vocabulary, of another early: the running
  // maximum moves between blocks, or not.
  b.logits[size_t(3) * v + 8999] = 40.0f;
  b.logits[size_t(4) * v + 2] = 40.0f;
  const models::EndToEnd whole = end_to_end(info, in, a, b);
  models::ModelOutput kept = b;
  kept.logits.clear();
  models::EndToEndStream stream(info, in, a);
  // Blocks as the variant's layout stores them: [n, cols] row-major.
  auto add = [&](int c0, int cols) {
    std::vector<float> block(size_t(n) * cols);
    for (int t = 0; t < n; ++t)
      std::copy_n(b.logits.data() + size_t(t) * v + c0, cols, block.data() + size_t(t) * cols);
    stream.add(c0, cols, block.data());
  };
  add(0, 4096);
  EXPECT_ATTN_ERROR(add(0, 5), ErrorCode::InvalidArgument, "out of order");
  add(4096, 1);
  EXPECT_ATTN_ERROR(stream.finish(kept), ErrorCode::InvalidArgument, "4097 of 9001");
  add(4097, v - 4097);
  const models::EndToEnd e = stream.finish(kept);
  ASSERT_TRUE(e.has_tokens);
  for (int t = 0; t < n; ++t)
    EXPECT_NEAR(e.kl[size_t(t)], whole.kl[size_t(t)], 1e-6 * whole.kl[size_t(t)] + 1e-9) << t;
  EXPECT_NEAR(e.mean_kl, whole.mean_kl, 1e-9 * whole.mean_kl);
  EXPECT_EQ(e.top1_agreement, whole.top1_agreement);
  EXPECT_LT(e.top1_agreement, 1.0);  // rows 3 and 4 at least
  EXPECT_NEAR(e.ppl_dense, whole.ppl_dense, 1e-12 * whole.ppl_dense);
  EXPECT_NEAR(e.ppl_variant, whole.ppl_variant, 1e-9 * whole.ppl_variant);
  EXPECT_EQ(e.logits_max_abs, whole.logits_max_abs);
  EXPECT_NEAR(e.logits_rel, whole.logits_rel, 1e-12 * whole.logits_rel);
  EXPECT_NEAR(e.logits_max_abs, 40.0, 15.0);
}

// A causal LM's substituted pass with a logits sink hands over every logit once, in ascending
// blocks (the last one short), the same as the pass that keeps them, and keeps none itself.
TEST(ArchSubstitution, ALogitsSinkSeesEveryLogitOnce) {
  for (const char* name : {"gpt2", "llama"}) {
    auto model = models::load_model(golden_dir(name));
    models::ModelInput in;
    in.ids = golden_ints(name, "golden_ids");
    const Variant v = make_variant("window(size=2)");
    auto backend = make_backend("cpu");
    models::Substitution sub{&v, backend.get()};
    const models::ModelOutput kept = model->forward(in, {.substitution = &sub});
    const int n = kept.n_tokens, vocab = kept.n_logits;
    std::vector<float> seen(size_t(n) * vocab, NAN);
    int next = 0;
    models::ForwardOptions fo{.substitution = &sub};
    fo.logits_sink_columns = 7;
    int blocks = 0;
    fo.logits_sink = [&](int c0, int cols, const float* block) {
      EXPECT_EQ(c0, next) << name;
      EXPECT_TRUE(cols == 7 || c0 + cols == vocab) << name;
      next = c0 + cols;
      ++blocks;
      for (int t = 0; t < n; ++t)
        std::copy_n(block + size_t(t) * cols, cols, seen.data() + size_t(t) * vocab + c0);
    };
    const models::ModelOutput streamed = model->forward(in, fo);
    EXPECT_TRUE(streamed.logits.empty()) << name;
    EXPECT_EQ(streamed.n_logits, vocab) << name;
    EXPECT_EQ(next, vocab) << name;
    EXPECT_EQ(blocks, (vocab + 6) / 7) << name;
    EXPECT_LE(max_rel_error(seen, std::vector<float>(kept.logits.begin(), kept.logits.end())), 1e-6)
        << name;
  }
}

TEST(ArchSubstitution, VitClassAgreementAndClsCosine) {
  auto model = models::load_model(golden_dir("vit"));
  models::ModelInput in;
  const auto& pp = model->preprocessor();
  in.image = pp(models::load_image(golden_dir("vit") + "/image.png", pp.channels));
  const models::ModelOutput base = model->forward(in);
  const Variant v = make_variant("window(size=1)");  // bidirectional window: each patch alone
  auto backend = make_backend("cpu");
  models::Substitution sub{&v, backend.get()};
  const models::ModelOutput out = model->forward(in, {.substitution = &sub});
  const models::EndToEnd e = end_to_end(model->info(), in, base, out);
  EXPECT_TRUE(e.has_class);
  EXPECT_FALSE(e.has_tokens);
  EXPECT_GE(e.class_dense, 0);
  EXPECT_EQ(e.class_agree, e.class_dense == e.class_variant);
  EXPECT_LT(e.cls_cosine, 0.9999);
  EXPECT_GT(e.cls_cosine, -1.0);
}

TEST(ArchSubstitution, SequenceStateAcrossLayers) {
  // Sketch&Walk carries its walk across the layers of one pass.
  auto model = models::load_model(golden_dir("llama"));
  models::ModelInput in;
  in.ids = golden_ints("llama", "golden_ids");
  const Variant v = make_variant("sketch_walk(block=4,density=0.5)");
  auto backend = make_backend("cpu");
  models::Substitution sub{&v, backend.get()};
  const models::ModelOutput out = model->forward(in, {.substitution = &sub});
  ASSERT_EQ(out.substituted.size(), 2u);
  for (float x : out.logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(ArchSubstitution, BadLayerOrHead) {
  auto model = models::load_model(golden_dir("gpt2"));
  const Variant v = make_variant("dense");
  auto backend = make_backend("cpu");
  models::Substitution bad_layer{&v, backend.get(), {2}};
  EXPECT_ATTN_ERROR(model->forward(gpt2_input(), {.substitution = &bad_layer}),
                    ErrorCode::InvalidArgument, "layer 2", "2 layers");
  models::Substitution bad_head{&v, backend.get(), {}, {5}};
  EXPECT_ATTN_ERROR(model->forward(gpt2_input(), {.substitution = &bad_head}),
                    ErrorCode::InvalidArgument, "head 5", "2 heads");
}

}  // namespace
}  // namespace attn
