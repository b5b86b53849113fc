#include "models/arch/substitution.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"

namespace attn {

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

// log-softmax of one row, in double.
void log_softmax(const float* x, int n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(s);
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
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
  std::vector<double> lp, lq;
  int agree = 0;
  double nll_d = 0, nll_v = 0;
  for (int t = 0; t < n; ++t) {
    const float* a = dense.logits.data() + size_t(t) * v;
    const float* b = variant.logits.data() + size_t(t) * v;
    log_softmax(a, v, lp);
    log_softmax(b, v, lq);
    double kl = 0;
    for (int i = 0; i < v; ++i) kl += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
    e.kl[size_t(t)] = float(std::max(0.0, kl));
    e.mean_kl += std::max(0.0, kl) / n;
    e.max_kl = std::max(e.max_kl, kl);
    agree += argmax(a, v) == argmax(b, v);
    if (info.causal && t + 1 < n && t + 1 < int(in.ids.size())) {
      const int32_t next = in.ids[size_t(t) + 1];
      if (next >= 0 && next < v) {
        nll_d -= lp[size_t(next)];
        nll_v -= lq[size_t(next)];
      }
    }
  }
  e.top1_agreement = double(agree) / n;
  if (info.causal && n > 1) {
    e.ppl_dense = std::exp(nll_d / (n - 1));
    e.ppl_variant = std::exp(nll_v / (n - 1));
  }
  return e;
}

}  // namespace attn
