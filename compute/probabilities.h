// Probabilities of any entry, recomputed from Q, K, the layout and the row statistics, in O(d)
// per entry and O(n_k) memory per row: the basis of metrics and of the renderer's tile query.
#pragma once
#include <vector>

#include "compute/host_buffer.h"
#include "compute/result.h"

namespace attn {

// Probabilities of query i of head h over keys [k0, k1) (0 for entries not kept), in double.
// For selective variants this replays the earlier queries (O(i * n_k * d)).
void probability_row(const Variant& v, const Problem& p, const Result& r, int h, int i, int k0,
                     int k1, std::vector<double>& out);

// Probabilities of queries [i0, i1) over keys [k0, k1): out is f64 [(i1 - i0), (k1 - k0)].
// Scores come from one float GEMM per block; normalisation is in double. For a variant with an
// approximation part, its implied matrix (Approximation::implied_block).
void probability_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                       int k0, int k1, std::vector<double>& out);

// Softmax without modifiers (no approximation, not selective): its rows are exp(s - lse) over the
// kept keys, with s = scale * q k and lse the result's row statistic, so they follow from one f32
// GEMM per block of rows (softmax_rows()) instead of probability_block()'s entry-by-entry work.
bool plain_softmax(const Variant& v);

// Rows [i0, i1) of head h of a plain-softmax result, every key at once, with the sums that
// entropy needs (the caller checks plain_softmax() of the result's variant).
struct SoftmaxRows {
  int i0 = 0, i1 = 0, n_k = 0;
  int lo = 0, hi = 0;           // keys [lo, hi) hold every nonzero entry of p
  std::vector<double> p;        // f64 [i1 - i0, n_k]: exp(s - lse) on kept keys, 0 elsewhere
  std::vector<double> mass;     // f64 [i1 - i0]: each row's sum over its kept keys
  std::vector<double> a_log_a;  // f64 [i1 - i0]: sum of a log a over kept keys (log a = s - lse)
  // Scratch, kept between calls: f32 scores and exponentials over the span of kept keys (64-byte
  // aligned), and the rows' kept keys (row after row, each row's from start[i - i0]).
  AlignedFloats scores, exps;
  std::vector<int32_t> keys, row_keys;
  std::vector<int64_t> start;
  const double* row(int i) const { return p.data() + size_t(i - i0) * size_t(n_k); }
};

// Fills `out` for queries [i0, i1) of head h: scores over the span of kept keys from one f32
// GEMM (a window's few keys, not the whole prefix), exponentials in f32, stored in double.
// The causal rule and the layout's kept set apply. Buffers are reused from call to call.
void softmax_rows(const Problem& p, const Result& r, int h, int i0, int i1, SoftmaxRows& out);

enum class Pool { Max, Mean };

struct TileRequest {
  int head = 0;
  int q0 = 0, q1 = 0;  // query rows [q0, q1)
  int k0 = 0, k1 = 0;  // key columns [k0, k1)
  int w = 0, h = 0;    // output cells (columns, rows); clamped to the tile's extent
  Pool pool = Pool::Max;
};

struct Tile {
  int w = 0, h = 0;          // cells actually produced
  std::vector<float> cells;  // f32 [h, w]: cell (y, x) pools rows [q0 + y*(q1-q0)/h, ...) and
                             // columns [k0 + x*(k1-k0)/w, ...) (integer floor boundaries)
};

// Pooled probabilities of a tile without materialising N x N; threaded over cell rows.
Tile tile_probabilities(const Variant& v, const Problem& p, const Result& r, const TileRequest& t);

}  // namespace attn
