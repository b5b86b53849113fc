#include "app/core/dataset_analysis.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "app/core/head_atlas.h"
#include "app/core/head_metrics.h"
#include "app/core/interventions.h"
#include "app/core/labels.h"
#include "app/core/views.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/hooks.h"
#include "models/arch/text_input.h"

namespace attn::core {
namespace {

// Per-record values of one quantity (NaN: the record has none).
using Samples = std::vector<double>;

Interval interval_of(const Samples& x, int bootstrap, uint64_t seed) {
  Interval r;
  double sum = 0;
  for (double v : x)
    if (std::isfinite(v)) {
      sum += v;
      ++r.n;
    }
  if (r.n == 0) return r;
  r.mean = sum / double(r.n);
  if (bootstrap > 0) {
    std::tie(r.lo, r.hi) = bootstrap_ci(x, bootstrap, seed);
  } else {
    r.lo = r.hi = r.mean;
  }
  return r;
}

// x - y record by record (NaN where either is missing).
Samples paired(const Samples& x, const Samples& y) {
  Samples d(x.size(), kNaN);
  for (size_t i = 0; i < x.size(); ++i) d[i] = x[i] - y[i];
  return d;
}

struct PanelSamples {
  std::vector<std::vector<Samples>> heads;  // [metric][L * H] -> records
  Samples density, rel_error, mass_recall, row_kl, flops;
  Samples kl, top1, class_agree, loss, correct;
};

std::string heads_list(const SessionAblation& a) {
  std::string list;
  for (const std::string& h : a.heads) list += (list.empty() ? "" : ",") + h;
  return list;
}

// Token ids of a text or ids record, as the analysis encodes them.
std::vector<int32_t> record_ids(const Model& model, const DatasetItem& it) {
  return it.input.kind == "ids" ? ids_for_model(model, it.input.ids).ids
                                : encode_for_model(model, it.input.text, it.name).ids;
}

}  // namespace

std::vector<std::vector<float>> head_output_means(const Model& model,
                                                  const std::vector<std::vector<int32_t>>& seqs,
                                                  int threads) {
  const ModelInfo& info = model.info();
  const int L = info.n_layers, H = info.n_heads, d = info.head_dim;
  std::vector<std::vector<double>> sum(size_t(L) * H, std::vector<double>(size_t(d), 0.0));
  double positions = 0;
  for (const auto& ids : seqs) {
    Capture cap(HookSelection::parse("blocks.*.attn.out"));
    ForwardOptions fo;
    fo.capture = &cap;
    fo.threads = threads;
    ModelInput in;
    in.ids = ids;
    model.forward(in, fo);
    const size_t n = ids.size();
    positions += double(n);
    for (int l = 0; l < L; ++l) {
      const auto& out = cap.layers[size_t(l)].out;
      for (int h = 0; h < H; ++h)
        for (size_t t = 0; t < n; ++t)
          for (int e = 0; e < d; ++e)
            sum[size_t(l) * H + h][size_t(e)] += out[(size_t(h) * n + t) * d + size_t(e)];
    }
  }
  std::vector<std::vector<float>> mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i)
    for (double x : sum[i]) mean[i].push_back(positions > 0 ? float(x / positions) : 0.0f);
  return mean;
}

DatasetAnalysis analyze_dataset(const Session& s, const std::string& session_path,
                                const std::vector<DatasetItem>& items,
                                const DatasetAnalysisOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  require(!items.empty(), ErrorCode::InvalidArgument, "the dataset has no records");
  require(s.input.kind != "tensors" && s.input.kind != "synthetic", ErrorCode::InvalidArgument,
          "a dataset runs a model: the session has raw tensors or a synthetic problem");
  const auto model = cached_model(is_default_model_name(s.model.id)
                                      ? s.model.id
                                      : resolve_session_path(session_path, s.model.id));
  const ModelInfo& info = model->info();
  DatasetAnalysis d;
  d.model = s.model.id;
  d.n_layers = info.n_layers;
  d.n_heads = info.n_heads;
  d.metrics = head_metric_names();
  const int64_t R = int64_t(items.size());
  const size_t LH = size_t(info.n_layers) * info.n_heads, M = d.metrics.size();

  Options ao = o.analysis;
  if (ao.verify_hashes) {  // the model's recorded hashes once, not once a record
    Session model_only = s;
    model_only.input = {};
    check_session_files(model_only, session_path);
  }
  ao.verify_hashes = false;
  if (!s.ablation.empty()) {
    d.ablation_heads = heads_list(s.ablation);
    d.ablation_mode = s.ablation.mode;
    require(s.ablation.mode == "zero" || s.ablation.mode == "mean", ErrorCode::InvalidArgument,
            "a dataset ablates by zero or mean (the corpus mean), not '" + s.ablation.mode + "'");
    const auto heads = parse_heads(d.ablation_heads);
    check_heads(heads, info);
    Intervention iv = ablation(heads, ablation_mode(s.ablation.mode));
    if (s.ablation.mode == "mean") {
      require(!info.vision, ErrorCode::InvalidArgument,
              "mean ablation over a dataset averages token sequences: use zero ablation for "
              "images");
      std::vector<std::vector<int32_t>> seqs;
      for (const DatasetItem& it : items) seqs.push_back(record_ids(*model, it));
      const auto means = head_output_means(*model, seqs, ao.threads);
      for (HeadEdit& e : iv.heads) e.values = means[size_t(e.layer) * info.n_heads + e.head];
    }
    ao.ablation = std::make_shared<const Intervention>(std::move(iv));
  }

  std::vector<PanelSamples> ps;
  Samples abl_kl(size_t(R), kNaN), abl_top1(size_t(R), kNaN), abl_class(size_t(R), kNaN),
      plain_loss(size_t(R), kNaN);
  for (int64_t r = 0; r < R; ++r) {
    const DatasetItem& it = items[size_t(r)];
    Session rs = s;
    rs.input = it.input;
    Options ro = ao;
    ro.input_name = it.name;
    if (!it.image.data.empty()) ro.image = &it.image;
    std::shared_ptr<Analysis> a;
    try {
      a = analyze(rs, session_path, ro);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) throw;
      throw Error(e.code(), it.name + ": " + e.what());
    }
    if (!a->notice.empty()) ++d.truncated;
    if (ps.empty()) {
      ps.resize(a->panels.size());
      for (PanelSamples& p : ps) {
        p.heads.assign(M, std::vector<Samples>(LH, Samples(size_t(R), kNaN)));
        for (Samples* x : {&p.density, &p.rel_error, &p.mass_recall, &p.row_kl, &p.flops, &p.kl,
                           &p.top1, &p.class_agree, &p.loss, &p.correct})
          x->assign(size_t(R), kNaN);
      }
      for (const Panel& pn : a->panels) {
        PanelSummary summary;
        summary.spec = pn.spec;
        d.panels.push_back(std::move(summary));
      }
    }
    const bool lm = !a->vision() && info.causal && info.vocab > 0;
    for (size_t p = 0; p < a->panels.size(); ++p) {
      PanelSamples& x = ps[p];
      const HeadGrid g = head_grid(*a, int(p));
      for (size_t m = 0; m < M && m < g.values.size(); ++m)
        for (size_t i = 0; i < LH && i < g.values[m].size(); ++i)
          x.heads[m][i][size_t(r)] = g.values[m][i];
      const TradeoffPoint t = tradeoff_point(*a, int(p));
      x.density[size_t(r)] = t.density;
      x.rel_error[size_t(r)] = t.rel_error;
      x.mass_recall[size_t(r)] = t.mass_recall;
      x.row_kl[size_t(r)] = t.row_kl;
      x.flops[size_t(r)] = t.flops;
      const std::optional<EndToEnd>& e = a->panels[p].e2e;
      int cls = -1;
      if (p == 0) {
        if (lm) x.loss[size_t(r)] = next_token_loss(a->dense_out(), a->input.ids);
        cls = a->predicted_class();
      } else if (e) {
        if (e->has_tokens) {
          x.kl[size_t(r)] = e->mean_kl;
          x.top1[size_t(r)] = e->top1_agreement;
        }
        if (lm && std::isfinite(e->ppl_variant)) x.loss[size_t(r)] = std::log(e->ppl_variant);
        if (e->has_class) {
          x.class_agree[size_t(r)] = e->class_agree ? 1.0 : 0.0;
          cls = e->class_variant;
        }
      }
      if (it.label >= 0 && (p == 0 || (e && e->has_class)))
        x.correct[size_t(r)] = cls == it.label ? 1.0 : 0.0;
    }
    if (a->ablation_effect) {
      const EndToEnd& e = *a->ablation_effect;
      if (e.has_tokens) {
        abl_kl[size_t(r)] = e.mean_kl;
        abl_top1[size_t(r)] = e.top1_agreement;
      }
      if (e.has_class) abl_class[size_t(r)] = e.class_agree ? 1.0 : 0.0;
      if (lm && std::isfinite(e.ppl_dense)) plain_loss[size_t(r)] = std::log(e.ppl_dense);
    }
    if (o.progress) o.progress(r + 1, R);
  }
  d.records = R;

  const int B = o.bootstrap;
  uint64_t seed = o.seed;
  const auto ci = [&](const Samples& x) { return interval_of(x, B, seed++); };
  for (size_t p = 0; p < ps.size(); ++p) {
    const PanelSamples& x = ps[p];
    PanelSummary& out = d.panels[p];
    out.mean.assign(M, std::vector<float>(LH, float(kNaN)));
    out.lo = out.hi = out.mean;
    for (size_t m = 0; m < M; ++m)
      for (size_t i = 0; i < LH; ++i) {
        const Interval v = ci(x.heads[m][i]);
        out.mean[m][i] = float(v.mean);
        out.lo[m][i] = float(v.lo);
        out.hi[m][i] = float(v.hi);
      }
    out.density = ci(x.density);
    out.rel_error = ci(x.rel_error);
    out.mass_recall = ci(x.mass_recall);
    out.row_kl = ci(x.row_kl);
    out.flops = ci(x.flops);
    out.next_token_kl = ci(x.kl);
    out.top1_agreement = ci(x.top1);
    out.class_agreement = ci(x.class_agree);
    out.loss = ci(x.loss);
    out.accuracy = ci(x.correct);
    if (p > 0) {
      out.loss_rise = ci(paired(x.loss, ps[0].loss));
      out.accuracy_drop = ci(paired(ps[0].correct, x.correct));
    }
  }
  if (!s.ablation.empty()) {
    d.ablation_kl = ci(abl_kl);
    d.ablation_top1 = ci(abl_top1);
    d.ablation_class_agreement = ci(abl_class);
    d.plain_loss = ci(plain_loss);
    d.ablation_loss = d.panels[0].loss;
    d.ablation_loss_rise = ci(paired(ps[0].loss, plain_loss));
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

namespace {

nlohmann::json interval_json(const Interval& v) {
  const auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  return {{"mean", num(v.mean)}, {"ci_low", num(v.lo)}, {"ci_high", num(v.hi)}, {"records", v.n}};
}

nlohmann::json grid_json(const std::vector<float>& g, int L, int H) {
  nlohmann::json rows = nlohmann::json::array();
  for (int l = 0; l < L; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int h = 0; h < H; ++h) {
      const float v = g[size_t(l) * H + h];
      row.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
    }
    rows.push_back(row);
  }
  return rows;
}

// " · L0H3 corpus-mean ablated" for subtitles ("" without an ablation).
std::string ablation_note(const DatasetAnalysis& d) {
  if (d.ablation_heads.empty()) return "";
  return " \u00b7 " + d.ablation_heads + " " +
         (d.ablation_mode == "mean" ? "corpus-mean" : d.ablation_mode) + " ablated";
}

}  // namespace

nlohmann::json dataset_analysis_json(const DatasetAnalysis& d) {
  nlohmann::json j = {{"version", 1},
                      {"model", d.model},
                      {"dataset", d.dataset},
                      {"records", d.records},
                      {"truncated", d.truncated},
                      {"layers", d.n_layers},
                      {"heads", d.n_heads},
                      {"seconds", d.seconds},
                      {"interval", "bootstrap 95% over the records"}};
  nlohmann::json panels = nlohmann::json::array();
  for (const PanelSummary& p : d.panels) {
    nlohmann::json pj = {{"spec", p.spec},
                         {"density", interval_json(p.density)},
                         {"rel_error", interval_json(p.rel_error)},
                         {"mass_recall", interval_json(p.mass_recall)},
                         {"row_kl", interval_json(p.row_kl)},
                         {"flops", interval_json(p.flops)},
                         {"next_token_kl", interval_json(p.next_token_kl)},
                         {"top1_agreement", interval_json(p.top1_agreement)},
                         {"class_agreement", interval_json(p.class_agreement)},
                         {"loss", interval_json(p.loss)},
                         {"loss_rise", interval_json(p.loss_rise)},
                         {"accuracy", interval_json(p.accuracy)},
                         {"accuracy_drop", interval_json(p.accuracy_drop)}};
    nlohmann::json heads = nlohmann::json::object();
    for (size_t m = 0; m < d.metrics.size() && m < p.mean.size(); ++m)
      heads[d.metrics[m]] = {{"mean", grid_json(p.mean[m], d.n_layers, d.n_heads)},
                             {"ci_low", grid_json(p.lo[m], d.n_layers, d.n_heads)},
                             {"ci_high", grid_json(p.hi[m], d.n_layers, d.n_heads)}};
    pj["heads"] = heads;
    panels.push_back(pj);
  }
  j["panels"] = panels;
  if (!d.ablation_heads.empty())
    j["ablation"] = {{"heads", d.ablation_heads},
                     {"mode", d.ablation_mode == "mean" ? "corpus-mean" : d.ablation_mode},
                     {"next_token_kl", interval_json(d.ablation_kl)},
                     {"top1_agreement", interval_json(d.ablation_top1)},
                     {"class_agreement", interval_json(d.ablation_class_agreement)},
                     {"plain_loss", interval_json(d.plain_loss)},
                     {"ablated_loss", interval_json(d.ablation_loss)},
                     {"loss_rise", interval_json(d.ablation_loss_rise)}};
  return j;
}

FigureData dataset_analysis_grid(const DatasetAnalysis& d, const std::string& metric, int panel) {
  require(panel >= 0 && panel < int(d.panels.size()), ErrorCode::InvalidArgument,
          "figure: panel " + std::to_string(panel) + " of " + std::to_string(d.panels.size()));
  const int m = head_metric_index(metric);
  const PanelSummary& p = d.panels[size_t(panel)];
  FigureData f;
  f.view = View::Heads;
  f.title =
      head_metric_title(metric) + " per head, mean over " + std::to_string(d.records) + " records";
  f.subtitle = d.model + " \u00b7 " + variant_caption(p.spec) + ablation_note(d) +
               " \u00b7 \u00b1 half-width of the bootstrap 95% interval";
  ValueGrid g;
  g.caption = variant_caption(p.spec);
  g.rows = d.n_layers;
  g.cols = d.n_heads;
  g.values = p.mean[size_t(m)];
  g.lo = p.lo[size_t(m)];
  g.hi = p.hi[size_t(m)];
  double lo = 0, hi = 0;
  bool any = false;
  for (float v : g.values)
    if (std::isfinite(v)) {
      lo = any ? std::min(lo, double(v)) : v;
      hi = any ? std::max(hi, double(v)) : v;
      any = true;
    }
  const bool unit = head_metrics()[size_t(m)].unit;
  f.values.vmin = unit ? 0 : std::min(0.0, lo);
  f.values.vmax = unit ? 1 : (hi > f.values.vmin ? hi : f.values.vmin + 1);
  if (f.values.vmin < 0) {  // diverging around 0
    const double a = std::max(-f.values.vmin, f.values.vmax);
    f.values.vmin = -a;
    f.values.vmax = a;
  }
  f.values.scale_title = head_metric_title(metric);
  f.values.panels.push_back(std::move(g));
  return f;
}

FigureData dataset_analysis_tradeoff(const DatasetAnalysis& d) {
  std::vector<TradeoffPoint> pts;
  for (const PanelSummary& p : d.panels) {
    TradeoffPoint t;
    t.spec = p.spec;
    t.caption = variant_caption(p.spec);
    t.pattern = spec_family_id(p.spec);
    t.density = p.density.mean;
    t.flops = p.flops.mean;
    t.rel_error = p.rel_error.mean;
    t.mass_recall = p.mass_recall.mean;
    t.row_kl = p.row_kl.mean;
    t.next_token_kl = p.next_token_kl.mean;
    t.top1_agreement = p.top1_agreement.mean;
    t.accuracy = p.accuracy.mean;
    t.accuracy_lo = p.accuracy.lo;
    t.accuracy_hi = p.accuracy.hi;
    t.loss = p.loss.mean;
    t.loss_lo = p.loss.lo;
    t.loss_hi = p.loss.hi;
    pts.push_back(t);
  }
  FigureData f = tradeoff_figure(pts, "Variants over " + std::to_string(d.records) + " records",
                                 d.model + " \u00b7 " + d.dataset + ablation_note(d));
  f.settings.tradeoff_x = "density";
  f.settings.tradeoff_y = d.panels.empty() || std::isfinite(d.panels[0].loss.mean) ? "loss"
                          : std::isfinite(d.panels[0].accuracy.mean)               ? "accuracy"
                                                                                   : "rel_error";
  return f;
}

}  // namespace attn::core
