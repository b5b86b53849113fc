#include "app/core/heads/interventions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <span>

#include "app/core/heads/head_atlas.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/dump.h"
#include "models/arch/text_input.h"

namespace attn::core {
namespace {

// Between forward passes of a long scan: the caller's cancellation.
void check_cancel(const std::atomic<bool>* cancel) {
  if (cancel && cancel->load()) throw Error(ErrorCode::Cancelled, "cancelled");
}

double logit_difference(const models::ModelOutput& out, int32_t target, int32_t foil) {
  const float* last = out.logits.data() + size_t(out.n_tokens - 1) * size_t(out.n_logits);
  return double(last[target]) - double(last[foil]);
}

std::string fixed4(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", x);
  return buf;
}

models::ModelOutput run(const models::Model& m, const std::vector<int32_t>& ids,
                        const models::Intervention* iv, models::Capture* cap, int threads) {
  models::ModelInput in;
  in.ids = ids;
  models::ForwardOptions fo;
  fo.intervention = iv;
  fo.capture = cap;
  fo.threads = threads;
  return m.forward(in, fo);
}

}  // namespace

std::vector<std::pair<int, int>> parse_heads(const std::string& list) {
  static const std::regex dotted(R"(\s*(\d+)\.(\d+)\s*)"), named(R"(\s*[Ll](\d+)[Hh](\d+)\s*)");
  std::vector<std::pair<int, int>> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    std::smatch m;
    require(std::regex_match(item, m, dotted) || std::regex_match(item, m, named),
            ErrorCode::InvalidArgument,
            "'" + item + "' is not a head: write LAYER.HEAD or LxHy, 0-based (0.3 or L0H3)");
    require(m[1].length() < 7 && m[2].length() < 7, ErrorCode::InvalidArgument,
            "'" + item + "': layer or head out of range");
    const std::pair<int, int> h{std::stoi(m[1]), std::stoi(m[2])};
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
    start = end + 1;
  }
  return out;
}

void check_heads(const std::vector<std::pair<int, int>>& heads, const models::ModelInfo& info) {
  for (const auto& [l, h] : heads)
    require(l < info.n_layers && h < info.n_heads, ErrorCode::InvalidArgument,
            models::head_name(l, h) + " is outside the model: it has " +
                std::to_string(info.n_layers) + " layers and " + std::to_string(info.n_heads) +
                " heads (0-based)");
}

models::HeadEdit::Mode ablation_mode(const std::string& name) {
  if (name == "zero") return models::HeadEdit::Zero;
  if (name == "mean") return models::HeadEdit::Mean;
  if (name == "resample") return models::HeadEdit::Replace;
  if (name == "pattern") return models::HeadEdit::Pattern;
  throw Error(ErrorCode::InvalidArgument,
              "unknown ablation mode '" + name + "' (known: zero, mean, resample, pattern)");
}

models::Intervention ablation(const std::vector<std::pair<int, int>>& heads,
                              models::HeadEdit::Mode mode) {
  models::Intervention iv;
  for (const auto& [l, h] : heads) {
    models::HeadEdit e;
    e.mode = mode;
    e.layer = l;
    e.head = h;
    iv.heads.push_back(e);
  }
  return iv;
}

models::Intervention resample_ablation(const models::Model& model,
                                       const std::vector<std::pair<int, int>>& heads,
                                       const std::vector<int32_t>& source, int n, int threads,
                                       bool pattern) {
  require(int(source.size()) == n, ErrorCode::InvalidArgument,
          std::string(pattern ? "pattern patching" : "resample ablation") +
              ": the source input has " + std::to_string(source.size()) + " tokens, the input " +
              std::to_string(n) + "; they must be the same length");
  check_heads(heads, model.info());
  models::Capture cap(
      models::HookSelection::parse(pattern ? "blocks.*.attn.pattern" : "blocks.*.attn.out"));
  run(model, source, nullptr, &cap, threads);
  // A head's slice: its output f32 [n, d], or its pattern f32 [n, n].
  const size_t per = size_t(n) * size_t(pattern ? n : model.info().head_dim);
  models::Intervention iv;
  for (const auto& [l, h] : heads) {
    models::HeadEdit e;
    e.mode = pattern ? models::HeadEdit::Pattern : models::HeadEdit::Replace;
    e.layer = l;
    e.head = h;
    const auto& from = pattern ? cap.layers[size_t(l)].pattern : cap.layers[size_t(l)].out;
    e.values.assign(from.begin() + ptrdiff_t(size_t(h) * per),
                    from.begin() + ptrdiff_t(size_t(h + 1) * per));
    iv.heads.push_back(std::move(e));
  }
  return iv;
}

InterventionRun run_intervention(const models::Model& model, const models::ModelInput& in,
                                 const models::Intervention& iv, const std::string& hooks,
                                 int threads) {
  InterventionRun r;
  models::ForwardOptions fo;
  fo.threads = threads;
  r.plain = model.forward(in, fo);
  if (!hooks.empty())
    r.capture = std::make_shared<models::Capture>(models::HookSelection::parse(hooks));
  fo.capture = r.capture.get();
  fo.intervention = &iv;
  r.edited = model.forward(in, fo);
  r.effect = end_to_end(model.info(), in, r.plain, r.edited);
  return r;
}

HeadAblation ablate_heads(const models::Model& model, const HeadAblationRequest& r) {
  HeadAblation a;
  for (const auto& [l, h] : r.heads)
    a.heads += (a.heads.empty() ? "" : ",") + models::head_name(l, h);
  const models::TextInput ti = r.use_ids ? models::ids_for_model(model, r.ids)
                                         : models::encode_for_model(model, r.text, r.text_name);
  if (!ti.notice.empty() && r.notice) r.notice(ti.notice);
  a.input.ids = ti.ids;
  a.input.labels = ti.labels;
  models::Intervention iv;
  if (r.mode == "resample" || r.mode == "pattern") {
    const models::TextInput src = models::encode_for_model(model, r.source_text, r.source_name);
    a.source_tokens = src.ids.size();
    if (src.ids.size() != a.input.ids.size()) {
      a.length_mismatch = true;
      return a;
    }
    iv = resample_ablation(model, r.heads, src.ids, int(a.input.ids.size()), r.threads,
                           r.mode == "pattern");
  } else {
    iv = ablation(r.heads, ablation_mode(r.mode));
  }
  a.run = run_intervention(model, a.input, iv, r.hooks, r.threads);
  return a;
}

std::vector<std::string> dump_head_ablation(const std::string& dir, const HeadAblation& a,
                                            const std::string& hooks) {
  require(a.run.capture != nullptr, ErrorCode::InvalidArgument,
          "dump: the ablated pass captured no hooks");
  const models::HookSelection asked = models::HookSelection::parse(hooks);
  return models::dump_forward(dir, *a.run.capture, a.input, a.run.edited, a.input.labels, &asked);
}

double next_token_loss(const models::ModelOutput& out, const std::vector<int32_t>& ids) {
  require(out.n_logits > 0 && out.logits.size() == size_t(out.n_tokens) * out.n_logits &&
              ids.size() == size_t(out.n_tokens),
          ErrorCode::InvalidArgument, "next-token loss: the model has no token logits");
  double s = 0;
  const int N = out.n_tokens, V = out.n_logits;
  for (int t = 0; t + 1 < N; ++t) {
    const float* row = out.logits.data() + size_t(t) * size_t(V);
    const float mx = *std::max_element(row, row + V);
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
    s += std::log(z) + mx - row[ids[size_t(t) + 1]];
  }
  return N > 1 ? s / (N - 1) : std::nan("");
}

std::vector<std::vector<float>> head_output_means(const models::Model& model,
                                                  const std::vector<std::vector<int32_t>>& seqs,
                                                  int threads) {
  const models::ModelInfo& info = model.info();
  const int L = info.n_layers, H = info.n_heads, d = info.head_dim;
  std::vector<std::vector<double>> sum(size_t(L) * H, std::vector<double>(size_t(d), 0.0));
  double positions = 0;
  for (const auto& ids : seqs) {
    models::Capture cap(models::HookSelection::parse("blocks.*.attn.out"));
    models::ForwardOptions fo;
    fo.capture = &cap;
    fo.threads = threads;
    models::ModelInput in;
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

AblationSamples ablation_samples(const models::Model& model,
                                 const std::vector<std::vector<int32_t>>& windows,
                                 models::HeadEdit::Mode mode, int threads, bool corpus_mean,
                                 const std::vector<int>* items, const std::atomic<bool>* cancel) {
  const models::ModelInfo& info = model.info();
  require(info.causal && info.vocab > 0, ErrorCode::Unsupported,
          "the ablation scan needs a causal language model");
  require(!windows.empty(), ErrorCode::InvalidArgument, "the ablation scan has no text windows");
  require(mode != models::HeadEdit::Replace, ErrorCode::InvalidArgument,
          "the ablation scan ablates by zero or mean, not by resampling");
  require(!corpus_mean || mode == models::HeadEdit::Mean, ErrorCode::InvalidArgument,
          "a corpus mean goes with mean ablation");
  const int L = info.n_layers, H = info.n_heads, W = int(windows.size());
  AblationSamples s;
  s.mode = mode == models::HeadEdit::Zero ? "zero" : corpus_mean ? "corpus-mean" : "mean";
  s.n_layers = L;
  s.n_heads = H;
  s.windows = W;
  if (items) {
    s.index = *items;
    std::sort(s.index.begin(), s.index.end());
    for (size_t k = 0; k < s.index.size(); ++k)
      require(s.index[k] >= 0 && s.index[k] < W && (k == 0 || s.index[k] != s.index[k - 1]),
              ErrorCode::InvalidArgument,
              "window " + std::to_string(s.index[k]) + " is outside the " + std::to_string(W) +
                  " windows, or given twice");
  } else {
    for (int w = 0; w < W; ++w) s.index.push_back(w);
  }
  const std::vector<std::vector<float>> corpus =
      corpus_mean ? head_output_means(model, windows, threads) : std::vector<std::vector<float>>{};
  s.delta.assign(size_t(L) * H, {});
  for (int w : s.index) {
    const auto& ids = windows[size_t(w)];
    check_cancel(cancel);
    const double base = next_token_loss(run(model, ids, nullptr, nullptr, threads), ids);
    s.base.push_back(base);
    for (int i = 0; i < L * H; ++i) {
      check_cancel(cancel);
      models::Intervention iv = ablation({{i / H, i % H}}, mode);
      if (corpus_mean) iv.heads.front().values = corpus[size_t(i)];
      s.delta[size_t(i)].push_back(next_token_loss(run(model, ids, &iv, nullptr, threads), ids) -
                                   base);
    }
  }
  return s;
}

AblationScan summarize_ablation(const AblationSamples& s, int bootstrap, uint64_t seed) {
  AblationScan a;
  a.mode = s.mode;
  a.n_layers = s.n_layers;
  a.n_heads = s.n_heads;
  const int W = int(s.base.size());
  a.windows = W;
  for (double b : s.base) a.loss += b / W;
  for (int i = 0; i < s.n_layers * s.n_heads; ++i) {
    double m = 0;
    for (double d : s.delta[size_t(i)]) m += d / W;
    a.delta.push_back(float(m));
    const auto [lo, hi] = bootstrap_ci(s.delta[size_t(i)], bootstrap, seed + uint64_t(i));
    a.lo.push_back(float(lo));
    a.hi.push_back(float(hi));
  }
  return a;
}

AblationScan ablation_scan(const models::Model& model,
                           const std::vector<std::vector<int32_t>>& windows,
                           models::HeadEdit::Mode mode, int threads, int bootstrap, uint64_t seed,
                           bool corpus_mean, const std::atomic<bool>* cancel) {
  return summarize_ablation(
      ablation_samples(model, windows, mode, threads, corpus_mean, nullptr, cancel), bootstrap,
      seed);
}

int32_t single_token(const models::Model& model, const std::string& text, const std::string& what) {
  require(model.tokenizer() != nullptr, ErrorCode::InvalidArgument,
          "the model has no tokenizer: give " + what + " as a token id");
  const std::vector<models::Token> t = model.tokenizer()->encode(text);
  std::vector<int32_t> ids;
  std::string pieces;
  for (const models::Token& k : t) {
    if (model.config().bos_token_id && k.id == *model.config().bos_token_id && t.size() > 1)
      continue;  // a tokenizer that adds BOS
    ids.push_back(k.id);
    pieces += (pieces.empty() ? "'" : ", '") + model.tokenizer()->id_to_piece(k.id) + "'";
  }
  require(ids.size() == 1, ErrorCode::InvalidArgument,
          what + " '" + text + "' is " + std::to_string(ids.size()) + " tokens (" + pieces +
              "), not one: give a single token (often with a leading space)");
  return ids[0];
}

namespace {

// Checks a clean/corrupt pair and its tokens against the model and `over`.
void check_pair(const models::ModelInfo& info, const std::vector<int32_t>& clean,
                const std::vector<int32_t>& corrupt, int32_t target, int32_t foil,
                const std::string& over) {
  require(!info.vision && info.vocab > 0, ErrorCode::Unsupported,
          "activation patching needs a model with token logits; " + info.model_type + " has none");
  require(over == "heads" || over == "positions" || over == "patterns", ErrorCode::InvalidArgument,
          "unknown patching target '" + over + "' (known: heads, positions, patterns)");
  require(!clean.empty() && clean.size() == corrupt.size(), ErrorCode::InvalidArgument,
          "clean and corrupt inputs must have the same number of tokens: clean has " +
              std::to_string(clean.size()) + ", corrupt " + std::to_string(corrupt.size()));
  for (int32_t id : {target, foil})
    require(id >= 0 && id < info.vocab, ErrorCode::InvalidArgument,
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(info.vocab) + ")");
}

// The hooks of the clean run that patching over `over` takes its pieces from.
const char* clean_hooks(const std::string& over) {
  return over == "patterns" ? "blocks.*.attn.pattern" : "blocks.*.attn.out,blocks.*.resid";
}

// The edit that patches cell (layer, j) from the clean run's capture into the corrupt run: head
// j's output or attention pattern, or the residual stream at position j.
models::Intervention cell_intervention(const models::ModelInfo& info, const models::Capture& cap,
                                       const std::string& over, int layer, int j, int N) {
  const models::LayerCapture& lc = cap.layers[size_t(layer)];
  const int d = info.head_dim;
  models::Intervention iv;
  if (over == "positions") {
    models::ResidEdit e;
    e.layer = layer;
    e.position = j;
    e.values.assign(lc.resid.begin() + ptrdiff_t(size_t(j) * info.hidden),
                    lc.resid.begin() + ptrdiff_t(size_t(j + 1) * info.hidden));
    iv.resid.push_back(std::move(e));
    return iv;
  }
  models::HeadEdit e;
  e.layer = layer;
  e.head = j;
  if (over == "patterns") {
    e.mode = models::HeadEdit::Pattern;
    e.values.assign(lc.pattern.begin() + ptrdiff_t(size_t(j) * N * N),
                    lc.pattern.begin() + ptrdiff_t(size_t(j + 1) * N * N));
  } else {
    e.mode = models::HeadEdit::Replace;
    e.values.assign(lc.out.begin() + ptrdiff_t(size_t(j) * N * d),
                    lc.out.begin() + ptrdiff_t(size_t(j + 1) * N * d));
  }
  iv.heads.push_back(std::move(e));
  return iv;
}

double patch_span(double ld_clean, double ld_corrupt) {
  const double span = ld_clean - ld_corrupt;
  require(std::abs(span) > 1e-9, ErrorCode::InvalidArgument,
          "the clean and corrupt runs give the same logit difference (" + std::to_string(ld_clean) +
              "): nothing to restore");
  return span;
}

// The `k` most likely next tokens at the last position, as (piece, probability).
std::vector<std::pair<std::string, double>> top_tokens(const models::Model& model,
                                                       const models::ModelOutput& out, int k) {
  const int V = out.n_logits;
  const float* last = out.logits.data() + size_t(out.n_tokens - 1) * size_t(V);
  const float mx = *std::max_element(last, last + V);
  double z = 0;
  for (int v = 0; v < V; ++v) z += std::exp(double(last[v]) - mx);
  std::vector<int> idx(static_cast<size_t>(V));
  for (int v = 0; v < V; ++v) idx[size_t(v)] = v;
  k = std::min(k, V);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return last[a] > last[b]; });
  std::vector<std::pair<std::string, double>> top;
  const models::Tokenizer* tok = model.tokenizer();
  for (int i = 0; i < k; ++i) {
    const int32_t id = idx[size_t(i)];
    top.push_back({tok ? tok->decode(std::span(&id, 1), false) : std::to_string(id),
                   std::exp(double(last[id]) - mx) / z});
  }
  return top;
}

}  // namespace

PatchResult activation_patching(const models::Model& model, const std::vector<int32_t>& clean,
                                const std::vector<int32_t>& corrupt, int32_t target, int32_t foil,
                                const PatchOptions& o) {
  const models::ModelInfo& info = model.info();
  check_pair(info, clean, corrupt, target, foil, o.over);
  const int L = info.n_layers, H = info.n_heads, N = int(clean.size());
  PatchResult r;
  r.over = o.over;
  r.target = target;
  r.foil = foil;
  models::Capture cap(models::HookSelection::parse(clean_hooks(o.over)));
  const models::ModelOutput c = run(model, clean, nullptr, &cap, o.threads);
  const models::ModelOutput k = run(model, corrupt, nullptr, nullptr, o.threads);
  r.ld_clean = logit_difference(c, target, foil);
  r.ld_corrupt = logit_difference(k, target, foil);
  const double span = patch_span(r.ld_clean, r.ld_corrupt);
  r.rows = L;
  r.cols = o.over != "positions" ? H : N;
  r.effect.assign(size_t(r.rows) * r.cols, 0.0f);
  if (const models::Tokenizer* tok = model.tokenizer())
    for (int t = 0; t < N; ++t) {
      r.clean_labels.push_back(tok->decode(std::span(&clean[size_t(t)], 1), false));
      r.corrupt_labels.push_back(tok->decode(std::span(&corrupt[size_t(t)], 1), false));
    }
  for (int l = 0; l < L; ++l)
    for (int j = 0; j < r.cols; ++j) {
      check_cancel(o.cancel);
      const models::Intervention iv = cell_intervention(info, cap, o.over, l, j, N);
      const models::ModelOutput p = run(model, corrupt, &iv, nullptr, o.threads);
      r.effect[size_t(l) * r.cols + j] =
          float((logit_difference(p, target, foil) - r.ld_corrupt) / span);
    }
  return r;
}

PatchCell patch_cell(const models::Model& model, const std::vector<int32_t>& clean,
                     const std::vector<int32_t>& corrupt, int32_t target, int32_t foil,
                     const std::string& over, int layer, int index, int threads) {
  const models::ModelInfo& info = model.info();
  check_pair(info, clean, corrupt, target, foil, over);
  const int N = int(clean.size());
  const int cols = over == "positions" ? N : info.n_heads;
  require(layer >= 0 && layer < info.n_layers && index >= 0 && index < cols,
          ErrorCode::InvalidArgument,
          "patch cell (" + std::to_string(layer) + ", " + std::to_string(index) + ") is outside " +
              std::to_string(info.n_layers) + " layers x " + std::to_string(cols) +
              (over == "positions" ? " positions" : " heads"));
  models::Capture cap(models::HookSelection::parse(clean_hooks(over)));
  const models::ModelOutput c = run(model, clean, nullptr, &cap, threads);
  const models::ModelOutput k = run(model, corrupt, nullptr, nullptr, threads);
  const models::Intervention iv = cell_intervention(info, cap, over, layer, index, N);
  const models::ModelOutput p = run(model, corrupt, &iv, nullptr, threads);
  PatchCell r;
  r.over = over;
  r.layer = layer;
  r.index = index;
  r.ld_clean = logit_difference(c, target, foil);
  r.ld_corrupt = logit_difference(k, target, foil);
  r.ld_patched = logit_difference(p, target, foil);
  r.effect = (r.ld_patched - r.ld_corrupt) / patch_span(r.ld_clean, r.ld_corrupt);
  r.top_clean = top_tokens(model, c, 5);
  r.top_corrupt = top_tokens(model, k, 5);
  r.top_patched = top_tokens(model, p, 5);
  return r;
}

std::vector<PatchRun> patch_runs(const models::Model& model,
                                 const std::vector<PatchRecord>& records, const PatchOptions& o) {
  require(!records.empty(), ErrorCode::InvalidArgument, "the patching dataset has no pairs");
  std::vector<PatchRun> runs;
  for (size_t i = 0; i < records.size(); ++i) {
    const PatchRecord& rec = records[i];
    if (o.over == "positions")
      require(rec.clean.size() == records.front().clean.size(), ErrorCode::InvalidArgument,
              rec.name + ": patching over positions needs pairs of one length (" +
                  std::to_string(records.front().clean.size()) + " tokens in the first, " +
                  std::to_string(rec.clean.size()) + " here); patch over heads instead");
    PatchRun run;
    run.index = rec.index >= 0 ? rec.index : int64_t(i);
    run.name = rec.name;
    try {
      run.result = activation_patching(model, rec.clean, rec.corrupt, rec.target, rec.foil, o);
    } catch (const Error& e) {
      throw Error(e.code(), (rec.name.empty() ? "" : rec.name + ": ") + e.what());
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

PatchResult summarize_patch_runs(const std::vector<PatchRun>& runs, int bootstrap, uint64_t seed) {
  require(!runs.empty(), ErrorCode::InvalidArgument, "the patching dataset has no pairs");
  PatchResult r = runs.front().result;
  const size_t cells = r.effect.size();
  const double n = double(runs.size());
  r.records = int(runs.size());
  r.ld_clean = r.ld_corrupt = 0;
  for (const PatchRun& x : runs) {
    require(x.result.effect.size() == cells, ErrorCode::InvalidArgument,
            x.name + ": its grid has another shape than the first pair's");
    r.ld_clean += x.result.ld_clean / n;
    r.ld_corrupt += x.result.ld_corrupt / n;
  }
  r.lo.resize(cells);
  r.hi.resize(cells);
  for (size_t c = 0; c < cells; ++c) {
    std::vector<double> v;
    double m = 0;
    for (const PatchRun& x : runs) {
      v.push_back(x.result.effect[c]);
      m += x.result.effect[c] / n;
    }
    r.effect[c] = float(m);
    const auto [lo, hi] = bootstrap_ci(v, bootstrap, seed + c);
    r.lo[c] = float(lo);
    r.hi[c] = float(hi);
  }
  return r;
}

PatchResult patch_dataset(const models::Model& model, const std::vector<PatchRecord>& records,
                          const PatchOptions& o, int bootstrap, uint64_t seed) {
  return summarize_patch_runs(patch_runs(model, records, o), bootstrap, seed);
}

namespace {
constexpr const char* kPatchShardKind = "attnscope-patch-shard";
}

nlohmann::json patch_shard_json(const PatchShard& s) {
  nlohmann::json runs = nlohmann::json::array();
  for (const PatchRun& x : s.runs) {
    const PatchResult& r = x.result;
    runs.push_back({{"index", x.index},
                    {"name", x.name},
                    {"rows", r.rows},
                    {"cols", r.cols},
                    {"effect", r.effect},
                    {"ld_clean", r.ld_clean},
                    {"ld_corrupt", r.ld_corrupt},
                    {"target", r.target},
                    {"foil", r.foil},
                    {"clean_labels", r.clean_labels},
                    {"corrupt_labels", r.corrupt_labels}});
  }
  return {{"kind", kPatchShardKind}, {"version", 1},   {"model", s.model},
          {"dataset", s.dataset},    {"over", s.over}, {"runs", runs}};
}

PatchShard patch_shard_from_json(const nlohmann::json& j, const std::string& source) {
  require(j.is_object() && j.value("kind", "") == kPatchShardKind, ErrorCode::Format,
          source + ": not a shard of `patch --dataset --shard` (kind " + kPatchShardKind + ")");
  PatchShard s;
  try {
    require(j.at("version").get<int>() == 1, ErrorCode::Format,
            source + ": version " + j.at("version").dump() + " is not supported");
    s.model = j.at("model").get<std::string>();
    s.dataset = j.at("dataset").get<std::string>();
    s.over = j.at("over").get<std::string>();
    for (const auto& rj : j.at("runs")) {
      PatchRun x;
      x.index = rj.at("index").get<int64_t>();
      x.name = rj.at("name").get<std::string>();
      PatchResult& r = x.result;
      r.over = s.over;
      r.rows = rj.at("rows").get<int>();
      r.cols = rj.at("cols").get<int>();
      r.effect = rj.at("effect").get<std::vector<float>>();
      require(r.rows > 0 && r.cols > 0 && r.effect.size() == size_t(r.rows) * size_t(r.cols),
              ErrorCode::Format, source + ": " + x.name + ": the effect grid is not rows x cols");
      r.ld_clean = rj.at("ld_clean").get<double>();
      r.ld_corrupt = rj.at("ld_corrupt").get<double>();
      r.target = rj.at("target").get<int32_t>();
      r.foil = rj.at("foil").get<int32_t>();
      r.clean_labels = rj.at("clean_labels").get<std::vector<std::string>>();
      r.corrupt_labels = rj.at("corrupt_labels").get<std::vector<std::string>>();
      s.runs.push_back(std::move(x));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::Format, source + ": " + e.what());
  }
  require(!s.runs.empty(), ErrorCode::Format, source + ": the shard holds no pairs");
  return s;
}

PatchShard merge_patch_shards(const std::vector<PatchShard>& shards) {
  require(!shards.empty(), ErrorCode::Format, "no shards to merge");
  PatchShard m;
  m.model = shards.front().model;
  m.dataset = shards.front().dataset;
  m.over = shards.front().over;
  for (size_t i = 0; i < shards.size(); ++i) {
    const PatchShard& s = shards[i];
    require(s.model == m.model && s.dataset == m.dataset && s.over == m.over, ErrorCode::Format,
            "shard " + std::to_string(i + 1) + " patched another model, dataset or target (" +
                s.model + ", " + s.dataset + ", " + s.over + ") than the first (" + m.model + ", " +
                m.dataset + ", " + m.over + ")");
    m.runs.insert(m.runs.end(), s.runs.begin(), s.runs.end());
  }
  std::stable_sort(m.runs.begin(), m.runs.end(),
                   [](const PatchRun& a, const PatchRun& b) { return a.index < b.index; });
  for (size_t i = 1; i < m.runs.size(); ++i)
    require(m.runs[i].index != m.runs[i - 1].index, ErrorCode::Format,
            "pair " + m.runs[i].name + " is in two shards");
  return m;
}

nlohmann::json patch_json(const PatchResult& r) {
  using nlohmann::json;
  json grid = json::array();
  for (int i = 0; i < r.rows; ++i) {
    json row = json::array();
    for (int j = 0; j < r.cols; ++j) row.push_back(r.effect[size_t(i) * r.cols + j]);
    grid.push_back(row);
  }
  json out = {{"version", 1},
              {"over", r.over},
              {"rows", r.over == "positions" ? "layer (residual stream after the block)" : "layer"},
              {"cols", r.over == "positions" ? "position" : "head"},
              {"target", {{"text", r.target_text}, {"id", r.target}}},
              {"foil", {{"text", r.foil_text}, {"id", r.foil}}},
              {"ld_clean", r.ld_clean},
              {"ld_corrupt", r.ld_corrupt},
              {"effect_definition",
               "(LD_patched - LD_corrupt) / (LD_clean - LD_corrupt), LD = logit(target) - "
               "logit(foil) at the last position"},
              {"clean_tokens", r.clean_labels},
              {"corrupt_tokens", r.corrupt_labels},
              {"records", r.records},
              {"effect", grid}};
  auto cells = [&](const std::vector<float>& v) {
    json g = json::array();
    for (int i = 0; i < r.rows; ++i) {
      json row = json::array();
      for (int k = 0; k < r.cols; ++k) row.push_back(v[size_t(i) * r.cols + k]);
      g.push_back(row);
    }
    return g;
  };
  if (!r.lo.empty()) {
    out["ci_low"] = cells(r.lo);
    out["ci_high"] = cells(r.hi);
  }
  return out;
}

nlohmann::json ablation_json(const AblationScan& s) {
  using nlohmann::json;
  auto grid = [&](const std::vector<float>& v) {
    json g = json::array();
    for (int l = 0; l < s.n_layers; ++l) {
      json row = json::array();
      for (int h = 0; h < s.n_heads; ++h) row.push_back(v[size_t(l) * s.n_heads + h]);
      g.push_back(row);
    }
    return g;
  };
  return {{"mode", s.mode},
          {"windows", s.windows},
          {"loss", s.loss},
          {"loss_scope", std::string(kLossScope) + " (the atlas's text_loss)"},
          {"definition",
           "mean next-token loss over the windows with the head ablated alone, "
           "minus the loss without ablation"},
          {"delta_loss", grid(s.delta)},
          {"ci_low", grid(s.lo)},
          {"ci_high", grid(s.hi)}};
}

FigureData patch_figure(const PatchResult& r, const std::string& model_name) {
  FigureData f;
  f.view = View::Patch;
  const bool heads = r.over != "positions";
  f.values.row_title = heads ? "Layer" : "Layer (residual stream after it)";
  f.values.col_title = heads ? "Head" : "Position (corrupt token)";
  if (!heads) f.values.col_labels = r.corrupt_labels;
  double m = 1;
  for (float x : r.effect)
    if (std::isfinite(x)) m = std::max(m, double(std::abs(x)));
  f.values.vmin = -m;
  f.values.vmax = m;
  f.values.scale_title = "Patching effect";
  ValueGrid g;
  g.caption = r.over == "patterns" ? "Head attention patterns patched from clean into corrupt"
              : heads              ? "Head outputs patched from clean into corrupt"
                                   : "Residual stream patched at one position";
  g.rows = r.rows;
  g.cols = r.cols;
  g.values = r.effect;
  g.lo = r.lo;
  g.hi = r.hi;
  f.values.panels.push_back(std::move(g));
  f.title = "Activation patching: (LD patched - LD corrupt) / (LD clean - LD corrupt)";
  const std::string what = r.records > 1
                               ? std::to_string(r.records) + " pairs (means)"
                               : "target '" + r.target_text + "' vs foil '" + r.foil_text + "'";
  f.subtitle = model_name + " \u00b7 " + what + " \u00b7 LD clean " + fixed4(r.ld_clean) +
               ", corrupt " + fixed4(r.ld_corrupt);
  return f;
}

FigureData ablation_figure(const AblationScan& s, const std::string& model_name) {
  FigureData f;
  f.view = View::Heads;
  double m = 0;
  for (float x : s.delta)
    if (std::isfinite(x)) m = std::max(m, double(std::abs(x)));
  if (!(m > 0)) m = 1;
  f.values.vmin = -m;  // a head whose ablation lowers the loss shows blue
  f.values.vmax = m;
  f.values.scale_title = "Loss rise (nats)";
  ValueGrid g;
  g.caption = s.mode + " ablation of each head alone";
  g.rows = s.n_layers;
  g.cols = s.n_heads;
  g.values = s.delta;
  g.lo = s.lo;
  g.hi = s.hi;
  f.values.panels.push_back(std::move(g));
  f.title = "Next-token loss rise when one head is ablated";
  f.subtitle = model_name + " \u00b7 " + std::to_string(s.windows) + " windows \u00b7 loss " +
               fixed4(s.loss) + " without ablation";
  return f;
}

}  // namespace attn::core
