#include "models/arch/intervention.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/problem.h"
#include "models/arch/model.h"

namespace attn::models {

std::string head_name(int layer, int head) {
  return "L" + std::to_string(layer) + "H" + std::to_string(head);
}

bool Intervention::edits_heads(int layer) const {
  return std::any_of(heads.begin(), heads.end(),
                     [&](const HeadEdit& e) { return e.layer == layer; });
}

bool Intervention::edits_resid(int layer) const {
  return std::any_of(resid.begin(), resid.end(),
                     [&](const ResidEdit& e) { return e.layer == layer; });
}

void Intervention::check(const ModelInfo& info, int n) const {
  const int d = info.head_dim;
  for (const HeadEdit& e : heads) {
    const std::string name = head_name(e.layer, e.head);
    require(e.layer >= 0 && e.layer < info.n_layers && e.head >= 0 && e.head < info.n_heads,
            ErrorCode::InvalidArgument,
            "intervention on " + name + ": the model has " + std::to_string(info.n_layers) +
                " layers and " + std::to_string(info.n_heads) + " heads (0-based)");
    require(e.position >= -1 && e.position < n, ErrorCode::InvalidArgument,
            "intervention on " + name + ": position " + std::to_string(e.position) +
                " is outside the input's " + std::to_string(n) + " tokens");
    if (e.mode == HeadEdit::Replace)
      require(e.values.size() == size_t(n) * size_t(d), ErrorCode::InvalidArgument,
              "patching " + name + ": the replacement holds " + std::to_string(e.values.size()) +
                  " values, not " + std::to_string(n) + " tokens x " + std::to_string(d) +
                  " (the two runs must have the same length)");
    if (e.mode == HeadEdit::Pattern) {
      require(e.values.size() == size_t(n) * size_t(n), ErrorCode::InvalidArgument,
              "pattern patching " + name + ": the pattern holds " +
                  std::to_string(e.values.size()) + " values, not " + std::to_string(n) + " x " +
                  std::to_string(n) + " (the two runs must have the same length)");
      for (float x : e.values)
        require(std::isfinite(x), ErrorCode::NonFinite,
                "pattern patching " + name + ": the pattern holds a non-finite value");
    }
    if (e.mode == HeadEdit::Mean)
      require(e.values.empty() || e.values.size() == size_t(d), ErrorCode::InvalidArgument,
              "mean ablation of " + name + ": the mean holds " + std::to_string(e.values.size()) +
                  " values, not head_dim " + std::to_string(d));
  }
  for (const ResidEdit& e : resid) {
    require(e.layer >= 0 && e.layer < info.n_layers, ErrorCode::InvalidArgument,
            "residual patch after layer " + std::to_string(e.layer) + ": the model has " +
                std::to_string(info.n_layers) + " layers");
    require(e.position >= 0 && e.position < n, ErrorCode::InvalidArgument,
            "residual patch at position " + std::to_string(e.position) + ": the input has " +
                std::to_string(n) + " tokens");
    require(e.values.size() == size_t(info.hidden), ErrorCode::InvalidArgument,
            "residual patch: " + std::to_string(e.values.size()) + " values, not hidden size " +
                std::to_string(info.hidden));
  }
}

void Intervention::apply_heads(int layer, float* out, int n, int n_heads, int d,
                               float* head_out) const {
  const size_t hd = size_t(n_heads) * size_t(d);
  for (const HeadEdit& e : heads) {
    if (e.layer != layer || e.mode == HeadEdit::Pattern) continue;
    const int t0 = e.position < 0 ? 0 : e.position, t1 = e.position < 0 ? n : e.position + 1;
    std::vector<float> mean;
    if (e.mode == HeadEdit::Mean) {
      if (!e.values.empty()) {
        mean = e.values;
      } else {
        std::vector<double> m(size_t(d), 0.0);
        for (int t = 0; t < n; ++t)
          for (int c = 0; c < d; ++c) m[size_t(c)] += out[size_t(t) * hd + size_t(e.head) * d + c];
        mean.resize(size_t(d));
        for (int c = 0; c < d; ++c) mean[size_t(c)] = float(m[size_t(c)] / n);
      }
    }
    for (int t = t0; t < t1; ++t) {
      float* dst = out + size_t(t) * hd + size_t(e.head) * d;
      switch (e.mode) {
        case HeadEdit::Zero:
          std::fill_n(dst, d, 0.0f);
          break;
        case HeadEdit::Mean:
          std::copy_n(mean.data(), d, dst);
          break;
        case HeadEdit::Replace:
          std::copy_n(e.values.data() + size_t(t) * d, d, dst);
          break;
        case HeadEdit::Pattern:
          break;
      }
      if (head_out) std::copy_n(dst, d, head_out + (size_t(e.head) * n + t) * d);
    }
  }
}

void Intervention::apply_patterns(int layer, const Problem& p, float* out, float* head_out,
                                  float* pattern) const {
  const int n = p.n_q, nk = p.n_k, d = p.d, H = p.n_heads;
  const size_t hd = size_t(H) * size_t(d);
  for (const HeadEdit& e : heads) {
    if (e.layer != layer || e.mode != HeadEdit::Pattern) continue;
    require(n == nk, ErrorCode::InvalidArgument,
            "pattern patching " + head_name(e.layer, e.head) +
                " runs in a forward pass, not in a decode step");
    const int t0 = e.position < 0 ? 0 : e.position, t1 = e.position < 0 ? n : e.position + 1;
    std::vector<double> acc(static_cast<size_t>(d));
    for (int t = t0; t < t1; ++t) {
      const float* row = e.values.data() + size_t(t) * nk;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j < nk; ++j) {
        if (row[j] == 0.0f) continue;
        const float* v = p.v_row(e.head, j);
        for (int c = 0; c < d; ++c) acc[size_t(c)] += double(row[j]) * v[c];
      }
      float* dst = out + size_t(t) * hd + size_t(e.head) * d;
      for (int c = 0; c < d; ++c) dst[c] = float(acc[size_t(c)]);
      if (head_out) std::copy_n(dst, d, head_out + (size_t(e.head) * n + t) * d);
      if (pattern) std::copy_n(row, nk, pattern + (size_t(e.head) * n + t) * nk);
    }
  }
}

void Intervention::apply_resid(int layer, float* x, int n, int hidden) const {
  for (const ResidEdit& e : resid)
    if (e.layer == layer && e.position < n)
      std::copy_n(e.values.data(), hidden, x + size_t(e.position) * hidden);
}

}  // namespace attn::models
