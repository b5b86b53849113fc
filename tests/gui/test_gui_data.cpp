// What the GUI asks of the analysis core (no display needed): pooled tiles, kept fractions,
// dropped mass, hover values and cell colours, checked against brute-force computations on an
// odd-sized problem; the Attribution view's document against the attribution core's own run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/attribution_doc.h"
#include "app/core/analysis/interactive.h"
#include "compute/error.h"
#include "compute/layout.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "render/cell_colors.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::gui {
namespace {

using core::Analysis;

core::Session synthetic_session(int n, std::vector<std::string> variants, int head = 1) {
  core::Session s;
  s.input.kind = "synthetic";
  s.input.synthetic_tokens = n;
  s.variants = std::move(variants);
  s.head = head;
  return s;
}

std::shared_ptr<const Analysis> synthetic(int n, std::vector<std::string> variants, int head = 1) {
  core::Options o;
  o.end_to_end = false;
  return core::analyze(synthetic_session(n, std::move(variants), head), "", o);
}

// Cell boundaries of tile_probabilities: cell y covers [q0 + y*Q/h, q0 + (y+1)*Q/h).
int lo(int a, int span, int cells, int c) {
  return a + int(int64_t(c) * span / cells);
}

TEST(GuiData, TilesMatchBruteForce) {
  auto a = synthetic(301, {"block_topk(block=16,k=3)", "top_p(block=16,p=0.8)", "window(size=37)"});
  ASSERT_EQ(a->panels.size(), 4u);
  const int q0 = 13, q1 = 290, k0 = 5, k1 = 280, W = 50, H = 40, head = 1;
  const auto tiles = core::tiles(*a, q0, q1, k0, k1, W, H, nullptr);
  ASSERT_EQ(tiles.size(), 4u);
  const Problem& p = a->problem(0);
  const Variant dense = make_variant("dense");
  const Result& dres = a->panels[0].result(0);
  TileRequest req{head, q0, q1, k0, k1, W, H, Pool::Max};
  const Tile dt = tile_probabilities(dense, p, dres, req);
  std::vector<double> drow;
  for (size_t v = 0; v < tiles.size(); ++v) {
    const render::PanelTile& t = tiles[v];
    ASSERT_EQ(t.w, W);
    ASSERT_EQ(t.h, H);
    const Result& r = a->panels[v].result(0);
    const Tile vt = tile_probabilities(*a->panels[v].variant, p, r, req);
    float vmax = 0;
    for (int y = 0; y < H; ++y) {
      for (int x = 0; x < W; ++x) {
        const size_t c = size_t(y) * W + x;
        EXPECT_EQ(t.texels[c * 4 + 0], vt.cells[c]);
        EXPECT_EQ(t.texels[c * 4 + 1], dt.cells[c]);
        vmax = std::max(vmax, vt.cells[c]);
        int kept = 0, total = 0;
        for (int i = lo(q0, q1 - q0, H, y); i < lo(q0, q1 - q0, H, y + 1); ++i)
          for (int j = lo(k0, k1 - k0, W, x); j < lo(k0, k1 - k0, W, x + 1); ++j) {
            ++total;
            kept += layout_keeps(r.layout, p, head, i, j);
          }
        ASSERT_NEAR(t.texels[c * 4 + 2], float(kept) / float(total), 1e-6)
            << "variant " << v << " cell " << y << "," << x;
      }
      if (v == 0) continue;
      // Dropped dense mass of the cell row's middle query, over all keys.
      const int i = q0 + int((int64_t(y) * (q1 - q0) / H + int64_t(y + 1) * (q1 - q0) / H) / 2);
      probability_row(dense, p, dres, head, i, 0, p.n_k, drow);
      double kept_mass = 0;
      for (int j = 0; j < p.n_k; ++j)
        if (layout_keeps(r.layout, p, head, i, j)) kept_mass += drow[size_t(j)];
      EXPECT_NEAR(t.dropped_rows[size_t(y)], std::clamp(1.0 - kept_mass, 0.0, 1.0), 1e-5)
          << "row " << y;
    }
    EXPECT_EQ(t.vmax, vmax);
  }
  EXPECT_TRUE(tiles[0].dropped_rows.empty());  // the dense reference drops nothing
}

TEST(GuiData, HoverMatchesRows) {
  auto a = synthetic(97, {"window(size=9)", "dense+sigmoid(bias_offset=0)"}, 2);
  const Problem& p = a->problem(0);
  std::vector<double> row;
  for (int panel = 0; panel < 3; ++panel)
    for (auto [q, k] :
         {std::pair{50, 45}, std::pair{50, 3}, std::pair{96, 96}, std::pair{10, 60}}) {
      const render::HoverInfo h = core::hover(*a, panel, q, k);
      ASSERT_TRUE(h.valid);
      const core::Panel& pn = a->panels[size_t(panel)];
      probability_row(*pn.variant, p, pn.result(0), 2, q, 0, p.n_k, row);
      EXPECT_DOUBLE_EQ(h.prob, row[size_t(k)]);
      EXPECT_EQ(h.visible, k <= q);
      EXPECT_EQ(h.kept, layout_keeps(pn.result(0).layout, p, 2, q, k));
      const std::vector<float> r = core::probability_row(*a, panel, q);
      ASSERT_EQ(r.size(), size_t(p.n_k));
      EXPECT_EQ(r[size_t(k)], float(row[size_t(k)]));
      if (h.prob > 0) {
        int greater = 0;
        for (double x : row) greater += x > h.prob;
        EXPECT_EQ(h.rank, greater + 1);
      } else {
        EXPECT_EQ(h.rank, 0);
      }
    }
  EXPECT_FALSE(core::hover(*a, 1, 50, 3).kept);  // outside the window of 9
  EXPECT_FALSE(core::hover(*a, 7, 1, 1).valid);  // no such panel
  // With the dense panel hidden, shown panel 0 is the first variant.
  core::Session s = a->session;
  s.view.show_dense = false;
  const auto hidden = core::reselect(*a, s);
  EXPECT_EQ(core::shown_panels(*hidden), (std::vector<int>{1, 2}));
  EXPECT_FALSE(core::hover(*hidden, 0, 50, 3).kept);
}

TEST(GuiData, DocumentDescribesPanelsAndBlocks) {
  auto a = synthetic(130, {"block_topk(block=16,k=2)"});
  const render::Document d = core::document(*a);
  ASSERT_EQ(d.heat.panels.size(), 2u);
  EXPECT_TRUE(d.heat.panels[0].reference);
  EXPECT_EQ(d.heat.panels[1].title, "block_topk(block=16,k=2)");
  const Layout& l = a->panels[1].result(0).layout;
  ASSERT_EQ(l.kind, Layout::Kind::Blocks);
  EXPECT_EQ(int64_t(d.heat.panels[1].kept_blocks.size()), l.block(0).nnz());
  EXPECT_EQ(d.grid.layers, 1);
  EXPECT_EQ(d.grid.heads, 4);
  EXPECT_TRUE(d.heat.panels[1].measured);
  EXPECT_NEAR(d.heat.panels[1].recall, a->panels[1].layer[0].mass_recall, 1e-12);
  // The head grid lists every head metric of the core's table.
  ASSERT_EQ(d.grid.names.size(), d.grid.values.size());
  EXPECT_NE(std::find(d.grid.names.begin(), d.grid.names.end(), "prev_token"), d.grid.names.end());
  // Every head role is a grid metric on a [0, 1] scale (app/core/heads/head_roles.h).
  for (const char* role : {"dup_token", "induction", "attn_distance", "offset_conc", "first_token",
                           "no_op", "long_range"}) {
    const auto it = std::find(d.grid.names.begin(), d.grid.names.end(), role);
    ASSERT_NE(it, d.grid.names.end()) << role;
    EXPECT_TRUE(d.grid.unit[size_t(it - d.grid.names.begin())]) << role;
  }
  EXPECT_EQ(d.tradeoff.points.size(), 2u);
}

TEST(GuiData, BadRequestsFailClearly) {
  core::Session s = synthetic_session(64, {"no_such_variant"});
  try {
    core::open(s, "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::UnknownVariant);
  }
  s.variants = {"window(size=4)"};
  std::atomic<bool> cancel{true};
  core::Options o;
  o.cancel = &cancel;
  try {
    core::analyze(s, "", o);
    FAIL() << "expected cancellation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
}

TEST(GuiData, ColoursFollowTheScale) {
  render::PanelTile t;
  t.w = 3;
  t.h = 1;
  t.texels = {1e-6f, 1e-6f, 1, 0, 0.5f, 0.5f, 1, 0, 0.2f, 0.6f, 0, 0};
  render::ColorScale s;
  s.vmax = 0.5f;
  s.log_floor = 1e-4f;
  std::vector<uint8_t> rgba;
  render::colorize(t, s, rgba);
  const auto lut = render::colormap_lut_rgba8();
  for (int c = 0; c < 3; ++c) EXPECT_EQ(rgba[size_t(c)], lut[size_t(c)]);  // below the floor
  for (int c = 0; c < 3; ++c) EXPECT_EQ(rgba[4 + size_t(c)], lut[255 * 4 + size_t(c)]);  // at vmax
  s.mode = render::DisplayMode::Difference;
  s.dmax = 0.4f;
  render::colorize(t, s, rgba);
  const size_t div = size_t(render::Colormap::Diverging) * 256 * 4;
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(rgba[4 + size_t(c)], lut[div + 128 * 4 + size_t(c)]);  // equal
  EXPECT_LT(rgba[8 + 0], rgba[8 + 2]);  // variant below dense: the blue side
  s.mode = render::DisplayMode::KeptSet;
  render::colorize(t, s, rgba);
  EXPECT_GT(rgba[8 + 0], rgba[8 + 2]);  // dropped cell with dense mass: red
}

// Dropped entries took the map's lowest colour and read as small probabilities: a cell with
// visible entries and none kept takes kDroppedRgb, which no map has; a cell the causal rule hides
// and every kept cell keep the map's colours.
TEST(GuiData, DroppedCellsTakeAColourOutsideTheMap) {
  auto a = synthetic(301, {"window(size=37)"});
  const auto tiles = core::tiles(*a, 0, 301, 0, 301, 60, 60, nullptr);
  ASSERT_EQ(tiles.size(), 2u);
  render::ColorScale s;
  s.vmax = std::max(tiles[0].vmax, tiles[1].vmax);
  const render::Rgb8 drop = render::kDroppedRgb;
  auto is_drop = [&](const std::vector<uint8_t>& rgba, size_t c) {
    return rgba[c * 4] == drop.r && rgba[c * 4 + 1] == drop.g && rgba[c * 4 + 2] == drop.b;
  };
  int dropped = 0;
  for (size_t v = 0; v < tiles.size(); ++v) {
    const render::PanelTile& t = tiles[v];
    std::vector<uint8_t> rgba;
    render::colorize(t, s, rgba);
    for (size_t c = 0; c < size_t(t.w) * size_t(t.h); ++c) {
      const float kept = t.texels[c * 4 + 2], visible = t.texels[c * 4 + 3];
      EXPECT_GE(visible, kept - 1e-6f);
      EXPECT_EQ(is_drop(rgba, c), kept <= 0 && visible > 0) << "panel " << v << " cell " << c;
      dropped += is_drop(rgba, c);
    }
    if (v == 0) {
      EXPECT_EQ(dropped, 0) << "dense drops nothing";
    }
  }
  EXPECT_GT(dropped, 100);  // the window's far keys
}

// Newline tokens showed as "?" in the Tokens and Sinks views: labels spell control characters.
TEST(GuiData, TokenLabelsSpellNewlinesAndTabs) {
  EXPECT_EQ(render::visible_label("cat"), "cat");
  EXPECT_EQ(render::visible_label("\n"), "\\n");  // no ImGui font here: the ASCII spelling
  EXPECT_EQ(render::visible_label("a\tb\r"), "a\\tb\\r");
  EXPECT_EQ(render::clip_label("\n\n", 12), "\\n\\n");
  EXPECT_EQ(render::visible_label(std::string("x\x01")), "x.");
}

}  // namespace
}  // namespace attn::gui

namespace attn::gui {
namespace {

// On the vulkan backend the heatmap tiles come from the Vulkan tile query, on cpu from the CPU
// one, and both give the same tiles (lavapipe in CI; N past lavapipe's loop limit).
TEST(GuiData, VulkanTilesMatchCpuTiles) {
  const auto names = backend_names();
  if (std::find(names.begin(), names.end(), "vulkan") == names.end())
    GTEST_SKIP() << "built without the Vulkan backend";
  core::Session s = synthetic_session(
      4133,
      {"block_topk(block=64,k=4)", "sinks_window(sinks=4,window=300)", "top_p(block=64,p=0.9)"}, 2);
  core::Options o;
  o.end_to_end = false;
  o.head_grid = false;
  const auto cpu = core::analyze(s, "", o);
  // Same results, other tile engine: only the session's backend differs.
  auto on_vk = std::make_shared<Analysis>(*cpu);
  on_vk->session.backend = "vulkan";
  const auto t_cpu = core::tiles(*cpu, 100, 4133, 0, 4000, 211, 173);
  const auto t_vk = core::tiles(*on_vk, 100, 4133, 0, 4000, 211, 173);
  if (!t_vk[0].gpu) GTEST_SKIP() << "no usable Vulkan device";
  ASSERT_EQ(t_cpu.size(), t_vk.size());
  for (size_t v = 0; v < t_cpu.size(); ++v) {
    EXPECT_FALSE(t_cpu[v].gpu);
    EXPECT_TRUE(t_vk[v].gpu) << "panel " << v;
    ASSERT_EQ(t_cpu[v].texels.size(), t_vk[v].texels.size());
    double worst = 0;
    for (size_t i = 0; i < t_cpu[v].texels.size(); ++i)
      worst = std::max(worst, double(std::fabs(t_cpu[v].texels[i] - t_vk[v].texels[i])));
    EXPECT_LT(worst, 2e-5) << "panel " << v;
    EXPECT_NEAR(t_cpu[v].vmax, t_vk[v].vmax, 2e-5);
    EXPECT_EQ(t_cpu[v].dropped_rows, t_vk[v].dropped_rows);
  }
}

// The Model dock's backend choice reaches the core: the Vulkan backend (lavapipe in CI) gives
// the same panels as the CPU one.
TEST(GuiData, VulkanBackendMatchesCpu) {
  const auto names = backend_names();
  if (std::find(names.begin(), names.end(), "vulkan") == names.end())
    GTEST_SKIP() << "built without the Vulkan backend";
  core::Session s =
      synthetic_session(203, {"block_topk(block=16,k=3)", "sinks_window(sinks=2,window=40)"});
  core::Options o;
  o.end_to_end = false;
  const auto cpu = core::analyze(s, "", o);
  s.backend = "vulkan";
  std::shared_ptr<const Analysis> vk;
  try {
    vk = core::analyze(s, "", o);
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable Vulkan device: " << e.what();
  }
  if (vk->panels[0].result(0).stats.backend != "vulkan")
    GTEST_SKIP() << "no usable Vulkan device: " << vk->panels[0].notes.front();
  ASSERT_EQ(cpu->panels.size(), vk->panels.size());
  // Per-variant choice: the first variant on Vulkan, the second on the Model dock's CPU.
  s.backend = "cpu";
  s.variant_backends = {"vulkan", ""};
  const auto mixed = core::analyze(s, "", o);
  EXPECT_EQ(mixed->panels[1].result(0).stats.backend, "vulkan");
  EXPECT_EQ(mixed->panels[2].result(0).stats.backend, "cpu");
  for (size_t v = 0; v < cpu->panels.size(); ++v)
    EXPECT_LT(relative_error(vk->panels[v].result(0).o, cpu->panels[v].result(0).o), 1e-4)
        << cpu->panels[v].spec;
}

// ---- the Attribution view's document -------------------------------------------------------

std::shared_ptr<const Analysis> text_analysis(const std::string& text,
                                              std::vector<std::string> variants = {}) {
  core::Session s;
  s.model.id = "default-text";
  s.input.kind = "text";
  s.input.text = text;
  s.variants = std::move(variants);
  core::Options o;
  o.end_to_end = false;
  o.verify_hashes = false;
  return core::analyze(s, "", o);
}

// The core fills the view from the same attribute() call the CLI makes: the same scores, ranks
// that order them, each method's scale, the agreement matrix of rank_agreement(), the curves of
// faithfulness() and the tokens' display labels.
TEST(GuiData, AttributionDocIsTheCoresRun) {
  const auto a = text_analysis("The cat sat on the mat. The cat sat on the", {"window(size=4)"});
  core::SessionAttribution setup;
  setup.methods = {"rollout", "grad_input", "occlusion"};
  setup.position = 6;
  setup.faithfulness = true;
  setup.steps = 4;
  const core::AttributionRun run = core::run_attribution(*a, setup);
  const render::AttributionDoc d = core::attribution_doc(run, a.get());
  // The request the CLI would build: the same scores.
  core::AttributionRequest q;
  q.methods = setup.methods;
  q.target.position = 6;
  const core::Attribution direct = core::attribute(*a->model, a->input, q);
  ASSERT_EQ(d.methods, setup.methods);
  ASSERT_EQ(d.units(), a->n_tokens());
  EXPECT_EQ(d.n_ranked, 7);  // a causal model: tokens 0..6
  EXPECT_EQ(d.target_unit, 6);
  for (int u = 0; u < d.units(); ++u) {
    EXPECT_EQ(d.ranked[size_t(u)], u <= 6 ? 1 : 0) << u;
    EXPECT_EQ(d.labels[size_t(u)], a->labels[size_t(u)]) << u;
  }
  for (size_t m = 0; m < d.methods.size(); ++m) {
    ASSERT_EQ(d.scores[m].size(), direct.methods[m].scores.size());
    for (size_t u = 0; u < d.scores[m].size(); ++u)
      EXPECT_NEAR(d.scores[m][u], direct.methods[m].scores[u], 1e-5) << d.methods[m] << " " << u;
    // Ranks 1..7 over the ranked tokens, in decreasing score; 0 elsewhere.
    float scale = 0;
    std::vector<int> seen;
    for (int u = 0; u < d.units(); ++u) {
      const int r = d.ranks[m][size_t(u)];
      if (!d.ranked[size_t(u)]) {
        EXPECT_EQ(r, 0);
        continue;
      }
      seen.push_back(r);
      scale = std::max(scale, std::fabs(d.scores[m][size_t(u)]));
      for (int v = 0; v <= 6; ++v) {
        if (d.ranks[m][size_t(v)] < r) {
          EXPECT_GE(d.scores[m][size_t(v)], d.scores[m][size_t(u)]);
        }
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5, 6, 7})) << d.methods[m];
    EXPECT_FLOAT_EQ(d.scale[m], scale);
  }
  const size_t M = d.methods.size();
  for (const core::RankAgreement& r : run.agreement) {
    const size_t i = size_t(std::find(d.methods.begin(), d.methods.end(), r.a) - d.methods.begin());
    const size_t j = size_t(std::find(d.methods.begin(), d.methods.end(), r.b) - d.methods.begin());
    EXPECT_FLOAT_EQ(d.spearman[i * M + j], float(r.spearman));
    EXPECT_FLOAT_EQ(d.spearman[j * M + i], float(r.spearman));
    EXPECT_FLOAT_EQ(d.kendall[i * M + j], float(r.kendall_tau));
  }
  for (size_t i = 0; i < M; ++i) EXPECT_EQ(d.spearman[i * M + i], 1.f);
  ASSERT_TRUE(run.faithfulness);
  ASSERT_EQ(d.curves.size(), M + 1);
  EXPECT_TRUE(d.curves.back().random);
  EXPECT_EQ(d.fractions.size(), 5u);
  EXPECT_EQ(d.curves[0].deletion, run.faithfulness->curves[0].p_deletion);
  EXPECT_NE(d.title.find("position 6"), std::string::npos) << d.title;
  // With the session's first variant: its spec in the title; a new text makes the run stale.
  setup.with_variant = true;
  setup.faithfulness = false;
  const core::AttributionRun wv = core::run_attribution(*a, setup);
  EXPECT_EQ(wv.attribution.variant, a->panels[1].spec);
  EXPECT_EQ(core::attribution_stale(*a, *a, true), "");
  const auto b = text_analysis("A different text.", {"window(size=4)"});
  EXPECT_NE(core::attribution_stale(*a, *b, false), "");
  const auto c = text_analysis("The cat sat on the mat. The cat sat on the", {"window(size=8)"});
  EXPECT_EQ(core::attribution_stale(*a, *c, false), "");
  EXPECT_NE(core::attribution_stale(*a, *c, true), "");
  // Targets by name, both ways.
  const int id = core::attribution_target_id(*a, " the");
  EXPECT_EQ(core::attribution_target_name(*a, id), "' the'");
}

// Every refusal is an InvalidArgument whose message says what to change.
TEST(GuiData, AttributionRefusalsSayWhy) {
  const auto a = text_analysis("The cat sat on the mat.", {"dense+sigmoid(bias_offset=0)"});
  auto refused = [&](core::SessionAttribution s, const std::string& words,
                     const Analysis* on = nullptr) {
    try {
      core::run_attribution(on ? *on : *a, s);
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  core::SessionAttribution s;
  refused(s, "choose at least one method");
  s.methods = {"grad_input"};
  s.with_variant = true;
  refused(s, "softmax");
  s.with_variant = false;
  s.baseline = "mean";
  refused(s, "mean baseline is for images");
  s.baseline = "zero";
  s.position = 500;
  refused(s, "outside the input");
  s.position = -1;
  s.target = s.foil = 3;
  refused(s, "foil is the target");
  s.foil = -1;
  s.target = 1 << 22;
  refused(s, "outside [0, ");
  // Tensors and synthetic problems have no model.
  s.target = -1;
  refused(s, "needs a model", synthetic(64, {}).get());
}

}  // namespace
}  // namespace attn::gui

// A panel's title block is sized by its statistics with every number at its widest, so values
// that change (a time, an error) never change how many lines it holds.
TEST(GuiData, StatisticsAreSizedWithTheirWidestNumbers) {
  const std::string a =
      "layer 3 head 10 \u00b7 density 0.125 \u00b7 error 1.2e-05 \u00b7 L2 0.5 \u00b7 9.87 ms";
  EXPECT_EQ(attn::render::with_widest_numbers(a),
            "layer 0.000000 head 0.000000 \u00b7 density 0.000000 \u00b7 error 0.000000 \u00b7 L2 "
            "0.000000 \u00b7 0.000000 ms");
  const std::string b =
      "layer 3 head 10 \u00b7 density 0 \u00b7 error 0.000123 \u00b7 L2 12.5 \u00b7 10.12 ms";
  EXPECT_EQ(attn::render::with_widest_numbers(a), attn::render::with_widest_numbers(b));
  EXPECT_EQ(attn::render::with_widest_numbers("sinks none"), "sinks none");
  EXPECT_EQ(attn::render::with_widest_numbers("h2o x12 3x"), "h2o x12 0.000000x");
}
