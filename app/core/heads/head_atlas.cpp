#include "app/core/heads/head_atlas.h"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/core/decode/stream.h"
#include "app/core/heads/head_roles.h"
#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// splitmix64: a small generator whose draws are the same on every platform (the standard
// library's distributions are not).
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return size_t(next() % n); }
};

std::optional<int32_t> bos_of(const models::Model& m) {
  const auto& b = m.config().bos_token_id;
  if (b) return int32_t(*b);
  return std::nullopt;
}

double percentile(std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t i = size_t(std::floor(pos));
  const double f = pos - double(i);
  return i + 1 < sorted.size() ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[i];
}

// Role scores of every head of one forward pass: [role][L * H].
std::vector<std::vector<double>> score_pass(const models::Model& model,
                                            const std::vector<int32_t>& ids, int repeat_start,
                                            int repeat_period, const AtlasOptions& o,
                                            double* nll_sum, std::vector<int>* offsets) {
  const models::ModelInfo& info = model.info();
  models::Capture cap(
      models::HookSelection::parse("blocks.*.attn.pattern,blocks.*.attn.out,blocks.*.attn.v"));
  models::ModelInput in;
  in.ids = ids;
  models::ForwardOptions fo;
  fo.capture = &cap;
  fo.threads = o.threads;
  const models::ModelOutput out = model.forward(in, fo);
  const int N = out.n_tokens, L = info.n_layers, H = info.n_heads;
  // Copy steps of a repeated sequence: second-copy queries whose top-1 next token is the next
  // token of the copy (the token after the earlier occurrence).
  std::vector<int> copy_source;
  if (repeat_period > 0 && out.n_logits > 0 && !out.logits.empty()) {
    copy_source.assign(size_t(N), -1);
    for (int j = 0; j + 1 < repeat_period; ++j) {
      const int t = repeat_start + repeat_period + j;
      const float* row = out.logits.data() + size_t(t) * size_t(out.n_logits);
      const int top = int(std::max_element(row, row + out.n_logits) - row);
      if (top == ids[size_t(t) + 1]) copy_source[size_t(t)] = repeat_start + j + 1;
    }
  }
  if (nll_sum && out.n_logits > 0 && !out.logits.empty()) {
    double s = 0;
    for (int t = 0; t + 1 < N; ++t) {
      const float* row = out.logits.data() + size_t(t) * size_t(out.n_logits);
      const float mx = *std::max_element(row, row + out.n_logits);
      double z = 0;
      for (int v = 0; v < out.n_logits; ++v) z += std::exp(double(row[v]) - mx);
      s += std::log(z) + mx - row[ids[size_t(t) + 1]];
    }
    *nll_sum += s;
  }
  const size_t R = head_roles().size();
  std::vector<std::vector<double>> scores(R, std::vector<double>(size_t(L) * H, kNaN));
  RoleOptions ro;
  ro.long_range = o.long_range;
  for (int l = 0; l < L; ++l) {
    const models::LayerCapture& c = cap.layers[size_t(l)];
    const Problem& p = c.problem;
    const int d = c.d;
    parallel_for(
        H,
        [&](int h) {
          HeadRows rows = pattern_rows(c.pattern.data() + size_t(h) * N * N, N, N, info.causal);
          rows.ids = &ids;
          rows.repeat_start = repeat_start;
          rows.repeat_period = repeat_period;
          rows.copy_source = copy_source;
          rows.out_norm.resize(size_t(N));
          rows.value_norm.resize(size_t(N));
          for (int t = 0; t < N; ++t) {
            double so = 0, sv = 0;
            const float* o_row = c.out.data() + (size_t(h) * N + t) * d;
            const float* v_row = p.v_row(h, t);
            for (int e = 0; e < d; ++e) {
              so += double(o_row[e]) * o_row[e];
              sv += double(v_row[e]) * v_row[e];
            }
            rows.out_norm[size_t(t)] = std::sqrt(so);
            rows.value_norm[size_t(t)] = std::sqrt(sv);
          }
          const RoleScores rs = role_scores(rows, ro);
          for (size_t r = 0; r < R; ++r) scores[r][size_t(l) * H + h] = rs.value[r];
          if (offsets) (*offsets)[size_t(l) * H + h] = rs.offset;
        },
        o.threads);
  }
  return scores;
}

}  // namespace

AtlasInput atlas_input(const models::Model& model, const std::vector<std::string>& texts,
                       const AtlasOptions& o) {
  const models::ModelInfo& info = model.info();
  require(!info.vision, ErrorCode::Unsupported,
          "head roles need a text model; " + info.model_type + " reads images");
  require(model.tokenizer() != nullptr, ErrorCode::InvalidArgument,
          info.model_type + " model has no tokenizer");
  require(o.window >= 4, ErrorCode::InvalidArgument,
          "the window must hold at least 4 tokens, not " + std::to_string(o.window));
  require(o.windows >= 1 && o.repeat_sequences >= 0 && o.repeat_length >= 2,
          ErrorCode::InvalidArgument,
          "the atlas needs at least one window and repeated sequences of 2 or more tokens");
  const std::optional<int32_t> bos = bos_of(model);
  const int prefix = bos ? 1 : 0;
  int W = o.window;
  if (info.max_tokens > 0) W = std::min(W, info.max_tokens);
  AtlasInput in;
  std::set<int32_t> pool;
  std::vector<std::vector<int32_t>> encoded;
  for (const std::string& text : texts) {
    if (text.empty()) continue;
    std::vector<int32_t> ids = tokenize_stream(model, text);
    if (bos && !ids.empty() && ids.front() == *bos) ids.erase(ids.begin());
    if (ids.empty()) continue;
    pool.insert(ids.begin(), ids.end());
    in.text_tokens += int(ids.size());
    encoded.push_back(std::move(ids));
  }
  require(!encoded.empty() || texts.empty(), ErrorCode::InvalidArgument, "the text has no tokens");
  auto window_at = [&](const std::vector<int32_t>& ids, size_t start, size_t len) {
    std::vector<int32_t> w;
    if (bos) w.push_back(*bos);
    w.insert(w.end(), ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(start + len));
    return w;
  };
  const size_t body = size_t(W - prefix);
  if (encoded.empty()) {
    // No text: the repeated sequences alone.
  } else if (encoded.size() == 1) {
    // measure_text.py: starts = linspace(0, len(ids) - W, K).astype(int) (the window is BOS +
    // W-1 tokens, so the last start leaves one token unread, as there).
    const std::vector<int32_t>& ids = encoded.front();
    if (ids.size() < body + 1) {
      in.windows.push_back(window_at(ids, 0, ids.size()));
    } else {
      const int K = o.windows;
      const double delta = double(ids.size() - size_t(W));
      const double step = K > 1 ? delta / double(K - 1) : 0.0;
      for (int i = 0; i < K; ++i) {
        const double y = i == K - 1 && K > 1 ? delta : double(i) * step;
        in.windows.push_back(window_at(ids, size_t(y), body));
      }
    }
  } else {
    for (const auto& ids : encoded)
      in.windows.push_back(window_at(ids, 0, std::min(body, ids.size())));
  }
  // Random sequences from the text's tokens (special tokens left out).
  const models::Tokenizer& tok = *model.tokenizer();
  std::vector<int32_t> tokens;
  for (int32_t t : pool)
    if (!tok.is_special(t) && (!bos || t != *bos)) tokens.push_back(t);
  if (tokens.size() < 2) {
    tokens.clear();
    for (int32_t t = 0; t < int32_t(tok.vocab_size()); ++t)
      if (!tok.is_special(t) && (!bos || t != *bos)) tokens.push_back(t);
  }
  const int P = o.repeat_length;
  require(info.max_tokens <= 0 || prefix + 2 * P <= info.max_tokens, ErrorCode::InvalidArgument,
          "repeated sequences of " + std::to_string(P) + " tokens do not fit the context of " +
              std::to_string(info.max_tokens));
  SplitMix rng{o.seed};
  for (int s = 0; s < o.repeat_sequences; ++s) {
    std::vector<int32_t> r(static_cast<size_t>(P));
    for (auto& t : r) t = tokens[rng.below(tokens.size())];
    std::vector<int32_t> seq;
    if (bos) seq.push_back(*bos);
    seq.insert(seq.end(), r.begin(), r.end());
    seq.insert(seq.end(), r.begin(), r.end());
    in.repeats.push_back(std::move(seq));
  }
  in.repeat_start = prefix;
  in.repeat_length = P;
  return in;
}

std::pair<double, double> bootstrap_ci(const std::vector<double>& x0, int resamples, uint64_t seed,
                                       double level) {
  std::vector<double> x;
  for (double v : x0)
    if (!std::isnan(v)) x.push_back(v);
  if (x.empty()) return {kNaN, kNaN};
  double m = 0;
  for (double v : x) m += v / double(x.size());
  if (x.size() < 2 || resamples < 2) return {m, m};
  SplitMix rng{seed};
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& mean : means) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[rng.below(x.size())];
    mean = s / double(x.size());
  }
  std::sort(means.begin(), means.end());
  const double a = (1 - level) / 2;
  return {percentile(means, a), percentile(means, 1 - a)};
}

std::vector<std::pair<double, double>> bootstrap_cis(
    const std::vector<const std::vector<double>*>& xs, int resamples, uint64_t seed, double level) {
  std::vector<std::pair<double, double>> out(xs.size(), {kNaN, kNaN});
  if (xs.empty()) return out;
  const Eigen::Index n = Eigen::Index(xs[0]->size()), K = Eigen::Index(xs.size());
  Eigen::MatrixXd x(n, K);
  for (Eigen::Index k = 0; k < K; ++k) {
    require(Eigen::Index(xs[size_t(k)]->size()) == n, ErrorCode::InvalidArgument,
            "bootstrap_cis: series of different lengths");
    for (Eigen::Index i = 0; i < n; ++i) x(i, k) = (*xs[size_t(k)])[size_t(i)];
  }
  if (n == 0) return out;
  const Eigen::RowVectorXd mean = x.colwise().mean();
  if (n < 2 || resamples < 2) {
    for (Eigen::Index k = 0; k < K; ++k) out[size_t(k)] = {mean(k), mean(k)};
    return out;
  }
  // Resamples in blocks, so the counts stay small for large datasets.
  SplitMix rng{seed};
  Eigen::MatrixXd means(resamples, K);
  constexpr int kBlock = 64;
  Eigen::MatrixXd counts;
  for (int b0 = 0; b0 < resamples; b0 += kBlock) {
    const int nb = std::min(kBlock, resamples - b0);
    counts.setZero(nb, n);
    for (int b = 0; b < nb; ++b)
      for (Eigen::Index i = 0; i < n; ++i) counts(b, Eigen::Index(rng.below(size_t(n)))) += 1;
    means.middleRows(b0, nb).noalias() = counts * x / double(n);
  }
  const double a = (1 - level) / 2;
  std::vector<double> col(static_cast<size_t>(resamples));
  for (Eigen::Index k = 0; k < K; ++k) {
    for (int b = 0; b < resamples; ++b) col[size_t(b)] = means(b, k);
    std::sort(col.begin(), col.end());
    out[size_t(k)] = {percentile(col, a), percentile(col, 1 - a)};
  }
  return out;
}

AtlasSamples collect_atlas(const models::Model& model, const std::string& model_name,
                           const AtlasInput& in, const AtlasOptions& o,
                           const std::vector<int>* items) {
  const auto t0 = std::chrono::steady_clock::now();
  const models::ModelInfo& info = model.info();
  require(!info.vision, ErrorCode::Unsupported,
          "head roles need a text model; " + info.model_type + " reads images");
  require(!in.windows.empty() || !in.repeats.empty(), ErrorCode::InvalidArgument,
          "the atlas has no input: neither text windows nor repeated sequences");
  const int L = info.n_layers, H = info.n_heads, LH = L * H;
  const auto& roles = head_roles();
  const size_t R = roles.size();
  AtlasSamples a;
  a.model = model_name;
  a.n_layers = L;
  a.n_heads = H;
  a.windows = int(in.windows.size());
  a.window_tokens = in.windows.empty() ? 0 : int(in.windows.front().size());
  a.text_tokens = in.text_tokens;
  a.repeats = int(in.repeats.size());
  a.repeat_length = in.repeat_length;
  a.long_range = o.long_range;
  a.seed = o.seed;
  a.lm = info.vocab > 0;
  const int all = a.windows + a.repeats;
  std::vector<int> run;
  if (items) {
    run = *items;
    std::sort(run.begin(), run.end());
    for (size_t k = 0; k < run.size(); ++k)
      require(run[k] >= 0 && run[k] < all && (k == 0 || run[k] != run[k - 1]),
              ErrorCode::InvalidArgument,
              "atlas item " + std::to_string(run[k]) + " is outside the " + std::to_string(all) +
                  " windows and sequences, or given twice");
  } else {
    for (int k = 0; k < all; ++k) run.push_back(k);
  }
  const int total = int(run.size());
  int done = 0;
  for (int k : run) {
    AtlasSample smp;
    smp.repeat = k >= a.windows;
    smp.index = smp.repeat ? k - a.windows : k;
    std::vector<std::vector<double>> s;
    if (!smp.repeat) {
      const auto& w = in.windows[size_t(k)];
      smp.offsets.assign(size_t(LH), 0);
      s = score_pass(model, w, 0, 0, o, &smp.nll, &smp.offsets);
      smp.predicted = int(w.size()) - 1;
    } else {
      const auto& q = in.repeats[size_t(smp.index)];
      require(in.repeat_length > 0 && int(q.size()) >= in.repeat_start + 2 * in.repeat_length,
              ErrorCode::InvalidArgument, "a repeated sequence is shorter than its two copies");
      s = score_pass(model, q, in.repeat_start, in.repeat_length, o, nullptr, nullptr);
    }
    smp.scores.resize(R);
    for (size_t r = 0; r < R; ++r)
      if (roles[r].repeated == smp.repeat) smp.scores[r] = std::move(s[r]);
    a.samples.push_back(std::move(smp));
    ++done;
    if (o.progress) o.progress(done, total);
    if (o.cancel && o.cancel->load()) throw Error(ErrorCode::Cancelled, "head atlas cancelled");
  }
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

HeadAtlas summarize_atlas(const AtlasSamples& s, int bootstrap) {
  const int LH = s.n_layers * s.n_heads;
  const auto& roles = head_roles();
  const size_t R = roles.size();
  HeadAtlas a;
  a.model = s.model;
  a.n_layers = s.n_layers;
  a.n_heads = s.n_heads;
  for (const HeadRole& r : roles) a.roles.push_back(r.name);
  a.windows = s.windows;
  a.window_tokens = s.window_tokens;
  a.text_tokens = s.text_tokens;
  a.repeats = s.repeats;
  a.repeat_length = s.repeat_length;
  a.long_range = s.long_range;
  a.bootstrap = bootstrap;
  a.seed = s.seed;
  a.seconds = s.seconds;
  double loss_sum = 0;
  int loss_windows = 0;
  long predicted = 0;
  std::vector<std::map<int, int>> offset_votes(static_cast<size_t>(LH));
  for (const AtlasSample& smp : s.samples) {
    if (smp.repeat) continue;
    if (smp.predicted > 0) loss_sum += smp.nll / smp.predicted, ++loss_windows;
    predicted += smp.predicted;
    for (int i = 0; i < LH && size_t(i) < smp.offsets.size(); ++i)
      ++offset_votes[size_t(i)][smp.offsets[size_t(i)]];
  }
  // Each window weighs the same, as in the ablation scan's baseline and `analyze --dataset`.
  a.text_loss = loss_windows > 0 && s.lm ? loss_sum / loss_windows : kNaN;
  a.predicted_tokens = int(predicted);
  for (int i = 0; i < LH; ++i) {
    int best = 0, votes = -1;
    for (const auto& [off, n] : offset_votes[size_t(i)])
      if (n > votes) best = off, votes = n;
    a.offset.push_back(best);
  }
  a.mean.assign(R, std::vector<float>(size_t(LH), float(kNaN)));
  a.lo = a.hi = a.mean;
  for (size_t r = 0; r < R; ++r) {
    // The role's samples in index order; those that score some head count (a sequence without
    // copy steps gives no retrieval score).
    std::vector<const std::vector<double>*> mine;
    for (const AtlasSample& smp : s.samples)
      if (r < smp.scores.size() && smp.scores[r].size() == size_t(LH))
        mine.push_back(&smp.scores[r]);
    int scored = 0;
    for (const auto* smp : mine)
      scored += std::any_of(smp->begin(), smp->end(), [](double v) { return !std::isnan(v); });
    a.samples.push_back(scored);
    for (int i = 0; i < LH; ++i) {
      std::vector<double> x;
      for (const auto* smp : mine) x.push_back((*smp)[size_t(i)]);
      double m = 0;
      int n = 0;
      for (double v : x)
        if (!std::isnan(v)) m += v, ++n;
      if (n == 0) continue;
      a.mean[r][size_t(i)] = float(m / n);
      const auto [lo, hi] = bootstrap_ci(x, bootstrap, s.seed + 7919 * (r * LH + i));
      a.lo[r][size_t(i)] = float(lo);
      a.hi[r][size_t(i)] = float(hi);
    }
  }
  return a;
}

HeadAtlas head_atlas(const models::Model& model, const std::string& model_name,
                     const AtlasInput& in, const AtlasOptions& o) {
  return summarize_atlas(collect_atlas(model, model_name, in, o), o.bootstrap);
}

namespace {
double at(const HeadAtlas& a, const std::vector<std::vector<float>>& v, const std::string& role,
          int layer, int head) {
  require(layer >= 0 && layer < a.n_layers && head >= 0 && head < a.n_heads,
          ErrorCode::InvalidArgument,
          "L" + std::to_string(layer) + "H" + std::to_string(head) + " is outside the atlas (" +
              std::to_string(a.n_layers) + " layers, " + std::to_string(a.n_heads) + " heads)");
  return v[size_t(head_role_index(role))][size_t(layer) * a.n_heads + head];
}
}  // namespace

double HeadAtlas::mean_of(const std::string& role, int layer, int head) const {
  return at(*this, mean, role, layer, head);
}
double HeadAtlas::lo_of(const std::string& role, int layer, int head) const {
  return at(*this, lo, role, layer, head);
}
double HeadAtlas::hi_of(const std::string& role, int layer, int head) const {
  return at(*this, hi, role, layer, head);
}

nlohmann::json atlas_json(const HeadAtlas& a) {
  using nlohmann::json;
  auto grid = [&](const std::vector<float>& v) {
    json rows = json::array();
    for (int l = 0; l < a.n_layers; ++l) {
      json row = json::array();
      for (int h = 0; h < a.n_heads; ++h) {
        const float x = v[size_t(l) * a.n_heads + h];
        row.push_back(std::isfinite(x) ? json(std::round(double(x) * 1e6) / 1e6) : json());
      }
      rows.push_back(row);
    }
    return rows;
  };
  json j;
  j["version"] = 1;
  j["model"] = a.model;
  j["layers"] = a.n_layers;
  j["heads"] = a.n_heads;
  j["protocol"] = {{"text_windows", a.windows},
                   {"window_tokens", a.window_tokens},
                   {"text_tokens", a.text_tokens},
                   {"repeated_sequences", a.repeats},
                   {"repeat_length", a.repeat_length},
                   {"seed", a.seed},
                   {"long_range_distance", a.long_range},
                   {"bootstrap_resamples", a.bootstrap},
                   {"interval", "bootstrap percentile 95% over samples"}};
  j["text_loss"] = std::isfinite(a.text_loss) ? json(a.text_loss) : json();
  j["text_loss_scope"] = std::string(kLossScope) + "; a window is BOS + its text (cut to --window)";
  j["predicted_tokens"] = a.predicted_tokens;
  j["seconds"] = a.seconds;
  j["roles"] = json::array();
  const auto& roles = head_roles();
  for (size_t r = 0; r < roles.size(); ++r) {
    json e = {
        {"name", roles[r].name},     {"title", roles[r].title}, {"definition", roles[r].definition},
        {"source", roles[r].source}, {"samples", a.samples[r]}, {"mean", grid(a.mean[r])},
        {"ci_low", grid(a.lo[r])},   {"ci_high", grid(a.hi[r])}};
    // The strongest head, as the model cards quote it.
    int best = -1;
    for (int i = 0; i < a.n_layers * a.n_heads; ++i)
      if (std::isfinite(a.mean[r][size_t(i)]) &&
          (best < 0 || a.mean[r][size_t(i)] > a.mean[r][size_t(best)]))
        best = i;
    if (best >= 0)
      e["best"] = {{"layer", best / a.n_heads},
                   {"head", best % a.n_heads},
                   {"value", a.mean[r][size_t(best)]}};
    if (roles[r].name == "offset") {
      json off = json::array();
      for (int l = 0; l < a.n_layers; ++l) {
        json row = json::array();
        for (int h = 0; h < a.n_heads; ++h) row.push_back(a.offset[size_t(l) * a.n_heads + h]);
        off.push_back(row);
      }
      e["offsets"] = off;
    }
    j["roles"].push_back(e);
  }
  return j;
}

}  // namespace attn::core
