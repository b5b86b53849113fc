// Vector-quantised keys (Transformer-VQ, Lingle 2024): every key is replaced by its nearest
// codeword of a codebook learned by k-means on the keys of its head, so attention sees at most
// `codebook` distinct keys (what lets Transformer-VQ compute attention in linear time). The
// codebook here is fitted on the input itself: centroids start from `codebook` distinct keys
// drawn with `seed` and take `iters` Lloyd steps (squared Euclidean distance). With codebook = N
// every key is its own codeword and attention is exact.
// Then the variant's exact parts (pattern, modifiers, normaliser) run through the backend on the
// problem with codeword keys; Result::approx keeps it for the implied matrix.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <numeric>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Nearest codeword of each row of x [n, d] among c [m, d] (in blocks of 1024 rows).
void nearest(const Eigen::Map<RowMatrix>& x, const RowMatrix& c, std::vector<int>& out) {
  const Eigen::VectorXf cn = c.rowwise().squaredNorm();
  out.resize(size_t(x.rows()));
  RowMatrix dots;
  for (Eigen::Index r0 = 0; r0 < x.rows(); r0 += 1024) {
    const Eigen::Index len = std::min<Eigen::Index>(1024, x.rows() - r0);
    dots.noalias() = x.middleRows(r0, len) * c.transpose();
    for (Eigen::Index a = 0; a < len; ++a) {
      // |x - c|^2 = |x|^2 - 2 x.c + |c|^2; |x|^2 is the same for every codeword.
      Eigen::Index best;
      (cn.transpose() - 2.0f * dots.row(a)).minCoeff(&best);
      out[size_t(r0 + a)] = int(best);
    }
  }
}

class VectorQuantisedKeys final : public Approximation {
 public:
  VectorQuantisedKeys(int codebook, int iters, uint64_t seed)
      : codebook_(codebook), iters_(iters), seed_(seed) {}
  VariantInfo info() const override { return kVqApprox.info(); }
  Kind kind() const override { return Kind::Wrap; }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)path;
    const auto t0 = std::chrono::steady_clock::now();
    auto q = std::make_shared<Problem>(p);
    parallel_for(
        q->n_kv_heads, [&](int h) { quantise_head(*q, h); }, opt.threads);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Result r = run_changed(v, std::move(q), backend, opt);
    r.stats.counted.flops += fit_flops(p);
    r.stats.select_seconds += seconds;
    return r;
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    (void)p;
    implied_changed(v, r, h, i0, i1, k0, k1, out);
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    const bool dynamic = v.pattern() && v.pattern()->dynamic();
    Cost c = v.exact_part().predict(p, dynamic ? density : -1);
    c.flops += fit_flops(p);
    return c;
  }

 private:
  double fit_flops(const Problem& p) const {
    const double m = std::min(codebook_, p.n_k);
    return double(p.n_kv_heads) * (iters_ + 1) * p.n_k * m * 2.0 * p.d;
  }

  void quantise_head(Problem& q, int h) const {
    const int n = q.n_k, d = q.d, m = std::min(codebook_, n);
    Eigen::Map<RowMatrix> k(q.k.data() + size_t(h) * n * d, n, d);
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    detail::SplitMix64 g(detail::mix_seed(seed_, uint64_t(h)));
    for (int c = 0; c < m; ++c)
      std::swap(order[size_t(c)], order[size_t(c) + g.below(uint64_t(n - c))]);
    std::sort(order.begin(), order.begin() + m);
    RowMatrix cents(m, d);
    for (int c = 0; c < m; ++c) cents.row(c) = k.row(order[size_t(c)]);
    std::vector<int> assign;
    for (int it = 0; it < iters_; ++it) {
      nearest(k, cents, assign);
      Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(m, d);
      std::vector<int> count(static_cast<size_t>(m), 0);
      for (int j = 0; j < n; ++j) {
        sum.row(assign[size_t(j)]) += k.row(j).cast<double>();
        ++count[size_t(assign[size_t(j)])];
      }
      for (int c = 0; c < m; ++c)  // an empty cluster keeps its codeword
        if (count[size_t(c)] > 0) cents.row(c) = (sum.row(c) / count[size_t(c)]).cast<float>();
    }
    nearest(k, cents, assign);
    for (int j = 0; j < n; ++j) k.row(j) = cents.row(assign[size_t(j)]);
  }

  int codebook_, iters_;
  uint64_t seed_;
};

VariantInfo vq_info() {
  return {"vq",
          "Vector-quantised keys (Transformer-VQ)",
          "quantised",
          "Lingle 2024, Transformer-VQ: Linear-Time Transformers via Vector Quantization",
          "Each key replaced by its nearest k-means codeword (codebook fitted on the input's keys "
          "per head); the rest exact.",
          {int_param("codebook", 1, 65536, 64, "codewords per head"),
           int_param("iters", 0, 100, 4, "Lloyd iterations"),
           int_param("seed", 0, 1000000000, 0, "random seed of the initial codewords")}};
}

std::shared_ptr<const Approximation> make_vq(const Params& params) {
  return std::make_shared<VectorQuantisedKeys>(int(params.at("codebook")), int(params.at("iters")),
                                               uint64_t(params.at("seed")));
}

}  // namespace

const ApproximationFactory kVqApprox = {vq_info, make_vq};

}  // namespace attn
