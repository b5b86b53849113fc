#include "app/core/teaching/head_steps.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "app/core/session/labels.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/layout.h"
#include "compute/registry.h"
#include "models/arch/attention_parts.h"
#include "models/arch/reverse.h"

namespace attn::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kTermsShown = 3;  // terms of a dot product or sum written out before "..."

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// "a×b + c×d + e×f + … (n terms)"
std::string terms(const std::vector<std::pair<double, double>>& t) {
  std::string s;
  for (size_t i = 0; i < t.size() && i < size_t(kTermsShown); ++i)
    s += (i ? " + " : "") + num(t[i].first) + "\u00d7" + num(t[i].second);
  if (t.size() > size_t(kTermsShown)) s += " + \u2026 (" + std::to_string(t.size()) + " terms)";
  return s;
}

double dot(const std::vector<std::pair<double, double>>& t) {
  double s = 0;
  for (const auto& [a, b] : t) s += a * b;
  return s;
}

StepStage make_stage(const char* id, std::string title, std::string hook, int rows, int cols,
                     bool key_columns, const std::vector<std::string>& tokens) {
  StepStage s;
  s.id = id;
  s.title = std::move(title);
  s.hook = std::move(hook);
  s.rows = rows;
  s.cols = cols;
  s.key_columns = key_columns;
  s.row_labels = tokens;
  if (key_columns) {
    s.col_labels = tokens;
  } else {
    for (int c = 0; c < cols; ++c) s.col_labels.push_back(std::to_string(c));
  }
  s.values.assign(size_t(rows) * cols, 0.0f);
  s.how.assign(size_t(rows) * cols, "");
  s.recomputed.assign(size_t(rows) * cols, kNaN);
  return s;
}

// Projection of token t onto output column `col` of `l`: the terms X[t, c] W[c, col].
std::vector<std::pair<double, double>> projection_terms(const std::vector<float>& x, int C, int t,
                                                        const models::Linear& l, int col) {
  std::vector<std::pair<double, double>> out(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c)
    out[size_t(c)] = {x[size_t(t) * C + c], models::linear_weight(l, c, col)};
  return out;
}

std::string hook_name(int layer, const char* what) {
  return "blocks." + std::to_string(layer) + ".attn." + what;
}

// Q (or K, V) of one head: the hook's values, each cell's projection (and RoPE) written out.
StepStage projection_stage(const char* id, const char* sym, int layer, int head_index,
                           const float* hook_rows, const models::AttentionParts& a,
                           const models::Linear& l, int col0, bool rope, int C, int d,
                           const std::vector<std::string>& tokens, const std::vector<float>& freq) {
  const int n = int(tokens.size());
  const std::string W = std::string("W_") + sym, b = std::string("b_") + sym;
  StepStage s = make_stage(id,
                           std::string(1, char(std::toupper(sym[0]))) + " = X " + W +
                               (l.b ? " + " + b : "") + (rope ? ", then RoPE" : ""),
                           hook_name(layer, id), n, d, false, tokens);
  const int c0 = col0 + head_index * d;
  char note[200];
  std::snprintf(note, sizeof note, "%s [%d x %d] = columns %d..%d of the %s projection%s",
                W.c_str(), C, d, c0, c0 + d - 1, l.in_out ? "fused (Conv1D)" : "",
                l.b ? (" + " + b + " [" + std::to_string(d) + "]").c_str() : "");
  s.note = note;
  // Pre-RoPE values of every cell, for the rotation's provenance.
  std::vector<double> pre(size_t(n) * d);
  std::vector<std::vector<std::pair<double, double>>> t(size_t(n) * d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      t[size_t(i) * d + j] = projection_terms(a.x, C, i, l, c0 + j);
      pre[size_t(i) * d + j] = dot(t[size_t(i) * d + j]) + (l.b ? double(l.b[c0 + j]) : 0.0);
    }
  const int half = d / 2;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      const size_t k = s.index(i, j);
      s.values[k] = hook_rows[size_t(i) * d + j];
      const double p = pre[size_t(i) * d + j];
      std::string how = std::string(1, char(std::toupper(sym[0]))) + "[" + std::to_string(i) + "," +
                        std::to_string(j) + "] = X[" + std::to_string(i) + ",:] \u00b7 " + W +
                        "[:," + std::to_string(j) + "]" +
                        (l.b ? " + " + b + "[" + std::to_string(j) + "]" : "") +
                        "\n= " + terms(t[size_t(i) * d + j]);
      if (l.b) how += "\n= " + num(p - l.b[c0 + j]) + " + " + num(l.b[c0 + j]);
      how += "\n= " + num(p);
      double r = p;
      if (rope) {
        // HF rotate_half: dim j pairs with j + d/2; angle = position x frequency of j mod d/2.
        const int jj = j % half;
        const double th = double(i) * double(freq[size_t(jj)]);
        const double partner = pre[size_t(i) * d + (j < half ? j + half : j - half)];
        r = j < half ? p * std::cos(th) - partner * std::sin(th)
                     : p * std::cos(th) + partner * std::sin(th);
        how += " before RoPE\nRoPE at position " + std::to_string(i) + ", angle " + num(th) +
               ":\n" + num(p) + "\u00b7cos " + (j < half ? "\u2212 " : "+ ") + num(partner) +
               "\u00b7sin (dim " + std::to_string(j < half ? j + half : j - half) +
               ")\n= " + num(r);
      }
      s.how[k] = std::move(how);
      s.recomputed[k] = r;
    }
  return s;
}

}  // namespace

std::string StepStage::shape() const {
  return "[" + std::to_string(rows) + " x " + std::to_string(cols) + "]";
}

const StepStage& HeadSteps::stage(const std::string& id) const {
  for (const StepStage& s : stages)
    if (s.id == id) return s;
  throw Error(ErrorCode::InvalidArgument, "no step '" + id + "' in the step-through");
}

std::string head_steps_refusal(int n) {
  if (n <= 0) return "The step-through needs an input: type a short text (a few words).";
  if (n > kHeadStepsMaxTokens) {
    return "The step-through prints every number of one head, so it takes at most " +
           std::to_string(kHeadStepsMaxTokens) + " tokens; this input has " + std::to_string(n) +
           ". Shorten the text to a sentence (about 8 to 24 tokens).";
  }
  return "";
}

HeadSteps head_steps(const Model& model, const ModelInput& in, const HeadStepsRequest& r) {
  const ModelInfo& info = model.info();
  require(!info.vision, ErrorCode::InvalidArgument,
          "the step-through shows text models; " + info.dir + " is a vision model");
  const int n = int(in.ids.size());
  const std::string refusal = head_steps_refusal(n);
  require(refusal.empty(), ErrorCode::InvalidArgument, refusal);
  require(r.layer >= 0 && r.layer < info.n_layers, ErrorCode::InvalidArgument,
          "layer " + std::to_string(r.layer) + " is outside the model's " +
              std::to_string(info.n_layers) + " layers (0.." + std::to_string(info.n_layers - 1) +
              ")");
  require(r.head >= 0 && r.head < info.n_heads, ErrorCode::InvalidArgument,
          "head " + std::to_string(r.head) + " is outside the model's " +
              std::to_string(info.n_heads) + " query heads (0.." +
              std::to_string(info.n_heads - 1) + ")");

  // One forward pass: the hooks of the layer and the trace its X is rebuilt from.
  std::unique_ptr<Variant> variant;
  std::unique_ptr<Backend> backend;
  models::Substitution sub;
  const bool substituted = !r.variant.empty() && r.variant != "dense";
  if (substituted) {
    variant = std::make_unique<Variant>(make_variant(r.variant));
    backend = make_backend("reference");
    sub.variant = variant.get();
    sub.backend = backend.get();
    sub.layers = {r.layer};
    sub.heads = {r.head};
  }
  const std::string L = std::to_string(r.layer);
  // Every hook, as a --dump pass captures them: which hooks are wanted picks the attention
  // kernels' paths (a materialised pattern or not), and so the last bits of later layers.
  Capture cap(HookSelection::all());
  models::ReverseTrace trace;
  ModelInput input = in;
  model.forward(input, {.capture = &cap,
                        .substitution = substituted ? &sub : nullptr,
                        .threads = r.threads,
                        .trace = &trace});
  const models::AttentionParts a = model.attention_parts(trace, r.layer);
  const models::LayerCapture& lc = cap.layers[size_t(r.layer)];
  const Problem& p = lc.problem;

  HeadSteps s;
  s.family = models::family_name(info.family);
  s.layer = r.layer;
  s.head = r.head;
  s.n_heads = p.n_heads;
  s.n_kv_heads = p.n_kv_heads;
  s.kv_head = p.kv_head(r.head);
  s.d = p.d;
  s.hidden = info.hidden;
  s.n = n;
  s.scale = p.effective_scale();
  s.causal = p.causal;
  if (substituted) {
    s.variant = variant->spec();
    s.normaliser = variant->normaliser().name();
  }
  for (int t = 0; t < n; ++t) {
    std::string label = size_t(t) < in.labels.size() ? in.labels[size_t(t)]
                                                     : "#" + std::to_string(in.ids[size_t(t)]);
    s.tokens.push_back(std::to_string(t) + " " + display_piece(label));
  }
  const int C = info.hidden, d = p.d, h = r.head, kvh = s.kv_head;
  const std::vector<float> freq = a.rope ? a.rope->inv_freq(n) : std::vector<float>{};

  // X: the sublayer's input after its norm.
  {
    StepStage x = make_stage("x", "X = " + std::string(a.norm), "", n, C, false, s.tokens);
    x.note = "the attention block's input after its norm: " + std::string(a.norm) + ", [" +
             std::to_string(n) + " x " + std::to_string(C) + "]";
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < C; ++c) {
        const size_t k = x.index(t, c);
        x.values[k] = a.x[k];
        x.recomputed[k] = a.x[k];
        x.how[k] = "X[" + std::to_string(t) + "," + std::to_string(c) + "] = " + num(a.x[k]) +
                   "\ntoken " + std::to_string(t) + "'s residual stream entering block " + L +
                   ",\nafter " + a.norm;
      }
    s.stages.push_back(std::move(x));
  }
  const bool rope = a.rope != nullptr;
  s.stages.push_back(projection_stage("q", "q", r.layer, h, p.q_row(h, 0), a, a.q, a.q_col0, rope,
                                      C, d, s.tokens, freq));
  StepStage k = projection_stage("k", "k", r.layer, kvh, p.k_row(h, 0), a, a.k, a.k_col0, rope, C,
                                 d, s.tokens, freq);
  StepStage v = projection_stage("v", "v", r.layer, kvh, p.v_row(h, 0), a, a.v, a.v_col0, false, C,
                                 d, s.tokens, freq);
  if (p.n_kv_heads != p.n_heads) {
    const std::string g = "; GQA: query head " + std::to_string(h) + " shares KV head " +
                          std::to_string(kvh) + " with " +
                          std::to_string(p.n_heads / p.n_kv_heads - 1) + " other query heads";
    k.note += g;
    v.note += g;
  }
  s.stages.push_back(std::move(k));
  s.stages.push_back(std::move(v));

  // Scores, scaled, masked.
  const float* hs = lc.scores.data() + size_t(h) * n * n;
  const float* hp = lc.pattern.data() + size_t(h) * n * n;
  const float* ho = lc.out.data() + size_t(h) * n * d;
  StepStage sc = make_stage("scores", "scores = Q K\u1d40", "", n, n, true, s.tokens);
  sc.note = "Q [" + std::to_string(n) + " x " + std::to_string(d) + "] times K\u1d40 [" +
            std::to_string(d) + " x " + std::to_string(n) + "]: every query against every key";
  StepStage scaled = make_stage("scaled", "scaled = Q K\u1d40 / \u221ad",
                                hook_name(r.layer, "scores"), n, n, true, s.tokens);
  scaled.note = "times 1/\u221a" + std::to_string(d) + " = " + num(s.scale);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      std::vector<std::pair<double, double>> t(static_cast<size_t>(d));
      for (int c = 0; c < d; ++c) t[size_t(c)] = {p.q_row(h, i)[c], p.k_row(h, j)[c]};
      const double raw = dot(t);
      const size_t e = sc.index(i, j);
      sc.values[e] = float(raw);
      sc.recomputed[e] = raw;
      sc.how[e] = "Q[" + std::to_string(i) + ",:] \u00b7 K[" + std::to_string(j) +
                  ",:]\n= " + terms(t) + "\n= " + num(raw);
      const float hook = hs[size_t(i) * n + j];
      // The hook hides entries the causal rule drops (-inf); the product itself is still shown.
      scaled.values[e] = std::isinf(hook) ? float(raw * s.scale) : hook;
      scaled.recomputed[e] = raw * s.scale;
      scaled.how[e] = "Q\u00b7K / \u221a" + std::to_string(d) + " = " + num(raw) + " \u00d7 " +
                      num(s.scale) + "\n= " + num(raw * s.scale);
    }
  StepStage masked = scaled;
  masked.id = "masked";
  masked.title = "masked";
  masked.hook = hook_name(r.layer, "scores");
  masked.dropped.assign(size_t(n) * n, 0);
  Layout layout;
  if (substituted) layout = variant->select(p);
  int kept = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const size_t e = masked.index(i, j);
      const bool visible = !p.causal || p.kpos(j) <= p.qpos(i);
      const bool keeps = !substituted || layout_keeps(layout, p, h, i, j);
      masked.dropped[e] = !visible ? 1 : !keeps ? 2 : 0;
      kept += masked.dropped[e] ? 0 : 1;
      if (!visible) {
        masked.how[e] = "dropped: key " + std::to_string(j) + " comes after query " +
                        std::to_string(i) + "\n(the causal mask: a token sees only the past)";
      } else if (!keeps) {
        masked.how[e] = "dropped by " + s.variant + "\n(the variant does not keep key " +
                        std::to_string(j) + " for query " + std::to_string(i) + ")";
      } else {
        masked.how[e] = "kept: " + num(masked.values[e]) +
                        (substituted ? "\n(" + s.variant + " keeps it)" : "");
      }
      if (masked.dropped[e]) masked.recomputed[e] = kNaN;
    }
  masked.note = std::string(p.causal ? "causal mask" : "no mask (bidirectional encoder)") +
                (substituted ? " and " + s.variant : "") + ": " + std::to_string(kept) + " of " +
                std::to_string(n * n) + " entries kept";
  s.stages.push_back(std::move(sc));
  s.stages.push_back(std::move(scaled));

  // Weights: the hook's probabilities, recomputed as a softmax over the kept keys when that is
  // what ran.
  const bool plain_softmax =
      !substituted ||
      (variant->mods().empty() && !variant->selective() && !variant->approximation() &&
       variant->normaliser().kind == Normaliser::Kind::Softmax);
  StepStage w = make_stage("weights", s.normaliser + "(masked)", hook_name(r.layer, "pattern"), n,
                           n, true, s.tokens);
  w.dropped = masked.dropped;
  w.note = plain_softmax ? "each row: exp(s \u2212 max) / \u03a3 exp over its kept keys; sums to 1"
                         : "the variant's normaliser " + s.normaliser +
                               " (with its score "
                               "modifiers) over the "
                               "kept keys";
  for (int i = 0; i < n; ++i) {
    double mx = -INFINITY;
    for (int j = 0; j < n; ++j)
      if (!masked.is_dropped(i, j)) mx = std::max(mx, double(masked.at(i, j)));
    double z = 0;
    std::vector<std::pair<double, double>> ex;
    for (int j = 0; j < n; ++j)
      if (!masked.is_dropped(i, j)) z += std::exp(double(masked.at(i, j)) - mx);
    for (int j = 0; j < n; ++j) {
      const size_t e = w.index(i, j);
      w.values[e] = hp[size_t(i) * n + j];
      if (masked.is_dropped(i, j)) {
        w.how[e] = "dropped: weight 0";
        w.recomputed[e] = 0;
        continue;
      }
      const double ej = std::exp(double(masked.at(i, j)) - mx);
      if (plain_softmax) {
        w.recomputed[e] = ej / z;
        w.how[e] = "exp(" + num(masked.at(i, j)) + " \u2212 " + num(mx) +
                   ") / \u03a3\u2c7c exp(s " + "\u2212 max)\n= " + num(ej) + " / " + num(z) +
                   "\n= " + num(ej / z);
      } else {
        w.how[e] = s.normaliser + " of the kept scores of row " + std::to_string(i) + " = " +
                   num(w.values[e]);
      }
    }
  }
  s.stages.push_back(std::move(masked));

  // Out = weights x V.
  StepStage o =
      make_stage("out", "out = weights \u00d7 V", hook_name(r.layer, "out"), n, d, false, s.tokens);
  o.note = "weights [" + std::to_string(n) + " x " + std::to_string(n) + "] times V [" +
           std::to_string(n) + " x " + std::to_string(d) + "]: each row a weighted mix of values";
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) {
      std::vector<std::pair<double, double>> t;
      for (int j = 0; j < n; ++j)
        if (!w.is_dropped(i, j)) t.push_back({w.at(i, j), p.v_row(h, j)[c]});
      const size_t e = o.index(i, c);
      o.values[e] = ho[size_t(i) * d + c];
      o.recomputed[e] = dot(t);
      o.how[e] = "\u03a3\u2c7c weight[" + std::to_string(i) + ",j] \u00d7 V[j," +
                 std::to_string(c) + "] over " + std::to_string(t.size()) +
                 " kept keys\n= " + terms(t) + "\n= " + num(dot(t));
    }
  s.stages.push_back(std::move(w));

  // Proj: the head's rows of the output projection (the bias belongs to no head).
  StepStage pr = make_stage("proj", "out W_o (head rows)", "", n, C, false, s.tokens);
  pr.note = "W_o rows " + std::to_string(h * d) + ".." + std::to_string(h * d + d - 1) + " [" +
            std::to_string(d) + " x " + std::to_string(C) +
            "]: this head's contribution to the residual stream (o's bias not included)";
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c) {
      std::vector<std::pair<double, double>> t(static_cast<size_t>(d));
      for (int j = 0; j < d; ++j)
        t[size_t(j)] = {o.at(i, j), models::linear_weight(a.o, h * d + j, c)};
      const size_t e = pr.index(i, c);
      pr.recomputed[e] = dot(t);
      pr.values[e] = float(pr.recomputed[e]);
      pr.how[e] = "out[" + std::to_string(i) + ",:] \u00b7 W_o[" + std::to_string(h * d) + "+j," +
                  std::to_string(c) + "]\n= " + terms(t) + "\n= " + num(pr.recomputed[e]);
    }
  s.stages.push_back(std::move(o));
  s.stages.push_back(std::move(pr));
  return s;
}

}  // namespace attn::core
