// The reverse pass of every architecture (models/arch/reverse.h) against PyTorch autograd on the
// golden checkpoints (tests/ref/make_grad_goldens.py, float64): dz/d input, dz/d each layer's
// pattern and residual stream, AttnLRP's input relevance, integrated gradients; and against the
// model's own forward pass by finite differences with a variant substituted. Tolerance 1e-4
// relative, as for the forward goldens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "arch_test_util.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/image.h"
#include "models/arch/model.h"
#include "models/arch/reverse.h"
#include "models/arch/substitution.h"

namespace attn {
namespace {

using test::golden;
using test::golden_dir;
using test::golden_ints;
using test::max_rel_error;

constexpr double kTol = 1e-4;

nlohmann::json target_json(const std::string& name) {
  std::ifstream f(golden_dir(name) + "/grad_target.json");
  return nlohmann::json::parse(f);
}

void expect_close(const std::string& model, const std::string& what, std::span<const float> got,
                  const models::NpyArray& want, double tol = kTol) {
  ASSERT_EQ(got.size(), want.to_f32().size()) << model << " " << what;
  const double err = max_rel_error(got, want.to_f32());
  std::printf("[reverse] %-6s %-18s max rel error %.3g\n", model.c_str(), what.c_str(), err);
  EXPECT_LE(err, tol) << model << " " << what;
}

struct Case {
  std::unique_ptr<models::Model> model;
  models::ModelInput in;
  models::ReverseTarget target;
  nlohmann::json meta;
};

Case load_case(const std::string& name) {
  Case c;
  c.model = models::load_model(golden_dir(name));
  c.meta = target_json(name);
  if (c.model->info().vision) {
    const models::NpyArray px = golden(name, "golden_pixels");
    c.in.image.channels = int(px.shape[0]);
    c.in.image.height = int(px.shape[1]);
    c.in.image.width = int(px.shape[2]);
    c.in.image.data = px.to_f32();
  } else {
    c.in.ids = golden_ints(name, "golden_ids");
    if (name == "bert") c.in.token_types = golden_ints(name, "golden_token_types");
    c.target.position = c.meta["position"];
  }
  c.target.id = c.meta["id"];
  c.target.foil = c.meta["foil"];
  return c;
}

std::vector<float> times(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] * b[i];
  return r;
}

void check_reverse(const std::string& name) {
  Case c = load_case(name);
  models::ReverseOptions o;
  o.keep_resid = true;
  o.keep_heads = true;
  const models::Reverse r = c.model->reverse(c.in, c.target, o);
  EXPECT_NEAR(r.z, double(c.meta["z"]), 1e-4 * std::max(1.0, std::abs(double(c.meta["z"]))));
  expect_close(name, "dz/d input", r.input_grad, golden(name, "grad_input"));
  const int L = c.model->info().n_layers;
  for (int l = 0; l < L; ++l) {
    const std::string f = "grad_pattern_" + std::to_string(l);
    if (!std::filesystem::exists(golden_dir(name) + "/" + f + ".npy")) continue;
    expect_close(name, "dz/dA " + std::to_string(l), r.pattern_grad[size_t(l)], golden(name, f));
    expect_close(name, "dz/d resid " + std::to_string(l), r.resid_grad[size_t(l)],
                 golden(name, "grad_resid_" + std::to_string(l)));
  }
  // Head outputs and their gradients are kept per layer: dz/d head out . head out sums to the
  // attention sublayer's first-order share, finite for every head.
  for (int l = 0; l < L; ++l) {
    ASSERT_EQ(r.head_out[size_t(l)].size(), r.head_out_grad[size_t(l)].size());
    for (float v : r.head_out_grad[size_t(l)]) ASSERT_TRUE(std::isfinite(v));
  }

  models::ReverseOptions lo;
  lo.rule = models::Rule::Lrp;
  const models::Reverse lrp = c.model->reverse(c.in, c.target, lo);
  EXPECT_NEAR(lrp.z, r.z, 1e-6 * std::max(1.0, std::abs(r.z)));  // same forward
  const std::vector<float> rel = times(lrp.input, lrp.input_grad);
  expect_close(name, "AttnLRP relevance", rel, golden(name, "lrp_input"));
  double sum = 0;
  for (float v : rel) sum += v;
  EXPECT_NEAR(sum, double(c.meta["lrp_sum"]), 1e-4 * std::max(1.0, std::abs(sum)));
}

TEST(ArchReverse, Gpt2AgainstAutograd) {
  check_reverse("gpt2");
}
TEST(ArchReverse, LlamaGqaRopeAgainstAutograd) {
  check_reverse("llama");
}
TEST(ArchReverse, Qwen2AgainstAutograd) {
  check_reverse("qwen2");
}
TEST(ArchReverse, BertMaskedLmAgainstAutograd) {
  check_reverse("bert");
}
TEST(ArchReverse, VitAgainstAutograd) {
  check_reverse("vit");
}
TEST(ArchReverse, DeitDistilledAgainstAutograd) {
  check_reverse("deit");
}

// Integrated gradients from the zero baseline, 64 midpoint steps, as the golden script computes
// them: (x - 0) * mean_k dz/dx at x (k + 0.5) / 64; their sum is z(x) - z(0) (completeness) where
// the steps resolve the path (`complete`).
void check_ig(const std::string& name, bool complete = true) {
  Case c = load_case(name);
  const models::Reverse r = c.model->reverse(c.in, c.target, {});
  const std::vector<float>& x = r.input;
  std::vector<double> mean(x.size(), 0.0);
  const int steps = 64;
  for (int k = 0; k < steps; ++k) {
    std::vector<float> xk(x.size());
    for (size_t i = 0; i < x.size(); ++i) xk[i] = float(x[i] * ((k + 0.5) / steps));
    models::ModelInput in = c.in;
    if (c.model->info().vision)
      in.image.data = xk;
    else
      in.embeddings = xk;
    const models::Reverse rk = c.model->reverse(in, c.target, {});
    for (size_t i = 0; i < x.size(); ++i) mean[i] += rk.input_grad[i] / steps;
  }
  std::vector<float> ig(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ig[i] = float(x[i] * mean[i]);
    sum += ig[i];
  }
  expect_close(name, "integrated grads", ig, golden(name, "ig_input"));
  EXPECT_NEAR(sum, double(c.meta["ig_sum"]), 1e-4 * std::max(1.0, std::abs(sum)));
  // Completeness within 1% of z(x) - z(baseline).
  const double delta = r.z - double(c.meta["z_baseline"]);
  if (complete) {
    EXPECT_NEAR(sum, delta, 0.01 * std::abs(delta));
  } else {  // the float64 reference misses it by as much: the path, not the pass
    EXPECT_GT(std::abs(sum - delta), 0.5 * std::abs(delta));
  }
}

TEST(ArchReverse, IntegratedGradientsGpt2) {
  check_ig("gpt2");
}
TEST(ArchReverse, IntegratedGradientsVit) {
  check_ig("vit");
}
// Llama's RMSNorm with no position embedding added makes z(alpha x) nearly flat in alpha except
// right at 0 (z climbs from z(0) to most of z(x) by alpha ~ 1e-5): 64 midpoint steps miss that
// step in PyTorch's float64 reference as here, and the values still agree.
TEST(ArchReverse, IntegratedGradientsLlamaMatchTheReferenceWhereTheStepsMissThePath) {
  check_ig("llama", false);
}

// With a variant substituted the reverse pass differentiates the variant's forward pass: a
// directional derivative of z by central differences of the model's own (f32) forward.
void check_variant_gradient(const std::string& name, const std::string& spec) {
  Case c = load_case(name);
  const Variant v = make_variant(spec);
  std::unique_ptr<Backend> be = make_backend("cpu");
  models::Substitution sub;
  sub.variant = &v;
  sub.backend = be.get();
  models::ReverseOptions o;
  o.substitution = &sub;
  const models::Reverse r = c.model->reverse(c.in, c.target, o);
  ASSERT_FALSE(r.output.substituted.empty()) << "the variant ran";
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> dir(r.input.size());
  for (float& d : dir) d = nd(rng);
  double analytic = 0;
  for (size_t i = 0; i < dir.size(); ++i) analytic += double(dir[i]) * r.input_grad[i];
  auto z_at = [&](double h) {
    std::vector<float> x = r.input;
    for (size_t i = 0; i < x.size(); ++i) x[i] += float(h * dir[i]);
    models::ModelInput in = c.in;
    if (c.model->info().vision)
      in.image.data = x;
    else
      in.embeddings = x;
    models::ReverseTarget t{r.position, r.id, r.foil};
    return c.model->reverse(in, t, {.substitution = &sub, .keep_patterns = false}).z;
  };
  const double h = 1e-3;
  const double numeric = (z_at(h) - z_at(-h)) / (2 * h);
  std::printf("[reverse] %-6s %-18s analytic %.6f numeric %.6f\n", name.c_str(), spec.c_str(),
              analytic, numeric);
  EXPECT_NEAR(analytic, numeric, 2e-3 * std::max(1.0, std::abs(numeric)));
  // The pattern the gradient saw is the variant's: zero outside its kept set.
  bool zero_seen = false;
  for (float p : r.pattern.back()) zero_seen |= (p == 0.0f);
  EXPECT_TRUE(zero_seen);
}

TEST(ArchReverse, WindowVariantGradientMatchesFiniteDifferencesGpt2) {
  check_variant_gradient("gpt2", "window(size=3)");
}
TEST(ArchReverse, TopkVariantGradientMatchesFiniteDifferencesLlama) {
  check_variant_gradient("llama", "topk(k=2)");
}
TEST(ArchReverse, WindowVariantGradientMatchesFiniteDifferencesVit) {
  check_variant_gradient("vit", "window(size=4)");
}

TEST(ArchReverse, BadTargetsAreRefusedWithAClearMessage) {
  Case c = load_case("gpt2");
  const int N = int(c.in.ids.size());
  auto refuses = [&](models::ReverseTarget t, const std::string& words) {
    try {
      c.model->reverse(c.in, t, {});
      ADD_FAILURE() << "accepted a bad target: " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refuses({N, 1, -1}, "outside the input's");
  refuses({0, c.model->info().vocab, -1}, "outside [0,");
  refuses({0, 3, 3}, "foil is the target");
  refuses({0, 3, c.model->info().vocab + 5}, "foil token id");
  Case v = load_case("vit");
  models::ReverseTarget t;
  t.id = 5;  // the golden checkpoint has 5 classes
  try {
    v.model->reverse(v.in, t, {});
    ADD_FAILURE() << "accepted class 5 of 5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("class 5"), std::string::npos) << e.what();
  }
}

TEST(ArchReverse, DefaultTargetIsTheTopPredictionAtTheLastPosition) {
  Case c = load_case("llama");
  const models::Reverse r = c.model->reverse(c.in, {}, {});
  const int N = int(c.in.ids.size()), V = r.output.n_logits;
  EXPECT_EQ(r.position, N - 1);
  const float* row = r.output.logits.data() + size_t(N - 1) * V;
  EXPECT_EQ(r.id, int(std::max_element(row, row + V) - row));
  EXPECT_DOUBLE_EQ(r.z, double(row[r.id]));
  EXPECT_GT(r.trace_bytes, 0u);
}

// ForwardOptions::logits_row keeps that row's logits alone (what repeated passes read), equal to
// the full pass's row (to rounding: one row is a matrix-vector product, the full pass a GEMM);
// ReverseOptions::target_logits_only gives the same target, z and the very same gradient.
TEST(ArchReverse, OneLogitsRowEqualsTheFullPassRow) {
  for (const char* name : {"gpt2", "llama"}) {
    Case c = load_case(name);
    const models::ModelOutput full = c.model->forward(c.in);
    models::ForwardOptions fo;
    fo.logits_row = 3;
    const models::ModelOutput one = c.model->forward(c.in, fo);
    const int V = full.n_logits;
    ASSERT_EQ(one.logits.size(), size_t(V)) << name;
    ASSERT_NE(one.logits_of(3), nullptr);
    EXPECT_EQ(one.logits_of(2), nullptr);
    for (int v = 0; v < V; ++v)
      EXPECT_NEAR(one.logits_of(3)[v], full.logits_of(3)[v],
                  1e-5 * (1 + std::abs(full.logits_of(3)[v])))
          << name;
    models::ReverseOptions o;
    const models::Reverse r0 = c.model->reverse(c.in, {3, -1, -1}, o);
    o.target_logits_only = true;
    const models::Reverse r1 = c.model->reverse(c.in, {3, -1, -1}, o);
    EXPECT_EQ(r1.id, r0.id);
    EXPECT_NEAR(r1.z, r0.z, 1e-5 * (1 + std::abs(r0.z)));
    // Near, not equal: one logits row runs its head product as a one-row GEMV, the full pass as
    // a GEMM, and with -march=native their sums round differently in the last bit.
    ASSERT_EQ(r1.input_grad.size(), r0.input_grad.size()) << name;
    for (size_t i = 0; i < r0.input_grad.size(); ++i)
      EXPECT_NEAR(r1.input_grad[i], r0.input_grad[i], 1e-5 * (1 + std::abs(r0.input_grad[i])))
          << name << " " << i;
  }
}

}  // namespace
}  // namespace attn
