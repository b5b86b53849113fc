#include "models/arch/substitution.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>

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

typedef double v4d __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));  // (wraps: no signed overflow)

// exp(x) for x <= 0 in double, four at a time (Eigen's exp of doubles is scalar here, and a
// position's comparison takes two per logit): 2^n e^r with |r| <= ln 2 / 2 by its Taylor series
// to r^13 (truncation below 1e-17), 2^n from the exponent bits. x below -708 (past the normal
// range) reads 0; NaN stays NaN.
v4d exp_nonpos(v4d x) {
  const v4d lowest = v4d{} - 708.0, shifter = v4d{} + 6755399441055744.0;  // 1.5 * 2^52
  const v4d xc = x < lowest ? lowest : x;
  const v4d t = xc * 1.4426950408889634 + shifter;  // n = round(x log2 e) in t's low bits
  const v4d n = t - shifter;
  const v4d r = xc - n * 0.6931471803691238 - n * 1.9082149292705877e-10;  // ln 2, hi + lo
  v4d p = v4d{} + 1.0 / 6227020800.0;
  for (double f : {479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0,
                   24.0, 6.0, 2.0, 1.0, 1.0})
    p = p * r + 1.0 / f;
  const v4u bits = ((v4u)t - (v4u)shifter + 1023) << 52;
  const v4d e = p * (v4d)bits;
  return x < lowest ? v4d{} : e;
}

v4d widen4(const float* x) {
  return v4d{double(x[0]), double(x[1]), double(x[2]), double(x[3])};
}

double hsum4(v4d v) {
  return (v[0] + v[1]) + (v[2] + v[3]);
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

bool EndToEndStream::takes(const ModelInfo& info, const ModelOutput& dense) {
  const int n = dense.n_tokens, v = dense.n_logits;
  return !info.vision && n > 0 && v > 0 && dense.logits.size() == size_t(n) * size_t(v);
}

EndToEndStream::EndToEndStream(const ModelInfo& info, const ModelInput& in,
                               const ModelOutput& dense)
    : info_(info), in_(in), dense_(dense) {
  const int n = dense.n_tokens, v = dense.n_logits;
  require(takes(info, dense), ErrorCode::InvalidArgument,
          "end_to_end: the dense run has no logits per token");
  rows_.resize(size_t(n));
  parallel_for(n, [&](int t) {
    const float* a = dense.logits.data() + size_t(t) * v;
    Row& r = rows_[size_t(t)];
    const float mx = Eigen::Map<const Eigen::ArrayXf>(a, v).maxCoeff();
    r.mx_a = mx;
    r.top_a = int(std::find(a, a + v, mx) - a);  // the first entry equal to the maximum
  });
}

// Columns [col0, col0 + cols) on both sides: the dense row's exps (against its maximum, found
// up front), and the variant's online (its running maximum rescales the running sum).
void EndToEndStream::accumulate(int col0, int cols, const float* block, bool same) {
  const int v = dense_.n_logits;
  parallel_for(dense_.n_tokens, [&](int t) {
    Row& r = rows_[size_t(t)];
    const Eigen::Map<const Eigen::ArrayXf> a(dense_.logits.data() + size_t(t) * v + col0, cols);
    const Eigen::Map<const Eigen::ArrayXf> b(block + size_t(t) * cols, cols);
    if (!std::isfinite(r.mx_a)) return;  // no distribution: the row's KL reads NaN
    // exp(a - mx_a), summed, and against a - b; four at a time, the tail one by one.
    const int c4 = cols / 4 * 4;
    v4d sa = {}, spd = {};
    for (int c = 0; c < c4; c += 4) {
      const v4d xa = widen4(a.data() + c);
      const v4d ea = exp_nonpos(xa - r.mx_a);
      sa += ea;
      if (!same) spd += ea * (xa - widen4(b.data() + c));
    }
    double s_a = hsum4(sa), pd = hsum4(spd);
    for (int c = c4; c < cols; ++c) {
      const double ea = std::exp(double(a[c]) - r.mx_a);
      s_a += ea;
      if (!same) pd += ea * (double(a[c]) - double(b[c]));
    }
    r.s_a += s_a;
    if (same) return;
    r.pd += pd;
    const float mb = b.maxCoeff();
    if (mb > r.top_b) {
      r.top_b = mb;
      r.top_idx = col0 + int(std::find(b.data(), b.data() + cols, mb) - b.data());
    }
    if (std::isnan(mb) || mb == INFINITY) {
      r.m_b = NAN;
    } else if (mb > -INFINITY) {
      const double m = std::max(r.m_b, double(mb));
      v4d sb = {};
      for (int c = 0; c < c4; c += 4) sb += exp_nonpos(widen4(b.data() + c) - m);
      double s_b = hsum4(sb);
      for (int c = c4; c < cols; ++c) s_b += std::exp(double(b[c]) - m);
      r.s_b = r.s_b * std::exp(r.m_b - m) + s_b;
      r.m_b = m;
    }
    const int next = info_.causal && t + 1 < int(in_.ids.size()) ? in_.ids[size_t(t) + 1] : -1;
    if (next >= col0 && next < col0 + cols) r.b_next = b[next - col0];
    const auto d = (b - a).cast<double>();
    r.diff2 += d.square().sum();
    r.norm2 += a.cast<double>().square().sum();
    r.max_abs = std::max(r.max_abs, d.abs().maxCoeff());
  });
}

void EndToEndStream::add(int col0, int cols, const float* block) {
  require(col0 == next_col_ && cols > 0 && col0 + cols <= dense_.n_logits,
          ErrorCode::InvalidArgument,
          "end_to_end: logits columns " + std::to_string(col0) + ".." +
              std::to_string(col0 + cols) + " out of order (expected from " +
              std::to_string(next_col_) + " of " + std::to_string(dense_.n_logits) + ")");
  accumulate(col0, cols, block, false);
  next_col_ = col0 + cols;
}

EndToEnd EndToEndStream::finish(const ModelOutput& variant) {
  const int n = dense_.n_tokens, v = dense_.n_logits;
  const bool same = &variant == &dense_ && next_col_ == 0;
  if (same) accumulate(0, v, dense_.logits.data(), true);
  require(next_col_ == v || same, ErrorCode::InvalidArgument,
          "end_to_end: " + std::to_string(next_col_) + " of " + std::to_string(v) +
              " logits columns came");
  require(variant.n_tokens == n && variant.n_logits == v &&
              variant.hidden_state.size() == dense_.hidden_state.size(),
          ErrorCode::InvalidArgument, "end_to_end: the two runs differ in shape");
  EndToEnd e;
  e.has_tokens = true;
  e.kl.assign(size_t(n), 0.0f);
  // KL(p || q) = sum p (a - b) - (lse_a - lse_b), p = exp(a - lse_a) (sum p = 1).
  double diff2 = 0, norm2 = 0, max_abs = 0, nll_dense = 0, nll_variant = 0;
  int agreeing = 0;
  for (int t = 0; t < n; ++t) {
    const Row& r = rows_[size_t(t)];
    const double lse_a = r.mx_a + std::log(r.s_a);
    const double lse_b = same ? lse_a : r.m_b + std::log(r.s_b);
    // A row without a distribution (a non-finite log-sum-exp) reads KL 0 and disagreeing.
    if (std::isfinite(lse_a) && std::isfinite(lse_b)) {
      const double kl = same ? 0.0 : r.pd * std::exp(r.mx_a - lse_a) - (lse_a - lse_b);
      e.kl[size_t(t)] = float(std::max(0.0, kl));
      e.mean_kl += std::max(0.0, kl) / n;
      e.max_kl = std::max(e.max_kl, kl);
      agreeing += same || r.top_a == r.top_idx;
    }
    diff2 += r.diff2;
    norm2 += same ? 0.0 : r.norm2;
    max_abs = std::max(max_abs, r.max_abs);
    const int next =
        info_.causal && t + 1 < n && t + 1 < int(in_.ids.size()) ? in_.ids[size_t(t) + 1] : -1;
    if (next >= 0 && next < v && std::isfinite(lse_a) && std::isfinite(lse_b)) {
      const double a_next = dense_.logits[size_t(t) * v + size_t(next)];
      nll_dense += lse_a - a_next;
      nll_variant += same ? lse_a - a_next : lse_b - r.b_next;
    }
  }
  e.top1_agreement = double(agreeing) / n;
  if (info_.causal && n > 1) {
    e.ppl_dense = std::exp(nll_dense / (n - 1));
    e.ppl_variant = std::exp(nll_variant / (n - 1));
  }
  e.logits_max_abs = max_abs;
  if (same) {
    e.logits_rel = 0.0;
  } else {
    e.logits_rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : (diff2 > 0 ? INFINITY : 0.0);
  }
  if (!info_.causal && !dense_.hidden_state.empty())
    e.cls_cosine = cosine(dense_.hidden_state.data(), variant.hidden_state.data(), dense_.hidden);
  return e;
}

EndToEnd end_to_end(const ModelInfo& info, const ModelInput& in, const ModelOutput& dense,
                    const ModelOutput& variant) {
  require(dense.n_tokens == variant.n_tokens && dense.n_logits == variant.n_logits &&
              dense.logits.size() == variant.logits.size() &&
              dense.hidden_state.size() == variant.hidden_state.size(),
          ErrorCode::InvalidArgument, "end_to_end: the two runs differ in shape");
  const int n = dense.n_tokens, v = dense.n_logits;
  if (EndToEndStream::takes(info, dense)) {
    EndToEndStream stream(info, in, dense);  // token logits: the variant's as one block
    if (&variant != &dense) stream.add(0, v, variant.logits.data());
    return stream.finish(variant);
  }
  EndToEnd e;
  if (!dense.logits.empty()) {
    double diff2 = 0, norm2 = 0, max_abs = 0;
    for (size_t i = 0; i < dense.logits.size(); ++i) {
      const double d = double(variant.logits[i]) - dense.logits[i];
      diff2 += d * d;
      norm2 += double(dense.logits[i]) * dense.logits[i];
      max_abs = std::max(max_abs, std::fabs(d));
    }
    e.logits_max_abs = max_abs;
    e.logits_rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : (diff2 > 0 ? INFINITY : 0.0);
  }
  if (!info.causal && n > 0 && !dense.hidden_state.empty()) {
    e.cls_cosine = cosine(dense.hidden_state.data(), variant.hidden_state.data(), dense.hidden);
  }
  if (info.vision && v > 0 && dense.logits.size() == size_t(v)) {
    e.has_class = true;
    e.class_dense = argmax(dense.logits.data(), v);
    e.class_variant = argmax(variant.logits.data(), v);
    e.class_agree = e.class_dense == e.class_variant;
  }
  return e;
}

}  // namespace attn::models
