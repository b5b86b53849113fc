// Nystromformer (Xiong et al. 2021): softmax(Q K^T s) approximated through m landmarks,
//   O = softmax(Q K~^T s) * pinv(softmax(Q~ K~^T s)) * (softmax(Q~ K^T s) V),   s = scale,
// with landmark r the mean of rows floor(r N / m) .. floor((r + 1) N / m) - 1 of Q (of K for K~).
// pinv=exact is a complete orthogonal decomposition's pseudo-inverse; pinv=iterative is the
// paper's 6 Newton-Schulz-type iterations from Z0 = A^T / (||A||_1 ||A||_inf),
//   Z <- Z (13 I - A Z (15 I - A Z (7 I - A Z))) / 4.
// Work O(N m d + m^3), memory O(N m); never N x N. Landmarks past the sequence length are
// clamped to it (with pinv=exact the result then equals dense attention). Landmark means mix
// every token into every row, so causal problems are refused.
// The implied matrix is A1 pinv(A2) A3 restricted to a block: Result::approx keeps each head's
// landmarks, the pseudo-inverse and the log-sum-exp of A3's rows.
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/variants/patterns.h"

namespace attn {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatD = Mat<double>;

struct NystromHead {
  MatD q_land, k_land;  // f64 [m, d]: landmarks of Q and K
  MatD pinv;            // f64 [m, m]: pinv(softmax(Q~ K~^T s))
  Eigen::VectorXd lse;  // f64 [m]: log-sum-exp of each row of Q~ K^T s
};

struct NystromState final : ApproxState {
  std::vector<NystromHead> heads;  // [H]
  std::shared_ptr<const ApproxState> head(int h) const override {
    auto s = std::make_shared<NystromState>();
    s->heads = {heads[size_t(h)]};
    return s;
  }
};

// Segment means of n rows (f32 [n, d]) into m landmarks, in double.
MatD landmarks(const float* x, int n, int d, int m) {
  MatD out = MatD::Zero(m, d);
  for (int r = 0; r < m; ++r) {
    const int a = int(int64_t(r) * n / m), b = int(int64_t(r + 1) * n / m);
    for (int i = a; i < b; ++i)
      for (int c = 0; c < d; ++c) out(r, c) += x[size_t(i) * d + c];
    out.row(r) /= double(b - a);
  }
  return out;
}

// Row-wise softmax in place; returns each row's log-sum-exp.
template <class M>
Eigen::VectorXd softmax_rows(M& a) {
  Eigen::VectorXd lse(a.rows());
  for (int i = 0; i < a.rows(); ++i) {
    const double top = double(a.row(i).maxCoeff());
    double sum = 0;
    for (int j = 0; j < a.cols(); ++j) {
      const double e = std::exp(double(a(i, j)) - top);
      a(i, j) = typename M::Scalar(e);
      sum += e;
    }
    a.row(i) /= typename M::Scalar(sum);
    lse[i] = top + std::log(sum);
  }
  return lse;
}

MatD iterative_pinv(const MatD& a) {
  const int m = int(a.rows());
  const double norm1 = a.cwiseAbs().colwise().sum().maxCoeff();
  const double norm_inf = a.cwiseAbs().rowwise().sum().maxCoeff();
  MatD z = a.transpose() / (norm1 * norm_inf);
  const MatD id = MatD::Identity(m, m);
  for (int it = 0; it < 6; ++it) {
    const MatD az = a * z;
    z = 0.25 * z * (13.0 * id - az * (15.0 * id - az * (7.0 * id - az)));
  }
  return z;
}

class Nystrom final : public Approximation {
 public:
  Nystrom(int landmarks, bool iterative) : m_(landmarks), iterative_(iterative) {}
  VariantInfo info() const override { return kNystromApprox.info(); }
  Kind kind() const override { return Kind::Replace; }

  std::string unsupported(const Problem& p) const override {
    return refuse_causal(p, "nystrom",
                         "each landmark averages tokens from the whole sequence, so every row "
                         "would see the future");
  }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)backend;
    const auto t0 = std::chrono::steady_clock::now();
    const bool fast = path == ApproxPath::Fast;
    auto state = std::make_shared<NystromState>();
    state->heads.resize(size_t(p.n_heads));
    return run_heads(*this, v, p, path, opt, t0, state, [&](int h, Result& r) {
      if (fast)
        head<float>(p, h, r, state->heads[size_t(h)]);
      else
        head<double>(p, h, r, state->heads[size_t(h)]);
    });
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    (void)v;
    const auto* state = dynamic_cast<const NystromState*>(r.approx.get());
    require(state != nullptr, ErrorCode::InvalidArgument,
            "nystrom: the result carries no landmark state (was it run by this variant?)");
    const NystromHead& s = state->heads[size_t(h)];
    const double scale = p.effective_scale();
    const MatD q = Eigen::Map<const Mat<float>>(p.q_row(h, i0), i1 - i0, p.d).cast<double>();
    const MatD k = Eigen::Map<const Mat<float>>(p.k_row(h, k0), k1 - k0, p.d).cast<double>();
    MatD a1 = q * s.k_land.transpose() * scale;
    softmax_rows(a1);
    MatD a3 = s.q_land * k.transpose() * scale;
    for (int r0 = 0; r0 < a3.rows(); ++r0) a3.row(r0) = (a3.row(r0).array() - s.lse[r0]).exp();
    const MatD block = (a1 * s.pinv) * a3;
    out.assign(block.data(), block.data() + block.size());
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    (void)v, (void)density;
    const double m = landmarks_for(p), d = p.d;
    Cost c;
    // Landmarks, A1 (n_q x m), A2 and its pseudo-inverse (~ m^3 tens), A3 (m x n_k), A3 V,
    // pinv (A3 V), A1 (...): per head.
    c.flops = p.n_heads * ((p.n_q + p.n_k) * d + 2.0 * p.n_q * m * d + 2.0 * m * m * d +
                           (iterative_ ? 6 * 8.0 : 20.0) * m * m * m + 2.0 * m * p.n_k * d +
                           2.0 * m * p.n_k * d + 2.0 * m * m * d + 2.0 * p.n_q * m * d);
    c.bytes = 4.0 * p.n_heads * (2.0 * p.n_q * d + 2.0 * p.n_k * d + (p.n_q + p.n_k) * m);
    return c;
  }

 private:
  int landmarks_for(const Problem& p) const { return std::max(1, std::min({m_, p.n_q, p.n_k})); }

  // One head with the big products in T (f32 fast, f64 reference); the m x m inverse is f64.
  template <class T>
  void head(const Problem& p, int h, Result& r, NystromHead& s) const {
    const int m = landmarks_for(p), d = p.d;
    const double scale = p.effective_scale();
    s.q_land = landmarks(p.q_row(h, 0), p.n_q, d, m);
    s.k_land = landmarks(p.k_row(h, 0), p.n_k, d, m);
    const Eigen::Map<const Mat<float>> q(p.q_row(h, 0), p.n_q, d), k(p.k_row(h, 0), p.n_k, d),
        vv(p.v_row(h, 0), p.n_k, d);
    MatD a2 = s.q_land * s.k_land.transpose() * scale;
    softmax_rows(a2);
    s.pinv = iterative_ ? iterative_pinv(a2)
                        : MatD(a2.completeOrthogonalDecomposition().pseudoInverse());
    Mat<T> a1 = q.cast<T>() * (s.k_land.transpose() * scale).cast<T>();
    softmax_rows(a1);
    Mat<T> a3 = s.q_land.cast<T>() * (k.cast<T>().transpose() * T(scale));
    s.lse = softmax_rows(a3);
    const Mat<T> w = s.pinv.cast<T>() * (a3 * vv.cast<T>());
    Eigen::Map<Mat<float>>(r.o.data() + size_t(h) * p.n_q * d, p.n_q, d) =
        (a1 * w).template cast<float>();
  }

  int m_;
  bool iterative_;
};

VariantInfo nystrom_info() {
  return {"nystrom",
          "Nystromformer",
          "low-rank",
          "Xiong et al. 2021, Nystromformer: A Nystrom-Based Algorithm for Approximating "
          "Self-Attention",
          "Softmax attention through segment-mean landmarks and a pseudo-inverse, O(N m d); "
          "bidirectional problems only.",
          {int_param("landmarks", 1, 65536, 64, "landmarks m (clamped to the sequence length)"),
           enum_param("pinv", {"exact", "iterative"}, 0,
                      "pseudo-inverse: exact, or the paper's 6 iterations")}};
}

std::shared_ptr<const Approximation> make_nystrom(const Params& params) {
  return std::make_shared<Nystrom>(int(params.at("landmarks")), params.at("pinv") == 1);
}

}  // namespace

const ApproximationFactory kNystromApprox = {nystrom_info, make_nystrom};

}  // namespace attn
