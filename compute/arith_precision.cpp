#include "compute/arith_precision.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compute/error.h"
#include "compute/kv/kv_precision.h"
#include "compute/parallel.h"

namespace attn {

namespace {

// Rounds to the format (f32 values are already f32).
struct Rounder {
  ArithFormat f;
  float operator()(float x) const {
    switch (f) {
      case ArithFormat::F32:
        return x;
      case ArithFormat::Bf16:
        return round_bf16(x);
      case ArithFormat::Fp16:
        return round_fp16(x);
    }
    return x;
  }
};

// Dot product of a and b (length d), read as stored (`in`): accumulated in f32, or rounded
// after every add.
float dot(const float* a, const float* b, int d, const Rounder& in, const Rounder& r,
          bool f32_acc) {
  float s = 0;
  for (int c = 0; c < d; ++c) {
    s += in(a[c]) * in(b[c]);
    if (!f32_acc) s = r(s);
  }
  return r(s);
}

}  // namespace

const char* arith_format_name(ArithFormat f) {
  switch (f) {
    case ArithFormat::F32:
      return "f32";
    case ArithFormat::Bf16:
      return "bf16";
    case ArithFormat::Fp16:
      return "fp16";
  }
  return "?";
}

std::vector<float> attention_in_precision(const Problem& p, const ArithOptions& o) {
  require(o.tile >= 1, ErrorCode::InvalidArgument, "tile must be >= 1");
  const int H = p.n_heads, n = p.n_q, nk = p.n_k, d = p.d;
  const float scale = p.effective_scale();
  const Rounder in{o.format};                                     // Q, K, V as stored
  const Rounder r{o.storage_only ? ArithFormat::F32 : o.format};  // every later step
  const bool acc = o.f32_accumulate || o.storage_only;
  std::vector<float> out(size_t(H) * n * d, 0.0f);
  parallel_for(H * n, [&](int task) {
    const int h = task / n, i = task % n;
    const float* q = p.q_row(h, i);
    float* dst = out.data() + (size_t(h) * n + i) * d;
    std::vector<float> s;
    if (!o.tiled) {
      // Scores, then the row's max, exponentials, sum and probabilities, each stored rounded.
      s.assign(size_t(nk), -std::numeric_limits<float>::infinity());
      float mx = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < nk; ++j)
        if (p.visible(i, j))
          mx = std::max(mx, s[size_t(j)] = r(r(dot(q, p.k_row(h, j), d, in, r, acc)) * scale));
      float sum = 0;
      for (int j = 0; j < nk; ++j) {
        s[size_t(j)] = p.visible(i, j) ? r(std::exp(s[size_t(j)] - mx)) : 0.0f;
        sum += s[size_t(j)];
        if (!acc) sum = r(sum);
      }
      for (int c = 0; c < d; ++c) {
        float a = 0;
        for (int j = 0; j < nk; ++j) {
          if (s[size_t(j)] == 0) continue;
          a += r(s[size_t(j)] / sum) * in(p.v_row(h, j)[c]);
          if (!acc) a = r(a);
        }
        dst[c] = r(a);
      }
      return;
    }
    // Tiled: running max m, sum l and unnormalised output o, rescaled and stored in the format
    // after every tile of keys; normalised at the end.
    float m = -std::numeric_limits<float>::infinity(), l = 0;
    std::vector<float> acc_o(size_t(d), 0.0f);
    for (int j0 = 0; j0 < nk; j0 += o.tile) {
      const int j1 = std::min(nk, j0 + o.tile);
      s.assign(size_t(j1 - j0), -std::numeric_limits<float>::infinity());
      float tm = -std::numeric_limits<float>::infinity();
      for (int j = j0; j < j1; ++j)
        if (p.visible(i, j))
          tm = std::max(tm, s[size_t(j - j0)] = r(r(dot(q, p.k_row(h, j), d, in, r, acc)) * scale));
      if (tm == -std::numeric_limits<float>::infinity()) continue;
      const float m_new = std::max(m, tm);
      const float alpha = r(std::exp(m - m_new));  // exp(-inf) = 0 on the first tile
      float tl = 0;
      for (int j = j0; j < j1; ++j) {
        float& e = s[size_t(j - j0)];
        e = p.visible(i, j) ? r(std::exp(e - m_new)) : 0.0f;
        tl += e;
        if (!acc) tl = r(tl);
      }
      l = r(r(alpha * l) + r(tl));
      for (int c = 0; c < d; ++c) {
        float a = 0;
        for (int j = j0; j < j1; ++j) {
          a += in(s[size_t(j - j0)]) * in(p.v_row(h, j)[c]);  // P V from 16-bit operands
          if (!acc) a = r(a);
        }
        acc_o[size_t(c)] = r(r(alpha * acc_o[size_t(c)]) + r(a));
      }
      m = m_new;
    }
    for (int c = 0; c < d; ++c) dst[c] = l > 0 ? r(acc_o[size_t(c)] / l) : 0.0f;
  });
  return out;
}

std::vector<double> attention_fp64(const Problem& p) {
  const int H = p.n_heads, n = p.n_q, nk = p.n_k, d = p.d;
  const double scale = p.effective_scale();
  std::vector<double> out(size_t(H) * n * d, 0.0);
  parallel_for(H * n, [&](int task) {
    const int h = task / n, i = task % n;
    std::vector<double> s(static_cast<size_t>(nk), 0.0);
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < nk; ++j) {
      if (!p.visible(i, j)) continue;
      double dp = 0;
      for (int c = 0; c < d; ++c) dp += double(p.q_row(h, i)[c]) * p.k_row(h, j)[c];
      s[size_t(j)] = dp * scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    double sum = 0;
    for (int j = 0; j < nk; ++j)
      sum += s[size_t(j)] = p.visible(i, j) ? std::exp(s[size_t(j)] - mx) : 0.0;
    double* dst = out.data() + (size_t(h) * n + i) * d;
    for (int j = 0; j < nk; ++j)
      if (s[size_t(j)] != 0)
        for (int c = 0; c < d; ++c) dst[c] += s[size_t(j)] / sum * p.v_row(h, j)[c];
  });
  return out;
}

ArithError arith_error(const std::vector<float>& out, const std::vector<double>& ref) {
  require(out.size() == ref.size(), ErrorCode::InvalidArgument, "outputs differ in size");
  ArithError e;
  for (size_t i = 0; i < out.size(); ++i) {
    const double a = std::fabs(double(out[i]) - ref[i]);
    e.max_abs = std::max(e.max_abs, a);
    e.mean_abs += a;
  }
  if (!out.empty()) e.mean_abs /= double(out.size());
  return e;
}

}  // namespace attn
