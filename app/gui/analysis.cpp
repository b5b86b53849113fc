#include "app/gui/analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "app/workbench/workbench.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/raw_tensors.h"
#include "models/arch/text_input.h"

namespace attn::gui {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void check_cancel(const std::atomic<bool>* cancel) {
  if (cancel && cancel->load()) throw Error(ErrorCode::Cancelled, "analysis cancelled");
}

// Per-head comparisons cost a few N^2 d passes each: skipped for long problems.
constexpr int kPerHeadMaxTokens = 1024;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::string AnalysisRequest::heavy_key() const {
  std::string k = model + "\x1f" + text + "\x1f" + image + "\x1f" + tensors + "\x1f" +
                  std::to_string(synthetic_tokens) + "\x1f" + backend + "\x1f" +
                  (show_dense ? "1" : "0");
  for (const auto& v : variants) k += "\x1f" + v;
  for (const auto& b : variant_backends) k += "\x1e" + b;
  return k;
}

const Model* ModelCache::get(const std::string& name) {
  if (name != name_ || !model_) {
    model_.reset();  // the old model goes as soon as nothing else holds it
    name_.clear();
    model_ = cached_model(name);
    name_ = name;
  }
  return model_.get();
}

std::string display_label(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(piece[i]);
    if (c == 0xC4 && i + 1 < piece.size()) {
      const unsigned char n = static_cast<unsigned char>(piece[i + 1]);
      if (n == 0xA0) {  // "Ġ": a leading space
        out += "\xC2\xB7";
        ++i;
        continue;
      }
      if (n == 0x8A) {  // "Ċ": a newline
        out += "\xC2\xB6";
        ++i;
        continue;
      }
    }
    if (c == 0xE2 && i + 2 < piece.size() && static_cast<unsigned char>(piece[i + 1]) == 0x96 &&
        static_cast<unsigned char>(piece[i + 2]) == 0x81) {  // "▁" (SentencePiece space)
      out += "\xC2\xB7";
      i += 2;
      continue;
    }
    out += piece[i];
  }
  return out;
}

std::shared_ptr<Analysis> run_analysis(const AnalysisRequest& r, ModelCache& models,
                                       const std::atomic<bool>* cancel,
                                       std::shared_ptr<const Analysis> reuse) {
  if (reuse && reuse->request.heavy_key() == r.heavy_key()) {
    auto a = std::make_shared<Analysis>(*reuse);
    a->request = r;
    return a;
  }
  require(r.variants.size() <= 4, ErrorCode::InvalidArgument,
          "at most 4 variants are shown beside the dense reference (got " +
              std::to_string(r.variants.size()) + ")");
  auto a = std::make_shared<Analysis>();
  a->request = r;
  RunOptions ro;
  ro.cancel = cancel;
  std::vector<Variant> variants;  // validate every spec before any heavy work
  if (r.show_dense) variants.push_back(make_variant("dense"));
  for (const auto& s : r.variants) variants.push_back(make_variant(s));
  auto backend = make_backend(r.backend);
  // Each variant's backend (the request's default where none is chosen).
  std::vector<std::unique_ptr<Backend>> backends;
  {
    size_t slot = 0;
    for (size_t v = 0; v < variants.size(); ++v) {
      const bool user = !(r.show_dense && v == 0);
      const std::string name =
          user && slot < r.variant_backends.size() && !r.variant_backends[slot].empty()
              ? r.variant_backends[slot]
              : r.backend;
      if (user) ++slot;
      backends.push_back(make_backend(name));
    }
  }

  const auto t0 = Clock::now();
  const Model* model = nullptr;
  ModelInput in;
  if (!r.tensors.empty()) {
    a->problems.push_back(load_problem_dir(r.tensors));
    const Problem& p = a->problems[0];
    a->model_summary = "tensors " + r.tensors + " · " + std::to_string(p.n_heads) +
                       " heads · d=" + std::to_string(p.d) + " · " + std::to_string(p.n_k) +
                       " tokens";
  } else if (r.model == "synthetic") {
    require(r.synthetic_tokens >= 2 && r.synthetic_tokens <= 65536, ErrorCode::InvalidArgument,
            "synthetic problem: tokens must be in [2, 65536]");
    a->problems.push_back(
        random_problem(4, 4, r.synthetic_tokens, r.synthetic_tokens, 64, true, 7, 1.6f));
    a->model_summary = "synthetic random Q/K/V · 4 heads · d=64 · " +
                       std::to_string(r.synthetic_tokens) + " tokens";
  } else {
    model = models.get(r.model);
    const ModelInfo& info = model->info();
    a->info = info;
    a->model_summary = info.model_type + " · " + std::to_string(info.n_layers) + " layers · " +
                       std::to_string(info.n_heads) +
                       " heads · d=" + std::to_string(info.head_dim) +
                       (info.max_tokens ? " · context " + std::to_string(info.max_tokens) : "");
    if (info.vision) {
      require(!r.image.empty(), ErrorCode::InvalidArgument,
              info.dir + " is a vision model: open an image");
      const ImagePreprocessor& pp = model->preprocessor();
      const Image8 raw = load_image(r.image, pp.channels);
      in.image = pp(raw);
      const Image8 shown = resize_image(raw, in.image.height, in.image.width, Resample::Bilinear);
      a->image.present = true;
      a->image.height = shown.height;
      a->image.width = shown.width;
      a->image.channels = shown.channels;
      a->image.pixels = shown.data;
    } else {
      require(!r.text.empty(), ErrorCode::InvalidArgument, "the input text is empty");
      TextInput ti = encode_for_model(*model, r.text, "the editor text");
      a->tokens = ti.tokens;
      a->notice = ti.notice;
      in.ids = ti.ids;
      in.labels = ti.labels;
    }
    Capture cap(
        HookSelection::parse("blocks.*.attn.q,blocks.*.attn.k,blocks.*.attn.v,blocks.*.resid"));
    ForwardOptions fo;
    fo.capture = &cap;
    const ModelOutput out = model->forward(in, fo);
    check_cancel(cancel);
    for (int l = 0; l < info.n_layers; ++l) {
      a->problems.push_back(*cap.problem(l));
      const ResidualStats rs =
          residual_stats(cap.layers[size_t(l)].resid, out.n_tokens, info.hidden);
      a->resid_norm.push_back(rs.token_norm);
      for (const auto& m : rs.massive)
        if (std::find(a->massive_tokens.begin(), a->massive_tokens.end(), m.token) ==
            a->massive_tokens.end())
          a->massive_tokens.push_back(m.token);
    }
    if (info.vision) {
      const int prefix =
          out.n_tokens - int(std::lround(std::floor(std::sqrt(double(out.n_tokens)))) *
                             int(std::lround(std::floor(std::sqrt(double(out.n_tokens))))));
      const int grid = int(std::floor(std::sqrt(double(out.n_tokens - std::max(1, prefix)))));
      a->image.grid_h = a->image.grid_w = grid;
      a->image.heads = info.n_heads;
      if (!out.logits.empty()) {
        const int c =
            int(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
        a->image.predicted = c < int(info.class_names.size()) ? info.class_names[size_t(c)]
                                                              : "class " + std::to_string(c);
      }
    }
    // Dense end-to-end reference for substitutions below.
    a->e2e.assign(variants.size(), std::nullopt);
    a->forward_seconds = since(t0);
    const auto t1 = Clock::now();
    for (size_t p = 0; p < variants.size(); ++p) {
      if (variants[p].dense_pattern() && variants[p].spec() == "dense") continue;
      check_cancel(cancel);
      Substitution sub{&variants[p], backends[p].get(), {}, {}, ro};
      ForwardOptions so;
      so.substitution = &sub;
      a->e2e[p] = end_to_end(info, in, out, model->forward(in, so));
    }
    a->variants_seconds += since(t1);
  }
  if (a->e2e.empty()) a->e2e.assign(variants.size(), std::nullopt);
  const Problem& p0 = a->problems[0];
  a->labels.resize(size_t(p0.n_k));
  for (int j = 0; j < p0.n_k; ++j)
    a->labels[size_t(j)] =
        j < int(p0.labels.size()) && !p0.labels[size_t(j)].empty()
            ? display_label(p0.labels[size_t(j)])
            : (a->image.present ? (j == 0 ? "CLS" : "p" + std::to_string(j)) : std::to_string(j));
  if (!a->forward_seconds) a->forward_seconds = since(t0);

  // Dense reference and each variant on every layer; metrics follow in add_metrics() so that
  // the heatmaps can be shown first.
  const auto t2 = Clock::now();
  const Variant dense = make_variant("dense");
  for (const Problem& p : a->problems) {
    check_cancel(cancel);
    a->dense.push_back(run(dense, p, *backend, ro));
  }
  for (size_t v = 0; v < variants.size(); ++v) {
    check_cancel(cancel);
    a->specs.push_back(variants[v].spec());
    const bool is_dense = variants[v].spec() == "dense";
    a->results.push_back(is_dense ? a->dense
                                  : run_layers(variants[v], a->problems, *backends[v], ro));
  }
  a->variants = std::move(variants);
  a->variants_seconds += since(t2);
  return a;
}

void add_metrics(Analysis& a, const std::atomic<bool>* cancel) {
  const auto t0 = Clock::now();
  const Variant dense = make_variant("dense");
  a.dense_metrics.clear();
  a.layer_metrics.clear();
  a.head_metrics.clear();
  for (size_t l = 0; l < a.problems.size(); ++l) {
    check_cancel(cancel);
    a.dense_metrics.push_back(compare(dense, a.problems[l], a.dense[l], a.dense[l]));
  }
  const bool per_head = a.n_tokens() <= kPerHeadMaxTokens;
  for (size_t v = 0; v < a.variants.size(); ++v) {
    const bool is_dense = a.specs[v] == "dense";
    std::vector<Metrics> lm;
    std::vector<std::vector<Metrics>> hm;
    for (size_t l = 0; l < a.problems.size(); ++l) {
      check_cancel(cancel);
      const Problem& p = a.problems[l];
      const Result& r = a.results[v][l];
      lm.push_back(is_dense ? a.dense_metrics[l] : compare(a.variants[v], p, r, a.dense[l]));
      std::vector<Metrics> heads(size_t(per_head ? p.n_heads : 0));
      if (per_head)
        parallel_for(p.n_heads, [&](int h) {
          heads[size_t(h)] = compare(a.variants[v], head_problem(p, h), head_result(r, p, h),
                                     head_result(a.dense[l], p, h));
        });
      hm.push_back(std::move(heads));
    }
    a.layer_metrics.push_back(std::move(lm));
    a.head_metrics.push_back(std::move(hm));
  }
  a.metrics_seconds = since(t0);
}

std::vector<std::string> sweep_specs(const Analysis& a) {
  std::vector<std::string> out;
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  const int n = a.problems[size_t(l)].n_k;
  const int points = n > 2048 ? 4 : 7;  // long problems: fewer, each point costs ~N^2 d
  for (const auto& spec : a.request.variants) {
    const std::string id = spec.substr(0, spec.find_first_of("(+"));
    const PieceInfo& piece = registry_piece(id);
    if (piece.info.params.empty()) continue;
    const ParamSpec& ps = piece.info.params[0];
    for (int i = 0; i < points; ++i) {
      double v;
      if (ps.type == ParamSpec::Type::Int && ps.min >= 1) {
        const double lo = std::max(1.0, ps.min), hi = std::min(ps.max, std::max(lo, double(n)));
        v = std::round(lo * std::pow(hi / lo, i / double(points - 1)));
      } else {
        v = ps.min + (ps.max - ps.min) * i / double(points - 1);
      }
      Params params;
      params[ps.name] = v;
      try {
        out.push_back(make_variant(id, params).spec());
      } catch (const Error&) {
      }
    }
  }
  return out;
}

std::optional<render::TradeoffPoint> sweep_point(const Analysis& a, const std::string& spec,
                                                 const std::atomic<bool>* cancel) {
  auto backend = make_backend(a.request.backend);
  RunOptions ro;
  ro.cancel = cancel;
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  const Problem& p = a.problems[size_t(l)];
  try {
    const Variant var = make_variant(spec);
    const Result res = run(var, p, *backend, ro);
    const Metrics m = compare(var, p, res, a.dense[size_t(l)]);
    render::TradeoffPoint pt;
    pt.label = var.spec();
    pt.density = m.density;
    pt.seconds = res.stats.kernel_seconds + res.stats.select_seconds;
    pt.rel_error = m.rel_error;
    pt.recall = m.mass_recall;
    pt.kl = m.row_kl;
    return pt;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Cancelled) throw;
    return std::nullopt;
  }
}

render::Document build_document(const Analysis& a) {
  render::Document d;
  d.generation = a.generation;
  const int L = a.n_layers(), H = a.n_heads(), N = a.n_tokens();
  const int l = std::clamp(a.request.layer, 0, L - 1), h = std::clamp(a.request.head, 0, H - 1);
  d.title = a.model_summary + " · " + std::to_string(N) + " tokens" +
            (a.notice.empty() ? "" : " (truncated)");

  render::HeatmapDoc& hd = d.heat;
  const Problem& p = a.problems[size_t(l)];
  hd.n_q = p.n_q;
  hd.n_k = p.n_k;
  hd.layer = l;
  hd.head = h;
  hd.k_labels = a.labels;
  hd.q_labels.assign(a.labels.end() - p.n_q, a.labels.end());
  const bool metrics = a.has_metrics();
  if (metrics) hd.sinks = a.dense_metrics[size_t(l)].sinks;
  for (size_t v = 0; v < a.variants.size(); ++v) {
    render::PanelDesc pd;
    pd.title = a.specs[v];
    pd.reference = a.specs[v] == "dense";
    const Result& r = a.results[v][size_t(l)];
    if (pd.reference) pd.title = "dense (reference)";
    pd.ms = 1e3 * (r.stats.kernel_seconds + r.stats.select_seconds);
    pd.density = r.stats.density;
    if (metrics) {
      const Metrics& lm = a.layer_metrics[v][size_t(l)];
      pd.measured = true;
      pd.rel_error = lm.rel_error;
      pd.recall = lm.mass_recall;
      pd.kl = a.e2e[v] && a.e2e[v]->has_tokens ? a.e2e[v]->mean_kl : std::nan("");
    }
    if (!metrics) {
      pd.stats = fmt("%.2f ms", 1e3 * (r.stats.kernel_seconds + r.stats.select_seconds)) +
                 " · density " + fmt("%.3f", r.stats.density) + " · metrics...";
    } else if (pd.reference) {
      const Metrics& m = a.layer_metrics[v][size_t(l)];
      pd.title = "dense (reference)";
      pd.stats = "layer " + std::to_string(l) + " head " + std::to_string(h) + " · " +
                 fmt("%.2f ms", 1e3 * r.stats.kernel_seconds) + " · " +
                 std::to_string(m.sinks.size()) + " sinks";
    } else {
      const Metrics& m = a.layer_metrics[v][size_t(l)];
      const std::vector<Metrics>& hm = a.head_metrics[v][size_t(l)];
      const Metrics& mh = hm.empty() ? m : hm[size_t(h)];
      pd.stats = "density " + fmt("%.3f", mh.density) + " · err " + fmt("%.2e", mh.rel_error) +
                 " · recall " + fmt("%.3f", mh.mass_recall) + " · " +
                 fmt("%.2f ms", 1e3 * (r.stats.kernel_seconds + r.stats.select_seconds));
      if (a.e2e[v] && a.e2e[v]->has_tokens)
        pd.stats += " · KL " + fmt("%.2e", a.e2e[v]->mean_kl) + " · top1 " +
                    fmt("%.2f", a.e2e[v]->top1_agreement);
      if (a.e2e[v] && a.e2e[v]->has_class)
        pd.stats += a.e2e[v]->class_agree ? " · class kept" : " · class CHANGED";
    }
    if (r.layout.kind == Layout::Kind::Blocks) {
      const BlockLayout& b = r.layout.block(h);
      for (int qb = 0; qb < b.n_qb; ++qb)
        for (int32_t e = b.row_ptr[size_t(qb)]; e < b.row_ptr[size_t(qb) + 1]; ++e) {
          const int kb = b.col[size_t(e)];
          pd.kept_blocks.push_back({qb * b.bq, std::min((qb + 1) * b.bq, p.n_q), kb * b.bk,
                                    std::min((kb + 1) * b.bk, p.n_k)});
        }
    }
    hd.panels.push_back(std::move(pd));
  }

  // Image: CLS attention over the patches for the selected layer, per panel and head.
  d.image = a.image;
  if (a.image.present) {
    const int grid = a.image.grid_h * a.image.grid_w;
    const int prefix = N - grid;
    std::vector<double> row;
    for (size_t v = 0; v < a.variants.size(); ++v) {
      d.image.panel_titles.push_back(v == 0 && a.specs[v] == "dense" ? "dense (reference)"
                                                                     : a.specs[v]);
      std::vector<float> att(size_t(H * grid)), kept(size_t(H * grid));
      const Result& r = a.results[v][size_t(l)];
      for (int hh = 0; hh < H; ++hh) {
        probability_row(a.variants[v], p, r, hh, 0, 0, N, row);
        for (int i = 0; i < grid; ++i) {
          att[size_t(hh * grid + i)] = float(row[size_t(prefix + i)]);
          kept[size_t(hh * grid + i)] = layout_keeps(r.layout, p, hh, 0, prefix + i) ? 1.f : 0.f;
        }
      }
      d.image.cls_attn.push_back(std::move(att));
      d.image.kept.push_back(a.specs[v] == "dense" ? std::vector<float>{} : std::move(kept));
    }
    // Rollout (Abnar & Zuidema 2020): product over layers of 0.5 (mean_h A) + 0.5 I.
    if (N <= 1024) {
      std::vector<double> roll(size_t(N) * N, 0.0), blk;
      for (int i = 0; i < N; ++i) roll[size_t(i) * N + i] = 1;
      const Variant dense = make_variant("dense");
      for (int li = 0; li < L; ++li) {
        std::vector<double> A(size_t(N) * N, 0.0);
        for (int hh = 0; hh < H; ++hh) {
          probability_block(dense, a.problems[size_t(li)], a.dense[size_t(li)], hh, 0, N, 0, N,
                            blk);
          for (size_t e = 0; e < A.size(); ++e) A[e] += 0.5 * blk[e] / H;
        }
        for (int i = 0; i < N; ++i) A[size_t(i) * N + i] += 0.5;
        std::vector<double> next(size_t(N) * N, 0.0);
        for (int i = 0; i < N; ++i)
          for (int k = 0; k < N; ++k) {
            const double aik = A[size_t(i) * N + k];
            if (aik == 0) continue;
            for (int j = 0; j < N; ++j) next[size_t(i) * N + j] += aik * roll[size_t(k) * N + j];
          }
        roll.swap(next);
      }
      d.image.rollout.resize(size_t(grid));
      for (int i = 0; i < grid; ++i) d.image.rollout[size_t(i)] = float(roll[size_t(prefix + i)]);
    }
  }

  if (!metrics) return d;  // head grid, sinks and trade-off need the metrics
  // Head grid: dense entropy and sink mass, and the first variant's error and recall.
  render::HeadGridDoc& g = d.grid;
  g.layers = L;
  g.heads = H;
  g.metrics = {"entropy (dense)", "sink mass (dense)"};
  g.values.assign(2, std::vector<float>(size_t(L * H), 0.f));
  for (int li = 0; li < L; ++li) {
    const Metrics& m = a.dense_metrics[size_t(li)];
    const int nq = a.problems[size_t(li)].n_q, nk = a.problems[size_t(li)].n_k;
    for (int hi = 0; hi < H; ++hi) {
      double e = 0;
      for (int i = 0; i < nq; ++i) e += m.entropy[size_t(hi * nq + i)];
      g.values[0][size_t(li * H + hi)] = float(e / nq);
      float mx = 0;
      for (int j = 0; j < nk; ++j) mx = std::max(mx, m.received[size_t(hi * nk + j)]);
      g.values[1][size_t(li * H + hi)] = mx;
    }
  }
  for (size_t v = 0; v < a.variants.size(); ++v) {
    if (a.specs[v] == "dense" || a.head_metrics[v].empty() || a.head_metrics[v][0].empty())
      continue;
    g.variant = a.specs[v];
    g.metrics.push_back("output error");
    g.metrics.push_back("mass recall");
    std::vector<float> err(size_t(L * H)), rec(size_t(L * H));
    for (int li = 0; li < L; ++li)
      for (int hi = 0; hi < H; ++hi) {
        err[size_t(li * H + hi)] = float(a.head_metrics[v][size_t(li)][size_t(hi)].rel_error);
        rec[size_t(li * H + hi)] = float(a.head_metrics[v][size_t(li)][size_t(hi)].mass_recall);
      }
    g.values.push_back(err);
    g.values.push_back(rec);
    break;
  }

  // Sinks.
  render::SinksDoc& s = d.sinks;
  s.layers = L;
  s.n = N;
  s.labels = a.labels;
  for (int li = 0; li < L; ++li) {
    const Metrics& m = a.dense_metrics[size_t(li)];
    s.received.insert(s.received.end(), m.sink_score.begin(), m.sink_score.end());
    for (int t : m.sinks)
      if (std::find(s.sinks.begin(), s.sinks.end(), t) == s.sinks.end()) s.sinks.push_back(t);
    if (size_t(li) < a.resid_norm.size())
      s.resid_norm.insert(s.resid_norm.end(), a.resid_norm[size_t(li)].begin(),
                          a.resid_norm[size_t(li)].end());
  }
  if (s.resid_norm.size() != size_t(L * N)) s.resid_norm.clear();
  s.massive_tokens = a.massive_tokens;

  // Trade-off: the shown variants (selected layer), then the sweep.
  for (size_t v = 0; v < a.variants.size(); ++v) {
    const Metrics& m = a.layer_metrics[v][size_t(l)];
    const Result& r = a.results[v][size_t(l)];
    render::TradeoffPoint pt;
    pt.label = a.specs[v];
    pt.density = m.density;
    pt.seconds = r.stats.kernel_seconds + r.stats.select_seconds;
    pt.rel_error = m.rel_error;
    pt.recall = m.mass_recall;
    pt.kl = a.e2e[v] && a.e2e[v]->has_tokens ? a.e2e[v]->mean_kl : m.row_kl;
    pt.shown = true;
    d.tradeoff.points.push_back(pt);
  }
  d.tradeoff.points.insert(d.tradeoff.points.end(), a.sweep.begin(), a.sweep.end());
  return d;
}

std::vector<render::PanelTile> build_tiles(const Analysis& a, int q0, int q1, int k0, int k1, int w,
                                           int h, const std::atomic<bool>* cancel) {
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  const int head = std::clamp(a.request.head, 0, a.n_heads() - 1);
  const Problem& p = a.problems[size_t(l)];
  q0 = std::clamp(q0, 0, p.n_q - 1);
  q1 = std::clamp(q1, q0 + 1, p.n_q);
  k0 = std::clamp(k0, 0, p.n_k - 1);
  k1 = std::clamp(k1, k0 + 1, p.n_k);
  TileRequest req;
  req.head = head;
  req.q0 = q0;
  req.q1 = q1;
  req.k0 = k0;
  req.k1 = k1;
  req.w = std::max(1, w);
  req.h = std::max(1, h);
  req.pool = Pool::Max;
  const Variant dense = make_variant("dense");
  const Tile dt = tile_probabilities(dense, p, a.dense[size_t(l)], req);
  const int W = dt.w, Hc = dt.h;
  const int Q = q1 - q0, K = k1 - k0;
  // Cell of each key column and row (the tile's floor boundaries).
  std::vector<int> col_cell(static_cast<size_t>(K)), row_cell(static_cast<size_t>(Q));
  std::vector<int> col_count(size_t(W), 0), row_count(size_t(Hc), 0);
  for (int x = 0; x < W; ++x)
    for (int j = int(int64_t(x) * K / W); j < int(int64_t(x + 1) * K / W); ++j)
      col_cell[size_t(j)] = x, ++col_count[size_t(x)];
  for (int y = 0; y < Hc; ++y)
    for (int i = int(int64_t(y) * Q / Hc); i < int(int64_t(y + 1) * Q / Hc); ++i)
      row_cell[size_t(i)] = y, ++row_count[size_t(y)];
  // Dense rows sampled once per cell row (its middle row) for the dropped-mass strip.
  std::vector<std::vector<double>> dense_rows(static_cast<size_t>(Hc));
  bool any_sparse = false;
  for (const auto& s : a.specs) any_sparse |= s != "dense";
  if (any_sparse)
    parallel_for(Hc, [&](int y) {
      const int i = q0 + int((int64_t(y) * Q / Hc + int64_t(y + 1) * Q / Hc) / 2);
      probability_row(dense, p, a.dense[size_t(l)], head, std::min(i, q1 - 1), 0, p.n_k,
                      dense_rows[size_t(y)]);
    });

  std::vector<render::PanelTile> out;
  for (size_t v = 0; v < a.variants.size(); ++v) {
    if (cancel && cancel->load()) throw Error(ErrorCode::Cancelled, "tiles cancelled");
    const Result& r = a.results[v][size_t(l)];
    const bool is_dense = a.specs[v] == "dense";
    const Tile vt = is_dense ? dt : tile_probabilities(a.variants[v], p, r, req);
    render::PanelTile t;
    t.q0 = q0;
    t.q1 = q1;
    t.k0 = k0;
    t.k1 = k1;
    t.w = W;
    t.h = Hc;
    t.texels.assign(size_t(W) * Hc * 4, 0.f);
    // Kept fraction per cell from the executed layout.
    std::vector<float> kept(size_t(W) * Hc, 0.f);
    std::vector<std::vector<int32_t>> keys_of(static_cast<size_t>(Hc));
    parallel_for(Hc, [&](int y) {
      std::vector<int32_t> keys;
      const int ia = q0 + int(int64_t(y) * Q / Hc), ib = q0 + int(int64_t(y + 1) * Q / Hc);
      const int mid = q0 + int((int64_t(y) * Q / Hc + int64_t(y + 1) * Q / Hc) / 2);
      for (int i = ia; i < ib; ++i) {
        layout_row_keys(r.layout, p, head, i, keys);
        for (int32_t j : keys)
          if (j >= k0 && j < k1) kept[size_t(y) * W + col_cell[size_t(j - k0)]] += 1.f;
        if (i == std::min(mid, q1 - 1)) keys_of[size_t(y)] = keys;
      }
      for (int x = 0; x < W; ++x)
        kept[size_t(y) * W + x] /= float(std::max(1, row_count[size_t(y)] * col_count[size_t(x)]));
    });
    for (int y = 0; y < Hc; ++y)
      for (int x = 0; x < W; ++x) {
        const size_t c = size_t(y) * W + x;
        const float vp = vt.cells[c], dp = dt.cells[c];
        t.texels[c * 4 + 0] = vp;
        t.texels[c * 4 + 1] = dp;
        t.texels[c * 4 + 2] = kept[c];
        t.vmax = std::max(t.vmax, vp);
        t.dmax = std::max(t.dmax, std::fabs(vp - dp));
      }
    if (!is_dense) {
      t.dropped_rows.assign(size_t(Hc), 0.f);
      for (int y = 0; y < Hc; ++y) {
        const std::vector<double>& dr = dense_rows[size_t(y)];
        if (dr.empty()) continue;
        double kept_mass = 0;
        for (int32_t j : keys_of[size_t(y)]) kept_mass += dr[size_t(j)];
        t.dropped_rows[size_t(y)] = float(std::clamp(1.0 - kept_mass, 0.0, 1.0));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

render::HoverInfo hover_info(const Analysis& a, int panel, int q, int k) {
  render::HoverInfo h;
  if (panel < 0 || panel >= int(a.variants.size())) return h;
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  const int head = std::clamp(a.request.head, 0, a.n_heads() - 1);
  const Problem& p = a.problems[size_t(l)];
  if (q < 0 || q >= p.n_q || k < 0 || k >= p.n_k) return h;
  std::vector<double> row, drow;
  probability_row(a.variants[size_t(panel)], p, a.results[size_t(panel)][size_t(l)], head, q, 0,
                  p.n_k, row);
  probability_row(make_variant("dense"), p, a.dense[size_t(l)], head, q, 0, p.n_k, drow);
  h.valid = true;
  h.prob = row[size_t(k)];
  h.dense_prob = drow[size_t(k)];
  // Rank among the keys the variant gives weight to (0 when it gives this key none).
  h.rank =
      h.prob > 0
          ? 1 + int(std::count_if(row.begin(), row.end(), [&](double x) { return x > h.prob; }))
          : 0;
  h.kept = layout_keeps(a.results[size_t(panel)][size_t(l)].layout, p, head, q, k);
  h.visible = p.visible(q, k);
  return h;
}

std::vector<float> probability_row_of(const Analysis& a, int panel, int q) {
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  const int head = std::clamp(a.request.head, 0, a.n_heads() - 1);
  const Problem& p = a.problems[size_t(l)];
  if (panel < 0 || panel >= int(a.variants.size()) || q < 0 || q >= p.n_q) return {};
  std::vector<double> row;
  probability_row(a.variants[size_t(panel)], p, a.results[size_t(panel)][size_t(l)], head, q, 0,
                  p.n_k, row);
  return std::vector<float>(row.begin(), row.end());
}

std::vector<float> received_mass(const Analysis& a) {
  if (!a.has_metrics()) return {};
  const int l = std::clamp(a.request.layer, 0, a.n_layers() - 1);
  return a.dense_metrics[size_t(l)].sink_score;
}

}  // namespace attn::gui
