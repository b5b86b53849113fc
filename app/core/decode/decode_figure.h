// Figure data of the decode view (View::Decode): one layer and query head of a decode trace
// (app/core/decode/decode_trace.h). An overview grid, steps down and stream positions across, shows
// the attention of each step's query where the cache held the entry and marks evicted entries and
// the future; one chosen step is drawn in detail as its tokens, shaded by that step's attention,
// evicted ones struck out and reduced-precision ones underlined.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace attn::core {

// What a (step, position) cell shows.
enum class DecodeCell : uint8_t {
  Future,     // the position comes after the step's query
  Evicted,    // streamed, but the cache no longer held it (or the policy did not attend it)
  Held,       // the query attended it, stored in f32
  Quantised,  // the query attended it, stored in the policy's reduced precision
};

struct DecodeFigure {
  std::string policy;
  int layer = 0, head = 0;
  int steps = 0;      // steps of the trace
  int first = 0;      // stream position of step 0's query
  int positions = 0;  // stream positions across (up to the last step's query)
  // Overview: rows = steps, cols = positions, binned to at most max_cells per side; a cell
  // holds the largest probability of its attended entries (NaN when none) and the state of
  // highest rank (Quantised > Held > Evicted > Future) among its entries.
  int rows = 0, cols = 0;
  std::vector<float> attention;   // f32 [rows, cols]
  std::vector<DecodeCell> state;  // [rows, cols]
  // The chosen step in detail, every position up to its query.
  int step = 0;                     // index into the trace's steps
  int query = 0;                    // its stream position
  std::vector<std::string> pieces;  // token text per position
  std::vector<float> weight;        // probability per position (NaN where not attended)
  std::vector<DecodeCell> cells;    // state per position
  int64_t entries = 0;              // cache entries after the step (all layers and KV heads)
  double bytes = 0;
  std::string next;  // the token after the query ("" when none)
  float nll = NAN;   // -log p(next)
};

}  // namespace attn::core
