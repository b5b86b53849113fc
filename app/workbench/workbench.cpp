#include "app/workbench/workbench.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/substitution.h"
#include "models/arch/text_input.h"

namespace attn {

// Everything computed for one variant spec on the open input.
struct Workbench::Cached {
  explicit Cached(Variant var) : v(std::move(var)) {}
  Variant v;
  std::vector<Result> results;                  // [L]
  std::vector<std::unique_ptr<Metrics>> layer;  // [L], lazily
  std::vector<std::unique_ptr<Metrics>> head;   // [L * H], lazily
};

std::shared_ptr<const Model> cached_model(const std::string& id_or_dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const Model>> models;
  const std::string dir = resolve_model_dir(id_or_dir);
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(dir, ec).string();
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = models[key].lock()) return m;
  std::shared_ptr<const Model> m = load_model(dir);
  models[key] = m;
  return m;
}

std::vector<std::string> token_display_labels(const std::string& text,
                                              const std::vector<Token>& tokens,
                                              const std::vector<std::string>& fallback) {
  std::vector<std::string> out;
  for (size_t i = 0; i < fallback.size(); ++i) {
    std::string s;
    if (i < tokens.size() && tokens[i].end > tokens[i].begin && tokens[i].end <= text.size())
      s = text.substr(tokens[i].begin, tokens[i].end - tokens[i].begin);
    size_t lead = 0;
    while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\n' || s[lead] == '\t')) ++lead;
    std::string body = s.substr(lead);
    while (!body.empty() && (body.back() == ' ' || body.back() == '\n' || body.back() == '\t'))
      body.pop_back();
    if (body.empty()) {
      if (!s.empty()) {
        out.push_back(s.find('\n') != std::string::npos ? "\u21b5" : "\u00b7");
        continue;
      }
      out.push_back(fallback[i]);
      continue;
    }
    out.push_back(body);
  }
  return out;
}

VariantLabel variant_label(const std::string& spec) {
  const std::string canon = make_variant(spec).spec();
  if (canon == "dense") return {"Dense softmax", ""};
  std::vector<std::string> pieces;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= canon.size(); ++i) {
    if (i == canon.size() || (canon[i] == '+' && depth == 0)) {
      pieces.push_back(canon.substr(start, i - start));
      start = i + 1;
    } else if (canon[i] == '(') {
      ++depth;
    } else if (canon[i] == ')') {
      --depth;
    }
  }
  VariantLabel out;
  for (const std::string& p : pieces) {
    const size_t paren = p.find('(');
    const std::string id = p.substr(0, paren);
    std::string name = id;
    try {
      name = registry_piece(id).info.display_name;
    } catch (const Error&) {
    }
    std::string params;
    if (paren != std::string::npos) {
      params = p.substr(paren + 1, p.size() - paren - 2);
      for (size_t k = 0; k < params.size(); ++k)
        if (params[k] == ',') params.insert(++k, " ");
    }
    out.name += (out.name.empty() ? "" : " + ") + name;
    if (!params.empty()) out.params += (out.params.empty() ? "" : "; ") + params;
  }
  return out;
}

std::string variant_caption(const std::string& spec) {
  const VariantLabel l = variant_label(spec);
  return l.params.empty() ? l.name : l.name + " [" + l.params + "]";
}

Workbench::Workbench(WorkbenchOptions o) : opt_(o) {}
Workbench::~Workbench() = default;

void Workbench::open(const Session& s, const std::string& session_path) {
  for (const std::string& spec : s.variants) make_variant(spec);  // fail early on a bad spec
  auto backend = make_backend(s.backend);
  const std::string model_id = is_default_model_name(s.model.id)
                                   ? s.model.id
                                   : resolve_session_path(session_path, s.model.id);
  if (opt_.verify_hashes) check_session_files(s, session_path);
  std::shared_ptr<const Model> model = cached_model(model_id);
  const ModelInfo& info = model->info();

  ModelInput in;
  std::vector<std::string> labels;
  Image8 image8;
  if (s.input.kind == "image") {
    require(info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a text model, but the session's input is an image");
    const std::string path = resolve_session_path(session_path, s.input.image);
    const ImagePreprocessor& pp = model->preprocessor();
    image8 = load_image(path, pp.channels);
    in.image = pp(image8);
  } else {
    require(!info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a vision model, but the session's input is text");
    TextInput ti = encode_for_model(*model, s.input.text, "session input text");
    in.ids = ti.ids;
    in.labels = ti.labels;
    labels = token_display_labels(s.input.text, ti.tokens, ti.labels);
  }
  require(s.layer < info.n_layers && s.head < info.n_heads, ErrorCode::InvalidArgument,
          "session selects layer " + std::to_string(s.layer) + ", head " + std::to_string(s.head) +
              ", but " + info.dir + " has " + std::to_string(info.n_layers) + " layers and " +
              std::to_string(info.n_heads) + " heads");
  auto cap = std::make_unique<Capture>(
      HookSelection::parse("blocks.*.attn.q,blocks.*.attn.k,blocks.*.attn.v"));
  ForwardOptions fo;
  fo.capture = cap.get();
  fo.threads = opt_.threads;
  ModelOutput out = model->forward(in, fo);
  if (labels.empty()) {  // vision: CLS, (distillation), then patches
    const Problem* p0 = cap->problem(0);
    labels = p0 && !p0->labels.empty() ? p0->labels : std::vector<std::string>{};
    if (labels.size() != size_t(out.n_tokens)) {
      labels.clear();
      for (int i = 0; i < out.n_tokens; ++i) labels.push_back(i == 0 ? "CLS" : std::to_string(i));
    }
  }

  // Commit only once everything succeeded, so a failed open leaves the old document intact.
  model_ = std::move(model);
  backend_ = std::move(backend);
  session_ = s;
  session_path_ = session_path;
  input_ = std::move(in);
  dense_out_ = std::move(out);
  capture_ = std::move(cap);
  n_tokens_ = dense_out_.n_tokens;
  labels_ = std::move(labels);
  image8_ = std::move(image8);
  cache_.clear();
  session_.layer = s.layer;
  session_.head = s.head;
}

void Workbench::check_layer_head(int layer, int head) const {
  require(is_open(), ErrorCode::InvalidArgument, "no session is open");
  const ModelInfo& i = model_->info();
  require(layer >= 0 && layer < i.n_layers, ErrorCode::InvalidArgument,
          "layer " + std::to_string(layer) + " is out of range: the model has " +
              std::to_string(i.n_layers) + " layers (0.." + std::to_string(i.n_layers - 1) + ")");
  require(head >= -1 && head < i.n_heads, ErrorCode::InvalidArgument,
          "head " + std::to_string(head) + " is out of range: the model has " +
              std::to_string(i.n_heads) + " heads (0.." + std::to_string(i.n_heads - 1) + ")");
}

void Workbench::select(int layer, int head) {
  check_layer_head(layer, head);
  require(head >= 0, ErrorCode::InvalidArgument, "select a head >= 0");
  session_.layer = layer;
  session_.head = head;
}

void Workbench::set_variants(const std::vector<std::string>& specs) {
  for (const std::string& s : specs) make_variant(s);
  session_.variants = specs;
  for (auto it = cache_.begin(); it != cache_.end();) {
    const bool keep =
        it->first == "dense" || std::find(specs.begin(), specs.end(), it->first) != specs.end();
    it = keep ? std::next(it) : cache_.erase(it);
  }
}

const ModelInfo& Workbench::info() const {
  require(is_open(), ErrorCode::InvalidArgument, "no session is open");
  return model_->info();
}

const Problem& Workbench::problem(int layer) const {
  check_layer_head(layer, 0);
  const Problem* p = capture_->problem(layer);
  require(p != nullptr, ErrorCode::InvalidArgument,
          "layer " + std::to_string(layer) + " captured no Q/K/V");
  return *p;
}

std::string Workbench::describe_input() const {
  if (session_.input.kind == "image")
    return "image " + std::filesystem::path(session_.input.image).filename().string() + ", " +
           std::to_string(image8_.width) + "x" + std::to_string(image8_.height) + " px, " +
           std::to_string(n_tokens_) + " tokens";
  return "text, " + std::to_string(n_tokens_) + " tokens";
}

const Workbench::Cached& Workbench::cached(const std::string& spec) {
  require(is_open(), ErrorCode::InvalidArgument, "no session is open");
  auto it = cache_.find(spec);
  if (it != cache_.end()) return *it->second;
  auto c = std::make_unique<Cached>(make_variant(spec));
  RunOptions ro;
  ro.threads = opt_.threads;
  ro.cancel = opt_.cancel;
  std::unique_ptr<SequenceState> seq =
      c->v.pattern() ? c->v.pattern()->new_sequence_state() : nullptr;
  const int L = model_->info().n_layers;
  for (int l = 0; l < L; ++l) c->results.push_back(run(c->v, problem(l), *backend_, seq.get(), ro));
  c->layer.resize(size_t(L));
  c->head.resize(size_t(L) * size_t(model_->info().n_heads));
  return *cache_.emplace(spec, std::move(c)).first->second;
}

const std::vector<Result>& Workbench::results(const std::string& spec) {
  return cached(spec).results;
}

const Metrics& Workbench::layer_metrics(const std::string& spec, int layer) {
  check_layer_head(layer, 0);
  const Cached& d = cached("dense");
  Cached& c = const_cast<Cached&>(cached(spec));
  auto& slot = c.layer[size_t(layer)];
  if (!slot)
    slot = std::make_unique<Metrics>(
        compare(c.v, problem(layer), c.results[size_t(layer)], d.results[size_t(layer)]));
  return *slot;
}

const Metrics& Workbench::head_metrics(const std::string& spec, int layer, int head) {
  check_layer_head(layer, head);
  const Cached& d = cached("dense");
  Cached& c = const_cast<Cached&>(cached(spec));
  auto& slot = c.head[size_t(layer) * size_t(model_->info().n_heads) + size_t(head)];
  if (!slot) {
    const Problem& p = problem(layer);
    const Problem hp = head_problem(p, head);
    slot =
        std::make_unique<Metrics>(compare(c.v, hp, head_result(c.results[size_t(layer)], p, head),
                                          head_result(d.results[size_t(layer)], p, head)));
  }
  return *slot;
}

HeatmapData Workbench::heatmap(const std::string& spec, int layer, int head, int max_cells) {
  check_layer_head(layer, head);
  require(head >= 0 && max_cells > 0, ErrorCode::InvalidArgument,
          "heatmap: head must be >= 0 and max_cells > 0");
  const Cached& c = cached(spec);
  const Problem& p = problem(layer);
  TileRequest t;
  t.head = head;
  t.q0 = 0;
  t.q1 = p.n_q;
  t.k0 = 0;
  t.k1 = p.n_k;
  t.w = std::min(p.n_k, max_cells);
  t.h = std::min(p.n_q, max_cells);
  t.pool = Pool::Max;
  Tile tile = tile_probabilities(c.v, p, c.results[size_t(layer)], t);
  const Metrics& m = head_metrics(spec, layer, head);
  HeatmapData h;
  h.spec = c.v.spec();
  h.caption = variant_caption(spec);
  h.layer = layer;
  h.head = head;
  h.n_q = p.n_q;
  h.n_k = p.n_k;
  h.rows = tile.h;
  h.cols = tile.w;
  h.cells = std::move(tile.cells);
  h.k_labels = labels_;
  h.q_labels.assign(labels_.end() - p.n_q, labels_.end());
  h.causal = p.causal;
  h.density = m.density;
  h.rel_error = m.rel_error;
  h.mass_recall = m.mass_recall;
  h.row_kl = m.row_kl;
  return h;
}

std::vector<HeatmapData> Workbench::heatmaps(int max_cells) {
  std::vector<HeatmapData> out;
  out.push_back(heatmap("dense", session_.layer, session_.head, max_cells));
  for (const std::string& s : session_.variants)
    out.push_back(heatmap(s, session_.layer, session_.head, max_cells));
  return out;
}

SinkData Workbench::sinks(const std::string& spec, double threshold) {
  SinkData s;
  s.spec = make_variant(spec).spec();
  s.n_layers = info().n_layers;
  s.n = n_tokens_;
  s.labels = labels_;
  s.threshold = threshold;
  std::vector<bool> is_sink(size_t(s.n), false);
  for (int l = 0; l < s.n_layers; ++l) {
    const Metrics& m = layer_metrics(spec, l);
    for (int j = 0; j < s.n; ++j) {
      const float r = j < int(m.sink_score.size()) ? m.sink_score[size_t(j)] : 0.0f;
      s.received.push_back(r);
      if (r > threshold) is_sink[size_t(j)] = true;
    }
  }
  for (int j = 0; j < s.n; ++j)
    if (is_sink[size_t(j)]) s.sinks.push_back(j);
  return s;
}

HeadGrid Workbench::head_grid(const std::string& spec) {
  HeadGrid g;
  g.spec = make_variant(spec).spec();
  g.n_layers = info().n_layers;
  g.n_heads = info().n_heads;
  for (int l = 0; l < g.n_layers; ++l)
    for (int h = 0; h < g.n_heads; ++h) {
      const Metrics& m = head_metrics(spec, l, h);
      double ent = 0;
      for (float e : m.entropy) ent += e;
      g.entropy.push_back(m.entropy.empty() ? NAN : float(ent / double(m.entropy.size())));
      g.sink_mass.push_back(
          m.received.empty() ? NAN : *std::max_element(m.received.begin(), m.received.end()));
      g.output_error.push_back(float(m.rel_error));
      g.mass_recall.push_back(float(m.mass_recall));
    }
  return g;
}

TradeoffPoint Workbench::evaluate(const std::string& spec, bool end_to_end_pass) {
  const Cached& c = cached(spec);
  TradeoffPoint t;
  t.spec = c.v.spec();
  t.pattern = t.spec.substr(0, t.spec.find_first_of("(+"));
  const int L = info().n_layers;
  double density = 0, err = 0, recall = 0, kl = 0;
  bool kl_ok = true;
  for (int l = 0; l < L; ++l) {
    const Metrics& m = layer_metrics(spec, l);
    density += m.density / L;
    err += m.rel_error / L;
    recall += m.mass_recall / L;
    if (std::isfinite(m.row_kl))
      kl += m.row_kl / L;
    else
      kl_ok = false;
    t.flops += c.results[size_t(l)].stats.counted.flops;
    t.kernel_seconds += c.results[size_t(l)].stats.kernel_seconds;
  }
  t.density = density;
  t.rel_error = err;
  t.mass_recall = recall;
  t.row_kl = kl_ok ? kl : kNaN;
  if (end_to_end_pass) {
    Substitution sub;
    sub.variant = &c.v;
    sub.backend = backend_.get();
    sub.layers = session_.substitute_layers;
    sub.heads = session_.substitute_heads;
    sub.run.threads = opt_.threads;
    sub.run.cancel = opt_.cancel;
    sub.check(info());
    ForwardOptions fo;
    fo.substitution = &sub;
    fo.threads = opt_.threads;
    const ModelOutput out = model_->forward(input_, fo);
    const EndToEnd e = end_to_end(info(), input_, dense_out_, out);
    if (e.has_tokens) {
      t.next_token_kl = e.mean_kl;
      t.top1_agreement = e.top1_agreement;
      t.perplexity = e.ppl_variant;
    }
    if (e.has_class) t.top1_agreement = e.class_agree ? 1.0 : 0.0;
    t.cls_cosine = e.cls_cosine;
  }
  return t;
}

std::vector<TradeoffPoint> Workbench::tradeoff(bool end_to_end_pass) {
  std::vector<TradeoffPoint> out;
  out.push_back(evaluate("dense", end_to_end_pass));
  for (const std::string& s : session_.variants) out.push_back(evaluate(s, end_to_end_pass));
  return out;
}

ImageAttention Workbench::image_attention(const std::string& spec, int layer, int head) {
  check_layer_head(layer, head);
  require(info().vision, ErrorCode::InvalidArgument,
          "the image view needs a vision model and an image input (this session has text)");
  const Cached& c = cached(spec);
  const Problem& p = problem(layer);
  const int patch = int(model_->config().patch_size);
  require(patch > 0, ErrorCode::Format, info().dir + ": config.json has no patch_size");
  ImageAttention a;
  a.spec = c.v.spec();
  a.layer = layer;
  a.head = head;
  a.image = image8_;
  a.grid_h = input_.image.height / patch;
  a.grid_w = input_.image.width / patch;
  const int prefix = p.n_k - a.grid_h * a.grid_w;
  require(prefix >= 1, ErrorCode::Format, "image tokens do not match the patch grid");
  a.cls.assign(size_t(a.grid_h) * size_t(a.grid_w), 0.0f);
  std::vector<double> row;
  const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? p.n_heads : head + 1;
  for (int h = h0; h < h1; ++h) {
    probability_row(c.v, p, c.results[size_t(layer)], h, 0, 0, p.n_k, row);
    for (size_t i = 0; i < a.cls.size(); ++i)
      a.cls[i] += float(row[size_t(prefix) + i] / double(h1 - h0));
  }
  if (!dense_out_.logits.empty()) {
    const size_t k = size_t(std::max_element(dense_out_.logits.begin(), dense_out_.logits.end()) -
                            dense_out_.logits.begin());
    a.predicted = k < info().class_names.size() ? info().class_names[k] : std::to_string(k);
  }
  return a;
}

TokensData Workbench::tokens(const std::string& spec, int layer, int head, int query) {
  check_layer_head(layer, head);
  require(head >= 0, ErrorCode::InvalidArgument, "tokens view: choose one head (>= 0)");
  const Cached& c = cached(spec);
  const Problem& p = problem(layer);
  if (query < 0) query = p.n_q - 1;
  require(
      query < p.n_q, ErrorCode::InvalidArgument,
      "query " + std::to_string(query) + " is out of range (" + std::to_string(p.n_q) + " tokens)");
  std::vector<double> row;
  probability_row(c.v, p, c.results[size_t(layer)], head, query, 0, p.n_k, row);
  TokensData t;
  t.spec = c.v.spec();
  t.caption = variant_caption(spec);
  t.layer = layer;
  t.head = head;
  t.query = query;
  t.labels = labels_;
  t.weight.assign(row.begin(), row.end());
  return t;
}

}  // namespace attn
