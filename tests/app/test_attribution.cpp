// The attribution core (app/core/attribution): rollout, flow and Chefer's rule against direct
// implementations on hand-made graphs; each method on the golden checkpoints against what it is
// defined as, recomputed here from the models' own passes (occlusion by re-running, integrated
// gradients' completeness, AttnLRP's relevance, gradient x input); faithfulness curves and rank
// agreement against values worked out by hand; bad requests refused with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "app/core/attribution/attention_graph.h"
#include "app/core/attribution/attribution.h"
#include "app/core/attribution/attribution_dataset.h"
#include "app/core/attribution/faithfulness.h"
#include "app/core/attribution/qk_embedding.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/model.h"
#include "models/formats/npy.h"

namespace attn {
namespace {

using core::Matrix;

std::string golden_dir(const std::string& name) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/tests/ref/goldens/" + name;
}

models::ModelInput golden_input(const std::string& name) {
  models::ModelInput in;
  if (name == "vit" || name == "deit") {
    const models::NpyArray px = models::read_npy(golden_dir(name) + "/golden_pixels.npy");
    in.image.channels = int(px.shape[0]);
    in.image.height = int(px.shape[1]);
    in.image.width = int(px.shape[2]);
    in.image.data = px.to_f32();
    return in;
  }
  const models::NpyArray ids = models::read_npy(golden_dir(name) + "/golden_ids.npy");
  for (float v : ids.to_f32()) in.ids.push_back(int32_t(v));
  return in;
}

// A random row-stochastic, causal matrix.
Matrix random_attention(int n, uint64_t seed, bool causal = true) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Matrix m(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j <= (causal ? i : n - 1); ++j) s += (m[size_t(i) * n + j] = u(rng));
    for (int j = 0; j < n; ++j) m[size_t(i) * n + j] /= s;
  }
  return m;
}

Matrix multiply(const Matrix& a, const Matrix& b, int n) {
  Matrix c(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k)
      for (int j = 0; j < n; ++j)
        c[size_t(i) * n + j] += a[size_t(i) * n + k] * b[size_t(k) * n + j];
  return c;
}

TEST(AttentionGraph, RolloutIsTheProductOfResidualAdjustedMeans) {
  const int n = 7, L = 4;
  std::vector<Matrix> adj;
  for (int l = 0; l < L; ++l) adj.push_back(core::with_residual(random_attention(n, 10 + l), n));
  // Rows of 0.5 A + 0.5 I still sum to 1; the diagonal gained 0.5.
  const Matrix a0 = random_attention(n, 10);
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(adj[0][size_t(i) * n + i], 0.5 * a0[size_t(i) * n + i] + 0.5, 1e-12);
    EXPECT_NEAR(std::accumulate(adj[0].begin() + i * n, adj[0].begin() + (i + 1) * n, 0.0), 1.0,
                1e-12);
  }
  Matrix r = adj[0];
  for (int l = 1; l < L; ++l) r = multiply(adj[size_t(l)], r, n);
  const std::vector<double> row = core::rollout_row(adj, n, 5);
  const std::vector<float> maps = core::rollout_maps(adj, n);
  for (int j = 0; j < n; ++j) {
    EXPECT_NEAR(row[size_t(j)], r[size_t(5) * n + j], 1e-12);
    EXPECT_NEAR(maps[(size_t(L - 1) * n + 5) * n + j], r[size_t(5) * n + j], 1e-6);
  }
  // Causal: nothing flows from a later token.
  EXPECT_EQ(row[6], 0.0);
}

// Max flow by brute force over every cut of a tiny layered graph (min cut = max flow).
double min_cut(const std::vector<Matrix>& a, int layers, int n, int source, int sink) {
  const int inner = (layers - 1) * n;  // the nodes of layers 1 .. layers-1
  double best = INFINITY;
  for (uint32_t mask = 0; mask < (1u << inner); ++mask) {
    auto on_source_side = [&](int l, int i) {
      if (l == 0) return i == source;
      if (l == layers) return false;
      return bool(mask >> ((l - 1) * n + i) & 1u);
    };
    double cut = 0;
    for (int l = 0; l < layers; ++l)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const bool to_sink_node = l + 1 < layers || i == sink;
          if (on_source_side(l, j) && !on_source_side(l + 1, i) && to_sink_node)
            cut += a[size_t(l)][size_t(i) * n + j];
        }
    best = std::min(best, cut);
  }
  return best;
}

TEST(AttentionGraph, FlowIsTheMinimumCutOfTheLayeredGraph) {
  const int n = 4, L = 3;
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<Matrix> adj;
    for (int l = 0; l < L; ++l)
      adj.push_back(core::with_residual(random_attention(n, seed * 10 + l, seed != 2), n));
    for (int sink = 0; sink < n; ++sink) {
      const std::vector<double> f = core::flow_row(adj, L, n, sink);
      for (int j = 0; j < n; ++j)
        EXPECT_NEAR(f[size_t(j)], min_cut(adj, L, n, j, sink), 1e-9)
            << "seed " << seed << " sink " << sink << " source " << j;
    }
    const std::vector<float> maps = core::flow_maps(adj, n);
    const std::vector<double> f1 = core::flow_row(adj, 1, n, 2);
    for (int j = 0; j < n; ++j) EXPECT_NEAR(maps[size_t(2) * n + j], f1[size_t(j)], 1e-6);
  }
}

TEST(AttentionGraph, FlowOnAHandMadeGraph) {
  // Two tokens, one layer: capacities are the matrix's entries; flow from j into i is A[i][j].
  std::vector<Matrix> a = {{1.0, 0.0, 0.25, 0.75}};
  const std::vector<double> f = core::flow_row(a, 1, 2, 1);
  EXPECT_NEAR(f[0], 0.25, 1e-12);
  EXPECT_NEAR(f[1], 0.75, 1e-12);
  // Two layers in series: a bottleneck of 0.1 in the first layer bounds the flow from token 0.
  a.push_back({0.5, 0.5, 0.5, 0.5});
  a[0] = {0.9, 0.1, 0.1, 0.9};  // from token 0: 0.9 into node 0, 0.1 into node 1
  const std::vector<double> g = core::flow_row(a, 2, 2, 1);
  EXPECT_NEAR(g[0], 0.5 + 0.1, 1e-12);  // 0.5 via node 0 (cap 0.9), 0.1 via node 1 (cap 0.1)
}

TEST(AttentionGraph, CheferRowIsTheProductOfIdentityPlusWeightedMeans) {
  const int n = 5;
  std::vector<Matrix> w = {random_attention(n, 4), random_attention(n, 5), random_attention(n, 6)};
  Matrix r(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) r[size_t(i) * n + i] = 1;
  for (const Matrix& x : w) {
    const Matrix xr = multiply(x, r, n);
    for (size_t e = 0; e < r.size(); ++e) r[e] += xr[e];
  }
  const std::vector<double> row = core::chefer_row(w, n, 4);
  for (int j = 0; j < n; ++j) EXPECT_NEAR(row[size_t(j)], r[size_t(4) * n + j], 1e-12);
  // Gradient weighting keeps the positive part of grad * A, averaged over heads.
  const std::vector<float> A = {0.5f, 0.5f, 0.2f, 0.8f, 0.5f, 0.5f, 0.6f, 0.4f};
  const std::vector<float> G = {2.0f, -1.0f, 1.0f, 1.0f, -4.0f, 3.0f, 0.0f, 1.0f};
  const Matrix m = core::gradient_weighted_mean(A.data(), G.data(), 2, 2, true);
  EXPECT_NEAR(m[0], 0.5 * (1.0 + 0.0), 1e-7);
  EXPECT_NEAR(m[1], 0.5 * (0.0 + 1.5), 1e-7);
  const Matrix s = core::gradient_weighted_mean(A.data(), G.data(), 2, 2, false);
  EXPECT_NEAR(s[0], 0.5 * (1.0 - 2.0), 1e-7);
}

TEST(RankAgreement, KnownValues) {
  const std::vector<double> x = {1, 2, 3, 4, 5}, rev = {5, 4, 3, 2, 1};
  EXPECT_NEAR(core::kendall_tau_b(x, x), 1.0, 1e-12);
  EXPECT_NEAR(core::kendall_tau_b(x, rev), -1.0, 1e-12);
  EXPECT_NEAR(core::spearman_rho(x, rev), -1.0, 1e-12);
  // One swapped pair of five: 9 concordant, 1 discordant -> tau 0.8; d^2 = 2 -> rho 0.9.
  const std::vector<double> y = {2, 1, 3, 4, 5};
  EXPECT_NEAR(core::kendall_tau_b(x, y), 0.8, 1e-12);
  EXPECT_NEAR(core::spearman_rho(x, y), 0.9, 1e-12);
  // Ties: tau-b of (1,1,2) against (1,2,3): 2 concordant, 1 tie in x -> 2 / sqrt(2*3).
  EXPECT_NEAR(core::kendall_tau_b({1, 1, 2}, {1, 2, 3}), 2 / std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(core::top_k_overlap(x, y, 2), 1.0, 1e-12);
  EXPECT_NEAR(core::top_k_overlap(x, rev, 2), 0.0, 1e-12);
  EXPECT_NEAR(core::top_k_overlap({5, 4, 0, 0}, {5, 0, 4, 0}, 2), 0.5, 1e-12);
}

struct Fixture {
  std::unique_ptr<models::Model> model;
  models::ModelInput in;
};

Fixture load(const std::string& name) {
  return {models::load_model(golden_dir(name)), golden_input(name)};
}

core::AttributionRequest request(std::vector<std::string> methods, int position = -1) {
  core::AttributionRequest q;
  q.methods = std::move(methods);
  q.target.position = position;
  return q;
}

TEST(Attribution, EveryMethodRunsOnEveryArchitecture) {
  for (const std::string name : {"gpt2", "llama", "bert", "vit", "deit"}) {
    Fixture f = load(name);
    core::AttributionRequest q = request(core::parse_attribution_methods("all"));
    q.ig_steps = 8;
    const core::Attribution a = core::attribute(*f.model, f.in, q);
    ASSERT_EQ(a.methods.size(), core::attribution_methods().size()) << name;
    for (const core::MethodScores& m : a.methods) {
      ASSERT_EQ(int(m.scores.size()), a.units()) << name << " " << m.method;
      for (float v : m.scores) ASSERT_TRUE(std::isfinite(v)) << name << " " << m.method;
    }
    if (a.image) {
      EXPECT_EQ(a.units(), a.grid_h * a.grid_w) << name;
      EXPECT_EQ(a.first_unit, a.n_tokens - a.units()) << name;
    }
  }
}

TEST(Attribution, AttentionMethodsReadTheTargetRowOfThePatterns) {
  Fixture f = load("gpt2");
  const int P = 6;
  core::AttributionRequest q = request({"attention", "rollout"}, P);
  const core::Attribution a = core::attribute(*f.model, f.in, q);
  // Direct: the captured patterns of a plain forward.
  models::Capture cap(models::HookSelection::parse("blocks.*.attn.pattern"));
  f.model->forward(f.in, {.capture = &cap});
  const int N = a.n_tokens, H = a.n_heads, L = a.n_layers;
  std::vector<Matrix> adj;
  for (int l = 0; l < L; ++l)
    adj.push_back(
        core::with_residual(core::head_mean(cap.layers[size_t(l)].pattern.data(), H, N), N));
  const std::vector<double> roll = core::rollout_row(adj, N, P);
  for (int j = 0; j < N; ++j) {
    double mean = 0;
    for (int h = 0; h < H; ++h)
      mean += cap.layers[size_t(L - 1)].pattern[(size_t(h) * N + P) * N + j];
    EXPECT_NEAR(a.methods[0].scores[size_t(j)], mean / H, 1e-6);
    EXPECT_NEAR(a.methods[1].scores[size_t(j)], roll[size_t(j)], 1e-6);
  }
  // Causal: only 0..P can matter and are ranked; later tokens score 0.
  EXPECT_EQ(int(a.ranked.size()), P + 1);
  for (int j = P + 1; j < N; ++j) EXPECT_EQ(a.methods[1].scores[size_t(j)], 0.0f);
  ASSERT_EQ(a.methods[0].maps.size(), size_t(L) * N * N);
  ASSERT_EQ(a.methods[0].heads.size(), size_t(L) * H * N);
}

TEST(Attribution, OcclusionIsTheDropOfZWhenTheUnitIsReplaced) {
  for (const std::string name : {"llama", "vit"}) {
    Fixture f = load(name);
    core::AttributionRequest q = request({"occlusion"});
    q.baseline = core::parse_baseline(name == "vit" ? "mean" : "zero");
    const core::Attribution a = core::attribute(*f.model, f.in, q);
    for (int u : {a.ranked.front(), a.ranked.back()}) {
      models::ModelInput in = f.in;
      if (a.image) {
        // Patch u's pixels set to each channel's mean, by hand.
        const int p = in.image.height / a.grid_h, r = u / a.grid_w, c = u % a.grid_w;
        const size_t plane = size_t(in.image.height) * in.image.width;
        for (int ch = 0; ch < in.image.channels; ++ch) {
          const double mean =
              std::accumulate(f.in.image.data.begin() + ptrdiff_t(ch * plane),
                              f.in.image.data.begin() + ptrdiff_t((ch + 1) * plane), 0.0) /
              double(plane);
          for (int y = r * p; y < (r + 1) * p; ++y)
            for (int x = c * p; x < (c + 1) * p; ++x)
              in.image.data[ch * plane + size_t(y) * in.image.width + x] = float(mean);
        }
      } else {
        in.embeddings = a.input_rows;
        const size_t C = a.input_rows.size() / size_t(a.n_tokens);
        std::fill_n(in.embeddings.begin() + ptrdiff_t(u * C), C, 0.0f);
      }
      const auto out = f.model->forward(in);
      const double z = core::target_value(out, a).first;
      EXPECT_NEAR(a.methods[0].scores[size_t(u)], a.z - z, 1e-4 * std::max(1.0, std::abs(a.z)))
          << name << " unit " << u;
    }
  }
}

TEST(Attribution, OcclusionByDeletionRemovesTheToken) {
  Fixture f = load("gpt2");
  core::AttributionRequest q = request({"occlusion"}, 5);
  q.occlusion_delete = true;
  const core::Attribution a = core::attribute(*f.model, f.in, q);
  models::ModelInput in = f.in;
  in.ids.erase(in.ids.begin() + 2);
  const auto out = f.model->forward(in);
  const float* row = out.logits.data() + size_t(4) * out.n_logits;  // the target moved up one
  EXPECT_NEAR(a.methods[0].scores[2], a.z - row[a.id], 1e-4);
}

TEST(Attribution, IntegratedGradientsAreComplete) {
  for (const std::string name : {"gpt2", "vit"}) {
    Fixture f = load(name);
    core::AttributionRequest q = request({"integrated_gradients"});
    q.ig_steps = 64;
    q.baseline = core::parse_baseline(name == "vit" ? "mean" : "zero");
    const core::Attribution a = core::attribute(*f.model, f.in, q);
    const core::MethodScores& m = a.methods[0];
    double s = 0;
    for (float v : m.scores) s += v;
    EXPECT_NEAR(s, m.z_difference, 0.01 * std::abs(m.z_difference)) << name;
    EXPECT_EQ(m.note, "") << name;
  }
}

// Where the steps miss the path (Llama from the zero baseline: RMSNorm makes z jump right at the
// zero input), the method says so beside its scores instead of passing them off as complete.
TEST(Attribution, IntegratedGradientsSayWhenTheyAreIncomplete) {
  Fixture f = load("llama");
  core::AttributionRequest q = request({"integrated_gradients"});
  q.ig_steps = 32;
  const core::MethodScores zero = core::attribute(*f.model, f.in, q).methods[0];
  double s = 0;
  for (float v : zero.scores) s += v;
  ASSERT_GT(std::abs(s - zero.z_difference), 0.05 * std::abs(zero.z_difference));
  EXPECT_NE(zero.note.find("incomplete"), std::string::npos) << zero.note;
  q.baseline = core::parse_baseline("token:7");
  EXPECT_EQ(core::attribute(*f.model, f.in, q).methods[0].note, "");
}

// bf16 matmuls (AttributionRequest::matmul): every pass rounds its GEMM operands to bf16, so z
// moves by about bf16's unit roundoff u = 2^-8; integrated gradients stay complete against their
// own z values (to 1%, plus u |z| for the rounding in z itself) and close to the f32 scores. On
// AMX CPUs the steps also reuse packed weights (cpu::GemmPackScope), which must change no value:
// a second run gives the same scores. Llama starts from a token (RMSNorm makes the model jump at
// the zero input, so a zero baseline is not complete in f32 either).
TEST(Attribution, Bf16MatmulsStayCloseAndComplete) {
  for (const std::string name : {"gpt2", "llama", "vit"}) {
    Fixture f = load(name);
    core::AttributionRequest q = request({"integrated_gradients"});
    q.ig_steps = 64;
    q.baseline = core::parse_baseline(name == "vit"     ? "mean"
                                      : name == "llama" ? "token:7"
                                                        : "zero");
    const core::Attribution a32 = core::attribute(*f.model, f.in, q);
    q.matmul = models::Matmul::Bf16;
    const core::Attribution a16 = core::attribute(*f.model, f.in, q);
    EXPECT_EQ(a32.matmul, "f32");
    EXPECT_EQ(a16.matmul, "bf16");
    EXPECT_NE(a16.z, a32.z) << name;  // rounded products
    EXPECT_NEAR(a16.z, a32.z, 0.03 * std::abs(a32.z) + 0.03) << name;
    const core::MethodScores& m = a16.methods[0];
    double s = 0, d2 = 0, r2 = 0;
    for (size_t u = 0; u < m.scores.size(); ++u) {
      const double b = a32.methods[0].scores[u];
      s += m.scores[u];
      d2 += (m.scores[u] - b) * (m.scores[u] - b);
      r2 += b * b;
    }
    EXPECT_NEAR(s, m.z_difference, 0.01 * std::abs(m.z_difference) + std::abs(a16.z) / 256) << name;
    EXPECT_LT(std::sqrt(d2 / r2), 0.1) << name;
    EXPECT_EQ(core::attribute(*f.model, f.in, q).methods[0].scores, m.scores) << name;
  }
}

TEST(Attribution, IntegratedGradientsFromATokenBaseline) {
  Fixture f = load("gpt2");
  core::AttributionRequest q = request({"integrated_gradients"});
  q.ig_steps = 64;
  q.baseline = core::parse_baseline("token:7");
  const core::Attribution a = core::attribute(*f.model, f.in, q);
  models::ModelInput base = f.in;
  std::fill(base.ids.begin(), base.ids.end(), 7);
  const double z0 = core::target_value(f.model->forward(base), a).first;
  EXPECT_NEAR(a.methods[0].z_difference, a.z - z0, 1e-4);
  double s = 0;
  for (float v : a.methods[0].scores) s += v;
  EXPECT_NEAR(s, a.z - z0, 0.01 * std::abs(a.z - z0));
}

TEST(Attribution, GradientTimesInputAndLrpSumTheReversePassPerUnit) {
  Fixture f = load("llama");
  const core::Attribution a =
      core::attribute(*f.model, f.in, request({"grad_input", "attnlrp"}, 4));
  const models::Reverse g = f.model->reverse(f.in, {4, a.id, -1}, {});
  models::ReverseOptions lo;
  lo.rule = models::Rule::Lrp;
  const models::Reverse r = f.model->reverse(f.in, {4, a.id, -1}, lo);
  const size_t C = g.input.size() / size_t(a.n_tokens);
  double total = 0;
  for (int t = 0; t < a.n_tokens; ++t) {
    double gi = 0, lrp = 0;
    for (size_t j = 0; j < C; ++j) {
      gi += double(g.input[t * C + j]) * g.input_grad[t * C + j];
      lrp += double(r.input[t * C + j]) * r.input_grad[t * C + j];
    }
    total += lrp;
    EXPECT_NEAR(a.methods[0].scores[size_t(t)], gi, 1e-5);
    EXPECT_NEAR(a.methods[1].scores[size_t(t)], lrp, 1e-5);
  }
  EXPECT_NEAR(a.methods[1].relevance_sum, total, 1e-5);
}

TEST(Attribution, VariantsRunWhereTheMethodAllowsAndAreRefusedWhereNot) {
  Fixture f = load("gpt2");
  const Variant window = make_variant("window(size=2)");
  const Variant sigmoid = make_variant("sigmoid");
  std::unique_ptr<Backend> be = make_backend("cpu");
  models::Substitution sub;
  sub.variant = &window;
  sub.backend = be.get();
  core::AttributionRequest q = request({"attention", "chefer", "occlusion"});
  q.substitution = &sub;
  const core::Attribution w = core::attribute(*f.model, f.in, q);
  EXPECT_EQ(w.variant, window.spec());
  // The window keeps the last 2 keys: attention from the target row is 0 before them.
  const int P = w.position;
  for (int j = 0; j < P - 1; ++j) EXPECT_EQ(w.methods[0].scores[size_t(j)], 0.0f) << j;
  const core::Attribution d = core::attribute(*f.model, f.in, request({"attention"}));
  EXPECT_NE(d.methods[0].scores[0], 0.0f);
  // A sigmoid normaliser: attention methods run, gradient methods are refused by name.
  models::Substitution sg;
  sg.variant = &sigmoid;
  sg.backend = be.get();
  q.substitution = &sg;
  q.methods = {"rollout", "occlusion"};
  EXPECT_NO_THROW(core::attribute(*f.model, f.in, q));
  q.methods = {"grad_input"};
  try {
    core::attribute(*f.model, f.in, q);
    ADD_FAILURE() << "gradient through a sigmoid normaliser accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("sigmoid"), std::string::npos) << e.what();
  }
}

TEST(Attribution, BadRequestsAreRefused) {
  Fixture f = load("gpt2");
  auto refuses = [&](core::AttributionRequest q, const std::string& words) {
    try {
      core::attribute(*f.model, f.in, q);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refuses(request({}), "no attribution method");
  refuses(request({"attention"}, 99), "outside the input's");
  EXPECT_THROW(core::parse_attribution_methods("rollout,saliency"), Error);
  EXPECT_THROW(core::parse_attribution_methods("rollout,rollout"), Error);
  EXPECT_THROW(core::parse_baseline("median"), Error);
  core::AttributionRequest q = request({"occlusion"});
  q.baseline = core::parse_baseline("mean");
  refuses(q, "mean is for images");
  Fixture v = load("vit");
  q.occlusion_delete = true;
  q.baseline = {};
  try {
    core::attribute(*v.model, v.in, q);
    ADD_FAILURE() << "deletion of patches accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deletion is for text"), std::string::npos);
  }
}

TEST(Faithfulness, CurvesReRunTheModelAlongTheOrder) {
  Fixture f = load("gpt2");
  core::AttributionRequest q = request({"occlusion", "attention"}, 7);
  const core::Attribution a = core::attribute(*f.model, f.in, q);
  core::FaithfulnessOptions o;
  o.steps = 4;
  o.random_orders = 2;
  const core::Faithfulness fa = core::faithfulness(*f.model, f.in, a, q, o);
  ASSERT_EQ(fa.curves.size(), 3u);
  EXPECT_EQ(fa.curves.back().order, "random");
  const core::Curve& c = fa.curves[0];
  ASSERT_EQ(c.z_deletion.size(), 5u);
  // Step 0 deletes nothing: z of the input; the last step deletes every ranked unit, which is
  // where insertion starts.
  EXPECT_NEAR(c.z_deletion[0], a.z, 1e-4);
  EXPECT_NEAR(c.z_insertion[4], a.z, 1e-4);
  EXPECT_NEAR(c.z_deletion[4], c.z_insertion[0], 1e-4);
  // Step 2 of 4 over 8 ranked units: the top 4 units by occlusion score removed.
  const std::vector<int> order =
      core::order_by_score(a.methods[0].scores, a.ranked, core::tie_seed(a));
  const std::vector<int> top(order.begin(), order.begin() + 4);
  const double z2 = core::target_value(f.model->forward(core::occluded(f.in, a, top)), a).first;
  EXPECT_NEAR(c.z_deletion[2], z2, 1e-4);
  double aopc = 0;
  for (float z : c.z_deletion) aopc += (c.z_deletion[0] - z) / 5.0;
  EXPECT_NEAR(c.aopc_z, aopc, 1e-6);
}

TEST(Faithfulness, OrderByScoreBreaksTiesByUnitAndPutsNaNLast) {
  const std::vector<float> s = {0.5f, NAN, 0.9f, 0.5f};
  EXPECT_EQ(core::order_by_score(s, {0, 1, 2, 3}), (std::vector<int>{2, 0, 3, 1}));
  // Seeded: ties in a drawn order, the rest still by score.
  const std::vector<float> flat(64, 1.0f);
  std::vector<int> all(64);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<int> drawn = core::order_by_score(flat, all, 7);
  EXPECT_NE(drawn, all);
  EXPECT_EQ(drawn, core::order_by_score(flat, all, 7));
  EXPECT_EQ(core::order_by_score(s, {0, 1, 2, 3}, 7).front(), 2);
  EXPECT_EQ(core::order_by_score(s, {0, 1, 2, 3}, 7).back(), 1);
  // Each attribution draws its own tie order.
  core::Attribution a, b;
  a.z = 1.5;
  b.z = 2.5;
  EXPECT_NE(core::tie_seed(a), core::tie_seed(b));
  EXPECT_EQ(core::tie_seed(a), core::tie_seed(a));
  EXPECT_NE(core::order_by_score(flat, all, core::tie_seed(a)),
            core::order_by_score(flat, all, core::tie_seed(b)));
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(QkEmbedding, PcaFindsTheAxesOfLargestVariance) {
  // Points on a line along (1, 2, 0) plus a smaller spread along (0, 0, 1): the first axis is the
  // line (up to sign), the second the small spread.
  std::vector<float> x;
  // s is +-0.1 in the pattern + - - + over each 4 steps of t: uncorrelated with t, mean 0.
  const int n = 48;
  auto s_of = [](int i) { return (i % 4 == 0 || i % 4 == 3) ? 0.1f : -0.1f; };
  for (int i = 0; i < n; ++i) {
    const float t = float(i - n / 2);
    x.insert(x.end(), {t, 2 * t, s_of(i)});
  }
  const std::vector<float> y = core::pca_2d(x, n, 3);
  for (int i = 0; i < n; ++i) {
    const float t = float(i - n / 2) + 0.5f, s = s_of(i);  // centred
    EXPECT_NEAR(std::abs(y[size_t(i) * 2]), std::abs(t) * std::sqrt(5.0f), 1e-3);
    EXPECT_NEAR(std::abs(y[size_t(i) * 2 + 1]), std::abs(s), 1e-3);
  }
}

TEST(QkEmbedding, TsneKeepsClustersApartAndIsSeeded) {
  // Three tight clusters far apart in 8-D: every point's nearest neighbour in the map is of its
  // own cluster.
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0, 0.1f);
  const int per = 20, n = 3 * per, dim = 8;
  std::vector<float> x;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per; ++i)
      for (int k = 0; k < dim; ++k) x.push_back((k == c ? 10.0f : 0.0f) + nd(rng));
  const std::vector<float> y = core::tsne_2d(x, n, dim, 10, 500, 7);
  for (int i = 0; i < n; ++i) {
    int best = -1;
    double bd = INFINITY;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const double a = y[size_t(i) * 2] - y[size_t(j) * 2],
                   b = y[size_t(i) * 2 + 1] - y[size_t(j) * 2 + 1];
      if (a * a + b * b < bd) bd = a * a + b * b, best = j;
    }
    EXPECT_EQ(best / per, i / per) << i;
  }
  EXPECT_EQ(y, core::tsne_2d(x, n, dim, 10, 500, 7));
  EXPECT_THROW(core::tsne_2d(x, n, dim, 100, 10, 7), Error);  // perplexity above the points
}

TEST(QkEmbedding, OneHeadOverTwoInputs) {
  const auto model = models::load_model(golden_dir("llama"));
  models::ModelInput a = golden_input("llama"), b = a;
  b.ids.resize(5);
  core::QkOptions o;
  o.layer = 1;
  o.head = 3;
  const core::QkEmbedding e = core::qk_embedding(*model, {a, b}, o);
  const int N = int(a.ids.size());
  ASSERT_EQ(e.points.size(), size_t(2 * N + 2 * 5));
  EXPECT_EQ(e.kv_head, 1);  // 4 query heads over 2 KV heads
  EXPECT_FALSE(e.points[0].key);
  EXPECT_TRUE(e.points[size_t(N)].key);
  EXPECT_EQ(e.points[size_t(2 * N)].input, 1);
  ASSERT_EQ(e.patterns.size(), 2u);
  int n = 0;
  const std::vector<float>* row = e.row(2 * N + 3, &n);  // the second input's query 3
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(n, 5);
  double s = 0;
  for (int j = 0; j < n; ++j) s += (*row)[size_t(3) * n + j];
  EXPECT_NEAR(s, 1.0, 1e-5);
  EXPECT_EQ(e.row(N, &n), nullptr);  // a key has no row
  EXPECT_TRUE(std::isfinite(e.rank_fidelity));
  EXPECT_GT(e.scale, 0);
  o.method = "umap";
  EXPECT_THROW(core::qk_embedding(*model, {a}, o), Error);
  o.method = "pca";
  o.head = 4;
  EXPECT_THROW(core::qk_embedding(*model, {a}, o), Error);
  o.head = 0;
  o.max_points = 10;
  EXPECT_THROW(core::qk_embedding(*model, {a}, o), Error);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(AttributionDataset, SummariesAndShardsAgree) {
  const auto model = models::load_model(golden_dir("gpt2"));
  models::ModelInput base = golden_input("gpt2");
  std::vector<core::AttributionRecordSummary> records;
  core::AttributionRequest q = request({"attention", "rollout", "occlusion"});
  for (int cut = 6; cut <= int(base.ids.size()); ++cut) {
    models::ModelInput in = base;
    in.ids.resize(size_t(cut));
    const core::Attribution a = core::attribute(*model, in, q);
    core::FaithfulnessOptions fo;
    fo.random_orders = 1;
    const core::Faithfulness f = core::faithfulness(*model, in, a, q, fo);
    core::AttributionRecordSummary r = core::summarize_record(a, core::rank_agreement(a), &f);
    r.index = cut;
    r.source = "cut " + std::to_string(cut);
    records.push_back(r);
  }
  const core::AttributionDatasetSummary s = core::summarize_records(records, 200);
  ASSERT_EQ(s.pairs.size(), 3u);
  ASSERT_EQ(s.orders.size(), 4u);  // three methods and random
  double mean = 0;
  for (const auto& r : records) mean += r.agreement[0].spearman / double(records.size());
  EXPECT_NEAR(s.pairs[0].spearman.mean, mean, 1e-12);
  EXPECT_LE(s.pairs[0].spearman.lo, mean);
  EXPECT_GE(s.pairs[0].spearman.hi, mean);
  EXPECT_EQ(s.pairs[0].spearman.n, int64_t(records.size()));
  // Through JSON (what shards write) and back: the same summary.
  const auto back = core::records_from_json(core::records_json(records), "test");
  const core::AttributionDatasetSummary t = core::summarize_records(back, 200);
  EXPECT_DOUBLE_EQ(t.pairs[2].kendall_tau.mean, s.pairs[2].kendall_tau.mean);
  EXPECT_DOUBLE_EQ(t.orders[1].aopc_p.lo, s.orders[1].aopc_p.lo);
  // Records of other methods cannot be joined.
  records.back().agreement.pop_back();
  EXPECT_THROW(core::summarize_records(records), Error);
  EXPECT_THROW(core::records_from_json(nlohmann::json::object(), "x"), Error);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(QkEmbedding, StopsWhenCancelled) {
  const auto model = models::load_model(golden_dir("gpt2"));
  std::atomic<bool> cancel{true};
  core::QkOptions o;
  o.cancel = &cancel;
  try {
    core::qk_embedding(*model, {golden_input("gpt2")}, o);
    ADD_FAILURE() << "a cancelled embedding ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
  std::vector<float> x(60 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7);
  EXPECT_THROW(core::tsne_2d(x, 60, 4, 5, 100, 1, &cancel), Error);
}

}  // namespace
}  // namespace attn
