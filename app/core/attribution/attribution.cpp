#include "app/core/attribution/attribution.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "app/core/attribution/attention_graph.h"
#include "app/core/session/labels.h"
#include "compute/cpu/gemm.h"
#include "compute/error.h"
#include "compute/variant.h"
#include "models/tokenizers/tokenizer.h"

namespace attn::core {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void check_cancel(const AttributionRequest& q) {
  if (q.cancel && q.cancel->load()) throw Error(ErrorCode::Cancelled, "attribution cancelled");
}

// What the methods read, computed once: the forward (or reverse) pass of the input.
struct Context {
  const models::Model& model;
  const models::ModelInput& in;
  const AttributionRequest& q;
  Attribution& a;
  models::ReverseTarget target;                             // resolved
  std::vector<std::vector<float>> patterns, pattern_grads;  // per layer f32 [H, N, N]
  std::vector<float> input, input_grad;  // the reverse pass's (text: embedding rows)
  std::vector<float> base;               // text: baseline rows f32 [N, C]; images: per channel
};

std::vector<float> per_unit(const Context& c, const std::vector<float>& x,
                            const std::vector<float>& g, const std::vector<float>* x0 = nullptr) {
  // sum over a unit's elements of (x - x0) * g: a token's row, or a patch's pixels and channels.
  const Attribution& a = c.a;
  std::vector<float> s(size_t(a.units()), 0.0f);
  auto diff = [&](size_t i) { return double(x[i]) - (x0 ? double((*x0)[i]) : 0.0); };
  if (!a.image) {
    const size_t C = x.size() / size_t(a.n_tokens);
    for (int t = 0; t < a.n_tokens; ++t) {
      double v = 0;
      for (size_t j = 0; j < C; ++j) v += diff(size_t(t) * C + j) * g[size_t(t) * C + j];
      s[size_t(t)] = float(v);
    }
  } else {
    const models::Image& img = c.in.image;
    const int p = img.height / a.grid_h;
    std::vector<double> acc(s.size(), 0.0);
    for (int ch = 0; ch < img.channels; ++ch)
      for (int y = 0; y < a.grid_h * p; ++y)
        for (int xx = 0; xx < a.grid_w * p; ++xx) {
          const size_t i = (size_t(ch) * img.height + y) * img.width + xx;
          acc[size_t(y / p) * a.grid_w + xx / p] += diff(i) * g[i];
        }
    for (size_t u = 0; u < s.size(); ++u) s[u] = float(acc[u]);
  }
  return s;
}

// Scores from a row over tokens: units are tokens (text) or the patch tokens (images).
std::vector<float> unit_scores(const Context& c, const std::vector<double>& row) {
  std::vector<float> s(size_t(c.a.units()));
  for (size_t u = 0; u < s.size(); ++u) s[u] = float(row[u + size_t(c.a.first_unit)]);
  return s;
}

bool maps_fit(const Context& c, int limit, MethodScores& m) {
  if (c.a.n_tokens <= limit) return true;
  m.note = "maps skipped: " + std::to_string(c.a.n_tokens) + " tokens > " + std::to_string(limit);
  return false;
}

std::vector<float> head_rows(const Context& c, bool times_grad) {
  const int L = c.a.n_layers, H = c.a.n_heads, N = c.a.n_tokens, P = c.target.position;
  std::vector<float> out(size_t(L) * H * N);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < N; ++j) {
        const size_t k = (size_t(h) * N + P) * N + j;
        float v = c.patterns[size_t(l)][k];
        if (times_grad) v *= c.pattern_grads[size_t(l)][k];
        out[(size_t(l) * H + h) * N + j] = v;
      }
  return out;
}

std::vector<Matrix> layer_means(const Context& c, bool weighted, bool positive) {
  std::vector<Matrix> m;
  for (int l = 0; l < c.a.n_layers; ++l) {
    const float* A = c.patterns[size_t(l)].data();
    m.push_back(weighted ? gradient_weighted_mean(A, c.pattern_grads[size_t(l)].data(), c.a.n_heads,
                                                  c.a.n_tokens, positive)
                         : head_mean(A, c.a.n_heads, c.a.n_tokens));
  }
  return m;
}

std::vector<float> flatten(const std::vector<Matrix>& m) {
  std::vector<float> out;
  for (const Matrix& x : m) out.insert(out.end(), x.begin(), x.end());
  return out;
}

std::vector<double> row_of(const Matrix& m, int n, int row) {
  return {m.begin() + ptrdiff_t(row) * n, m.begin() + ptrdiff_t(row + 1) * n};
}

// ---- the methods ------------------------------------------------------------------------------

void attention_method(Context& c, MethodScores& m) {
  const std::vector<Matrix> A = layer_means(c, false, false);
  m.scores = unit_scores(c, row_of(A.back(), c.a.n_tokens, c.target.position));
  m.heads = head_rows(c, false);
  if (maps_fit(c, c.q.map_tokens, m)) m.maps = flatten(A);
}

std::vector<Matrix> adjusted(const Context& c) {
  std::vector<Matrix> A = layer_means(c, false, false);
  for (Matrix& x : A) x = with_residual(x, c.a.n_tokens);
  return A;
}

void rollout_method(Context& c, MethodScores& m) {
  const std::vector<Matrix> A = adjusted(c);
  m.scores = unit_scores(c, rollout_row(A, c.a.n_tokens, c.target.position));
  if (maps_fit(c, c.q.map_tokens, m)) m.maps = rollout_maps(A, c.a.n_tokens);
}

void flow_method(Context& c, MethodScores& m) {
  const std::vector<Matrix> A = adjusted(c);
  m.scores = unit_scores(c, flow_row(A, int(A.size()), c.a.n_tokens, c.target.position));
  if (maps_fit(c, c.q.flow_map_tokens, m)) m.maps = flow_maps(A, c.a.n_tokens);
}

void grad_input_method(Context& c, MethodScores& m) {
  m.scores = per_unit(c, c.input, c.input_grad);
}

void attn_grad_method(Context& c, MethodScores& m) {
  const std::vector<Matrix> W = layer_means(c, true, false);
  m.scores = unit_scores(c, row_of(W.back(), c.a.n_tokens, c.target.position));
  m.heads = head_rows(c, true);
  if (maps_fit(c, c.q.map_tokens, m)) m.maps = flatten(W);
}

void chefer_method(Context& c, MethodScores& m) {
  m.scores =
      unit_scores(c, chefer_row(layer_means(c, true, true), c.a.n_tokens, c.target.position));
}

models::ReverseOptions reverse_options(const Context& c, bool patterns) {
  models::ReverseOptions o;
  o.substitution = c.q.substitution;
  o.threads = c.q.threads;
  o.matmul = c.q.matmul;
  o.keep_patterns = patterns;
  return o;
}

void lrp_method(Context& c, MethodScores& m) {
  models::ReverseOptions o = reverse_options(c, false);
  o.rule = models::Rule::Lrp;
  const models::Reverse r = c.model.reverse(c.in, c.target, o);
  m.scores = per_unit(c, r.input, r.input_grad);
  double s = 0;
  for (size_t i = 0; i < r.input.size(); ++i) s += double(r.input[i]) * r.input_grad[i];
  m.relevance_sum = s;
}

models::ModelInput with_input(const Context& c, const std::vector<float>& x) {
  models::ModelInput in = c.in;
  if (c.a.image)
    in.image.data = x;
  else
    in.embeddings = x;
  return in;
}

// The baseline as a whole input: text rows, or an image whose every pixel is its channel's value.
std::vector<float> baseline_input(const Context& c) {
  if (!c.a.image) return c.base;
  const models::Image& img = c.in.image;
  std::vector<float> x(img.data.size());
  const size_t plane = size_t(img.height) * img.width;
  for (int ch = 0; ch < img.channels; ++ch)
    std::fill_n(x.begin() + ptrdiff_t(ch * plane), plane, c.base[size_t(ch)]);
  return x;
}

// Methods that re-run the model many times keep the packed weights of their GEMMs between
// passes (cpu::GemmPackScope: the amx and dpbf16 paths) up to this many bytes.
constexpr size_t kPackedWeightsBudget = size_t(1) << 30;

void ig_method(Context& c, MethodScores& m) {
  const cpu::GemmPackScope packed(kPackedWeightsBudget);
  const std::vector<float> x0 = baseline_input(c);
  const std::vector<float>& x = c.input;
  const int steps = c.q.ig_steps;
  std::vector<double> sum(x.size(), 0.0);
  std::vector<float> xk(x.size());
  for (int k = 0; k < steps; ++k) {
    check_cancel(c.q);
    const double alpha = (k + 0.5) / steps;  // midpoint rule
    for (size_t i = 0; i < x.size(); ++i) xk[i] = float(x0[i] + alpha * (double(x[i]) - x0[i]));
    models::ReverseOptions o = reverse_options(c, false);
    o.target_logits_only = true;  // z's logits are all a step reads
    o.target_ids_only = true;
    const models::Reverse r = c.model.reverse(with_input(c, xk), c.target, o);
    for (size_t i = 0; i < x.size(); ++i) sum[i] += r.input_grad[i];
  }
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) g[i] = float(sum[i] / steps);
  m.scores = per_unit(c, x, g, &x0);
  models::ForwardOptions fo = target_forward(c.a, c.q);
  if (!c.a.image) fo.logits_ids = {c.a.id};  // z alone: the target's logit and the foil's
  if (!c.a.image && c.a.foil >= 0) fo.logits_ids.push_back(c.a.foil);
  const double z0 = target_value(c.model.forward(with_input(c, x0), fo), c.a).first;
  m.z_difference = c.a.z - z0;
  // Completeness checks the steps: a sum that misses z(x) - z(baseline) by more than 5% did not
  // resolve the path (a zero baseline on an RMSNorm model, whose z jumps right at 0, above all).
  double total = 0;
  for (float s : m.scores) total += double(s);
  const double gap = std::abs(total - m.z_difference);
  if (gap > 0.05 * std::abs(m.z_difference) && gap > 1e-6) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "incomplete: the scores sum to %.4g, not z(x) - z(baseline) = %.4g; the steps "
                  "miss the path: take more steps or a token baseline",
                  total, m.z_difference);
    m.note = buf;
  }
}

void occlusion_method(Context& c, MethodScores& m) {
  const cpu::GemmPackScope packed(kPackedWeightsBudget);
  m.scores.assign(size_t(c.a.units()), 0.0f);
  const models::ForwardOptions fo = target_forward(c.a, c.q);
  for (int u : c.a.ranked) {
    check_cancel(c.q);
    double z = 0;
    if (c.q.occlusion_delete) {
      // The text without token u; the target's row moves up one when u is at or before it.
      models::ModelInput in = c.in;
      in.embeddings.clear();
      in.ids.erase(in.ids.begin() + u);
      if (!in.labels.empty()) in.labels.erase(in.labels.begin() + u);
      if (!in.token_types.empty()) in.token_types.erase(in.token_types.begin() + u);
      if (!in.positions.empty()) in.positions.erase(in.positions.begin() + u);
      Attribution shifted;
      shifted.image = false;
      shifted.position = c.a.position - (u <= c.a.position ? 1 : 0);
      shifted.id = c.a.id;
      shifted.foil = c.a.foil;
      if (shifted.position < 0) continue;  // nothing is left before the target
      z = target_value(c.model.forward(in, target_forward(shifted, c.q)), shifted).first;
    } else {
      z = target_value(c.model.forward(occluded(c.in, c.a, {u}), fo), c.a).first;
    }
    m.scores[size_t(u)] = float(c.a.z - z);
  }
}

struct MethodEntry {
  AttributionMethod info;
  std::function<void(Context&, MethodScores&)> run;
  bool patterns = false;  // reads the patterns (and, with a gradient, dz/dA) of every layer
};

const std::vector<MethodEntry>& method_table() {
  static const std::vector<MethodEntry> table = {
      {{"attention", "Attention (last layer)", "-",
        "the last layer's attention from the target row, mean over heads", false, true},
       attention_method,
       true},
      {{"rollout", "Attention rollout",
        "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers",
        "row of the product over layers of 0.5 A + 0.5 I (head means, rows renormalised)", false,
        true},
       rollout_method,
       true},
      {{"flow", "Attention flow",
        "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers",
        "maximum flow from the input token to the target in the graph of 0.5 A + 0.5 I", false,
        true},
       flow_method,
       true},
      {{"grad_input", "Gradient x input", "Shrikumar et al. 2016; Denil et al. 2014",
        "sum over the unit's input elements of x * dz/dx", true, false},
       grad_input_method,
       false},
      {{"integrated_gradients", "Integrated gradients",
        "Sundararajan et al. 2017, Axiomatic Attribution for Deep Networks",
        "sum over the unit of (x - x') * mean over the path x' -> x of dz/dx (midpoint steps)",
        true, false},
       ig_method,
       false},
      {{"attn_grad", "Attention x gradient", "e.g. Serrano & Smith 2019; Chefer et al. 2021",
        "the last layer's A * dz/dA from the target row, mean over heads", true, true},
       attn_grad_method,
       true},
      {{"chefer", "Gradient-weighted relevance (Chefer et al.)",
        "Chefer, Gur & Wolf 2021, Generic Attention-model Explainability",
        "row of the product over layers of I + mean_h (A * dz/dA)^+", true, false},
       chefer_method,
       true},
      {{"attnlrp", "AttnLRP",
        "Achtibat et al. 2024, AttnLRP: Attention-Aware Layer-Wise "
        "Relevance Propagation for Transformers",
        "relevance x * g at the input under AttnLRP's rules (softmax, bilinear, norms)", true,
        false},
       lrp_method,
       false},
      {{"occlusion", "Occlusion (leave one out)", "Zeiler & Fergus 2014; Li et al. 2016",
        "z minus z with the unit replaced by the baseline (or deleted)", false, false},
       occlusion_method,
       false},
  };
  return table;
}

std::string method_list() {
  std::string s;
  for (const MethodEntry& e : method_table()) s += (s.empty() ? "" : ", ") + e.info.id;
  return s;
}

// Text: the baseline token's id.
int baseline_token(const models::Model& model, const Baseline& b) {
  if (b.token >= 0) return b.token;
  const models::Tokenizer* tok = model.tokenizer();
  require(tok != nullptr, ErrorCode::InvalidArgument,
          "--baseline token: the model has no tokenizer to name a mask, pad or unk token; give "
          "token:ID");
  const models::SpecialTokens& s = tok->special_tokens();
  for (const auto& t : {s.mask, s.pad, s.unk, s.eos})
    if (t) return *t;
  throw Error(ErrorCode::InvalidArgument,
              "--baseline token: the tokenizer names no mask, pad, unk or eos token; give "
              "token:ID");
}

void set_units(const models::Model& model, const models::ModelInput& in, Attribution& a) {
  const models::ModelInfo& info = model.info();
  if (a.image) {
    const int p = int(model.config().patch_size);
    require(p > 0, ErrorCode::InvalidArgument, info.dir + ": config.json has no patch_size");
    a.grid_h = in.image.height / p;
    a.grid_w = in.image.width / p;
    a.first_unit = a.n_tokens - a.grid_h * a.grid_w;
    for (int r = 0; r < a.grid_h; ++r)
      for (int col = 0; col < a.grid_w; ++col)
        a.unit_labels.push_back(std::to_string(r) + "," + std::to_string(col));
    for (int u = 0; u < a.units(); ++u) a.ranked.push_back(u);
    a.position = 0;
    if (size_t(a.id) < info.class_names.size()) a.target_label = info.class_names[size_t(a.id)];
    if (a.foil >= 0 && size_t(a.foil) < info.class_names.size())
      a.foil_label = info.class_names[size_t(a.foil)];
    if (a.target_label.empty()) a.target_label = "class " + std::to_string(a.id);
    return;
  }
  const models::Tokenizer* tok = model.tokenizer();
  auto piece = [&](int id) { return tok ? tok->id_to_piece(id) : "#" + std::to_string(id); };
  for (int t = 0; t < a.n_tokens; ++t)
    a.unit_labels.push_back(display_piece(
        in.labels.size() == size_t(a.n_tokens) ? in.labels[size_t(t)] : piece(in.ids[size_t(t)])));
  const int last = info.causal ? a.position : a.n_tokens - 1;
  for (int u = 0; u <= last; ++u) a.ranked.push_back(u);
  a.target_label = display_piece(piece(a.id));
  if (a.foil >= 0) a.foil_label = display_piece(piece(a.foil));
}

void fill_baseline(Context& c) {
  const Baseline& b = c.q.baseline;
  if (c.a.image) {
    require(b.kind != Baseline::Kind::Token, ErrorCode::InvalidArgument,
            "--baseline token is for text; images take zero or mean");
    const models::Image& img = c.in.image;
    c.base.assign(size_t(img.channels), 0.0f);
    if (b.kind == Baseline::Kind::Mean) {
      const size_t plane = size_t(img.height) * img.width;
      for (int ch = 0; ch < img.channels; ++ch) {
        double s = 0;
        for (size_t i = 0; i < plane; ++i) s += img.data[size_t(ch) * plane + i];
        c.base[size_t(ch)] = float(s / double(plane));
      }
    }
    return;
  }
  require(b.kind != Baseline::Kind::Mean, ErrorCode::InvalidArgument,
          "--baseline mean is for images; text takes zero or token[:ID]");
  if (b.kind == Baseline::Kind::Zero) {
    c.base.assign(c.input.size(), 0.0f);
    return;
  }
  // A token's embedding row at every position: what a traced forward of that token reads.
  const int id = baseline_token(c.model, b);
  require(id >= 0 && id < c.model.info().vocab, ErrorCode::InvalidArgument,
          "--baseline token:" + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(c.model.info().vocab) + ")");
  models::ModelInput in;
  in.ids.assign(c.in.ids.size(), id);
  models::ReverseTrace tr;
  models::ForwardOptions fo;
  fo.trace = &tr;
  fo.threads = c.q.threads;
  fo.matmul = c.q.matmul;
  c.model.forward(in, fo);
  c.base = tr.embeddings;
  c.a.baseline.token = id;
}

// The passes every method reads: the reverse pass when a gradient method asks for it, else a
// traced forward (patterns and input rows only).
void first_pass(Context& c, bool gradient) {
  const auto t0 = Clock::now();
  models::ModelOutput out;
  if (gradient) {
    // Patterns and dz/dA only when a method reads them: the others skip their copies.
    bool patterns = false;
    for (const std::string& id : c.q.methods)
      patterns |= method_table()[size_t(attribution_method_index(id))].patterns;
    models::ReverseOptions o = reverse_options(c, patterns);
    o.target_logits_only = true;  // the target's row: its top token and probability
    models::Reverse r = c.model.reverse(c.in, c.q.target, o);
    c.target = {r.position, r.id, r.foil};
    c.a.z = r.z;
    c.a.seconds_forward = r.seconds_forward;
    c.a.seconds_reverse = r.seconds_backward;
    c.a.reverse_bytes = r.trace_bytes;
    c.patterns = std::move(r.pattern);
    c.pattern_grads = std::move(r.pattern_grad);
    c.input = std::move(r.input);
    c.input_grad = std::move(r.input_grad);
    out = std::move(r.output);
  } else {
    models::ReverseTrace tr;
    models::ForwardOptions fo;
    fo.trace = &tr;
    fo.substitution = c.q.substitution;
    fo.threads = c.q.threads;
    fo.matmul = c.q.matmul;
    out = c.model.forward(c.in, fo);
    c.target = c.q.target;
    c.a.z = models::resolve_target(c.model.info(), out, c.target);
    c.a.seconds_forward = since(t0);
    for (models::BlockTrace& b : tr.blocks) c.patterns.push_back(std::move(b.pattern));
    c.input = c.a.image ? c.in.image.data : std::move(tr.embeddings);
  }
  c.a.n_tokens = out.n_tokens;
  c.a.id = c.target.id;
  c.a.foil = c.target.foil;
  c.a.position = c.target.position;
  c.a.probability = target_value(out, c.a).second;
}

}  // namespace

const std::vector<AttributionMethod>& attribution_methods() {
  static const std::vector<AttributionMethod> methods = [] {
    std::vector<AttributionMethod> v;
    for (const MethodEntry& e : method_table()) v.push_back(e.info);
    return v;
  }();
  return methods;
}

int attribution_method_index(const std::string& id) {
  const auto& t = method_table();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].info.id == id) return int(i);
  throw Error(ErrorCode::InvalidArgument,
              "unknown attribution method '" + id + "'; methods: " + method_list());
}

std::vector<std::string> parse_attribution_methods(const std::string& list) {
  std::vector<std::string> out;
  if (list == "all") {
    for (const MethodEntry& e : method_table()) out.push_back(e.info.id);
    return out;
  }
  size_t b = 0;
  while (b <= list.size()) {
    size_t e = list.find(',', b);
    if (e == std::string::npos) e = list.size();
    const std::string id = list.substr(b, e - b);
    attribution_method_index(id);
    require(std::find(out.begin(), out.end(), id) == out.end(), ErrorCode::InvalidArgument,
            "attribution method '" + id + "' is listed twice");
    out.push_back(id);
    b = e + 1;
  }
  return out;
}

Baseline parse_baseline(const std::string& text) {
  Baseline b;
  if (text == "zero") return b;
  if (text == "mean") {
    b.kind = Baseline::Kind::Mean;
    return b;
  }
  if (text == "token" || text.rfind("token:", 0) == 0) {
    b.kind = Baseline::Kind::Token;
    if (text.size() > 6) {
      const std::string id = text.substr(6);
      require(
          !id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 10,
          ErrorCode::InvalidArgument, "baseline '" + text + "': token:ID takes a token id");
      b.token = std::stoi(id);
    }
    return b;
  }
  throw Error(ErrorCode::InvalidArgument,
              "unknown baseline '" + text + "'; baselines: zero, token, token:ID, mean");
}

std::string baseline_name(const Baseline& b) {
  switch (b.kind) {
    case Baseline::Kind::Zero:
      return "zero";
    case Baseline::Kind::Mean:
      return "mean";
    case Baseline::Kind::Token:
      return b.token >= 0 ? "token:" + std::to_string(b.token) : "token";
  }
  return "zero";
}

const MethodScores* Attribution::find(const std::string& method) const {
  for (const MethodScores& m : methods)
    if (m.method == method) return &m;
  return nullptr;
}

std::string gradient_refusal(const Variant& v) {
  const std::string head =
      "the gradient methods need a softmax over the kept keys, but " + v.spec() + " ";
  if (v.approximation()) return head + "is an approximation";
  if (v.selective()) return head + "uses selective attention";
  if (v.normaliser().kind != Normaliser::Kind::Softmax)
    return head + "uses the " + v.normaliser().name() + " normaliser";
  for (const ScoreMod& m : v.mods())
    if (m.kind != ScoreMod::Kind::Alibi)
      return head + "modifies the scores non-additively (temperature or soft-capping)";
  return "";
}

models::ModelInput occluded(const models::ModelInput& in, const Attribution& a,
                            const std::vector<int>& units) {
  const std::vector<float>& rows = a.input_rows;
  const std::vector<float>& base = a.baseline_values;
  models::ModelInput out = in;
  if (!a.image) {
    out.embeddings = rows;
    const size_t C = rows.size() / size_t(a.n_tokens);
    for (int u : units)
      for (size_t j = 0; j < C; ++j)
        out.embeddings[size_t(u) * C + j] = base.empty() ? 0.0f : base[size_t(u) * C + j];
    return out;
  }
  models::Image& img = out.image;
  const int p = img.height / a.grid_h;
  for (int u : units) {
    const int r = u / a.grid_w, col = u % a.grid_w;
    for (int ch = 0; ch < img.channels; ++ch)
      for (int y = r * p; y < (r + 1) * p; ++y)
        std::fill_n(img.data.begin() +
                        ptrdiff_t((size_t(ch) * img.height + y) * img.width + size_t(col) * p),
                    p, base.empty() ? 0.0f : base[size_t(ch)]);
  }
  return out;
}

models::ForwardOptions target_forward(const Attribution& a, const AttributionRequest& q) {
  models::ForwardOptions fo;
  fo.substitution = q.substitution;
  fo.threads = q.threads;
  fo.matmul = q.matmul;
  if (!a.image) fo.logits_row = a.position;
  return fo;
}

std::pair<double, double> target_value(const models::ModelOutput& out, const Attribution& a) {
  const int V = out.n_logits;
  const float* row = out.logits_of(a.image ? 0 : a.position);
  require(row != nullptr, ErrorCode::InvalidArgument,
          "the forward pass did not compute the target's logits");
  const double z = double(row[a.id]) - (a.foil >= 0 ? double(row[a.foil]) : 0.0);
  double mx = -INFINITY, s = 0;
  for (int i = 0; i < V; ++i) mx = std::max(mx, double(row[i]));
  for (int i = 0; i < V; ++i) s += std::exp(double(row[i]) - mx);
  return {z, std::exp(double(row[a.id]) - mx) / s};
}

Attribution attribute(const models::Model& model, const models::ModelInput& in,
                      const AttributionRequest& q) {
  const models::ModelInfo& info = model.info();
  require(!q.methods.empty(), ErrorCode::InvalidArgument,
          "no attribution method asked for; methods: " + method_list());
  bool gradient = false;
  for (const std::string& id : q.methods)
    gradient |= method_table()[size_t(attribution_method_index(id))].info.gradient;
  require(q.ig_steps >= 1 && q.ig_steps <= 4096, ErrorCode::InvalidArgument,
          "integrated gradients takes 1 to 4096 steps, not " + std::to_string(q.ig_steps));
  if (q.substitution) {
    q.substitution->check(info);
    if (gradient) {
      const std::string why = gradient_refusal(*q.substitution->variant);
      require(why.empty(), ErrorCode::InvalidArgument,
              why + "; the attention methods (attention, rollout, flow) and occlusion run with it");
    }
  }
  require(!(q.occlusion_delete && info.vision), ErrorCode::InvalidArgument,
          "occlusion by deletion is for text; an image's patches are replaced by the baseline");
  Attribution a;
  a.image = info.vision;
  a.n_layers = info.n_layers;
  a.n_heads = info.n_heads;
  a.baseline = q.baseline;
  if (q.substitution) a.variant = q.substitution->variant->spec();
  a.matmul = models::matmul_name(q.matmul);
  Context c{model, in, q, a, q.target, {}, {}, {}, {}, {}};
  first_pass(c, gradient);
  set_units(model, in, a);
  fill_baseline(c);
  if (!a.image) a.input_rows = c.input;
  a.baseline_values = c.base;
  for (const std::string& id : q.methods) {
    check_cancel(q);
    const auto t0 = Clock::now();
    MethodScores m;
    m.method = id;
    method_table()[size_t(attribution_method_index(id))].run(c, m);
    m.seconds = since(t0);
    a.methods.push_back(std::move(m));
  }
  return a;
}

}  // namespace attn::core
