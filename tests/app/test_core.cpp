// The analysis core on the default models: values checked against a direct softmax of the
// captured Q/K, metrics against their definitions, and clear errors for bad sessions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/evaluate.h"
#include "app/core/analysis/interactive.h"
#include "app/core/analysis/views.h"
#include "app/core/export/data_export.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/session/labels.h"
#include "app/core/session/session.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "render/number_format.h"
#include "tests/app/model_available.h"

namespace attn::core {
namespace {

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

TEST(Core, DenseHeatmapIsTheSoftmaxOfCapturedScores) {
  REQUIRE_MODEL("default-text");
  const auto a = analyze(text_session(), "");
  const HeatmapData h = heatmap(*a, 0, 1, 2);
  const Problem& p = a->problem(1);
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

TEST(Core, WindowHeatmapDropsFarKeysAndCostsAccuracy) {
  REQUIRE_MODEL("default-text");
  const auto a = analyze(text_session(), "");
  const auto maps = heatmaps(*a);
  ASSERT_EQ(maps.size(), 3u);
  const HeatmapData& w = maps[1];
  EXPECT_EQ(w.spec, "window(size=4)");
  EXPECT_NE(w.caption.find("size=4"), std::string::npos) << w.caption;
  for (int i = 0; i < w.rows; ++i) {
    double sum = 0;
    for (int j = 0; j < w.cols; ++j) {
      const float v = w.cells[size_t(i) * size_t(w.cols) + size_t(j)];
      if (j > i || j <= i - 4) {
        EXPECT_EQ(v, 0.0f) << i << "," << j;
      }
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "row " << i;
  }
  EXPECT_GT(w.rel_error, 0.0);
  EXPECT_LT(w.mass_recall, 1.0);
  EXPECT_LT(w.density, 1.0);
}

TEST(Core, GridSinksTradeoffAndTokens) {
  REQUIRE_MODEL("default-text");
  const auto a = analyze(text_session(), "");
  const models::ModelInfo& info = *a->info;
  const HeadGrid g = head_grid(*a, a->panel_of("window(size=4)"));
  ASSERT_EQ(g.n_layers, info.n_layers);
  ASSERT_EQ(g.n_heads, info.n_heads);
  const auto& entropy = g.metric("entropy");
  const auto& output_error = g.metric("output_error");
  const auto& mass_recall = g.metric("mass_recall");
  const auto& sink_mass = g.metric("max_token_mass");
  ASSERT_EQ(entropy.size(), size_t(info.n_layers * info.n_heads));
  for (size_t i = 0; i < entropy.size(); ++i) {
    EXPECT_GE(entropy[i], 0.0f);
    EXPECT_LE(entropy[i], std::log(4.0) + 1e-4);  // at most 4 keys per row
    EXPECT_GT(output_error[i], 0.0f);
    EXPECT_LE(mass_recall[i], 1.0f + 1e-6f);
    EXPECT_GE(sink_mass[i], 1.0f / float(a->n_tokens()) - 1e-6f);  // masses sum to 1
    EXPECT_LE(sink_mass[i], 1.0f + 1e-6f);
  }
  const HeadGrid dg = head_grid(*a, 0);
  for (float e : dg.metric("output_error")) EXPECT_EQ(e, 0.0f);
  EXPECT_THROW(dg.metric("no_such_metric"), Error);

  const SinkData s = sinks(*a);
  ASSERT_EQ(s.received.size(), size_t(info.n_layers) * size_t(a->n_tokens()));
  for (int l = 0; l < s.n_layers; ++l) {
    double total = 0;  // mean over queries of mass received, summed over keys, is 1
    for (int j = 0; j < s.n; ++j) total += s.received[size_t(l) * size_t(s.n) + size_t(j)];
    EXPECT_NEAR(total, 1.0, 1e-4);
  }

  const auto pts = tradeoff(*a);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_NEAR(pts[0].next_token_kl, 0.0, 1e-6);
  EXPECT_NEAR(pts[0].top1_agreement, 1.0, 1e-12);
  EXPECT_GT(pts[1].next_token_kl, 1e-6);
  EXPECT_LT(pts[1].density, 1.0);
  EXPECT_GT(pts[1].rel_error, 0.0);

  // A sweep point of a panel's spec is the panel's own point.
  const TradeoffPoint again = evaluate(*a, "window(size=4)", true);
  EXPECT_NEAR(again.rel_error, pts[1].rel_error, 1e-12);
  EXPECT_NEAR(again.next_token_kl, pts[1].next_token_kl, 1e-12);
  EXPECT_NEAR(again.density, pts[1].density, 1e-12);

  const TokensData t = tokens(*a, 0, 1, 2, 5);
  double sum = 0;
  for (size_t j = 0; j < t.weight.size(); ++j) {
    if (j > 5) {
      EXPECT_EQ(t.weight[j], 0.0f);
    }
    sum += t.weight[j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(Core, BadSessionsAreNamed) {
  REQUIRE_MODEL("default-text");
  Session s = text_session();
  s.layer = 40;
  try {
    open(s, "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 40"), std::string::npos) << e.what();
  }
  s = text_session();
  s.variants = {"window(size=-3)"};
  EXPECT_THROW(open(s, ""), Error);
  s = text_session();
  s.backend = "no_such_backend";
  EXPECT_THROW(open(s, ""), Error);
  s = text_session();
  s.input.kind = "image";
  s.input.image = "/no/such/image.png";
  EXPECT_THROW(open(s, ""), Error);
  const auto a = analyze(text_session(), "");
  EXPECT_THROW(image_attention(*a, 0, 0, 0), Error);
  EXPECT_THROW(heatmap(*a, 0, 0, 99), Error);
  EXPECT_THROW(heatmap(*a, 7, 0, 0), Error);
  Session other = text_session();
  other.input.text = "another text";
  EXPECT_THROW(reselect(*a, other), Error);
  Session moved = text_session();
  moved.layer = 0;
  EXPECT_EQ(reselect(*a, moved)->layer(), 0);
}

TEST(Core, ImageClsAttentionCoversThePatches) {
  REQUIRE_MODEL("default-vision");
  const std::string img = models::resolve_model_dir("default-vision") + "/../images/coat_1.png";
  const std::string alt = std::string(ATTN_TEST_SOURCE_DIR) + "/assets/images/coat_1.png";
  Session s;
  s.model.id = "default-vision";
  s.input.kind = "image";
  s.input.image = std::filesystem::exists(alt) ? alt : img;
  if (!std::filesystem::exists(s.input.image)) GTEST_SKIP() << "no sample image";
  s.variants = {"window(size=8)"};
  const auto an = analyze(s, "");
  const ImageAttention a = image_attention(*an, 0, 3, -1);
  EXPECT_EQ(a.grid_h * a.grid_w + 1, an->n_tokens());
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

// The previous-token head metric against its definition, computed here from a direct softmax.
TEST(Core, PreviousTokenMetricMatchesItsDefinition) {
  REQUIRE_MODEL("default-text");
  const auto a = analyze(text_session(), "");
  const HeadGrid g = head_grid(*a, 0);
  const auto& prev = g.metric("prev_token");
  for (int l = 0; l < a->n_layers(); ++l) {
    const Problem& p = a->problem(l);
    const double scale = 1.0 / std::sqrt(double(p.d));
    for (int h = 0; h < p.n_heads; ++h) {
      double sum = 0;
      for (int i = 1; i < p.n_q; ++i) {
        double mx = -1e300, z = 0, prev_s = 0;
        std::vector<double> s(size_t(i) + 1);
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < p.d; ++c) dot += double(p.q_row(h, i)[c]) * p.k_row(h, j)[c];
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        for (double x : s) z += std::exp(x - mx);
        prev_s = std::exp(s[size_t(i) - 1] - mx) / z;
        sum += prev_s;
      }
      EXPECT_NEAR(prev[size_t(l * p.n_heads + h)], sum / (p.n_q - 1), 1e-5) << l << "," << h;
    }
  }
  // The default model's card: layer 0 head 3 is a previous-token head.
  EXPECT_GT(prev[3], 0.5);
  EXPECT_EQ(head_metric_index("prev_token"), 2);
  EXPECT_THROW(head_metric_index("nope"), Error);
}

// Staged results: views that need later stages say so instead of showing stale numbers.
TEST(Core, StagesAndCancellation) {
  REQUIRE_MODEL("default-text");
  const auto a = open(text_session(), "");
  EXPECT_TRUE(a->panels[0].ran());
  EXPECT_FALSE(a->variants_ran());
  EXPECT_THROW(heatmap(*a, 1, 0, 0), Error);
  EXPECT_THROW(add_metrics(*a), Error);
  const auto b = run_variants(*a);
  EXPECT_FALSE(a->variants_ran());  // stages work on copies
  EXPECT_TRUE(b->variants_ran());
  EXPECT_THROW(sinks(*b), Error);
  std::atomic<bool> cancel{true};
  Options o;
  o.cancel = &cancel;
  try {
    add_metrics(*b, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
  Options quick;
  quick.per_head_max_tokens = 4;  // long inputs: head values from the layer's rows
  const auto c = add_metrics(*b, quick);
  const HeadGrid g = head_grid(*c, 1);
  EXPECT_TRUE(std::isnan(g.metric("output_error")[0]));
  const auto full = add_metrics(*b);
  EXPECT_NEAR(g.metric("entropy")[5], head_grid(*full, 1).metric("entropy")[5], 1e-6);
  EXPECT_NEAR(g.metric("prev_token")[5], head_grid(*full, 1).metric("prev_token")[5], 1e-6);
}

// The dense reference is what the model's own forward pass ran: the same results as running
// dense again over the captured layers, bit for bit, with or without an ablation; a preview's
// one head is run apart and full_heads() brings every head back.
TEST(Core, TheReferenceIsTheForwardPassesOwnAttention) {
  REQUIRE_MODEL("default-text");
  for (const bool ablate : {false, true}) {
    Session s = text_session();
    if (ablate) s.ablation.heads = {"L0H1"};
    const auto a = open(s, "");
    ASSERT_TRUE(a->panels[0].ran());
    ASSERT_EQ(a->panels[0].results->size(), size_t(a->n_layers()));
    auto cpu = make_backend("cpu");
    const std::vector<Result> again =
        run_layers(*a->panels[0].variant, *a->problems, *cpu, RunOptions{});
    for (int l = 0; l < a->n_layers(); ++l) {
      const Result& got = a->panels[0].result(l);
      ASSERT_EQ(got.o.size(), again[size_t(l)].o.size());
      for (size_t i = 0; i < got.o.size(); ++i) ASSERT_EQ(got.o[i], again[size_t(l)].o[i]) << l;
      for (size_t i = 0; i < got.row_stat.size(); ++i)
        ASSERT_EQ(got.row_stat[i], again[size_t(l)].row_stat[i]) << l;
    }
    // The pass's logits are the model's with dense attention (another f32 kernel order).
    models::ForwardOptions fo;
    const auto iv = a->ablation;
    fo.intervention = iv.get();
    const models::ModelOutput plain = a->model->forward(a->input, fo);
    ASSERT_EQ(plain.logits.size(), a->dense_out().logits.size());
    for (size_t i = 0; i < plain.logits.size(); ++i)
      ASSERT_NEAR(plain.logits[i], a->dense_out().logits[i], 1e-4) << i;
    EXPECT_TRUE(a->dense_out().substituted.empty());
  }
  Options o;
  o.preview_tokens = 8;
  const auto pv = open(text_session(), "", o);
  ASSERT_TRUE(pv->preview());
  EXPECT_EQ(pv->panels[0].result(0).o.size(), size_t(pv->n_tokens()) * pv->problem(0).d);
  const auto full = full_heads(*pv, o);
  EXPECT_EQ(full->panels[0].result(0).o.size(),
            size_t(full->n_heads()) * full->n_tokens() * full->problem(0).d);
}

// Raw tensors and synthetic problems go through the same core.
TEST(Core, SyntheticAndTensorInputs) {
  Session s;
  s.input.kind = "synthetic";
  s.input.synthetic_tokens = 300;
  s.variants = {"window(size=32)", "block_topk(block=16,k=2)"};
  const auto a = analyze(s, "");
  EXPECT_EQ(a->n_tokens(), 300);
  EXPECT_EQ(a->n_layers(), 1);
  EXPECT_FALSE(a->model);
  const auto pts = tradeoff(*a);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_NEAR(pts[0].rel_error, 0.0, 1e-12);
  EXPECT_GT(pts[1].rel_error, 0.0);
  EXPECT_TRUE(std::isnan(pts[1].next_token_kl));
  s.input.synthetic_tokens = 1;
  EXPECT_THROW(open(s, ""), Error);
  s.input.kind = "tensors";
  s.input.tensors = "/no/such/folder";
  EXPECT_THROW(open(s, ""), Error);
}

// Panel headers once put the layer's kept and computed fractions beside the head's own error and
// recall ("kept 0.856 · out err 0 · recall 1.000" for a head of density 1). Every number of a
// header is now the shown head's own (heatmap_header: the figure's panel title and `analyze
// --json` print the same) or says it is the layer's.
TEST(Core, PanelHeadersGiveTheHeadsOwnNumbersOrSayLayer) {
  REQUIRE_MODEL("default-text");
  Session s = text_session();
  s.variants = {"top_p(block=4,p=0.7)", "window(size=4)"};  // keeps a different share per head
  s.view.show_dense = true;
  const auto a = analyze(s, "");
  const render::Document d = document(*a);
  ASSERT_EQ(shown_panels(*a).size(), a->panels.size());
  ASSERT_EQ(d.heat.panels.size(), a->panels.size());
  for (size_t v = 0; v < a->panels.size(); ++v) {
    const std::string& stats = d.heat.panels[v].stats;
    const HeatmapData h = heatmap(*a, int(v), a->layer(), a->head());
    const Metrics& own = a->panels[v].heads[size_t(a->layer())][size_t(a->head())];
    EXPECT_EQ(h.density, own.density);
    for (const std::string& seg : heatmap_header(h))
      EXPECT_NE(stats.find(seg), std::string::npos) << "'" << seg << "' not in: " << stats;
    EXPECT_NE(stats.find("density " + render::format_number(own.density, 3)), std::string::npos)
        << stats;
    EXPECT_EQ(stats.find("kept "), std::string::npos) << "unlabelled layer figure: " << stats;
    // Whatever is the layer's says so: it sits in the segment that starts "layer: ".
    const std::string sep = " \u00b7 ";
    for (const char* layer_wide : {"computed ", " ms"}) {
      const size_t at = stats.find(layer_wide);
      if (at == std::string::npos) continue;
      const size_t from = stats.rfind(sep, at);
      const std::string part = stats.substr(from == std::string::npos ? 0 : from + sep.size());
      EXPECT_EQ(part.rfind("layer: ", 0), 0u) << layer_wide << " in: " << stats;
    }
    EXPECT_NE(d.heat.panels[v].stats_tip.find("this head's own"), std::string::npos);
  }
  // The per-head densities differ from the layer's here, which the old header printed.
  bool differs = false;
  const Panel& topk = a->panels[1];
  for (int h = 0; h < a->n_heads(); ++h)
    differs = differs || topk.heads[size_t(a->layer())][size_t(h)].density !=
                             topk.result(a->layer()).stats.density;
  EXPECT_TRUE(differs);
}

// "Sink" meant the most-attended token's mass (grid), the first token's (the `sink` role) and a
// layer-mean count in the panel (the sink head L1H2 read "0 sinks"). Now: max-token mass and
// first-token mass are two named metrics, and a sink is a key receiving more than 0.3 of a
// head's attention (kSinkRule), so a head has sinks exactly when its max-token mass exceeds 0.3.
TEST(Core, SinksFollowOneRuleAndTheOldMetricNameStillReads) {
  REQUIRE_MODEL("default-text");
  Session s;
  s.model.id = "default-text";
  s.input.text =
      "The keeper of the lighthouse wrote every evening in a small book. The sea was calm, and "
      "the light turned all night over the rocks.";
  s.layer = 1;
  s.head = 2;
  const auto a = analyze(s, "");
  const HeatmapData h = heatmap(*a, 0, 1, 2);
  EXPECT_FALSE(h.sinks.empty()) << "the sink head L1H2 has no sink";
  const std::string stats = document(*a).heat.panels[0].stats;
  EXPECT_EQ(stats.find(" 0 sinks"), std::string::npos) << stats;
  EXPECT_NE(stats.find(std::to_string(h.sinks.size()) + (h.sinks.size() == 1 ? " sink" : " sinks")),
            std::string::npos)
      << stats;
  const HeadGrid g = head_grid(*a, 0);
  const std::vector<float>& max_mass = g.metric("max_token_mass");
  for (int l = 0; l < g.n_layers; ++l)
    for (int hh = 0; hh < g.n_heads; ++hh) {
      const HeatmapData m = heatmap(*a, 0, l, hh, 8);
      EXPECT_EQ(!m.sinks.empty(), max_mass[size_t(l * g.n_heads + hh)] > kSinkThreshold)
          << "L" << l << "H" << hh;
    }
  // The deprecated name reads as the new one: metric lookups, saved sessions, JSON keys.
  EXPECT_EQ(head_metric_index("sink_mass"), head_metric_index("max_token_mass"));
  EXPECT_EQ(&g.metric("sink_mass"), &g.metric("max_token_mass"));
  Session saved = s;
  saved.view.grid_metric = "sink_mass";
  EXPECT_EQ(session_from_json(session_to_json(saved)).view.grid_metric, "max_token_mass");
  const nlohmann::json jg = to_json(g);
  EXPECT_EQ(jg["sink_mass"], jg["max_token_mass"]);
  // Definitions for hover and --help.
  const std::string help = head_metric_help();
  EXPECT_NE(help.find("max_token_mass: "), std::string::npos);
  EXPECT_NE(help.find("sink_mass: deprecated name of max_token_mass"), std::string::npos);
  EXPECT_NE(std::string(kSinkRule).find("0.3"), std::string::npos);
}

}  // namespace
}  // namespace attn::core

namespace attn {
namespace {

// Captions name a variant with its parameters, leaving out one that another makes unused.
TEST(Core, CaptionsLeaveOutUnusedParameters) {
  EXPECT_EQ(core::variant_caption("dense"), "Dense softmax");
  EXPECT_EQ(core::variant_caption("window(size=8)"), "Sliding window [size=8]");
  const std::string tree = core::variant_caption("kmeans(size=256)");
  EXPECT_EQ(tree.find("clusters"), std::string::npos) << tree;
  EXPECT_NE(tree.find("size=256"), std::string::npos) << tree;
  const std::string flat = core::variant_caption("kmeans(clusters=16)");
  EXPECT_NE(flat.find("clusters=16"), std::string::npos) << flat;
  // The canonical spec keeps every parameter: sessions and tables stay comparable.
  EXPECT_NE(make_variant("kmeans(size=256)").spec().find("clusters=8"), std::string::npos);
}

}  // namespace
}  // namespace attn
