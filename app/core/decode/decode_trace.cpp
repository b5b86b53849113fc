#include "app/core/decode/decode_trace.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "compute/error.h"
#include "compute/kv/kv_policy.h"
#include "models/arch/hooks.h"
#include "models/tokenizers/tokenizer.h"

namespace attn::core {

namespace {

void check_cell(const DecodeTrace& t, int step, int layer, int head) {
  require(step >= 0 && step < int(t.steps.size()), ErrorCode::InvalidArgument,
          "step " + std::to_string(step) + " is outside the trace's " +
              std::to_string(t.steps.size()) + " steps");
  require(layer >= 0 && layer < t.n_layers && head >= 0 && head < t.n_heads,
          ErrorCode::InvalidArgument,
          "layer " + std::to_string(layer) + ", head " + std::to_string(head) + ": the model has " +
              std::to_string(t.n_layers) + " layers of " + std::to_string(t.n_heads) + " heads");
}

int kv_head_of(const DecodeTrace& t, int head) {
  return head / std::max(1, t.n_heads / std::max(1, t.n_kv_heads));
}

}  // namespace

std::vector<float> DecodeTrace::row(int step, int layer, int head) const {
  check_cell(*this, step, layer, head);
  const TraceStep& s = steps[size_t(step)];
  std::vector<float> out(size_t(s.position) + 1, NAN);
  const auto& att = s.cache.attended[size_t(layer)][size_t(kv_head_of(*this, head))];
  const std::vector<float>& p = s.probs[size_t(layer)];
  const size_t n = att.size();
  require(p.size() == size_t(n_heads) * n, ErrorCode::InvalidArgument,
          "the trace kept no attention for layer " + std::to_string(layer));
  for (size_t j = 0; j < n; ++j)
    if (att[j] >= 0 && att[j] <= s.position) out[size_t(att[j])] = p[size_t(head) * n + j];
  return out;
}

const std::vector<int32_t>& DecodeTrace::kept(int step, int layer, int head) const {
  check_cell(*this, step, layer, head);
  return steps[size_t(step)].cache.kept[size_t(layer)][size_t(kv_head_of(*this, head))];
}

int DecodeTrace::quantised(int step, int layer, int head) const {
  check_cell(*this, step, layer, head);
  return steps[size_t(step)].cache.quantised[size_t(layer)][size_t(kv_head_of(*this, head))];
}

DecodeTrace trace_decode(const models::Model& model, const std::string& model_name,
                         const std::vector<int32_t>& ids, const TraceOptions& opt) {
  const models::ModelInfo& info = model.info();
  require(info.causal && !info.vision && info.vocab > 0, ErrorCode::Unsupported,
          "a decode trace needs a causal language model (GPT-2 or the Llama family); " +
              info.model_type + " is not one");
  const int given = int(ids.size());
  require(given >= 1, ErrorCode::InvalidArgument, "no tokens to decode");
  for (int i = 0; i < given; ++i)
    require(ids[size_t(i)] >= 0 && ids[size_t(i)] < info.vocab, ErrorCode::InvalidArgument,
            "token id " + std::to_string(ids[size_t(i)]) + " at position " + std::to_string(i) +
                " is outside the vocabulary [0, " + std::to_string(info.vocab) + ")");
  const int prefill = opt.prefill < 0 ? given - 1 : opt.prefill;
  require(prefill <= given - 1, ErrorCode::InvalidArgument,
          "prefill " + std::to_string(prefill) + " is outside [0, " + std::to_string(given - 1) +
              "]: at least one given token is left for the first step");
  require(opt.steps >= 1 && opt.steps <= kMaxTraceSteps, ErrorCode::InvalidArgument,
          "steps " + std::to_string(opt.steps) + " is outside [1, " +
              std::to_string(kMaxTraceSteps) + "]");
  const int steps = opt.generate ? opt.steps : std::min(opt.steps, given - prefill);
  const SamplingOptions& sp = opt.sampling;
  require(sp.top_p > 0 && sp.top_p <= 1 && sp.top_k >= 0 && sp.temperature >= 0 &&
              std::isfinite(sp.temperature),
          ErrorCode::InvalidArgument,
          "sampling: top_p must be in (0, 1], top_k and temperature >= 0");

  DecodeTrace t;
  t.model = model_name;
  t.model_type = info.model_type;
  t.n_layers = info.n_layers;
  t.n_heads = info.n_heads;
  t.n_kv_heads = info.n_kv_heads;
  t.prefill = prefill;
  t.given = given;
  t.ids = ids;
  models::KvCache cache(make_kv_policy(opt.policy));
  t.policy = cache.policy.spec;
  cache.record = true;
  require(opt.layer >= -1 && opt.layer < info.n_layers, ErrorCode::InvalidArgument,
          "layer " + std::to_string(opt.layer) + " is outside the model's " +
              std::to_string(info.n_layers) + " layers");
  models::Capture cap(models::HookSelection::parse(
      opt.layer < 0 ? std::string("blocks.*.attn.pattern")
                    : "blocks." + std::to_string(opt.layer) + ".attn.pattern"));
  models::ForwardOptions fo;
  fo.threads = opt.threads;
  fo.capture = &cap;
  const int V = info.vocab;
  std::mt19937_64 rng(sp.seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);

  if (prefill > 0)
    model.decode(std::vector<int32_t>(ids.begin(), ids.begin() + prefill), cache, fo);
  for (int s = 0; s < steps; ++s) {
    const int pos = prefill + s;
    TraceStep st;
    st.position = pos;
    st.token = t.ids[size_t(pos)];
    const models::ModelOutput out = model.decode({st.token}, cache, fo);
    const float* logits = out.logits.data();
    if (pos + 1 < int(t.ids.size())) {
      st.next = t.ids[size_t(pos) + 1];
    } else if (opt.generate && s + 1 < steps) {
      st.next = sample_token(logits, V, sp, unif(rng));
      t.ids.push_back(st.next);
    }
    if (st.next >= 0) st.nll = float(token_nll(logits, V, st.next));
    st.entries = cache.entries();
    st.bytes = cache.bytes();
    st.cache = cache.history.back();
    cache.history.clear();  // the step keeps its own copy
    st.probs.resize(size_t(t.n_layers));
    for (int l = 0; l < t.n_layers; ++l) {
      if (opt.layer >= 0 && l != opt.layer) continue;
      const models::LayerCapture& lc = cap.layers[size_t(l)];
      // One query: pattern f32 [H, 1, attended].
      st.probs[size_t(l)].assign(lc.pattern.data(), lc.pattern.data() + lc.pattern.size());
    }
    t.steps.push_back(std::move(st));
    if (opt.progress && !opt.progress(s + 1)) throw Error(ErrorCode::Cancelled, "cancelled");
  }
  if (const models::Tokenizer* tok = model.tokenizer())
    for (int32_t id : t.ids)
      t.pieces.push_back(tok->decode(std::span<const int32_t>(&id, 1), false));
  else
    for (int32_t id : t.ids) t.pieces.push_back("#" + std::to_string(id));
  return t;
}

nlohmann::json trace_json(const DecodeTrace& t, int layer) {
  using nlohmann::json;
  require(layer >= -1 && layer < t.n_layers, ErrorCode::InvalidArgument,
          "layer " + std::to_string(layer) + " is outside the model's " +
              std::to_string(t.n_layers) + " layers");
  json j;
  j["version"] = 1;
  j["model"] = t.model;
  j["model_type"] = t.model_type;
  j["policy"] = t.policy;
  j["layers"] = t.n_layers;
  j["heads"] = t.n_heads;
  j["kv_heads"] = t.n_kv_heads;
  j["prefill"] = t.prefill;
  j["given"] = t.given;
  j["ids"] = t.ids;
  j["pieces"] = t.pieces;
  json steps = json::array();
  for (const TraceStep& s : t.steps) {
    json js;
    js["position"] = s.position;
    js["token"] = s.token;
    js["next"] = s.next;
    js["nll"] = std::isfinite(s.nll) ? json(s.nll) : json(nullptr);
    js["entries"] = s.entries;
    js["bytes"] = s.bytes;
    json layers = json::array();
    for (int l = 0; l < t.n_layers; ++l) {
      if (layer >= 0 && l != layer) continue;
      json jl;
      jl["layer"] = l;
      jl["attended"] = s.cache.attended[size_t(l)];  // [kv head][entries]
      jl["kept"] = s.cache.kept[size_t(l)];          // [kv head][entries]
      jl["quantised"] = s.cache.quantised[size_t(l)];
      const size_t n =
          s.cache.attended[size_t(l)].empty() ? 0 : s.cache.attended[size_t(l)][0].size();
      json probs = json::array();
      for (int h = 0; h < t.n_heads && s.probs[size_t(l)].size() == size_t(t.n_heads) * n; ++h) {
        const float* p = s.probs[size_t(l)].data() + size_t(h) * n;
        probs.push_back(std::vector<float>(p, p + n));
      }
      jl["probs"] = std::move(probs);  // [query head][entries of its KV head's `attended`]
      layers.push_back(std::move(jl));
    }
    js["layers"] = std::move(layers);
    steps.push_back(std::move(js));
  }
  j["steps"] = std::move(steps);
  return j;
}

FigureData decode_figure(const DecodeTrace& t, int layer, int head, int step, int max_cells) {
  require(!t.steps.empty(), ErrorCode::InvalidArgument, "the decode trace has no steps");
  if (step < 0) step = int(t.steps.size()) - 1;
  check_cell(t, step, layer, head);
  require(max_cells >= 1, ErrorCode::InvalidArgument, "max_cells must be >= 1");
  FigureData f;
  f.view = View::Decode;
  DecodeFigure& d = f.decode;
  d.policy = t.policy;
  d.layer = layer;
  d.head = head;
  d.steps = int(t.steps.size());
  d.first = t.steps.front().position;
  d.positions = t.steps.back().position + 1;
  d.rows = std::min(d.steps, max_cells);
  d.cols = std::min(d.positions, max_cells);
  d.attention.assign(size_t(d.rows) * d.cols, NAN);
  d.state.assign(d.attention.size(), DecodeCell::Future);
  // The state of (step s, position p): attended entries are held (quantised when among the
  // first `quantised` entries the cache kept after the step), earlier positions evicted.
  const auto states = [&](int s) {
    const TraceStep& st = t.steps[size_t(s)];
    std::vector<DecodeCell> out(size_t(st.position) + 1, DecodeCell::Evicted);
    const std::vector<float> r = t.row(s, layer, head);
    const std::vector<int32_t>& kept = t.kept(s, layer, head);
    const int q = t.quantised(s, layer, head);
    for (size_t p = 0; p < r.size(); ++p)
      if (!std::isnan(r[p])) out[p] = DecodeCell::Held;
    for (int e = 0; e < q && e < int(kept.size()); ++e)
      if (out[size_t(kept[size_t(e)])] == DecodeCell::Held)
        out[size_t(kept[size_t(e)])] = DecodeCell::Quantised;
    return std::pair(r, out);
  };
  for (int s = 0; s < d.steps; ++s) {
    const auto [r, cells] = states(s);
    const int row = int(int64_t(s) * d.rows / d.steps);
    for (size_t p = 0; p < r.size(); ++p) {
      const size_t i = size_t(row) * d.cols + size_t(int64_t(p) * d.cols / d.positions);
      if (!std::isnan(r[p]) && !(d.attention[i] >= r[p])) d.attention[i] = r[p];
      d.state[i] = std::max(d.state[i], cells[p]);
    }
  }
  const auto [r, cells] = states(step);
  const TraceStep& st = t.steps[size_t(step)];
  d.step = step;
  d.query = st.position;
  d.pieces.assign(t.pieces.begin(), t.pieces.begin() + st.position + 1);
  d.weight = r;
  d.cells = cells;
  d.entries = st.entries;
  d.bytes = st.bytes;
  d.next = st.next >= 0 && size_t(st.position) + 1 < t.pieces.size()
               ? t.pieces[size_t(st.position) + 1]
               : "";
  d.nll = st.nll;
  f.title = "One decoding step under a KV-cache policy";
  f.subtitle = t.model + " · layer " + std::to_string(layer) + ", head " + std::to_string(head) +
               " · " + std::to_string(d.steps) + " steps from position " + std::to_string(d.first);
  return f;
}

}  // namespace attn::core
