// Hooks: selection syntax, what a forward pass captures (shapes, consistency between scores,
// pattern, out and the captured Q/K/V), captured layers as compute-core problems, residual
// statistics and massive-activation detection.
#include <cmath>

#include "arch_test_util.h"
#include "compute/backend.h"
#include "compute/metrics.h"
#include "compute/registry.h"
#include "models/arch/model.h"
#include "test_util.h"

namespace attn {
namespace {

using test::golden_dir;
using test::golden_ints;

TEST(ArchHooks, GlobMatching) {
  EXPECT_TRUE(models::glob_match("blocks.*.attn.pattern", "blocks.11.attn.pattern"));
  EXPECT_TRUE(models::glob_match("*", "blocks.0.resid"));
  EXPECT_TRUE(models::glob_match("blocks.1*.attn.*", "blocks.12.attn.q"));
  EXPECT_FALSE(models::glob_match("blocks.1.attn.*", "blocks.12.attn.q"));
  EXPECT_FALSE(models::glob_match("blocks.*.attn.pattern", "blocks.1.resid"));
  EXPECT_TRUE(models::glob_match("b*s.*.r*d", "blocks.3.resid"));
}

TEST(ArchHooks, SelectionParsesAndRejects) {
  models::HookSelection s = models::HookSelection::parse("blocks.*.attn.pattern, blocks.3.resid");
  EXPECT_TRUE(s.wants(7, "attn.pattern"));
  EXPECT_TRUE(s.wants(3, "resid"));
  EXPECT_FALSE(s.wants(4, "resid"));
  EXPECT_FALSE(s.wants(0, "attn.q"));
  EXPECT_TRUE(models::HookSelection::all().wants(5, "attn.v"));
  EXPECT_ATTN_ERROR(models::HookSelection::parse("blocks.0.attn.patern"),
                    ErrorCode::InvalidArgument, "blocks.0.attn.patern", "matches no hook");
  EXPECT_ATTN_ERROR(models::HookSelection::parse("blocks.0.resid,,"), ErrorCode::InvalidArgument,
                    "empty entry");
  EXPECT_ATTN_ERROR(models::HookSelection::parse("blocks.40.resid").check(12),
                    ErrorCode::InvalidArgument, "blocks.40.resid", "12 layers");
}

// Every hook of every layer, checked against each other and against the compute core.
void check_all_hooks(const std::string& name) {
  auto model = models::load_model(golden_dir(name));
  const models::ModelInfo& info = model->info();
  models::ModelInput in;
  in.ids = golden_ints(name, "golden_ids");
  models::Capture cap(models::HookSelection::all());
  models::ModelOutput out = model->forward(in, {.capture = &cap});
  const int n = out.n_tokens;
  ASSERT_EQ(int(cap.layers.size()), info.n_layers);

  const std::vector<models::HookTensor> tensors = cap.tensors();
  ASSERT_EQ(tensors.size(), size_t(7 * info.n_layers));
  EXPECT_EQ(tensors[0].name, "blocks.0.attn.q");
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{info.n_heads, n, info.head_dim}));
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{info.n_kv_heads, n, info.head_dim}));
  EXPECT_EQ(tensors[4].name, "blocks.0.attn.pattern");
  EXPECT_EQ(tensors[4].shape, (std::vector<int64_t>{info.n_heads, n, n}));
  EXPECT_EQ(tensors[6].name, "blocks.0.resid");
  EXPECT_EQ(tensors[6].shape, (std::vector<int64_t>{n, info.hidden}));

  auto dense = make_variant("dense");
  auto reference = make_backend("reference");
  for (int l = 0; l < info.n_layers; ++l) {
    const models::LayerCapture& c = cap.layers[size_t(l)];
    const Problem* p = cap.problem(l);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->n_kv_heads, info.n_kv_heads);
    EXPECT_EQ(p->causal, info.causal);
    EXPECT_EQ(p->labels.size(), 0u);  // no labels were given
    for (int h = 0; h < info.n_heads; ++h) {
      for (int i = 0; i < n; ++i) {
        // softmax(scores) == pattern; hidden entries -inf / 0; rows sum to 1.
        const float* s = &c.scores[(size_t(h) * n + i) * n];
        const float* pr = &c.pattern[(size_t(h) * n + i) * n];
        double mx = -INFINITY, z = 0, sum = 0;
        for (int j = 0; j < n; ++j) mx = std::max(mx, double(s[j]));
        for (int j = 0; j < n; ++j) z += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        for (int j = 0; j < n; ++j) {
          const bool hidden = info.causal && j > i;
          EXPECT_EQ(std::isinf(s[j]), hidden);
          const double want = hidden ? 0.0 : std::exp(s[j] - mx) / z;
          EXPECT_NEAR(pr[j], want, 1e-6);
          sum += pr[j];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
    // The captured problem, run by the compute core's reference, gives the captured outputs.
    Result r = run(dense, *p, *reference);
    EXPECT_LE(relative_error(std::vector<float>(c.out.begin(), c.out.end()), r.o), 1e-5)
        << name << " layer " << l;
    // Residual stats: norms per token.
    models::ResidualStats rs = models::residual_stats(c.resid, n, info.hidden);
    for (int t = 0; t < n; ++t) {
      double sq = 0;
      for (int j = 0; j < info.hidden; ++j)
        sq += double(c.resid[size_t(t) * info.hidden + j]) * c.resid[size_t(t) * info.hidden + j];
      EXPECT_NEAR(rs.token_norm[size_t(t)], std::sqrt(sq), 1e-4 * std::sqrt(sq));
    }
  }
}

TEST(ArchHooks, Gpt2AllHooksConsistent) {
  check_all_hooks("gpt2");
}
TEST(ArchHooks, LlamaGqaHooksConsistent) {
  check_all_hooks("llama");
}
TEST(ArchHooks, BertBidirectionalHooksConsistent) {
  check_all_hooks("bert");
}

TEST(ArchHooks, LabelsReachTheProblem) {
  auto model = models::load_model(golden_dir("gpt2"));
  models::ModelInput in;
  in.ids = {1, 2, 3};
  in.labels = {"a", "b", "c"};
  models::Capture cap(models::HookSelection::parse("blocks.1.attn.k"));
  model->forward(in, {.capture = &cap});
  ASSERT_NE(cap.problem(1), nullptr);
  EXPECT_EQ(cap.problem(0), nullptr);  // not wanted
  EXPECT_EQ(cap.problem(1)->labels, in.labels);
  EXPECT_EQ(cap.tensors().size(), 1u);
  EXPECT_EQ(cap.tensors()[0].name, "blocks.1.attn.k");
}

TEST(ArchHooks, VitPatchLabels) {
  auto model = models::load_model(golden_dir("deit"));
  models::ModelInput in;
  in.image = {3, 16, 16, std::vector<float>(3 * 16 * 16, 0.1f)};
  models::Capture cap(models::HookSelection::parse("blocks.0.attn.q"));
  model->forward(in, {.capture = &cap});
  const auto& labels = cap.problem(0)->labels;
  ASSERT_EQ(labels.size(), 18u);
  EXPECT_EQ(labels[0], "[CLS]");
  EXPECT_EQ(labels[1], "[DIST]");
  EXPECT_EQ(labels[2], "p0,0");
  EXPECT_EQ(labels[17], "p3,3");
  EXPECT_FALSE(cap.problem(0)->causal);
}

TEST(ArchHooks, MassiveActivationsFound) {
  const int n = 64, hidden = 48;
  std::vector<float> r(size_t(n) * hidden);
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.05f * float(int(i % 7) - 3);
  r[size_t(0) * hidden + 5] = -900.0f;  // the first token's massive dimension
  r[size_t(9) * hidden + 5] = 450.0f;
  r[size_t(3) * hidden + 7] = 50.0f;  // large, but below the absolute threshold
  models::ResidualStats s = models::residual_stats(r, n, hidden);
  ASSERT_EQ(s.massive.size(), 2u);
  EXPECT_EQ(s.massive[0].token, 0);
  EXPECT_EQ(s.massive[0].dim, 5);
  EXPECT_FLOAT_EQ(s.massive[0].value, -900.0f);
  EXPECT_EQ(s.massive[1].token, 9);
  EXPECT_GT(s.massive[1].ratio_to_median, 1000.0f);
  EXPECT_FLOAT_EQ(s.dim_absmax[5], 900.0f);
  EXPECT_FLOAT_EQ(s.dim_absmax[7], 50.0f);
  EXPECT_NEAR(s.token_norm[0], 900.0, 0.1);
  EXPECT_ATTN_ERROR(models::residual_stats(r, n + 1, hidden), ErrorCode::InvalidArgument,
                    "residual");
}

}  // namespace
}  // namespace attn
