// Kernelised (linear) attention: softmax(q.k) is replaced by a feature-map product
// phi(q).phi(k), so that o_i = phi(q_i)^T S_i / phi(q_i).z_i with S_i = sum_j phi(k_j) v_j^T
// and z_i = sum_j phi(k_j) over the keys query i sees. Causal problems keep S and z as prefix
// sums: O(N * F * d) work and O(F * d) state per head, never N x N.
//   linear(feature=elu1|relu)  phi(x) = elu(x) + 1 or max(x, 0), F = d
//                              (Katharopoulos, Vyas, Pappas, Fleuret 2020)
//   performer(features, seed)  FAVOR+ positive orthogonal random features,
//                              phi(x) = exp(w_r.x' - |x'|^2 / 2), x' = x sqrt(scale), F = features
//                              (Choromanski et al. 2021)
//   cosformer                  ReLU features re-weighted by cos(pi/2 (t_q - t_k) / M), split as
//                              [relu(x) cos(pi t / 2M), relu(x) sin(pi t / 2M)], F = 2d, M = last
//                              position + 1 (Qin et al. 2022)
//
// The fast routine (f32) walks queries in chunks of 64: the keys every query of the chunk sees
// are folded into S and z with one GEMM; the few keys only some of them see (the chunk's own
// diagonal) are computed as a small masked block. The reference routine (f64) evaluates the
// same normalised kernel sums directly, quadratically: an independent check of the prefix sums.
// Row statistic: the normaliser phi(q_i).z_i, so implied entries are phi(q_i).phi(k_j) / stat.
// Performer's query features drop per-row constants (they cancel); its key features are shifted
// by the largest exponent of their head (kept in Result::approx, so implied entries use the same).
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

enum class Feature { Elu1, Relu, Performer, Cosformer };

struct FeatureState final : ApproxState {
  std::vector<double> key_shift;  // f64 [H]: exponent shift of each head's key features

  std::shared_ptr<const ApproxState> head(int h) const override {
    auto s = std::make_shared<FeatureState>();
    s->key_shift = {key_shift[size_t(h)]};
    return s;
  }
};

// Standard normal from two uniforms (Box-Muller).
double gaussian(detail::SplitMix64& g) {
  const double u1 = std::max(g.uniform(), 1e-300), u2 = g.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// FAVOR+ projection f64 [F, d]: blocks of d orthonormal rows (QR of a Gaussian matrix), each row
// scaled by the norm of an independent Gaussian d-vector, so rows are marginally N(0, I).
Mat<double> orthogonal_features(int features, int d, uint64_t seed) {
  detail::SplitMix64 g(detail::mix_seed(seed, uint64_t(d)));
  Mat<double> w(features, d);
  for (int r0 = 0; r0 < features; r0 += d) {
    Mat<double> a(d, d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) a(i, j) = gaussian(g);
    Eigen::HouseholderQR<Mat<double>> qr(a);
    const Mat<double> q = qr.householderQ();
    for (int r = r0; r < std::min(r0 + d, features); ++r) {
      double norm2 = 0;
      for (int j = 0; j < d; ++j) norm2 += std::pow(gaussian(g), 2);
      w.row(r) = q.col(r - r0).transpose() * std::sqrt(norm2);
    }
  }
  return w;
}

class FeatureAttention final : public Approximation {
 public:
  FeatureAttention(Feature kind, int features, uint64_t seed, VariantInfo (*info)())
      : kind_(kind), features_(features), seed_(seed), info_(info) {}

  VariantInfo info() const override { return info_(); }
  Kind kind() const override { return Kind::Replace; }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)v, (void)backend;
    const auto t0 = std::chrono::steady_clock::now();
    const bool fast = path == ApproxPath::Fast;
    Result r = approx_result(p, fast ? "cpu" : "reference");
    auto state = std::make_shared<FeatureState>();
    state->key_shift.assign(size_t(p.n_heads), 0.0);
    const Mat<double> w =
        kind_ == Feature::Performer ? orthogonal_features(features_, p.d, seed_) : Mat<double>();
    std::vector<double> flops(size_t(p.n_heads), 0.0);
    parallel_for(
        p.n_heads,
        [&](int h) {
          if (fast)
            flops[size_t(h)] = head_fast(p, h, w, r, &state->key_shift[size_t(h)], opt);
          else
            flops[size_t(h)] = head_reference(p, h, w, r, &state->key_shift[size_t(h)], opt);
        },
        opt.threads);
    const int F = n_features(p);
    for (double f : flops) r.stats.counted.flops += f;
    r.stats.counted.bytes =
        4.0 * p.n_heads * (2.0 * p.n_q * p.d + 2.0 * p.n_k * p.d + 2.0 * (p.n_q + p.n_k) * F);
    r.stats.kernel_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.approx = state;
    return r;
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    (void)v;
    const auto* state = dynamic_cast<const FeatureState*>(r.approx.get());
    require(state != nullptr, ErrorCode::InvalidArgument,
            info_().id + ": the result carries no feature state (was it run by this variant?)");
    const Mat<double> w =
        kind_ == Feature::Performer ? orthogonal_features(features_, p.d, seed_) : Mat<double>();
    Mat<double> fq, fk;
    map<double>(p, p.q_row(h, i0), i1 - i0, i0, false, w, 0.0, fq);
    map<double>(p, p.k_row(h, k0), k1 - k0, k0, true, w, state->key_shift[size_t(h)], fk);
    const Mat<double> a = fq * fk.transpose();
    out.assign(size_t(i1 - i0) * (k1 - k0), 0.0);
    for (int i = i0; i < i1; ++i) {
      const double den = r.row_stat[size_t(h) * p.n_q + i];
      if (den == 0) continue;
      for (int j = k0; j < k1; ++j)
        if (p.visible(i, j)) out[size_t(i - i0) * (k1 - k0) + (j - k0)] = a(i - i0, j - k0) / den;
    }
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    (void)v, (void)density;
    const double F = n_features(p), d = p.d, C = kChunk;
    const double map = kind_ == Feature::Performer ? 2.0 * F * d + 2.0 * F : F;
    const double shift = kind_ == Feature::Performer ? 2.0 * F * d * p.n_k : 0.0;
    // Keys folded into the state and queries read from it, plus the chunk-diagonal blocks.
    const double local = p.causal ? 0.5 * C * (2.0 * F + 2.0 * d + 1.0) : 0.0;
    Cost c;
    c.flops = p.n_heads * (shift + (p.n_q + p.n_k) * map + p.n_k * (2.0 * F * d + F) +
                           p.n_q * (2.0 * F * d + 2.0 * F + local));
    c.bytes = 4.0 * p.n_heads * (2.0 * p.n_q * d + 2.0 * p.n_k * d + 2.0 * (p.n_q + p.n_k) * F);
    return c;
  }

 private:
  static constexpr int kChunk = 64;

  int n_features(const Problem& p) const {
    switch (kind_) {
      case Feature::Elu1:
      case Feature::Relu:
        return p.d;
      case Feature::Performer:
        return features_;
      case Feature::Cosformer:
        return 2 * p.d;
    }
    return p.d;
  }

  // Flops of mapping one row.
  double map_flops(const Problem& p) const {
    const int F = n_features(p);
    return kind_ == Feature::Performer ? 2.0 * F * p.d + 2.0 * F : double(F);
  }

  // phi of n rows of x (f32 [n, d]), rows first.. of the queries (key = false) or keys of head
  // h: out T [n, F]. `shift` is the key exponent shift (performer keys only).
  template <class T>
  void map(const Problem& p, const float* x, int n, int first, bool key, const Mat<double>& w,
           double shift, Mat<T>& out) const {
    const int d = p.d, F = n_features(p);
    out.resize(n, F);
    const Eigen::Map<const Mat<float>> xs(x, n, d);
    switch (kind_) {
      case Feature::Elu1:
        out = xs.cast<T>().unaryExpr([](T t) { return t > T(0) ? t + T(1) : T(std::exp(t)); });
        break;
      case Feature::Relu:
        out = xs.cast<T>().cwiseMax(T(0));
        break;
      case Feature::Cosformer: {
        const double m = double(std::max(p.qpos(p.n_q - 1), p.kpos(p.n_k - 1))) + 1.0;
        for (int a = 0; a < n; ++a) {
          const double t = key ? p.kpos(first + a) : p.qpos(first + a);
          const T c = T(std::cos(M_PI * t / (2.0 * m))), s = T(std::sin(M_PI * t / (2.0 * m)));
          for (int c0 = 0; c0 < d; ++c0) {
            const T rl = std::max(T(xs(a, c0)), T(0));
            out(a, c0) = rl * c;
            out(a, d + c0) = rl * s;
          }
        }
        break;
      }
      case Feature::Performer: {
        // x' = x sqrt(scale): phi(q').phi(k') estimates exp(scale q.k).
        const T root = T(std::sqrt(double(p.effective_scale())));
        const Mat<T> xr = xs.cast<T>() * root;
        out.noalias() = xr * w.cast<T>().transpose();
        for (int a = 0; a < n; ++a) {
          if (key) {
            const T half = T(0.5) * xr.row(a).squaredNorm();
            for (int f = 0; f < F; ++f) out(a, f) = T(std::exp(out(a, f) - half - T(shift)));
          } else {
            const T top = out.row(a).maxCoeff();
            for (int f = 0; f < F; ++f) out(a, f) = T(std::exp(out(a, f) - top));
          }
        }
        break;
      }
    }
  }

  // Performer's key shift: the largest exponent w_r.k' - |k'|^2 / 2 over head h's keys.
  template <class T>
  double key_shift(const Problem& p, int h, const Mat<double>& w) const {
    if (kind_ != Feature::Performer) return 0.0;
    const T root = T(std::sqrt(double(p.effective_scale())));
    const Mat<T> xr = Eigen::Map<const Mat<float>>(p.k_row(h, 0), p.n_k, p.d).cast<T>() * root;
    const Mat<T> u = xr * w.cast<T>().transpose();
    double top = -INFINITY;
    for (int a = 0; a < p.n_k; ++a)
      top = std::max(top, double(u.row(a).maxCoeff() - T(0.5) * xr.row(a).squaredNorm()));
    return top;
  }

  static int frontier(const Problem& p, int i) {
    return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
  }

  static void check_cancel(const RunOptions& opt) {
    if (opt.cancel && opt.cancel->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Cancelled, "feature attention: cancelled");
  }

  // f32 prefix-sum routine for head h; returns its flops.
  double head_fast(const Problem& p, int h, const Mat<double>& w, Result& r, double* shift,
                   const RunOptions& opt) const {
    const int d = p.d, F = n_features(p);
    *shift = key_shift<float>(p, h, w);
    Mat<float> fq, fk;
    map<float>(p, p.q_row(h, 0), p.n_q, 0, false, w, 0.0, fq);
    map<float>(p, p.k_row(h, 0), p.n_k, 0, true, w, *shift, fk);
    const Eigen::Map<const Mat<float>> vv(p.v_row(h, 0), p.n_k, d);
    double flops = (p.n_q + p.n_k) * map_flops(p);
    if (kind_ == Feature::Performer) flops += p.n_k * 2.0 * F * d;  // the key shift's projection
    Mat<float> s = Mat<float>::Zero(F, d), num, a;
    Vec<float> z = Vec<float>::Zero(F), den;
    int done = 0;  // keys folded into s and z
    for (int i0 = 0; i0 < p.n_q; i0 += kChunk) {
      check_cancel(opt);
      const int i1 = std::min(i0 + kChunk, p.n_q), rows = i1 - i0;
      const int fa = frontier(p, i0), fb = frontier(p, i1 - 1);
      if (fa > done) {
        s.noalias() += fk.middleRows(done, fa - done).transpose() * vv.middleRows(done, fa - done);
        z += fk.middleRows(done, fa - done).colwise().sum().transpose();
        flops += double(fa - done) * (2.0 * F * d + F);
        done = fa;
      }
      const auto fqc = fq.middleRows(i0, rows);
      num.noalias() = fqc * s;
      den.noalias() = fqc * z;
      flops += rows * (2.0 * F * d + 2.0 * F);
      if (fb > fa) {
        // Keys [fa, fb): seen by the later queries of the chunk only.
        a.noalias() = fqc * fk.middleRows(fa, fb - fa).transpose();
        for (int q = 0; q < rows; ++q) {
          const int f = frontier(p, i0 + q);
          for (int j = std::max(f, fa); j < fb; ++j) a(q, j - fa) = 0.0f;
        }
        num.noalias() += a * vv.middleRows(fa, fb - fa);
        den += a.rowwise().sum();
        flops += double(rows) * (fb - fa) * (2.0 * F + 2.0 * d + 1.0);
      }
      for (int q = 0; q < rows; ++q) {
        const size_t i = size_t(i0 + q);
        float* o = r.o.data() + (size_t(h) * p.n_q + i) * d;
        const float dn = den[q];
        r.row_stat[size_t(h) * p.n_q + i] = dn;
        if (dn == 0.0f) continue;  // no key with a positive kernel value: O = 0
        for (int c = 0; c < d; ++c) o[c] = num(q, c) / dn;
      }
    }
    return flops;
  }

  // f64 direct sums for head h (quadratic: the oracle of the same approximation).
  double head_reference(const Problem& p, int h, const Mat<double>& w, Result& r, double* shift,
                        const RunOptions& opt) const {
    const int d = p.d;
    *shift = key_shift<double>(p, h, w);
    Mat<double> fq, fk;
    map<double>(p, p.q_row(h, 0), p.n_q, 0, false, w, 0.0, fq);
    map<double>(p, p.k_row(h, 0), p.n_k, 0, true, w, *shift, fk);
    double flops = 0;
    std::vector<double> acc(static_cast<size_t>(d));
    for (int i = 0; i < p.n_q; ++i) {
      if (i % 64 == 0) check_cancel(opt);
      std::fill(acc.begin(), acc.end(), 0.0);
      double den = 0;
      const int f = frontier(p, i);
      for (int j = 0; j < f; ++j) {
        const double kij = fq.row(i).dot(fk.row(j));
        const float* vj = p.v_row(h, j);
        for (int c = 0; c < d; ++c) acc[size_t(c)] += kij * vj[c];
        den += kij;
      }
      flops += double(f) * (2.0 * fq.cols() + 2.0 * d);
      float* o = r.o.data() + (size_t(h) * p.n_q + i) * d;
      r.row_stat[size_t(h) * p.n_q + i] = float(den);
      if (den == 0) continue;
      for (int c = 0; c < d; ++c) o[c] = float(acc[size_t(c)] / den);
    }
    return flops;
  }

  Feature kind_;
  int features_;
  uint64_t seed_;
  VariantInfo (*info_)();
};

VariantInfo linear_info() {
  return {"linear",
          "Linear attention (elu+1)",
          "kernel",
          "Katharopoulos, Vyas, Pappas, Fleuret 2020, Transformers are RNNs: Fast Autoregressive "
          "Transformers with Linear Attention",
          "softmax(q.k) replaced by phi(q).phi(k) with phi = elu+1 (or ReLU); causal by prefix "
          "sums, O(N d^2).",
          {enum_param("feature", {"elu1", "relu"}, 0, "feature map phi")}};
}

VariantInfo performer_info() {
  return {"performer",
          "Performer (FAVOR+)",
          "kernel",
          "Choromanski et al. 2021, Rethinking Attention with Performers",
          "Positive orthogonal random features whose products estimate exp(q.k/sqrt(d)) without "
          "bias; error falls like 1/sqrt(features).",
          {int_param("features", 1, 4096, 64, "random features"),
           int_param("seed", 0, 1000000000, 0, "random seed of the projection")}};
}

VariantInfo cosformer_info() {
  return {"cosformer",
          "cosFormer",
          "kernel",
          "Qin et al. 2022, cosFormer: Rethinking Softmax in Attention",
          "ReLU features with a cos re-weighting by distance (a locality bias), linear in N.",
          {}};
}

std::shared_ptr<const Approximation> make_linear(const Params& params) {
  return std::make_shared<FeatureAttention>(
      params.at("feature") == 0 ? Feature::Elu1 : Feature::Relu, 0, 0, linear_info);
}
std::shared_ptr<const Approximation> make_performer(const Params& params) {
  return std::make_shared<FeatureAttention>(Feature::Performer, int(params.at("features")),
                                            uint64_t(params.at("seed")), performer_info);
}
std::shared_ptr<const Approximation> make_cosformer(const Params&) {
  return std::make_shared<FeatureAttention>(Feature::Cosformer, 0, 0, cosformer_info);
}

}  // namespace

const ApproximationFactory kLinearApprox = {linear_info, make_linear};
const ApproximationFactory kPerformerApprox = {performer_info, make_performer};
const ApproximationFactory kCosformerApprox = {cosformer_info, make_cosformer};

}  // namespace attn
