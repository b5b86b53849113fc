#include "models/arch/substitution.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::models {

bool Substitution::applies(int layer) const {
  return variant &&
         (layers.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end());
}

std::vector<int> Substitution::heads_of(int n_heads) const {
  std::vector<int> out;
  for (int h = 0; h < n_heads; ++h) {
    if (heads.empty() || std::find(heads.begin(), heads.end(), h) != heads.end()) out.push_back(h);
  }
  return out;
}

void Substitution::check(const ModelInfo& info) const {
  require(variant != nullptr && backend != nullptr, ErrorCode::InvalidArgument,
          "substitution needs a variant and a backend");
  for (int l : layers) {
    require(l >= 0 && l < info.n_layers, ErrorCode::InvalidArgument,
            "substitution layer " + std::to_string(l) + " is outside the model's " +
                std::to_string(info.n_layers) + " layers");
  }
  for (int h : heads) {
    require(h >= 0 && h < info.n_heads, ErrorCode::InvalidArgument,
            "substitution head " + std::to_string(h) + " is outside the model's " +
                std::to_string(info.n_heads) + " heads");
  }
}

namespace {

// Log-sum-exp of one row in double, with Eigen's vectorised exp; e holds exp(x - mx), mx the
// row's maximum.
double log_sum_exp(const Eigen::Map<const Eigen::ArrayXf>& x, Eigen::ArrayXd& e, double& mx) {
  mx = double(x.maxCoeff());
  if (!std::isfinite(mx)) return mx;
  e = x.cast<double>() - mx;
  e = e.exp();
  return mx + std::log(e.sum());
}

int argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

double cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

}  // namespace

EndToEnd end_to_end(const ModelInfo& info, const ModelInput& in, const ModelOutput& dense,
                    const ModelOutput& variant) {
  require(dense.n_tokens == variant.n_tokens && dense.n_logits == variant.n_logits &&
              dense.logits.size() == variant.logits.size() &&
              dense.hidden_state.size() == variant.hidden_state.size(),
          ErrorCode::InvalidArgument, "end_to_end: the two runs differ in shape");
  EndToEnd e;
  const int n = dense.n_tokens, v = dense.n_logits;
  if (!dense.logits.empty()) {
    // In chunks, in parallel (an LM's logits run to 10^8 entries), summed in chunk order.
    constexpr size_t kChunk = size_t(1) << 16;
    const size_t size = dense.logits.size(), chunks = (size + kChunk - 1) / kChunk;
    std::vector<std::array<double, 3>> part(chunks);
    parallel_for(int(chunks), [&](int c) {
      const size_t lo = size_t(c) * kChunk;
      const Eigen::Index len = Eigen::Index(std::min(kChunk, size - lo));
      const auto a = Eigen::Map<const Eigen::ArrayXf>(dense.logits.data() + lo, len).cast<double>();
      const auto b =
          Eigen::Map<const Eigen::ArrayXf>(variant.logits.data() + lo, len).cast<double>();
      part[size_t(c)] = {(b - a).square().sum(), a.square().sum(), (b - a).abs().maxCoeff()};
    });
    double diff2 = 0, norm2 = 0, max_abs = 0;
    for (const auto& [d2, n2, mx] : part) {
      diff2 += d2;
      norm2 += n2;
      max_abs = std::max(max_abs, mx);
    }
    e.logits_max_abs = max_abs;
    e.logits_rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : (diff2 > 0 ? INFINITY : 0.0);
  }
  if (!info.causal && n > 0 && !dense.hidden_state.empty()) {
    e.cls_cosine = cosine(dense.hidden_state.data(), variant.hidden_state.data(), dense.hidden);
  }
  if (info.vision) {
    if (v > 0 && dense.logits.size() == size_t(v)) {
      e.has_class = true;
      e.class_dense = argmax(dense.logits.data(), v);
      e.class_variant = argmax(variant.logits.data(), v);
      e.class_agree = e.class_dense == e.class_variant;
    }
    return e;
  }
  if (v == 0 || dense.logits.size() != size_t(n) * size_t(v)) return e;
  e.has_tokens = true;
  e.kl.assign(size_t(n), 0.0f);
  // Per token (in parallel): KL(p || q) = sum p (a - b) - (lse_a - lse_b), with p = exp(a - lse_a)
  // (sum p = 1); the next token's log-probabilities for perplexity; top-1 agreement.
  std::vector<double> kl(static_cast<size_t>(n)), nll_d(static_cast<size_t>(n), 0.0),
      nll_v(static_cast<size_t>(n), 0.0);
  std::vector<char> agree(static_cast<size_t>(n));
  // The same logits on both sides (the dense row of a report): one log-sum-exp per token.
  const bool same = &dense.logits == &variant.logits;
  parallel_for(n, [&](int t) {
    const Eigen::Map<const Eigen::ArrayXf> a(dense.logits.data() + size_t(t) * v, v);
    const Eigen::Map<const Eigen::ArrayXf> b(variant.logits.data() + size_t(t) * v, v);
    // Per-thread buffers: a fresh vocabulary-sized one per token would be mapped and faulted in
    // again each time.
    thread_local Eigen::ArrayXd ea, eb;
    double mx_a = 0, mx_b = 0;
    const double lse_a = log_sum_exp(a, ea, mx_a), lse_b = same ? lse_a : log_sum_exp(b, eb, mx_b);
    if (!std::isfinite(lse_a) || !std::isfinite(lse_b)) {  // no distribution to compare
      kl[size_t(t)] = NAN;
      return;
    }
    // p (a - b) = exp(a - mx_a) (a - b) / sum_a: the exps are ea, scaled by exp(mx_a - lse_a).
    const double p_scale = std::exp(mx_a - lse_a);
    const double pd = same ? 0.0 : (ea * (a - b).cast<double>()).sum() * p_scale;
    kl[size_t(t)] = pd - (lse_a - lse_b);
    // Top-1 tokens: the first entries equal to the maxima the log-sum-exps found.
    const auto top = [v](const float* x, double mx) {
      return int(std::find(x, x + v, float(mx)) - x);
    };
    agree[size_t(t)] = same || top(a.data(), mx_a) == top(b.data(), mx_b);
    if (info.causal && t + 1 < n && t + 1 < int(in.ids.size())) {
      const int32_t next = in.ids[size_t(t) + 1];
      if (next >= 0 && next < v) {
        nll_d[size_t(t)] = lse_a - double(a[next]);
        nll_v[size_t(t)] = lse_b - double(b[next]);
      }
    }
  });
  int agreeing = 0;
  double nll_dense = 0, nll_variant = 0;
  for (int t = 0; t < n; ++t) {
    e.kl[size_t(t)] = float(std::max(0.0, kl[size_t(t)]));
    e.mean_kl += std::max(0.0, kl[size_t(t)]) / n;
    e.max_kl = std::max(e.max_kl, kl[size_t(t)]);
    agreeing += agree[size_t(t)];
    nll_dense += nll_d[size_t(t)];
    nll_variant += nll_v[size_t(t)];
  }
  e.top1_agreement = double(agreeing) / n;
  if (info.causal && n > 1) {
    e.ppl_dense = std::exp(nll_dense / (n - 1));
    e.ppl_variant = std::exp(nll_variant / (n - 1));
  }
  return e;
}

}  // namespace attn::models
