#include "tests/app/figure_fixtures.h"

#include <cmath>
#include <cstdio>

namespace attn::test {
using namespace core;  // fixtures of the core's view structs
namespace {

const char* kWords[] = {"The",  "cat", "sat", "on",  "the", "mat",   ".",     "It",   "was",
                        "warm", ",",   "and", "the", "cat", "slept", "until", "noon", "."};
constexpr int kN = 18;

std::vector<std::string> words() {
  return std::vector<std::string>(kWords, kWords + kN);
}

// Row i: mass on token 0 (a sink), on the previous token and spread over the rest; `window`
// > 0 keeps only the last `window` keys (renormalised).
HeatmapData heatmap(const std::string& spec, int window) {
  HeatmapData h;
  h.spec = spec;
  h.caption = spec;
  h.layer = 1;
  h.head = 2;
  h.n_q = h.n_k = h.rows = h.cols = kN;
  h.q_labels = h.k_labels = words();
  h.cells.assign(size_t(kN * kN), 0.0f);
  for (int i = 0; i < kN; ++i) {
    double z = 0;
    std::vector<double> w(size_t(kN), 0.0);
    for (int j = 0; j <= i; ++j) {
      if (window > 0 && j <= i - window) continue;
      w[size_t(j)] = (j == 0 ? 4.0 : 0.3) + (j == i - 1 ? 3.0 : 0.0) + 0.2 * std::sin(i * 1.7 + j);
      z += w[size_t(j)];
    }
    for (int j = 0; j < kN; ++j) h.cells[size_t(i * kN + j)] = float(w[size_t(j)] / z);
  }
  // Keys before the window are dropped (visible to the query, not kept).
  if (window > 0) {
    h.dropped.assign(h.cells.size(), 0);
    for (int i = 0; i < kN; ++i)
      for (int j = 0; j <= i - window; ++j) h.dropped[size_t(i * kN + j)] = 1;
  }
  h.sinks = {0};
  h.density = window > 0 ? 0.4 : 1.0;
  h.rel_error = window > 0 ? 0.31 : 0.0;
  h.mass_recall = window > 0 ? 0.62 : 1.0;
  h.row_kl = window > 0 ? 0.45 : 0.0;
  return h;
}

HeadGrid grid(const std::string& spec, double shift) {
  HeadGrid g;
  g.spec = spec;
  g.n_layers = 4;
  g.n_heads = 6;
  g.metrics = {"entropy", "sink_mass", "prev_token", "output_error", "mass_recall"};
  g.values.assign(g.metrics.size(), {});
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < 6; ++h) {
      g.values[0].push_back(float(0.4 + 0.35 * l + 0.1 * h - shift));
      g.values[1].push_back(float(0.1 + 0.15 * l));
      g.values[2].push_back(float(0.05 + 0.1 * ((l + h) % 4)));
      g.values[3].push_back(float(shift * (0.1 + 0.05 * h)));
      g.values[4].push_back(float(1 - shift * 0.1 * l));
    }
  return g;
}

}  // namespace

// Stream figure data: `n` policies over `tokens` tokens; the first stops at a context of
// 256; perplexity rises with the policy index and wobbles along the stream.
core::StreamFigure stream_curves(int n, int tokens, bool long_specs) {
  core::StreamFigure sf;
  sf.smooth = std::max(32, tokens / 20);
  sf.context = 256;
  for (int i = 0; i < n; ++i) {
    core::StreamCurve c;
    c.spec = i == 0
                 ? "kv_full(reposition=true)"
                 : "kv_streaming(sinks=" + std::to_string(i) + ",window=" + std::to_string(60 * i) +
                       ",reposition=true)" +
                       (long_specs ? "+kv_quant(bits=4,group=32,k_axis=channel,v_axis=token)" : "");
    const int end = i == 0 ? 256 : tokens;
    for (int t = sf.smooth; t <= end; t += std::max(1, end / 300)) {
      c.tokens.push_back(t);
      c.ppl.push_back(20.0 * (1 + 0.3 * i) * (1 + 0.2 * std::sin(t / 37.0)) *
                      (i == 1 && t > 256 ? 40 : 1));
    }
    c.perplexity = 25.0 * (1 + 0.3 * i);
    c.read = end;
    c.mean_bytes = 4096.0 * (1 + i);
    if (i == 0) c.stopped = "context";
    sf.curves.push_back(std::move(c));
  }
  return sf;
}

// Cache timelines of `n` policies over `tokens` tokens: sinks + a window that widens with the
// policy index, binned to at most 400 cells per side.
core::CacheFigure cache_panels(int n, int tokens, bool long_specs) {
  core::CacheFigure cf;
  cf.layer = 1;
  cf.head = 2;
  for (int i = 0; i < n; ++i) {
    core::CacheTimeline t;
    t.spec = "kv_streaming(sinks=4,window=" + std::to_string(16 * (i + 1)) + ",reposition=true)" +
             (long_specs ? "+kv_quant(bits=2,group=32,k_axis=channel,v_axis=token)" : "");
    t.passes = t.tokens = tokens;
    t.rows = t.cols = std::min(tokens, 400);
    t.kept.assign(size_t(t.rows) * t.cols, NAN);
    for (int r = 0; r < t.rows; ++r)
      for (int c = 0; c <= r; ++c)
        t.kept[size_t(r) * t.cols + c] = c < 2 || r - c < 8 * (i + 1) ? 1.0f : 0.0f;
    for (int tok = 0; tok < 4 && tokens > 400; ++tok) t.persistent.push_back(tok);
    if (tokens <= 400) t.persistent = {0, 1};
    cf.panels.push_back(std::move(t));
  }
  return cf;
}

// A decode trace's figure: kv_streaming over `steps` steps from position `first`, two sinks and
// a window of 12, the detail at the middle step (quantised entries when `long_specs`).
core::DecodeFigure decode_panel(const std::vector<std::string>& labels, int first,
                                bool long_specs) {
  core::DecodeFigure d;
  d.policy = std::string("kv_streaming(sinks=2,window=12,reposition=true)") +
             (long_specs ? "+kv_quant(bits=2,group=32,k_axis=channel,v_axis=token)" : "");
  d.layer = 1;
  d.head = 2;
  d.first = first;
  d.positions = int(labels.size());
  d.steps = d.positions - first;
  d.rows = d.steps;
  d.cols = d.positions;
  const auto state = [&](int q, int p) {
    if (p > q) return core::DecodeCell::Future;
    if (p < 2 || p > q - 12)
      return long_specs && p < q - 4 ? core::DecodeCell::Quantised : core::DecodeCell::Held;
    return core::DecodeCell::Evicted;
  };
  const auto weight = [&](int q, int p) { return p < 2 ? 0.3f : 0.4f / float(1 + q - p); };
  for (int s = 0; s < d.steps; ++s)
    for (int p = 0; p < d.positions; ++p) {
      const core::DecodeCell c = state(first + s, p);
      d.state.push_back(c);
      d.attention.push_back(c == core::DecodeCell::Held || c == core::DecodeCell::Quantised
                                ? weight(first + s, p)
                                : NAN);
    }
  d.step = d.steps / 2;
  d.query = first + d.step;
  d.pieces.assign(labels.begin(), labels.begin() + d.query + 1);
  for (int p = 0; p <= d.query; ++p) {
    d.cells.push_back(state(d.query, p));
    d.weight.push_back(d.attention[size_t(d.step) * d.cols + p]);
  }
  d.entries = 14 * 4 * 4;
  d.bytes = d.entries * 2 * 64 * 4.0;
  d.next = labels.back();
  d.nll = 2.5f;
  return d;
}

// Value-grid panels (heads, patch presets): `panels` grids of rows x cols, values spread over
// [0, 1] (or [-1, 1] when diverging, with token column labels).
core::ValueGrids value_grids(int panels, int rows, int cols, bool diverging) {
  core::ValueGrids v;
  if (diverging) {
    v.vmin = -1;
    v.row_title = "Layer (residual stream after it)";
    v.col_title = "Position (corrupt token)";
    for (int j = 0; j < cols; ++j) v.col_labels.push_back(j % 3 ? " the" : " Jerusalem");
  }
  v.scale_title = diverging ? "Patching effect" : "Score";
  for (int k = 0; k < panels; ++k) {
    core::ValueGrid g;
    g.caption = diverging ? "Residual stream patched at one position"
                          : "Role " + std::to_string(k) + (k % 2 ? " with a longer name" : "");
    g.rows = rows;
    g.cols = cols;
    for (int i = 0; i < rows * cols; ++i)
      g.values.push_back(i == 1 ? NAN
                                : float(std::fmod(0.37 * (i + k), 1.0) * (diverging ? 2 : 1) -
                                        (diverging ? 1 : 0)));
    if (k % 2 == 0)  // intervals on every other panel
      for (float x : g.values) {
        g.lo.push_back(x - 0.05f);
        g.hi.push_back(x + 0.07f);
      }
    v.panels.push_back(std::move(g));
  }
  return v;
}

// Attribution panel: `methods` methods over `units` tokens (or a 7 x 7 patch grid of a 28 x 28
// image), with deletion curves of `steps` steps.
core::AttributionFigure attribution_panel(bool image, int units, int methods, int steps,
                                          const std::vector<std::string>& labels) {
  core::AttributionFigure a;
  a.image = image;
  a.target = "\u201c lamp\u201d at position 21, z = 2.47, p = 0.088";
  const char* ids[] = {"attention", "rollout", "flow",    "grad_input", "integrated_gradients",
                       "attn_grad", "chefer",  "attnlrp", "occlusion"};
  if (image) {
    a.grid_h = a.grid_w = 7;
    a.image_h = a.image_w = 28;
    units = 49;
    for (int i = 0; i < 28 * 28; ++i) a.pixels.push_back(float((i * 37) % 101) / 100.0f);
  }
  for (int u = 0; u < units; ++u)
    a.labels.push_back(image ? std::to_string(u / 7) + "," + std::to_string(u % 7)
                             : labels[size_t(u) % labels.size()]);
  for (int m = 0; m < methods; ++m) {
    a.methods.push_back(ids[m % 9]);
    a.titles.push_back(ids[m % 9]);
    std::vector<float> s;
    for (int u = 0; u < units; ++u) s.push_back(float(std::sin(0.7 * u + m)) * float(m + 1));
    a.scores.push_back(s);
  }
  for (int i = 0; i < methods; ++i)
    for (int j = 0; j < methods; ++j)
      a.spearman.push_back(i == j ? 1.0f : float(std::cos(i * 1.3 + j * 1.3)) * 0.8f);
  if (steps > 0) {
    for (int k = 0; k <= steps; ++k) a.fractions.push_back(float(k) / float(steps));
    for (int m = 0; m <= methods; ++m) {
      a.curve_names.push_back(m == methods ? "random" : a.methods[size_t(m)]);
      std::vector<float> p;
      for (int k = 0; k <= steps; ++k) p.push_back(0.5f * std::exp(-float(k) * (m + 1) / steps));
      a.p_deletion.push_back(p);
      a.aopc.push_back(0.1 * m);
    }
  }
  return a;
}

// Q/K map: `n` tokens of `inputs` inputs, queries and keys on two spirals.
core::QkFigure qk_panel(int n, int inputs) {
  core::QkFigure q;
  q.layer = 1;
  q.head = 2;
  q.method = "tsne";
  q.rank_fidelity = 0.71;
  q.inputs = inputs;
  for (int in = 0; in < inputs; ++in)
    for (int key = 0; key < 2; ++key)
      for (int t = 0; t < n; ++t) {
        const double a = 0.3 * t + key * 0.4 + in;
        q.x.push_back(float((1 + 0.05 * t) * std::cos(a)));
        q.y.push_back(float((1 + 0.05 * t) * std::sin(a)));
        q.key.push_back(uint8_t(key));
        q.position.push_back(n > 1 ? float(t) / float(n - 1) : 0.0f);
      }
  return q;
}

FigureData long_figure(View view) {
  constexpr int n = 160;
  const char* odd[] = {"internationalization",
                       "https://example.org/a/very/long/path",
                       "\n",
                       "   ",
                       "\xc2\xb7",
                       "\t",
                       "\xe2\x80\x94",
                       "Pneumonoultramicroscopic"};
  std::vector<std::string> labels;
  for (int i = 0; i < n; ++i)
    labels.push_back(i % 9 == 4 ? odd[(i / 9) % 8] : std::string(kWords[i % kN]));
  const std::vector<std::string> specs = {
      "dense",
      "window(size=16)",
      "sinks_window(sinks=4,window=64)",
      "bigbird(block=16,global=2,window=1,random=3,seed=7)+softcap(cap=30)",
      "vertical_slash(last_q=64,vertical=128,slash=128)",
      "top_p(block=16,p=0.95)+temperature(t=0.7)"};
  FigureData f;
  f.view = view;
  f.title =
      "A long title for a figure that has a great deal to say about attention variants, "
      "layer 11, head 7";
  f.subtitle =
      "a model with a long name \u00b7 text, 160 tokens \u00b7 substituted into every "
      "layer \u00b7 threshold 0.3";
  auto map = [&](const std::string& spec, int window) {
    HeatmapData h;
    h.spec = h.caption = spec;
    h.layer = 11;
    h.head = 7;
    h.n_q = h.n_k = h.rows = h.cols = n;
    h.q_labels = h.k_labels = labels;
    h.cells.assign(size_t(n) * n, 0.0f);
    for (int i = 0; i < n; ++i) {
      double z = 0;
      std::vector<double> w(size_t(n), 0.0);
      for (int j = 0; j <= i; ++j) {
        if (window > 0 && j > 0 && j <= i - window) continue;
        w[size_t(j)] = (j == 0 ? 6.0 : 0.2) + (j == i - 1 ? 2.0 : 0.0);
        z += w[size_t(j)];
      }
      for (int j = 0; j < n; ++j) h.cells[size_t(i) * n + size_t(j)] = float(w[size_t(j)] / z);
    }
    h.density = window > 0 ? 0.123456 : 1.0;
    h.rel_error = window > 0 ? 0.0123456 : 0.0;
    h.mass_recall = window > 0 ? 0.987654 : 1.0;
    h.row_kl = window > 0 ? 0.00123456 : 0.0;
    return h;
  };
  switch (view) {
    case View::Heatmap:
      f.heatmaps = {map("dense", 0)};
      break;
    case View::Variants:
      for (size_t i = 0; i < specs.size(); ++i) f.heatmaps.push_back(map(specs[i], int(8 * i)));
      break;
    case View::Grid:
      for (size_t i = 0; i < specs.size(); ++i) {
        HeadGrid g = grid(specs[i], 0.1 * double(i));
        g.n_layers = g.n_heads = 12;
        for (auto& v : g.values) {
          v.clear();
          for (int c = 0; c < 144; ++c) v.push_back(float(0.01 * c * (1 + 0.1 * double(i))));
        }
        f.grids.push_back(g);
      }
      break;
    case View::Sinks: {
      SinkData& s = f.sinks;
      s.spec = "dense";
      s.n_layers = 12;
      s.n = n;
      s.labels = labels;
      for (int l = 0; l < 12; ++l)
        for (int j = 0; j < n; ++j)
          s.received.push_back(float(j == 0                                     ? 0.37 + 0.01 * l
                                     : (j == 1 || j == 2 || j == 50 || j == 51) ? 0.31
                                                                                : 0.5 / n));
      s.sinks = {0, 1, 2, 50, 51};
      break;
    }
    case View::Image: {
      f.images = synthetic_figure(View::Image).images;
      for (size_t i = 2; i < specs.size(); ++i) {
        ImageAttention a = f.images[1];
        a.spec = specs[i];
        f.images.push_back(a);
      }
      for (auto& a : f.images) a.predicted = "Ankle boot (class 9 of 10)";
      break;
    }
    case View::Tradeoff: {
      TradeoffPoint d;
      d.spec = "dense";
      d.pattern = "dense";
      d.density = 1;
      d.rel_error = 0;
      d.next_token_kl = 0;
      f.tradeoff.push_back(d);
      const char* families[] = {
          "window(size=%d)", "sinks_window(sinks=4,window=%d)", "block_topk(block=64,k=%d)",
          "vertical_slash(last_q=64,vertical=%d,slash=128)", "h2o(heavy=%d,recent=64)"};
      const char* ids[] = {"window", "sinks_window", "block_topk", "vertical_slash", "h2o"};
      for (int fam = 0; fam < 5; ++fam)
        for (int k = 0; k < 8; ++k) {
          TradeoffPoint p;
          char spec[128];
          std::snprintf(spec, sizeof spec, families[fam], 1 << (k + 2));
          p.spec = spec;
          p.pattern = ids[fam];
          p.density = std::min(1.0, 0.004 * (1 << k) * (1 + 0.2 * fam));
          p.rel_error = 0.9 / (1 << k) / (1 + fam);
          p.next_token_kl = 3.0 / double(1 << (2 * k)) / (1 + fam);
          if (fam == 2 && k == 7) p.rel_error = p.next_token_kl = 0;  // exact: drawn at 0
          f.tradeoff.push_back(p);
        }
      break;
    }
    case View::Tokens: {
      for (size_t i = 0; i < specs.size(); ++i) {
        const HeatmapData h = map(specs[i], int(8 * i));
        TokensData t;
        t.spec = specs[i];
        t.caption = specs[i] + " with a long caption";
        t.query = n - 1;
        t.labels = labels;
        t.weight.assign(h.cells.end() - n, h.cells.end());
        f.tokens.push_back(t);
      }
      break;
    }
    case View::Stream:
      f.stream = stream_curves(8, 20000, true);
      break;
    case View::Cache:
      f.cache = cache_panels(5, 3000, true);
      break;
    case View::Decode:
      f.decode = decode_panel(labels, 40, true);
      break;
    case View::Heads:
      f.values = value_grids(8, 12, 12, false);
      break;
    case View::Patch:
      f.values = value_grids(1, 12, 40, true);
      break;
    case View::Attribution:
      f.attribution = attribution_panel(false, n, 9, 40, labels);
      break;
    case View::Qk:
      f.qk = qk_panel(n, 6);
      break;
    case View::Steps:  // drawn from a real head by explain-head (tests/app/test_head_steps.cpp)
      break;
  }
  return f;
}

FigureData synthetic_figure(View view) {
  FigureData f;
  f.view = view;
  f.title = std::string("Synthetic ") + view_name(view);
  f.subtitle = "test data \u00b7 18 tokens";
  switch (view) {
    case View::Heatmap:
      f.heatmaps = {heatmap("dense", 0)};
      break;
    case View::Variants:
      f.heatmaps = {heatmap("dense", 0), heatmap("window(size=4)", 4),
                    heatmap("sinks_window(sinks=1,window=4)", 4)};
      break;
    case View::Grid:
      f.grids = {grid("dense", 0), grid("window(size=4)", 0.3)};
      break;
    case View::Sinks: {
      SinkData& s = f.sinks;
      s.spec = "dense";
      s.n_layers = 3;
      s.n = kN;
      s.labels = words();
      for (int l = 0; l < 3; ++l)
        for (int j = 0; j < kN; ++j)
          s.received.push_back(float(j == 0 ? 0.2 + 0.2 * l : 0.8 / kN * (1 + 0.3 * std::cos(j))));
      s.sinks = {0};
      break;
    }
    case View::Image: {
      for (const char* spec : {"dense", "window(size=8)"}) {
        ImageAttention a;
        a.spec = spec;
        a.layer = 3;
        a.image.height = a.image.width = 28;
        a.image.channels = 1;
        for (int y = 0; y < 28; ++y)
          for (int x = 0; x < 28; ++x)
            a.image.data.push_back(
                uint8_t((x - 14) * (x - 14) + (y - 14) * (y - 14) < 100 ? 220 : 20));
        a.grid_h = a.grid_w = 7;
        for (int i = 0; i < 49; ++i)
          a.cls.push_back(float(std::exp(-0.3 * std::abs(i / 7 - 3) - 0.3 * std::abs(i % 7 - 3)) /
                                (a.spec == "dense" ? 12.0 : 6.0)));
        a.predicted = "Bag";
        f.images.push_back(a);
      }
      break;
    }
    case View::Tradeoff: {
      for (int k = 0; k < 6; ++k) {
        TradeoffPoint p;
        p.spec = "window(size=" + std::to_string(4 << k) + ")";
        p.pattern = "window";
        p.density = std::min(1.0, 0.05 * (1 << k));
        p.rel_error = 0.8 / (1 << k);
        p.next_token_kl = 0.5 / (1 << (2 * k));
        f.tradeoff.push_back(p);
        p.spec = "block_topk(block=16,k=" + std::to_string(k + 1) + ")";
        p.pattern = "block_topk";
        p.density = 0.08 * (k + 1);
        p.rel_error = 0.3 / (k + 1);
        p.next_token_kl = 0.1 / ((k + 1) * (k + 1));
        f.tradeoff.push_back(p);
      }
      break;
    }
    case View::Tokens: {
      const HeatmapData d = heatmap("dense", 0), w = heatmap("window(size=4)", 4);
      for (const HeatmapData* h : {&d, &w}) {
        TokensData t;
        t.spec = h->spec;
        t.caption = h->spec;
        t.query = 14;
        t.labels = words();
        t.weight.assign(h->cells.begin() + 14 * kN, h->cells.begin() + 15 * kN);
        f.tokens.push_back(t);
      }
      break;
    }
    case View::Stream:
      f.stream = stream_curves(3, 600, false);
      break;
    case View::Cache:
      f.cache = cache_panels(2, 60, false);
      break;
    case View::Decode:
      f.decode = decode_panel(words(), 4, false);
      break;
    case View::Heads:
      f.values = value_grids(8, 2, 4, false);
      break;
    case View::Patch:
      f.values = value_grids(1, 2, 6, true);
      break;
    case View::Attribution:
      f.attribution = attribution_panel(true, 49, 5, 10, words());
      break;
    case View::Qk:
      f.qk = qk_panel(18, 1);
      break;
    case View::Steps:
      break;
  }
  return f;
}

}  // namespace attn::test
