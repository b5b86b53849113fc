#include "app/core/analysis/analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/labels.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/layer_analysis.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/problem.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/raw_tensors.h"
#include "models/arch/text_input.h"

namespace attn::core {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void check_cancel(const Options& o) {
  if (o.cancel && o.cancel->load()) throw Error(ErrorCode::Cancelled, "analysis cancelled");
}

void progress(const Options& o, const std::string& stage) {
  if (o.progress) o.progress(stage);
}

RunOptions run_options(const Options& o) {
  RunOptions ro;
  ro.threads = o.threads;
  ro.cancel = o.cancel;
  ro.precision = o.precision;
  return ro;
}

// The dense reference runs in f32 whatever the variants' precision.
Options reference_options(const Options& o) {
  Options ref = o;
  ref.precision = Precision::F32;
  return ref;
}

std::string model_id(const Session& s, const std::string& session_path) {
  return models::is_default_model_name(s.model.id) ? s.model.id
                                                   : resolve_session_path(session_path, s.model.id);
}

// Synthetic long problems: 4 heads of d = 64 random Q/K/V with a sharpened score scale, so rows
// have structure worth pooling.
constexpr int kSyntheticHeads = 4, kSyntheticDim = 64;

std::unique_ptr<Backend> backend_of(const Panel& p) {
  return make_backend_with_fallback(p.backend);
}

void keep_notes(Panel& panel, const Backend& b) {
  if (const auto* fb = dynamic_cast<const FallbackBackend*>(&b))
    for (const std::string& n : fb->notes())
      if (std::find(panel.notes.begin(), panel.notes.end(), n) == panel.notes.end())
        panel.notes.push_back(n);
}

// Captures the dense forward pass of a model on the session's input.
void open_model(Analysis& a, const Options& o) {
  const Session& s = a.session;
  a.model = o.model ? o.model : cached_model(model_id(s, a.session_path));
  const models::ModelInfo& info = a.model->info();
  a.info = info;
  a.model_summary = info.model_type + " \u00b7 " + std::to_string(info.n_layers) +
                    " layers \u00b7 " + std::to_string(info.n_heads) +
                    " heads \u00b7 d=" + std::to_string(info.head_dim) +
                    (info.max_tokens ? " \u00b7 context " + std::to_string(info.max_tokens) : "") +
                    (info.weight_dtype != "f32" ? " \u00b7 " + info.weight_dtype + " weights" : "");
  std::vector<std::string> pieces;
  if (s.input.kind == "image") {
    require(info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a text model, but the input is an image");
    models::ImagePreprocessor pp = a.model->preprocessor();
    if (s.input.image_size > 0) {  // position embeddings are interpolated to the new grid
      pp.do_resize = true;
      pp.height = pp.width = s.input.image_size;
      pp.shortest_edge = 0;
      pp.do_center_crop = false;
    }
    a.image = o.image ? *o.image
                      : models::load_image(resolve_session_path(a.session_path, s.input.image),
                                           pp.channels);
    require(a.image.channels == pp.channels, ErrorCode::InvalidArgument,
            s.input.image + ": " + std::to_string(a.image.channels) +
                " channels, the model takes " + std::to_string(pp.channels));
    a.input.image = pp(a.image);
    const int patch = int(a.model->config().patch_size);
    require(patch > 0, ErrorCode::Format, info.dir + ": config.json has no patch_size");
    a.grid_h = a.input.image.height / patch;
    a.grid_w = a.input.image.width / patch;
  } else {
    require(s.input.kind == "text" || s.input.kind == "ids", ErrorCode::InvalidArgument,
            "input kind '" + s.input.kind + "' does not go with a model");
    require(!info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a vision model, but the input is text: open an image");
    models::TextInput ti = s.input.kind == "ids"
                               ? ids_for_model(*a.model, s.input.ids)
                               : encode_for_model(*a.model, s.input.text, o.input_name);
    a.tokens = ti.tokens;
    a.notice = ti.notice;
    a.input.ids = ti.ids;
    a.input.labels = ti.labels;
    pieces = ti.labels;
  }
  std::string hooks = "blocks.*.attn.q,blocks.*.attn.k,blocks.*.attn.v";
  if (o.residual_stats) hooks += ",blocks.*.resid";
  if (!o.extra_hooks.empty()) hooks += "," + o.extra_hooks;
  auto capture = std::make_shared<models::Capture>(models::HookSelection::parse(hooks));
  const models::Capture& cap = *capture;
  models::ForwardOptions fo;
  fo.capture = capture.get();
  fo.threads = o.threads;
  // The dense pass runs the reference panel's own kernel and keeps its results: the reference is
  // then the attention the model's forward used, not a second run over the captured layers.
  Panel& dense = a.panels[0];
  const std::unique_ptr<Backend> dense_backend = backend_of(dense);
  models::Substitution reference{
      dense.variant.get(), dense_backend.get(), {}, {}, run_options(reference_options(o))};
  reference.keep_results = true;
  fo.substitution = &reference;
  std::optional<models::ModelOutput> plain;  // the model without the ablation
  if (!s.ablation.empty()) {
    // The plain model runs once, without hooks, for the effect; every view shows the ablated one.
    std::string list;
    for (const std::string& h : s.ablation.heads) list += (list.empty() ? "" : ",") + h;
    const auto heads = parse_heads(list);
    check_heads(heads, info);
    a.ablation = o.ablation ? o.ablation
                            : std::make_shared<const models::Intervention>(
                                  ablation(heads, ablation_mode(s.ablation.mode)));
    models::ForwardOptions plain_options;
    plain_options.threads = o.threads;
    models::Substitution same_kernel = reference;  // the ablated pass's dense kernel
    same_kernel.keep_results = false;
    plain_options.substitution = &same_kernel;
    plain = a.model->forward(a.input, plain_options);
    check_cancel(o);
    fo.intervention = a.ablation.get();
  }
  models::ModelOutput pass = a.model->forward(a.input, fo);
  check_cancel(o);
  keep_notes(dense, *dense_backend);
  auto results = std::make_shared<std::vector<Result>>();
  for (models::SubstitutedLayer& sl : pass.substituted)
    if (sl.result) results->push_back(std::move(*sl.result));
  if (results->size() == size_t(info.n_layers)) dense.results = std::move(results);
  pass.substituted.clear();  // the dense pass, whichever kernel ran it
  a.dense_pass = std::make_shared<const models::ModelOutput>(std::move(pass));
  if (plain) a.ablation_effect = end_to_end(info, a.input, *plain, *a.dense_pass);
  auto problems = std::make_shared<std::vector<Problem>>();
  const bool keep_capture = !o.extra_hooks.empty();
  // Residual statistics (a median over N x hidden entries each) for every layer at once.
  require(cap.layers.size() >= size_t(info.n_layers), ErrorCode::Format,
          info.dir + ": the forward pass captured " + std::to_string(cap.layers.size()) +
              " layers of " + std::to_string(info.n_layers));
  a.resid.resize(o.residual_stats ? size_t(info.n_layers) : 0);
  if (o.residual_stats)
    parallel_for(
        info.n_layers,
        [&](int l) {
          a.resid[size_t(l)] = models::residual_stats(cap.layers[size_t(l)].resid,
                                                      a.dense_out().n_tokens, info.hidden);
        },
        o.threads);
  for (int l = 0; l < info.n_layers; ++l) {
    const Problem* p = cap.problem(l);
    require(p != nullptr, ErrorCode::Format,
            info.dir + ": layer " + std::to_string(l) + " captured no Q/K/V");
    // The capture is dropped unless asked for: its problems move instead of being copied.
    problems->push_back(keep_capture ? *p : std::move(capture->layers[size_t(l)].problem));
    if (size_t(l) < a.resid.size())
      for (const auto& m : a.resid[size_t(l)].massive)
        if (std::find(a.massive_tokens.begin(), a.massive_tokens.end(), m.token) ==
            a.massive_tokens.end())
          a.massive_tokens.push_back(m.token);
  }
  a.problems = std::move(problems);
  if (!o.extra_hooks.empty()) a.capture = capture;
  const int n = a.dense_out().n_tokens;
  if (info.vision) {  // CLS (and distillation) then patches, as the capture labels them
    a.labels = a.problem(0).labels;
    if (a.labels.size() != size_t(n)) {
      a.labels.clear();
      for (int i = 0; i < n; ++i) a.labels.push_back(i == 0 ? "CLS" : std::to_string(i));
    }
  } else {
    a.labels = token_labels(s.input.text, a.tokens, pieces);
  }
}

void open_problem(Analysis& a) {
  const Session& s = a.session;
  auto problems = std::make_shared<std::vector<Problem>>();
  if (s.input.kind == "tensors") {
    const std::string dir = resolve_session_path(a.session_path, s.input.tensors);
    models::RawTensorOptions rto;
    rto.causal = s.input.causal;
    problems->push_back(load_problem_dir(dir, s.input.tensors_layer, rto));
    const Problem& p = problems->front();
    a.model_summary = "tensors " + std::filesystem::path(dir).filename().string() + " \u00b7 " +
                      std::to_string(p.n_heads) + " heads \u00b7 d=" + std::to_string(p.d);
  } else {
    const int n = s.input.synthetic_tokens;
    require(n >= 2 && n <= 65536, ErrorCode::InvalidArgument,
            "synthetic problem: tokens must be in [2, 65536], not " + std::to_string(n));
    problems->push_back(
        random_problem(kSyntheticHeads, kSyntheticHeads, n, n, kSyntheticDim, true, 7, 1.6f));
    a.model_summary = "synthetic random Q/K/V \u00b7 " + std::to_string(kSyntheticHeads) +
                      " heads \u00b7 d=" + std::to_string(kSyntheticDim);
  }
  const Problem& p = problems->front();
  for (int j = 0; j < p.n_k; ++j)
    a.labels.push_back(j < int(p.labels.size()) && !p.labels[size_t(j)].empty()
                           ? display_piece(p.labels[size_t(j)])
                           : std::to_string(j));
  a.problems = std::move(problems);
}

// Runs one panel's variant on every layer (sharing the pattern's sequence state).
void run_panel(const Analysis& a, Panel& panel, const Options& o) {
  auto backend = backend_of(panel);
  panel.results = std::make_shared<const std::vector<Result>>(
      run_layers(*panel.variant, *a.problems, *backend, run_options(o)));
  keep_notes(panel, *backend);
}

// The previous layer's result and problem, and the lists indexed_result() made for it.
struct Listed {
  const Result* raw = nullptr;
  const Problem* problem = nullptr;
  const Result* lists = nullptr;
};

// `r` with its block layout as per-query key lists (the same kept set), for the metric passes
// of add_metrics(): a partial block consults the mask entry by entry, and the comparisons, role
// scores and head slices each walk every row again. Blocks shared by every head (static
// patterns) stay one list; `prev`'s lists serve again when the blocks, the mask and the positions
// are the same (a static pattern in every layer). Other layouts, and inputs too long to list,
// are left as they are.
std::optional<Result> indexed_result(const Result& r, const Problem& p, const Listed& prev) {
  constexpr int64_t kMaxListed = int64_t(1) << 20;  // entries a head's lists may cover (4 MiB)
  if (r.layout.kind != Layout::Kind::Blocks || int64_t(p.n_q) * p.n_k > kMaxListed)
    return std::nullopt;
  Result out = r;
  out.layout = Layout{};
  out.layout.kind = Layout::Kind::Indices;
  const auto same_blocks = [](const BlockLayout& x, const BlockLayout& y) {
    return x.bq == y.bq && x.bk == y.bk && x.row_ptr == y.row_ptr && x.col == y.col &&
           x.full == y.full;
  };
  const bool reuse = prev.raw && prev.lists && r.layout.mask == prev.raw->layout.mask &&
                     prev.raw->layout.blocks.size() == r.layout.blocks.size() &&
                     prev.lists->layout.indices.size() == r.layout.blocks.size() &&
                     p.n_q == prev.problem->n_q && p.n_k == prev.problem->n_k &&
                     p.causal == prev.problem->causal && p.q_pos == prev.problem->q_pos &&
                     p.k_pos == prev.problem->k_pos;
  for (size_t h = 0; h < r.layout.blocks.size(); ++h)
    out.layout.indices.push_back(reuse &&
                                         same_blocks(r.layout.blocks[h], prev.raw->layout.blocks[h])
                                     ? prev.lists->layout.indices[h]
                                     : to_index_layout(r.layout, p, int(h)));
  return out;
}

// A panel that would compute exactly what the reference did: plain dense on the same backend,
// in the precision the reference ran in.
bool same_as_reference(const Analysis& a, const Panel& p, const Options& o) {
  const Panel& ref = a.panels[0];
  return p.spec == ref.spec && p.backend == ref.backend && ref.ran() &&
         (ref.results->empty() || ref.results->front().stats.precision == o.precision);
}

// A later panel that took the reference's results (run_variants()): its comparisons and
// end-to-end figures are the reference's too.
bool shares_reference(const Analysis& a, const Panel& p) {
  return &p != &a.panels[0] && p.results && p.results == a.panels[0].results;
}

}  // namespace

std::shared_ptr<const models::Model> cached_model(const std::string& id_or_dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const models::Model>> models;
  const std::string dir = models::resolve_model_dir(id_or_dir);
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(dir, ec).string();
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = models[key].lock()) return m;
  std::shared_ptr<const models::Model> m = models::load_model(dir);
  models[key] = m;
  return m;
}

Precision Panel::precision() const {
  return ran() && !results->empty() ? results->front().stats.precision : Precision::F32;
}

bool Analysis::variants_ran() const {
  return !panels.empty() &&
         std::all_of(panels.begin(), panels.end(), [](const Panel& p) { return p.ran(); });
}

bool Analysis::has_metrics() const {
  return !panels.empty() &&
         std::all_of(panels.begin(), panels.end(), [](const Panel& p) { return !p.layer.empty(); });
}

bool Analysis::has_end_to_end() const {
  return !panels.empty() && panels[0].e2e.has_value();
}

int Analysis::layer() const {
  return std::clamp(session.layer, 0, std::max(0, n_layers() - 1));
}

int Analysis::head() const {
  return std::clamp(session.head - head_offset, 0, std::max(0, n_heads() - 1));
}

const models::ModelOutput& Analysis::dense_out() const {
  static const models::ModelOutput none;
  return dense_pass ? *dense_pass : none;
}

int Analysis::predicted_class() const {
  const auto& logits = dense_out().logits;
  if (!vision() || logits.empty()) return -1;
  return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string Analysis::predicted_name() const {
  const int c = predicted_class();
  if (c < 0) return "";
  return size_t(c) < info->class_names.size() ? info->class_names[size_t(c)]
                                              : "class " + std::to_string(c);
}

int Analysis::panel_of(const std::string& spec) const {
  for (size_t i = 0; i < panels.size(); ++i)
    if (panels[i].spec == spec) return int(i);
  std::string canon;
  try {
    canon = make_variant(spec).spec();
  } catch (const Error&) {
    return -1;
  }
  for (size_t i = 0; i < panels.size(); ++i)
    if (panels[i].spec == canon) return int(i);
  return -1;
}

std::string heavy_key(const Session& s) {
  std::string k = s.input.kind + "\x1f" + s.model.id + "\x1f" + s.input.text + "\x1f" +
                  s.input.image + "\x1f" + s.input.tensors + "\x1f" +
                  std::to_string(s.input.synthetic_tokens) + "\x1f" + s.backend + "\x1f" +
                  std::to_string(s.input.image_size) + "\x1f" +
                  std::to_string(s.input.tensors_layer) + (s.input.causal ? "c" : "b");
  for (int32_t id : s.input.ids) k += "," + std::to_string(id);
  for (size_t i = 0; i < s.variants.size(); ++i)
    k += "\x1f" + s.variants[i] + "\x1e" +
         (i < s.variant_backends.size() ? s.variant_backends[i] : "");
  for (int l : s.substitute_layers) k += "\x1dL" + std::to_string(l);
  for (int h : s.substitute_heads) k += "\x1dH" + std::to_string(h);
  if (!s.ablation.empty()) {
    k += std::string("\x1d") + "A" + s.ablation.mode;
    for (const std::string& h : s.ablation.heads) k += "," + h;
  }
  return k;
}

std::shared_ptr<Analysis> open(const Session& s, const std::string& session_path,
                               const Options& o) {
  const auto t0 = Clock::now();
  auto a = std::make_shared<Analysis>();
  a->session = s;
  a->session_path = session_path;
  // Every spec and backend is checked before any heavy work.
  const bool made = o.variants.size() == s.variants.size() + 1;
  const auto variant = [&](size_t i, const std::string& spec) {
    return made ? o.variants[i] : std::make_shared<const Variant>(make_variant(spec));
  };
  Panel dense;
  dense.spec = "dense";
  dense.variant = variant(0, "dense");
  dense.backend = s.backend;
  make_backend(s.backend);
  a->panels.push_back(std::move(dense));
  for (size_t i = 0; i < s.variants.size(); ++i) {
    Panel p;
    p.variant = variant(i + 1, s.variants[i]);
    p.spec = p.variant->spec();
    p.backend = i < s.variant_backends.size() && !s.variant_backends[i].empty()
                    ? s.variant_backends[i]
                    : s.backend;
    make_backend(p.backend);
    a->panels.push_back(std::move(p));
  }
  const bool model_free = s.input.kind == "tensors" || s.input.kind == "synthetic";
  require(!model_free || s.ablation.empty(), ErrorCode::InvalidArgument,
          "ablating heads needs a model: " + s.input.kind + " inputs have no heads to ablate");
  if (o.verify_hashes && !model_free) {
    Session checked = s;
    if (o.image) checked.input = {};  // the image is in memory: no file to check
    check_session_files(checked, session_path);
  }
  progress(o, model_free ? "building the problem..." : "running the model...");
  if (model_free)
    open_problem(*a);
  else
    open_model(*a, o);
  require(s.layer < a->n_layers() && s.head < a->n_heads(), ErrorCode::InvalidArgument,
          "the session selects layer " + std::to_string(s.layer) + ", head " +
              std::to_string(s.head) + ", but the input has " + std::to_string(a->n_layers()) +
              " layers and " + std::to_string(a->n_heads()) + " heads");
  check_cancel(o);
  if (o.preview_tokens > 0 && a->n_tokens() >= o.preview_tokens && a->n_heads() > 1) {
    auto one = std::make_shared<std::vector<Problem>>();
    for (const Problem& p : *a->problems) one->push_back(head_problem(p, s.head));
    a->all_heads = std::move(a->problems);
    a->problems = std::move(one);
    a->head_offset = s.head;
    a->panels[0].results.reset();  // the forward's are every head's; the preview shows one
  }
  if (!a->panels[0].ran()) {  // tensors and synthetic problems; a preview's one head
    progress(o, "dense attention...");
    run_panel(*a, a->panels[0], reference_options(o));
  }
  a->forward_seconds = since(t0);
  return a;
}

std::shared_ptr<Analysis> full_heads(const Analysis& in, const Options& o) {
  require(in.preview(), ErrorCode::InvalidArgument, "full_heads: the analysis is no preview");
  const auto t0 = Clock::now();
  auto a = std::make_shared<Analysis>(in);
  a->problems = std::move(a->all_heads);
  a->head_offset = 0;
  for (Panel& p : a->panels) {
    p.results.reset();
    p.layer.clear();
    p.heads.clear();
    p.head_values.clear();
    p.e2e.reset();
    p.capture.reset();
    p.substituted.reset();
  }
  progress(o, "dense attention, every head...");
  run_panel(*a, a->panels[0], reference_options(o));
  a->forward_seconds += since(t0);
  return a;
}

namespace {

// Stages 2-4 on `a` itself: the public stages run them on a copy, analyze() on the one analysis
// it opened (a copy per stage costs a dataset record more than its small model's work).
void run_variants_in(Analysis* a, const Options& o) {
  const auto t0 = Clock::now();
  for (size_t v = 1; v < a->panels.size(); ++v) {
    check_cancel(o);
    Panel& p = a->panels[v];
    if (p.ran()) continue;
    if (same_as_reference(*a, p, o)) {  // "dense" asked for: the reference's results, not a rerun
      p.results = a->panels[0].results;
      continue;
    }
    progress(o, "variant " + p.spec + "...");
    run_panel(*a, p, o);
  }
  a->variants_seconds += since(t0);
}

void add_metrics_in(Analysis* a, const Options& o) {
  require(a->variants_ran(), ErrorCode::InvalidArgument, "add_metrics: run the variants first");
  require(!a->preview(), ErrorCode::InvalidArgument, "add_metrics: run full_heads() first");
  const auto t0 = Clock::now();
  const Panel& dense = a->panels[0];
  const bool per_head =
      o.head_grid && (o.per_head_max_tokens <= 0 || a->n_tokens() <= o.per_head_max_tokens);
  const int L = a->n_layers(), H = a->n_heads();
  const auto& table = head_metrics();
  // The panels to compare: those not compared yet (full_heads() clears comparisons), less any
  // that holds the reference's own results (they copy the reference's comparisons below).
  std::vector<Panel*> todo;
  for (Panel& panel : a->panels)
    if (panel.layer.empty() && !shares_reference(*a, panel)) todo.push_back(&panel);
  const size_t P = todo.size();
  if (P > 0)
    progress(o, "comparing " + (P == 1 ? todo[0]->spec : std::to_string(P) + " panels") +
                    " with dense...");
  // listed[k][l]: panel k's result of layer l as the metric passes read it (indexed_result()).
  std::vector<std::vector<std::optional<Result>>> listed(P);
  for (size_t k = 0; k < P; ++k) {
    listed[k].resize(size_t(L));
    for (int l = 0; l < L; ++l) {
      Listed prev;
      if (l > 0 && listed[k][size_t(l) - 1])
        prev = {&todo[k]->result(l - 1), &a->problem(l - 1), &*listed[k][size_t(l) - 1]};
      listed[k][size_t(l)] = indexed_result(todo[k]->result(l), a->problem(l), prev);
    }
  }
  const auto result = [&](size_t k, int l) -> const Result& {
    return listed[k][size_t(l)] ? *listed[k][size_t(l)] : todo[k]->result(l);
  };
  if (o.head_grid)
    for (Panel* panel : todo)
      panel->head_values.assign(table.size(), std::vector<float>(size_t(L) * size_t(H), 0.f));
  for (int l = 0; l < L; ++l) {
    check_cancel(o);
    const Problem& p = a->problem(l);
    const Result& ref = dense.result(l);
    if (!per_head) {
      for (size_t k = 0; k < P; ++k) {
        Panel& panel = *todo[k];
        panel.layer.push_back(compare(*panel.variant, p, result(k, l), ref, 0.3, o.cancel));
        if (!o.head_grid) continue;
        // Head-grid values from the layer's per-head rows; the comparisons against dense and
        // the role scores (a pass over the head's rows each) are left NaN on long inputs.
        const Metrics& lm = panel.layer.back();
        parallel_for(
            H,
            [&](int h) {
              Metrics sliced;
              sliced.rel_error = sliced.mass_recall = sliced.row_kl = std::nan("");
              sliced.entropy.assign(lm.entropy.begin() + ptrdiff_t(h) * p.n_q,
                                    lm.entropy.begin() + ptrdiff_t(h + 1) * p.n_q);
              sliced.received.assign(lm.received.begin() + ptrdiff_t(h) * p.n_k,
                                     lm.received.begin() + ptrdiff_t(h + 1) * p.n_k);
              const HeadMetricInput hi{*panel.variant, p, result(k, l), h, sliced, nullptr};
              for (size_t m = 0; m < table.size(); ++m)
                panel.head_values[m][size_t(l) * size_t(H) + size_t(h)] = float(table[m].value(hi));
            },
            o.threads);
      }
      continue;
    }
    // Head by head, every panel in turn. A plain-softmax panel's rows are computed once for its
    // comparison with dense, its role scores and its previous-token mass (panel_head()); other
    // panels compare the head's slices (the problem and dense result sliced once for them all).
    // Then the layer's metrics follow from the heads' (no second pass).
    std::vector<std::vector<Metrics>> heads(P, std::vector<Metrics>(size_t(H)));
    parallel_for(
        H,
        [&](int h) {
          std::optional<Problem> ph;
          std::optional<Result> rh;
          SoftmaxRows rows;  // every panel's row blocks of this head, in turn
          for (size_t k = 0; k < P; ++k) {
            check_cancel(o);
            Panel& panel = *todo[k];
            const Variant& v = *panel.variant;
            const Result& var = result(k, l);
            Metrics& m = heads[k][size_t(h)];
            const auto put = [&](const HeadMetricInput& hi) {
              for (size_t t = 0; t < table.size(); ++t)
                panel.head_values[t][size_t(l) * size_t(H) + size_t(h)] = float(table[t].value(hi));
            };
            if (std::optional<PanelHead> one =
                    panel_head(v, p, var, ref, h, &a->input.ids, &rows)) {
              m = std::move(one->metrics);
              put({v, p, var, h, m, &one->roles, one->previous_token});
              continue;
            }
            if (!ph) ph = head_problem(p, h), rh = head_result(ref, p, h);
            m = compare(v, *ph, head_result(var, p, h), *rh, 0.3, o.cancel);
            const RoleScores roles = panel_role_scores(v, p, var, h, &a->input.ids);
            put({v, p, var, h, m, &roles});
          }
        },
        o.threads);
    for (size_t k = 0; k < P; ++k) {
      Panel& panel = *todo[k];
      panel.layer.push_back(
          merge_head_metrics(*panel.variant, p, result(k, l), ref, heads[k], 0.3));
      panel.heads.push_back(std::move(heads[k]));
    }
  }
  // The reference itself under another name (a "dense" variant): the reference's comparisons.
  for (Panel& panel : a->panels)
    if (panel.layer.empty() && shares_reference(*a, panel)) {
      panel.layer = dense.layer;
      panel.heads = dense.heads;
      panel.head_values = dense.head_values;
    }
  a->metrics_seconds = since(t0);
}

void add_end_to_end_in(Analysis* a, const Options& o) {
  require(!a->preview(), ErrorCode::InvalidArgument, "add_end_to_end: run full_heads() first");
  if (!a->model) return;  // raw tensors and synthetic problems have no model to run on
  const auto t0 = Clock::now();
  const models::ModelInfo& info = *a->info;
  // Dense against itself: KL 0, agreement 1, and the dense perplexity, with no second pass.
  a->panels[0].e2e = end_to_end(info, a->input, a->dense_out(), a->dense_out());
  for (size_t v = 1; v < a->panels.size(); ++v) {
    check_cancel(o);
    Panel& p = a->panels[v];
    if (shares_reference(*a, p)) {  // dense substituted is the dense pass
      p.e2e = a->panels[0].e2e;
      continue;
    }
    progress(o, "substituting " + p.spec + " into the model...");
    auto backend = backend_of(p);
    models::Substitution sub{p.variant.get(), backend.get(), a->session.substitute_layers,
                             a->session.substitute_heads, run_options(o)};
    sub.check(info);
    models::ForwardOptions fo;
    fo.substitution = &sub;
    fo.intervention = a->ablation.get();  // the variant replaces attention in the ablated model
    fo.threads = o.threads;
    std::shared_ptr<models::Capture> capture;
    if (!o.extra_hooks.empty()) {
      capture = std::make_shared<models::Capture>(models::HookSelection::parse(o.extra_hooks));
      fo.capture = capture.get();
    }
    // A causal LM's logits are compared as the pass makes them, a block of vocabulary columns
    // at a time, unless the pass is kept (its hooks dumped with its logits).
    std::optional<models::EndToEndStream> stream;
    if (!capture && info.causal && models::EndToEndStream::takes(info, a->dense_out())) {
      stream.emplace(info, a->input, a->dense_out());
      fo.logits_sink = [&stream](int col0, int cols, const float* block) {
        stream->add(col0, cols, block);
      };
    }
    auto out = std::make_shared<const models::ModelOutput>(a->model->forward(a->input, fo));
    p.e2e = stream && out->logits.empty() ? stream->finish(*out)
                                          : end_to_end(info, a->input, a->dense_out(), *out);
    p.forward_seconds = out->seconds;
    if (capture) {
      p.capture = std::move(capture);
      p.substituted = std::move(out);
    }
    keep_notes(p, *backend);
  }
  a->e2e_seconds = since(t0);
}

}  // namespace

std::shared_ptr<Analysis> run_variants(const Analysis& in, const Options& o) {
  auto a = std::make_shared<Analysis>(in);
  run_variants_in(a.get(), o);
  return a;
}

std::shared_ptr<Analysis> add_metrics(const Analysis& in, const Options& o) {
  auto a = std::make_shared<Analysis>(in);
  add_metrics_in(a.get(), o);
  return a;
}

std::shared_ptr<Analysis> add_end_to_end(const Analysis& in, const Options& o) {
  auto a = std::make_shared<Analysis>(in);
  add_end_to_end_in(a.get(), o);
  return a;
}

std::shared_ptr<Analysis> analyze(const Session& s, const std::string& session_path,
                                  const Options& o) {
  auto a = open(s, session_path, o);
  run_variants_in(a.get(), o);
  add_metrics_in(a.get(), o);
  if (o.end_to_end) add_end_to_end_in(a.get(), o);
  progress(o, "");
  return a;
}

std::shared_ptr<Analysis> reselect(const Analysis& in, const Session& s) {
  require(heavy_key(s) == heavy_key(in.session), ErrorCode::InvalidArgument,
          "reselect: the session asks for a different analysis");
  require(s.layer >= 0 && s.layer < in.n_layers() && s.head >= 0 && s.head < in.n_heads(),
          ErrorCode::InvalidArgument,
          "layer " + std::to_string(s.layer) + ", head " + std::to_string(s.head) +
              " is out of range (" + std::to_string(in.n_layers()) + " layers, " +
              std::to_string(in.n_heads()) + " heads)");
  require(!in.preview() || s.head == in.head_offset, ErrorCode::InvalidArgument,
          "reselect: a preview holds head " + std::to_string(in.head_offset) + " alone");
  auto a = std::make_shared<Analysis>(in);
  a->session = s;
  return a;
}

}  // namespace attn::core
