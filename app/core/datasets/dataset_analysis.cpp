#include "app/core/datasets/dataset_analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "app/core/analysis/views.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/labels.h"
#include "compute/cpu/thread_pool.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/hooks.h"
#include "models/arch/text_input.h"

namespace attn::core {
namespace {

// Per-record values of one quantity (NaN: the record has none).
using Samples = std::vector<double>;

// x - y record by record (NaN where either is missing).
Samples paired(const Samples& x, const Samples& y) {
  Samples d(x.size(), kNaN);
  for (size_t i = 0; i < x.size(); ++i) d[i] = x[i] - y[i];
  return d;
}

std::string heads_list(const SessionAblation& a) {
  std::string list;
  for (const std::string& h : a.heads) list += (list.empty() ? "" : ",") + h;
  return list;
}

// Token ids of a text or ids record, as the analysis encodes them.
std::vector<int32_t> record_ids(const models::Model& model, const DatasetItem& it) {
  return it.input.kind == "ids" ? ids_for_model(model, it.input.ids).ids
                                : encode_for_model(model, it.input.text, it.name).ids;
}

}  // namespace

Interval interval_of(const std::vector<double>& x, int bootstrap, uint64_t seed) {
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

namespace {

// The session's head ablation over a dataset, with "mean" as the mean over the corpus (or
// `o.mean_over`) rather than over one record; null without an ablation.
std::shared_ptr<const models::Intervention> dataset_ablation(const Session& s,
                                                             const models::Model& model,
                                                             const std::vector<DatasetItem>& items,
                                                             const DatasetAnalysisOptions& o,
                                                             int threads, DatasetSamples& d) {
  if (s.ablation.empty()) return nullptr;
  const models::ModelInfo& info = model.info();
  d.ablation_heads = heads_list(s.ablation);
  d.ablation_mode = s.ablation.mode;
  require(s.ablation.mode == "zero" || s.ablation.mode == "mean", ErrorCode::InvalidArgument,
          "a dataset ablates by zero or mean (the corpus mean), not '" + s.ablation.mode + "'");
  const auto heads = parse_heads(d.ablation_heads);
  check_heads(heads, info);
  models::Intervention iv = ablation(heads, ablation_mode(s.ablation.mode));
  if (s.ablation.mode == "mean") {
    require(!info.vision, ErrorCode::InvalidArgument,
            "mean ablation over a dataset averages token sequences: use zero ablation for "
            "images");
    std::vector<std::vector<int32_t>> seqs;
    for (const DatasetItem& it : o.mean_over ? *o.mean_over : items)
      seqs.push_back(record_ids(model, it));
    const auto means = head_output_means(model, seqs, threads);
    for (models::HeadEdit& e : iv.heads) e.values = means[size_t(e.layer) * info.n_heads + e.head];
  }
  return std::make_shared<const models::Intervention>(std::move(iv));
}

// The whole analysis of one record; errors name the record.
std::shared_ptr<Analysis> analyze_record(const Session& s, const std::string& session_path,
                                         const DatasetItem& it, const Options& ao) {
  Session rs = s;
  rs.input = it.input;
  Options ro = ao;
  ro.input_name = it.name;
  if (!it.image.data.empty()) ro.image = &it.image;
  try {
    return analyze(rs, session_path, ro);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Cancelled) throw;
    throw Error(e.code(), it.name + ": " + e.what());
  }
}

// One panel's samples per record, all missing (NaN) until the records fill them.
void init_panels(DatasetSamples& d, const Analysis& a, size_t metrics, size_t heads,
                 int64_t records) {
  const Samples nan(size_t(records), kNaN);
  d.panels.resize(a.panels.size());
  for (size_t p = 0; p < d.panels.size(); ++p) {
    PanelSamples& x = d.panels[p];
    x.spec = a.panels[p].spec;
    x.heads.assign(metrics, std::vector<Samples>(heads, nan));
    for (Samples* v : {&x.density, &x.rel_error, &x.mass_recall, &x.row_kl, &x.flops, &x.kl,
                       &x.top1, &x.class_agree, &x.loss, &x.correct})
      *v = nan;
  }
}

// Record `ri`'s head-grid metrics, trade-off point and end-to-end figures of every panel.
void record_panels(DatasetSamples& d, const Analysis& a, const DatasetItem& it, size_t ri,
                   bool lm) {
  const size_t M = d.metrics.size(), LH = size_t(d.n_layers) * d.n_heads;
  for (size_t p = 0; p < a.panels.size(); ++p) {
    PanelSamples& x = d.panels[p];
    const HeadGrid g = head_grid(a, int(p));
    for (size_t m = 0; m < M && m < g.values.size(); ++m)
      for (size_t i = 0; i < LH && i < g.values[m].size(); ++i) x.heads[m][i][ri] = g.values[m][i];
    const TradeoffPoint t = tradeoff_values(a, int(p));
    x.density[ri] = t.density;
    x.rel_error[ri] = t.rel_error;
    x.mass_recall[ri] = t.mass_recall;
    x.row_kl[ri] = t.row_kl;
    x.flops[ri] = t.flops;
    const std::optional<models::EndToEnd>& e = a.panels[p].e2e;
    int cls = -1;
    if (p == 0) {
      if (lm) x.loss[ri] = next_token_loss(a.dense_out(), a.input.ids);
      cls = a.predicted_class();
    } else if (e) {
      if (e->has_tokens) {
        x.kl[ri] = e->mean_kl;
        x.top1[ri] = e->top1_agreement;
      }
      if (lm && std::isfinite(e->ppl_variant)) x.loss[ri] = std::log(e->ppl_variant);
      if (e->has_class) {
        x.class_agree[ri] = e->class_agree ? 1.0 : 0.0;
        cls = e->class_variant;
      }
    }
    if (it.label >= 0 && (p == 0 || (e && e->has_class))) x.correct[ri] = cls == it.label;
  }
}

// Record `ri`'s ablation effect (ablated against plain) and its plain loss.
void record_ablation(DatasetSamples& d, const Analysis& a, size_t ri, bool lm) {
  if (!a.ablation_effect) return;
  const models::EndToEnd& e = *a.ablation_effect;
  if (e.has_tokens) {
    d.ablation_kl[ri] = e.mean_kl;
    d.ablation_top1[ri] = e.top1_agreement;
  }
  if (e.has_class) d.ablation_class[ri] = e.class_agree ? 1.0 : 0.0;
  if (lm && std::isfinite(e.ppl_dense)) d.plain_loss[ri] = std::log(e.ppl_dense);
}

}  // namespace

DatasetSamples collect_dataset(const Session& s, const std::string& session_path,
                               const std::vector<DatasetItem>& items,
                               const DatasetAnalysisOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  require(!items.empty(), ErrorCode::InvalidArgument, "the dataset has no records");
  require(s.input.kind != "tensors" && s.input.kind != "synthetic", ErrorCode::InvalidArgument,
          "a dataset runs a model: the session has raw tensors or a synthetic problem");
  const auto model = cached_model(models::is_default_model_name(s.model.id)
                                      ? s.model.id
                                      : resolve_session_path(session_path, s.model.id));
  const models::ModelInfo& info = model->info();
  DatasetSamples d;
  d.model = s.model.id;
  d.n_layers = info.n_layers;
  d.n_heads = info.n_heads;
  d.metrics = head_metric_names();
  const int64_t R = int64_t(items.size());

  Options ao = o.analysis;
  if (ao.verify_hashes) {  // the model's recorded hashes once, not once a record
    Session model_only = s;
    model_only.input = {};
    check_session_files(model_only, session_path);
  }
  ao.verify_hashes = false;
  ao.residual_stats = false;  // nothing per record reads them
  ao.model = model;
  ao.variants = {std::make_shared<const Variant>(make_variant("dense"))};
  for (const std::string& spec : s.variants)
    ao.variants.push_back(std::make_shared<const Variant>(make_variant(spec)));
  if (auto iv = dataset_ablation(s, *model, items, o, ao.threads, d)) ao.ablation = std::move(iv);

  d.ablation_kl = d.ablation_top1 = d.ablation_class = d.plain_loss = Samples(size_t(R), kNaN);
  d.truncated.assign(size_t(R), 0);
  for (int64_t r = 0; r < R; ++r) {
    const DatasetItem& it = items[size_t(r)];
    d.index.push_back(it.index >= 0 ? it.index : r);
    d.names.push_back(it.name);
    require(r == 0 || d.index[size_t(r)] > d.index[size_t(r - 1)], ErrorCode::InvalidArgument,
            it.name + ": records must come in the order of their indices");
  }
  // Each record fills its own slot of every sample vector, so records run in any order.
  const auto run_record = [&](int64_t r, const Options& ro) {
    const DatasetItem& it = items[size_t(r)];
    const std::shared_ptr<Analysis> a = analyze_record(s, session_path, it, ro);
    d.truncated[size_t(r)] = a->notice.empty() ? 0 : 1;
    if (d.panels.empty())
      init_panels(d, *a, d.metrics.size(), size_t(info.n_layers) * info.n_heads, R);
    const bool lm = !a->vision() && info.causal && info.vocab > 0;
    record_panels(d, *a, it, size_t(r), lm);
    record_ablation(d, *a, size_t(r), lm);
  };
  // The first record sizes the panels (on every thread); the rest run in parallel, one record
  // per thread: a record of a small model is too little work to split its heads across threads
  // (the workers would mostly wait on one another), and records are independent.
  run_record(0, ao);
  if (o.progress) o.progress(1, R);
  std::mutex progress_mu;
  int64_t done = 1;
  Options one = ao;
  one.threads = 1;
  parallel_items(
      R - 1, cpu::resolve_threads(ao.threads),
      [&] {
        return [&](int64_t k) {
          run_record(k + 1, one);
          std::lock_guard<std::mutex> lock(progress_mu);
          ++done;
          if (o.progress) o.progress(done, R);
        };
      },
      ao.cancel);
  if (ao.cancel && ao.cancel->load()) throw Error(ErrorCode::Cancelled, "cancelled");
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

DatasetAnalysis summarize_dataset(const DatasetSamples& x, int bootstrap, uint64_t seed) {
  DatasetAnalysis d;
  d.model = x.model;
  d.dataset = x.dataset;
  d.records = int64_t(x.index.size());
  for (int t : x.truncated) d.truncated += t;
  d.n_layers = x.n_layers;
  d.n_heads = x.n_heads;
  d.metrics = x.metrics;
  d.ablation_heads = x.ablation_heads;
  d.ablation_mode = x.ablation_mode;
  d.seconds = x.seconds;
  const size_t LH = size_t(x.n_layers) * x.n_heads, M = x.metrics.size();
  // Each interval takes the next seed, in the order below; the bootstraps themselves (thousands
  // of resamples of every series) run afterwards in parallel, each with its own seed.
  struct Job {
    const Samples* v;
    uint64_t seed;
    std::function<void(const Interval&)> put;
  };
  std::vector<Job> jobs;
  std::vector<std::unique_ptr<Samples>> owned;  // paired differences
  const auto ci = [&](const Samples& v, std::function<void(const Interval&)> put) {
    jobs.push_back({&v, seed++, std::move(put)});
  };
  const auto ci_of = [&](Samples v, std::function<void(const Interval&)> put) {
    owned.push_back(std::make_unique<Samples>(std::move(v)));
    ci(*owned.back(), std::move(put));
  };
  // Each panel's head grid (one shared bootstrap, the longest task) runs beside the jobs.
  std::vector<std::function<void()>> grids;
  d.panels.resize(x.panels.size());
  for (size_t p = 0; p < x.panels.size(); ++p) {
    const PanelSamples& ps = x.panels[p];
    PanelSummary& out = d.panels[p];
    out.spec = ps.spec;
    out.mean.assign(M, std::vector<float>(LH, float(kNaN)));
    out.lo = out.hi = out.mean;
    // The per-head intervals: metrics x heads series over the same records, bootstrapped
    // together with one shared set of resamples (one matrix product, bootstrap_cis); a series
    // with a missing record (NaN) takes its own resampling of the records it has.
    std::vector<std::pair<size_t, size_t>> cells, shared;
    std::vector<const Samples*> series;
    for (size_t m = 0; m < M && m < ps.heads.size(); ++m)
      for (size_t i = 0; i < LH && i < ps.heads[m].size(); ++i) {
        const Samples& v = ps.heads[m][i];
        if (std::all_of(v.begin(), v.end(), [](double y) { return std::isfinite(y); })) {
          shared.emplace_back(m, i);
          series.push_back(&v);
        } else {
          cells.emplace_back(m, i);
        }
      }
    const auto put = [&out](size_t m, size_t i, double mean, double lo, double hi) {
      out.mean[m][i] = float(mean);
      out.lo[m][i] = float(lo);
      out.hi[m][i] = float(hi);
    };
    const uint64_t grid_seed = seed++;
    grids.push_back([=, shared = std::move(shared), series = std::move(series)] {
      const std::vector<std::pair<double, double>> cis =
          bootstrap > 0 ? bootstrap_cis(series, bootstrap, grid_seed)
                        : std::vector<std::pair<double, double>>(series.size(), {kNaN, kNaN});
      for (size_t c = 0; c < shared.size(); ++c) {
        const Samples& v = *series[c];
        double mean = 0;
        for (double y : v) mean += y;
        mean /= double(std::max<size_t>(v.size(), 1));
        const auto [lo, hi] = bootstrap > 0 ? cis[c] : std::pair{mean, mean};
        put(shared[c].first, shared[c].second, mean, lo, hi);
      }
    });
    for (const auto& [m, i] : cells)
      ci(ps.heads[m][i], [put, m = m, i = i](const Interval& v) { put(m, i, v.mean, v.lo, v.hi); });
    for (auto [v, field] : {std::pair{&ps.density, &PanelSummary::density},
                            {&ps.rel_error, &PanelSummary::rel_error},
                            {&ps.mass_recall, &PanelSummary::mass_recall},
                            {&ps.row_kl, &PanelSummary::row_kl},
                            {&ps.flops, &PanelSummary::flops},
                            {&ps.kl, &PanelSummary::next_token_kl},
                            {&ps.top1, &PanelSummary::top1_agreement},
                            {&ps.class_agree, &PanelSummary::class_agreement},
                            {&ps.loss, &PanelSummary::loss},
                            {&ps.correct, &PanelSummary::accuracy}})
      ci(*v, [&out, field = field](const Interval& r) { out.*field = r; });
    if (p > 0) {
      ci_of(paired(ps.loss, x.panels[0].loss), [&out](const Interval& r) { out.loss_rise = r; });
      ci_of(paired(x.panels[0].correct, ps.correct),
            [&out](const Interval& r) { out.accuracy_drop = r; });
    }
  }
  if (!x.ablation_heads.empty() && !x.panels.empty()) {
    ci(x.ablation_kl, [&d](const Interval& r) { d.ablation_kl = r; });
    ci(x.ablation_top1, [&d](const Interval& r) { d.ablation_top1 = r; });
    ci(x.ablation_class, [&d](const Interval& r) { d.ablation_class_agreement = r; });
    ci(x.plain_loss, [&d](const Interval& r) { d.plain_loss = r; });
    d.ablation_loss = d.panels[0].loss;  // set once the panels' intervals are in (below)
    ci_of(paired(x.panels[0].loss, x.plain_loss),
          [&d](const Interval& r) { d.ablation_loss_rise = r; });
  }
  std::vector<Interval> got(jobs.size());
  const int G = int(grids.size());
  parallel_for(G + int(jobs.size()), [&](int j) {
    if (j < G) return grids[size_t(j)]();
    const Job& job = jobs[size_t(j - G)];
    got[size_t(j - G)] = interval_of(*job.v, bootstrap, job.seed);
  });
  for (size_t j = 0; j < jobs.size(); ++j) jobs[j].put(got[j]);
  if (!x.ablation_heads.empty() && !x.panels.empty()) d.ablation_loss = d.panels[0].loss;
  return d;
}

DatasetAnalysis analyze_dataset(const Session& s, const std::string& session_path,
                                const std::vector<DatasetItem>& items,
                                const DatasetAnalysisOptions& o) {
  return summarize_dataset(collect_dataset(s, session_path, items, o), o.bootstrap, o.seed);
}

namespace {

constexpr const char* kSamplesKind = "attnscope-dataset-samples";

nlohmann::json values_json(const Samples& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
  return a;
}

Samples values_from(const nlohmann::json& j, size_t n, const std::string& what,
                    const std::string& source) {
  require(j.is_array() && j.size() == n, ErrorCode::Format,
          source + ": " + what + " must list " + std::to_string(n) + " values, one a record");
  Samples v;
  for (const auto& x : j) {
    require(x.is_null() || x.is_number(), ErrorCode::Format,
            source + ": " + what + " holds a value that is not a number");
    v.push_back(x.is_null() ? kNaN : x.get<double>());
  }
  return v;
}

// The per-record vectors of a panel, by name (one table for writing and reading).
std::vector<std::pair<const char*, Samples PanelSamples::*>> panel_fields() {
  return {{"density", &PanelSamples::density},
          {"rel_error", &PanelSamples::rel_error},
          {"mass_recall", &PanelSamples::mass_recall},
          {"row_kl", &PanelSamples::row_kl},
          {"flops", &PanelSamples::flops},
          {"next_token_kl", &PanelSamples::kl},
          {"top1_agreement", &PanelSamples::top1},
          {"class_agreement", &PanelSamples::class_agree},
          {"loss", &PanelSamples::loss},
          {"correct", &PanelSamples::correct}};
}
std::vector<std::pair<const char*, Samples DatasetSamples::*>> ablation_fields() {
  return {{"next_token_kl", &DatasetSamples::ablation_kl},
          {"top1_agreement", &DatasetSamples::ablation_top1},
          {"class_agreement", &DatasetSamples::ablation_class},
          {"plain_loss", &DatasetSamples::plain_loss}};
}

}  // namespace

nlohmann::json dataset_samples_json(const DatasetSamples& d) {
  nlohmann::json j = {{"kind", kSamplesKind},     {"version", 1},         {"model", d.model},
                      {"dataset", d.dataset},     {"layers", d.n_layers}, {"heads", d.n_heads},
                      {"metrics", d.metrics},     {"index", d.index},     {"names", d.names},
                      {"truncated", d.truncated}, {"seconds", d.seconds}};
  nlohmann::json panels = nlohmann::json::array();
  for (const PanelSamples& p : d.panels) {
    nlohmann::json pj = {{"spec", p.spec}};
    for (const auto& [name, field] : panel_fields()) pj[name] = values_json(p.*field);
    nlohmann::json heads = nlohmann::json::object();
    for (size_t m = 0; m < d.metrics.size() && m < p.heads.size(); ++m) {
      nlohmann::json cells = nlohmann::json::array();
      for (const Samples& c : p.heads[m]) cells.push_back(values_json(c));
      heads[d.metrics[m]] = cells;
    }
    pj["heads"] = heads;
    panels.push_back(pj);
  }
  j["panels"] = panels;
  if (!d.ablation_heads.empty()) {
    nlohmann::json a = {{"heads", d.ablation_heads}, {"mode", d.ablation_mode}};
    for (const auto& [name, field] : ablation_fields()) a[name] = values_json(d.*field);
    j["ablation"] = a;
  }
  return j;
}

bool is_dataset_samples_json(const nlohmann::json& j) {
  return j.is_object() && j.value("kind", "") == kSamplesKind;
}

DatasetSamples dataset_samples_from_json(const nlohmann::json& j, const std::string& source) {
  require(is_dataset_samples_json(j), ErrorCode::Format,
          source + ": not a shard of `analyze --dataset --shard` (kind " + kSamplesKind + ")");
  DatasetSamples d;
  try {
    require(j.at("version").get<int>() == 1, ErrorCode::Format,
            source + ": version " + j.at("version").dump() + " is not supported");
    d.model = j.at("model").get<std::string>();
    d.dataset = j.at("dataset").get<std::string>();
    d.n_layers = j.at("layers").get<int>();
    d.n_heads = j.at("heads").get<int>();
    d.metrics = j.at("metrics").get<std::vector<std::string>>();
    d.index = j.at("index").get<std::vector<int64_t>>();
    d.names = j.at("names").get<std::vector<std::string>>();
    d.truncated = j.at("truncated").get<std::vector<int>>();
    d.seconds = j.value("seconds", 0.0);
    const size_t R = d.index.size(), LH = size_t(std::max(0, d.n_layers * d.n_heads));
    require(d.names.size() == R && d.truncated.size() == R && d.n_layers > 0 && d.n_heads > 0,
            ErrorCode::Format,
            source + ": index, names and truncated must have one entry a record");
    for (size_t r = 1; r < R; ++r)
      require(d.index[r] > d.index[r - 1], ErrorCode::Format,
              source + ": record indices must ascend");
    for (const auto& pj : j.at("panels")) {
      PanelSamples p;
      p.spec = pj.at("spec").get<std::string>();
      for (const auto& [name, field] : panel_fields())
        p.*field = values_from(pj.at(name), R, p.spec + " " + name, source);
      for (const std::string& m : d.metrics) {
        const auto& cells = pj.at("heads").at(m);
        require(cells.is_array() && cells.size() == LH, ErrorCode::Format,
                source + ": " + p.spec + " heads." + m + " must hold layers x heads cells");
        std::vector<Samples> grid;
        for (const auto& c : cells) grid.push_back(values_from(c, R, p.spec + " " + m, source));
        p.heads.push_back(std::move(grid));
      }
      d.panels.push_back(std::move(p));
    }
    require(!d.panels.empty(), ErrorCode::Format, source + ": no panels");
    if (j.contains("ablation")) {
      const auto& a = j.at("ablation");
      d.ablation_heads = a.at("heads").get<std::string>();
      d.ablation_mode = a.at("mode").get<std::string>();
      for (const auto& [name, field] : ablation_fields())
        d.*field = values_from(a.at(name), R, std::string("ablation ") + name, source);
    } else {
      for (const auto& [name, field] : ablation_fields()) d.*field = Samples(R, kNaN);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::Format, source + ": " + e.what());
  }
  return d;
}

DatasetSamples merge_dataset_samples(const std::vector<DatasetSamples>& shards) {
  require(!shards.empty(), ErrorCode::Format, "no shards to merge");
  const DatasetSamples& f = shards.front();
  std::vector<std::pair<int64_t, std::pair<size_t, size_t>>> order;  // index -> (shard, record)
  for (size_t s = 0; s < shards.size(); ++s) {
    const DatasetSamples& x = shards[s];
    bool same = x.model == f.model && x.dataset == f.dataset && x.n_layers == f.n_layers &&
                x.n_heads == f.n_heads && x.metrics == f.metrics &&
                x.panels.size() == f.panels.size() && x.ablation_heads == f.ablation_heads &&
                x.ablation_mode == f.ablation_mode;
    for (size_t p = 0; same && p < x.panels.size(); ++p)
      same = x.panels[p].spec == f.panels[p].spec;
    require(same, ErrorCode::Format,
            "shard " + std::to_string(s + 1) +
                " ran another model, dataset, variant list or ablation than the first");
    for (size_t r = 0; r < x.index.size(); ++r) order.push_back({x.index[r], {s, r}});
  }
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i)
    require(order[i].first != order[i - 1].first, ErrorCode::Format,
            "record " + std::to_string(order[i].first) + " is in two shards");
  DatasetSamples m;
  m.model = f.model;
  m.dataset = f.dataset;
  m.n_layers = f.n_layers;
  m.n_heads = f.n_heads;
  m.metrics = f.metrics;
  m.ablation_heads = f.ablation_heads;
  m.ablation_mode = f.ablation_mode;
  m.panels.resize(f.panels.size());
  for (size_t p = 0; p < f.panels.size(); ++p) {
    m.panels[p].spec = f.panels[p].spec;
    m.panels[p].heads.assign(
        f.panels[p].heads.size(),
        std::vector<Samples>(f.panels[p].heads.empty() ? 0 : f.panels[p].heads[0].size()));
  }
  for (const DatasetSamples& x : shards) m.seconds += x.seconds;
  for (const auto& [index, at] : order) {
    const DatasetSamples& x = shards[at.first];
    const size_t r = at.second;
    m.index.push_back(index);
    m.names.push_back(x.names[r]);
    m.truncated.push_back(x.truncated[r]);
    for (const auto& [name, field] : ablation_fields()) (m.*field).push_back((x.*field)[r]);
    for (size_t p = 0; p < m.panels.size(); ++p) {
      for (const auto& [name, field] : panel_fields())
        (m.panels[p].*field).push_back((x.panels[p].*field)[r]);
      for (size_t k = 0; k < m.panels[p].heads.size(); ++k)
        for (size_t i = 0; i < m.panels[p].heads[k].size(); ++i)
          m.panels[p].heads[k][i].push_back(x.panels[p].heads[k][i][r]);
    }
  }
  return m;
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
