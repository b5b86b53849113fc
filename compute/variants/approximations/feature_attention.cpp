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
#include <array>
#include <chrono>
#include <cmath>
#include <memory>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"
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
    // Callers walk a head's rows block by block over the same keys (compare(), the tile query):
    // the projection and every key's features are made once per (result, head) and thread, not
    // once per block. The cache holds the state weakly: a freed result never matches.
    struct KeyCache {
      std::weak_ptr<const ApproxState> state;
      int h = -1;
      const float* k = nullptr;
      int n_k = 0;
      Mat<double> w, fk;  // projection f64 [F, d]; features of every key f64 [n_k, F]
    };
    thread_local KeyCache cache;
    if (cache.state.lock() != r.approx || cache.h != h || cache.k != p.k.data() ||
        cache.n_k != p.n_k) {
      cache.state = r.approx;
      cache.h = h;
      cache.k = p.k.data();
      cache.n_k = p.n_k;
      cache.w =
          kind_ == Feature::Performer ? orthogonal_features(features_, p.d, seed_) : Mat<double>();
      map<double>(p, p.k_row(h, 0), p.n_k, 0, true, cache.w, state->key_shift[size_t(h)], cache.fk);
    }
    Mat<double> fq;
    map<double>(p, p.q_row(h, i0), i1 - i0, i0, false, cache.w, 0.0, fq);
    const Mat<double> a = fq * cache.fk.middleRows(k0, k1 - k0).transpose();
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
        out = xs.cast<T>();
        // elu(x) + 1 = max(x, 0) + exp(min(x, 0)).
        out = (out.array().max(T(0)) + out.array().min(T(0)).exp()).matrix();
        break;
      case Feature::Relu:
        out = xs.cast<T>().cwiseMax(T(0));
        break;
      case Feature::Cosformer: {
        const double m = double(std::max(p.qpos(p.n_q - 1), p.kpos(p.n_k - 1))) + 1.0;
        Vec<T> cs(n), sn(n);
        for (int a = 0; a < n; ++a) {
          const double t = key ? p.kpos(first + a) : p.qpos(first + a);
          cs[a] = T(std::cos(M_PI * t / (2.0 * m)));
          sn[a] = T(std::sin(M_PI * t / (2.0 * m)));
        }
        out.leftCols(d) = xs.cast<T>().cwiseMax(T(0));
        out.rightCols(d) = out.leftCols(d).array().colwise() * sn.array();
        out.leftCols(d).array().colwise() *= cs.array();
        break;
      }
      case Feature::Performer: {
        // x' = x sqrt(scale): phi(q').phi(k') estimates exp(scale q.k).
        const T root = T(std::sqrt(double(p.effective_scale())));
        const Mat<T> xr = xs.cast<T>() * root;
        out.noalias() = xr * w.cast<T>().transpose();
        // Keys: exp(u - |x'|^2 / 2 - shift); queries: exp(u - max_r u) (a per-row constant).
        const Vec<T> offset = key ? Vec<T>((T(0.5) * xr.rowwise().squaredNorm()).array() + T(shift))
                                  : Vec<T>(out.rowwise().maxCoeff());
        out.array().colwise() -= offset.array();
        out = out.array().exp().matrix();
        break;
      }
    }
  }

  // Performer's key shift: the largest exponent w_r.k' - |k'|^2 / 2 over head h's keys, computed
  // over blocks of keys (no [n_k, F] buffer).
  template <class T>
  double key_shift(const Problem& p, int h, const Mat<double>& w) const {
    if (kind_ != Feature::Performer) return 0.0;
    const T root = T(std::sqrt(double(p.effective_scale())));
    const Mat<T> wt = w.cast<T>().transpose();
    double top = -INFINITY;
    Mat<T> xr, u;
    for (int j0 = 0; j0 < p.n_k; j0 += 256) {
      const int len = std::min(256, p.n_k - j0);
      xr = Eigen::Map<const Mat<float>>(p.k_row(h, j0), len, p.d).cast<T>() * root;
      u.noalias() = xr * wt;
      for (int a = 0; a < len; ++a)
        top = std::max(top, double(u.row(a).maxCoeff() - T(0.5) * xr.row(a).squaredNorm()));
    }
    return top;
  }

  static int frontier(const Problem& p, int i) {
    return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
  }

  static void check_cancel(const RunOptions& opt) {
    if (opt.cancel && opt.cancel->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Cancelled, "feature attention: cancelled");
  }

  // Key features of head h in blocks of kChunk keys, each mapped once while the walk moves
  // forward (a few recent blocks are kept).
  class KeyBlocks {
   public:
    KeyBlocks(const FeatureAttention& fa, const Problem& p, int h, const Mat<double>& w,
              double shift)
        : fa_(fa), p_(p), h_(h), w_(w), shift_(shift) {}
    // Features of key block b (keys [b * kChunk, ...)).
    const Mat<float>& block(int b) {
      for (Slot& s : slots_)
        if (s.b == b) return s.f;
      Slot& s = slots_[next_++ % slots_.size()];
      s.b = b;
      const int j0 = b * kChunk, len = std::min(kChunk, p_.n_k - j0);
      fa_.map<float>(p_, p_.k_row(h_, j0), len, j0, true, w_, shift_, s.f);
      mapped_ += len;
      return s.f;
    }
    int64_t mapped() const { return mapped_; }

   private:
    struct Slot {
      int b = -1;
      Mat<float> f;
    };
    const FeatureAttention& fa_;
    const Problem& p_;
    int h_;
    const Mat<double>& w_;
    double shift_;
    std::array<Slot, 4> slots_;
    size_t next_ = 0;
    int64_t mapped_ = 0;
  };

  // f32 prefix-sum routine for head h; returns its flops. Memory: the F x d state and a few
  // kChunk-row feature blocks, whatever N is.
  double head_fast(const Problem& p, int h, const Mat<double>& w, Result& r, double* shift,
                   const RunOptions& opt) const {
    const int d = p.d, F = n_features(p);
    *shift = key_shift<float>(p, h, w);
    KeyBlocks keys(*this, p, h, w, *shift);
    const Eigen::Map<const Mat<float>> vv(p.v_row(h, 0), p.n_k, d);
    double flops = kind_ == Feature::Performer ? p.n_k * 2.0 * F * d : 0.0;  // the key shift
    Mat<float> s = Mat<float>::Zero(F, d), num, a, fqc;
    Vec<float> z = Vec<float>::Zero(F), den;
    // Calls fn(features, first key, count) over the key blocks covering [j0, j1).
    auto over_keys = [&](int j0, int j1, auto&& fn) {
      for (int b = j0 / kChunk; b * kChunk < j1; ++b) {
        const Mat<float>& f = keys.block(b);
        const int lo = std::max(j0, b * kChunk), hi = std::min(j1, b * kChunk + int(f.rows()));
        fn(f.middleRows(lo - b * kChunk, hi - lo), lo, hi - lo);
      }
    };
    int done = 0;  // keys folded into s and z
    for (int i0 = 0; i0 < p.n_q; i0 += kChunk) {
      check_cancel(opt);
      const int i1 = std::min(i0 + kChunk, p.n_q), rows = i1 - i0;
      const int fa = frontier(p, i0), fb = frontier(p, i1 - 1);
      if (fa > done) {
        over_keys(done, fa, [&](const auto& f, int j, int len) {
          s.noalias() += f.transpose() * vv.middleRows(j, len);
          z += f.colwise().sum().transpose();
        });
        flops += double(fa - done) * (2.0 * F * d + F);
        done = fa;
      }
      map<float>(p, p.q_row(h, i0), rows, i0, false, w, 0.0, fqc);
      num.noalias() = fqc * s;
      den.noalias() = fqc * z;
      flops += rows * (2.0 * F * d + 2.0 * F);
      // Keys [fa, fb): seen by the later queries of the chunk only.
      over_keys(fa, fb, [&](const auto& f, int j, int len) {
        a.noalias() = fqc * f.transpose();
        for (int q = 0; q < rows; ++q)
          for (int e = std::max(frontier(p, i0 + q), j) - j; e < len; ++e) a(q, e) = 0.0f;
        num.noalias() += a * vv.middleRows(j, len);
        den += a.rowwise().sum();
        flops += double(rows) * len * (2.0 * F + 2.0 * d + 1.0);
      });
      for (int q = 0; q < rows; ++q) {
        const size_t i = size_t(i0 + q);
        float* o = r.o.data() + (size_t(h) * p.n_q + i) * d;
        const float dn = den[q];
        r.row_stat[size_t(h) * p.n_q + i] = dn;
        if (dn == 0.0f) continue;  // no key with a positive kernel value: O = 0
        for (int c = 0; c < d; ++c) o[c] = num(q, c) / dn;
      }
    }
    flops += double(p.n_q + keys.mapped()) * map_flops(p);
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
