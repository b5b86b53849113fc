// The workbench on the default models: values checked against a direct softmax of the captured
// Q/K, metrics against their definitions, and clear errors for bad sessions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "app/workbench/workbench.h"
#include "compute/error.h"
#include "models/arch/default_models.h"

namespace attn {
namespace {

bool have_model(const char* id) {
  try {
    resolve_model_dir(id);
    return true;
  } catch (const Error&) {
    return false;
  }
}

#define REQUIRE_MODEL(id) \
  if (!have_model(id))    \
  GTEST_SKIP() << id << " not found (set ATTNSCOPE_MODELS or add assets/models)"

Session text_session() {
  Session s;
  s.input.text =
      "Once upon a time there was a small cat. The cat sat on the mat, and the cat slept.";
  s.model.id = "default-text";
  s.variants = {"window(size=4)", "sinks_window(sinks=1,window=4)"};
  s.layer = 1;
  s.head = 2;
  return s;
}

TEST(Workbench, DenseHeatmapIsTheSoftmaxOfCapturedScores) {
  REQUIRE_MODEL("default-text");
  Workbench wb;
  wb.open(text_session());
  const HeatmapData h = wb.heatmap("dense", 1, 2);
  const Problem& p = wb.problem(1);
  ASSERT_EQ(h.rows, p.n_q);
  ASSERT_EQ(h.cols, p.n_k);
  ASSERT_EQ(int(h.k_labels.size()), p.n_k);
  const double scale = 1.0 / std::sqrt(double(p.d));
  for (int i = 0; i < p.n_q; i += 3) {
    std::vector<double> s(size_t(i) + 1);
    double mx = -1e300, z = 0;
    for (int j = 0; j <= i; ++j) {
      double dot = 0;
      for (int c = 0; c < p.d; ++c) dot += double(p.q_row(2, i)[c]) * p.k_row(2, j)[c];
      s[size_t(j)] = dot * scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    for (double& x : s) z += (x = std::exp(x - mx));
    for (int j = 0; j < p.n_k; ++j) {
      const double want = j <= i ? s[size_t(j)] / z : 0.0;
      EXPECT_NEAR(h.cells[size_t(i) * size_t(h.cols) + size_t(j)], want, 1e-5) << i << "," << j;
    }
  }
  EXPECT_EQ(h.rel_error, 0.0);
  EXPECT_NEAR(h.mass_recall, 1.0, 1e-6);
}

TEST(Workbench, WindowHeatmapDropsFarKeysAndCostsAccuracy) {
  REQUIRE_MODEL("default-text");
  Workbench wb;
  wb.open(text_session());
  const auto maps = wb.heatmaps();
  ASSERT_EQ(maps.size(), 3u);
  const HeatmapData& w = maps[1];
  EXPECT_EQ(w.spec, "window(size=4)");
  EXPECT_NE(w.caption.find("size=4"), std::string::npos) << w.caption;
  for (int i = 0; i < w.rows; ++i) {
    double sum = 0;
    for (int j = 0; j < w.cols; ++j) {
      const float v = w.cells[size_t(i) * size_t(w.cols) + size_t(j)];
      if (j > i || j <= i - 4) EXPECT_EQ(v, 0.0f) << i << "," << j;
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "row " << i;
  }
  EXPECT_GT(w.rel_error, 0.0);
  EXPECT_LT(w.mass_recall, 1.0);
  EXPECT_LT(w.density, 1.0);
}

TEST(Workbench, GridSinksTradeoffAndTokens) {
  REQUIRE_MODEL("default-text");
  Workbench wb;
  wb.open(text_session());
  const ModelInfo& info = wb.info();
  const HeadGrid g = wb.head_grid("window(size=4)");
  ASSERT_EQ(g.n_layers, info.n_layers);
  ASSERT_EQ(g.n_heads, info.n_heads);
  ASSERT_EQ(g.entropy.size(), size_t(info.n_layers * info.n_heads));
  for (size_t i = 0; i < g.entropy.size(); ++i) {
    EXPECT_GE(g.entropy[i], 0.0f);
    EXPECT_LE(g.entropy[i], std::log(4.0) + 1e-4);  // at most 4 keys per row
    EXPECT_GT(g.output_error[i], 0.0f);
    EXPECT_LE(g.mass_recall[i], 1.0f + 1e-6f);
    EXPECT_GE(g.sink_mass[i], 1.0f / float(wb.n_tokens()) - 1e-6f);  // masses sum to 1
    EXPECT_LE(g.sink_mass[i], 1.0f + 1e-6f);
  }
  const HeadGrid dg = wb.head_grid();
  for (float e : dg.output_error) EXPECT_EQ(e, 0.0f);

  const SinkData s = wb.sinks();
  ASSERT_EQ(s.received.size(), size_t(info.n_layers) * size_t(wb.n_tokens()));
  for (int l = 0; l < s.n_layers; ++l) {
    double total = 0;  // mean over queries of mass received, summed over keys, is 1
    for (int j = 0; j < s.n; ++j) total += s.received[size_t(l) * size_t(s.n) + size_t(j)];
    EXPECT_NEAR(total, 1.0, 1e-4);
  }

  const auto pts = wb.tradeoff();
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_NEAR(pts[0].next_token_kl, 0.0, 1e-6);
  EXPECT_NEAR(pts[0].top1_agreement, 1.0, 1e-12);
  EXPECT_GT(pts[1].next_token_kl, 1e-6);
  EXPECT_LT(pts[1].density, 1.0);
  EXPECT_GT(pts[1].rel_error, 0.0);

  const TokensData t = wb.tokens("dense", 1, 2, 5);
  double sum = 0;
  for (size_t j = 0; j < t.weight.size(); ++j) {
    if (j > 5) EXPECT_EQ(t.weight[j], 0.0f);
    sum += t.weight[j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(Workbench, BadSessionsAreNamed) {
  REQUIRE_MODEL("default-text");
  Workbench wb;
  Session s = text_session();
  s.layer = 40;
  try {
    wb.open(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 40"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(wb.is_open());
  s = text_session();
  s.variants = {"window(size=-3)"};
  EXPECT_THROW(wb.open(s), Error);
  s = text_session();
  s.input.kind = "image";
  s.input.image = "/no/such/image.png";
  EXPECT_THROW(wb.open(s), Error);
  wb.open(text_session());
  EXPECT_THROW(wb.image_attention("dense", 0, 0), Error);
  EXPECT_THROW(wb.heatmap("dense", 0, 99), Error);
}

TEST(Workbench, ImageClsAttentionCoversThePatches) {
  REQUIRE_MODEL("default-vision");
  const std::string img = resolve_model_dir("default-vision") + "/../images/coat_1.png";
  const std::string alt = std::string(ATTN_TEST_SOURCE_DIR) + "/assets/images/coat_1.png";
  Session s;
  s.model.id = "default-vision";
  s.input.kind = "image";
  s.input.image = std::filesystem::exists(alt) ? alt : img;
  if (!std::filesystem::exists(s.input.image)) GTEST_SKIP() << "no sample image";
  s.variants = {"window(size=8)"};
  Workbench wb;
  wb.open(s);
  const ImageAttention a = wb.image_attention("dense", 3, -1);
  EXPECT_EQ(a.grid_h * a.grid_w + 1, wb.n_tokens());
  double sum = 0;
  for (float x : a.cls) {
    EXPECT_GE(x, 0.0f);
    sum += x;
  }
  EXPECT_GT(sum, 0.0);
  EXPECT_LE(sum, 1.0 + 1e-5);  // the rest went to CLS itself
  EXPECT_FALSE(a.predicted.empty());
  EXPECT_EQ(a.image.width, 28);
}

}  // namespace
}  // namespace attn
