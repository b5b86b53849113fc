// Linformer (Wang, Li, Khabsa, Fang, Ma 2020): keys and values projected along the sequence to k
// rows, O = softmax(Q (E K)^T s) (F V) with E, F [k, N], in O(N k d). Linformer learns E and F;
// here they are an UNTRAINED stand-in: independent Gaussian entries N(0, 1/k) drawn from `seed`
// (a Johnson-Lindenstrauss projection). Its quality on a pretrained model says how far a random
// projection is from attention, not how well a trained Linformer does. The projections mix
// every position into every row, so causal problems are refused.
// Implied matrix: softmax(Q (E K)^T s) F (rows sum to whatever F's columns give, not one).
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/variants/patterns.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Gaussian N(0, 1/k) entries of a [k, n] projection, stream `which` (0: E, 1: F).
Mat<double> projection(int k, int n, uint64_t seed, uint64_t which) {
  detail::SplitMix64 g(detail::mix_seed(seed, which));
  Mat<double> m(k, n);
  const double sd = 1.0 / std::sqrt(double(k));
  for (int r = 0; r < k; ++r)
    for (int j = 0; j < n; ++j) {
      const double u1 = std::max(g.uniform(), 1e-300), u2 = g.uniform();
      m(r, j) = sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }
  return m;
}

struct LinformerState final : ApproxState {
  std::vector<Mat<double>> ek;           // f64 [H][k, d]: E K of each head's kv head
  std::shared_ptr<const Mat<double>> f;  // f64 [k, n_k]

  std::shared_ptr<const ApproxState> head(int h) const override {
    auto s = std::make_shared<LinformerState>();
    s->ek = {ek[size_t(h)]};
    s->f = f;
    return s;
  }
};

// Row-wise softmax in place.
template <class M>
void softmax_rows(M& a) {
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    a.row(i).array() = (a.row(i).array() - a.row(i).maxCoeff()).exp();
    a.row(i) /= a.row(i).sum();
  }
}

class Linformer final : public Approximation {
 public:
  Linformer(int k, uint64_t seed) : k_(k), seed_(seed) {}
  VariantInfo info() const override { return kLinformerApprox.info(); }
  Kind kind() const override { return Kind::Replace; }

  std::string unsupported(const Problem& p) const override {
    return refuse_causal(p, "linformer",
                         "its projections along the sequence mix later tokens into every row");
  }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)backend;
    const auto t0 = std::chrono::steady_clock::now();
    const bool fast = path == ApproxPath::Fast;
    const int kr = rows(p);
    const Mat<double> e = projection(kr, p.n_k, seed_, 0);
    auto f = std::make_shared<const Mat<double>>(projection(kr, p.n_k, seed_, 1));
    auto state = std::make_shared<LinformerState>();
    state->ek.resize(size_t(p.n_heads));
    state->f = f;
    const Mat<float> ef = e.cast<float>(), ff = f->cast<float>();
    return run_heads(*this, v, p, path, opt, t0, state, [&](int h, Result& r) {
      const Eigen::Map<const Mat<float>> q(p.q_row(h, 0), p.n_q, p.d), k(p.k_row(h, 0), p.n_k, p.d),
          vv(p.v_row(h, 0), p.n_k, p.d);
      Eigen::Map<Mat<float>> o(r.o.data() + size_t(h) * p.n_q * p.d, p.n_q, p.d);
      const double scale = p.effective_scale();
      if (fast) {
        const Mat<float> ek = ef * k, fv = ff * vv;
        Mat<float> a = (q * ek.transpose()) * float(scale);
        softmax_rows(a);
        o = a * fv;
        state->ek[size_t(h)] = ek.cast<double>();
      } else {
        const Mat<double> ek = e * k.cast<double>(), fv = *f * vv.cast<double>();
        Mat<double> a = (q.cast<double>() * ek.transpose()) * scale;
        softmax_rows(a);
        o = (a * fv).cast<float>();
        state->ek[size_t(h)] = ek;
      }
    });
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    (void)v;
    const auto* state = dynamic_cast<const LinformerState*>(r.approx.get());
    require(state != nullptr, ErrorCode::InvalidArgument,
            "linformer: the result carries no projections (was it run by this variant?)");
    const Mat<double> q = Eigen::Map<const Mat<float>>(p.q_row(h, i0), i1 - i0, p.d).cast<double>();
    Mat<double> a = (q * state->ek[size_t(h)].transpose()) * double(p.effective_scale());
    softmax_rows(a);
    const Mat<double> block = a * state->f->middleCols(k0, k1 - k0);
    out.assign(block.data(), block.data() + block.size());
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    (void)v, (void)density;
    const double k = rows(p), d = p.d;
    Cost c;
    // E K and F V, the n_q x k scores, the softmax, and the n_q x k by k x d product.
    c.flops = p.n_heads * (4.0 * k * p.n_k * d + 4.0 * p.n_q * k * d + 3.0 * p.n_q * k);
    c.bytes = 4.0 * p.n_heads * (2.0 * p.n_q * d + 2.0 * p.n_k * d) + 8.0 * k * p.n_k;
    return c;
  }

 private:
  // Projected rows: k, at most the number of keys. More rows than keys add no rank (E K has rank
  // <= n_k) but cost k x n_k per projection: k = 65536 over 40 keys took 28 s to draw.
  int rows(const Problem& p) const { return std::max(1, std::min(k_, p.n_k)); }

  int k_;
  uint64_t seed_;
};

VariantInfo linformer_info() {
  return {"linformer",
          "Linformer (random projection)",
          "low-rank",
          "Wang, Li, Khabsa, Fang, Ma 2020, Linformer: Self-Attention with Linear Complexity",
          "Keys and values projected along the sequence to k rows, O(N k d); the projections are "
          "random (an untrained stand-in for Linformer's learned ones); bidirectional only.",
          {int_param("k", 1, 65536, 64, "projected length (clamped to the number of keys)"),
           int_param("seed", 0, 1000000000, 0, "random seed of the projections")}};
}

std::shared_ptr<const Approximation> make_linformer(const Params& params) {
  return std::make_shared<Linformer>(int(params.at("k")), uint64_t(params.at("seed")));
}

}  // namespace

const ApproximationFactory kLinformerApprox = {linformer_info, make_linformer};

}  // namespace attn
