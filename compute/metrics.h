// Metrics of a variant's result against the dense reference of the same problem.
#pragma once
#include <atomic>
#include <vector>

#include "compute/result.h"

namespace attn {

struct Metrics {
  double rel_error = 0;         // ||O - O_ref||_F / ||O_ref||_F over all heads
  double mass_recall = 1;       // mean over rows of the dense mass inside the kept set
  double row_kl = 0;            // mean over rows of KL(p_variant || p_ref); NaN when the variant's
                                // rows are not distributions (sigmoid, ReLU)
  double density = 1;           // kept / visible entries
  std::vector<float> entropy;   // f32 [H, n_q]: per-row entropy (nats) of the variant
  std::vector<float> received;  // f32 [H, n_k]: mean over queries of mass received per key
  std::vector<float> sink_score;  // f32 [n_k]: received mass averaged over heads
  std::vector<int> sinks;         // key indices with sink_score > threshold
  Stats stats;                    // the variant's counted flops/bytes and times
};

// Compares `var` (a result of `v`) with `ref` (a dense softmax result of the same problem).
// Throws Error(InvalidArgument) when shapes differ. Work follows what is visible and kept: a
// sparse variant costs O(kept d), dense softmax one GEMM over the visible keys with vectorised
// exponentials (a 32K-token head in about a second here).
// `cancel`, when set, is polled every 64 rows: Error(Cancelled) is thrown.
Metrics compare(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                double sink_threshold = 0.3, const std::atomic<bool>* cancel = nullptr);

// The same from every probability in double, row by row over all keys: the oracle compare() is
// tested against (and the path selective attention takes).
Metrics compare_naive(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                      double sink_threshold = 0.3, const std::atomic<bool>* cancel = nullptr);

// The layer's metrics from its heads' (compare() of head_problem(p, h) and head_result(var, p,
// h) against head_result(ref, p, h), in head order): what compare() of the whole layer gives, up
// to summation order, without a second pass over the probabilities.
Metrics merge_head_metrics(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                           const std::vector<Metrics>& heads, double sink_threshold = 0.3);

struct SoftmaxRows;

// compare() of head h alone against dense, fed the head's rows as softmax_rows() gives them (a
// plain-softmax variant at the reference's precision, plain_softmax()): what compare() of
// head_problem(p, h), head_result(var, p, h) and head_result(ref, p, h) gives, up to rounding,
// without a pass of its own over the scores, for a caller that reads the same rows for more (the
// head grid's role scores). Rows come in any order, each once.
class HeadComparison {
 public:
  HeadComparison(const Problem& p, const Result& var, const Result& ref, int h);
  void add(const SoftmaxRows& rows);
  // Once every row is in.
  Metrics metrics(double sink_threshold = 0.3) const;

 private:
  const Problem& p_;
  const Result& var_;
  const Result& ref_;
  int h_;
  std::vector<float> entropy_;    // f32 [n_q]
  std::vector<double> received_;  // f64 [n_k]: summed over the rows
  double recall_ = 0, kl_ = 0;    // summed over the rows
};

// Relative Frobenius error of two outputs of equal size.
double relative_error(const std::vector<float>& o, const std::vector<float>& o_ref);

}  // namespace attn
