// Head roles: what one attention head does, as scores in [0, 1], computed from its attention
// rows (and, for the no-op role, its output and value norms). The detectors read nothing but a
// head's rows, so the same code scores a hand-made pattern in a test, a head of any panel in
// the app's head grid (head_metrics.h) and every head of a model over a corpus (head_atlas.h).
//
// Positions: query row i of a head with n_q queries over n_k keys sits at key position
// t = n_k - n_q + i (causal decoders: n_q = n_k, t = i). Distances are t - k.
//
// The roles are one table, head_roles(): id, title, a one-line definition, its source, where the
// atlas measures it, its head-grid metric and its detector. The detectors (head_roles.cpp, each
// with its protocol and paper above it) see every row of a head once, in one pass shared by all
// roles. `attnscope heads --json`, the head grid (head_metrics.h), the atlas (head_atlas.h) and
// the `heads` figure read the table, so a new role is one detector and one entry there.
// A score without the queries it needs (no repeated token, too short an input, no norms) is NaN.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attn::core {

// One head's attention, row by row.
struct HeadRows {
  int n_q = 0, n_k = 0;
  bool causal = true;
  // The probabilities of query i over keys [0, n_k): a pointer to n_k values, valid until the
  // next call (into `scratch` where the source has to convert or copy them).
  std::function<const double*(int i, std::vector<double>& scratch)> row;
  const std::vector<int32_t>* ids = nullptr;  // [n_k] token ids (duplicate, induction); null: NaN
  // On a repeated sequence (ids = prefix + R + R, R of length repeat_period starting at key
  // position repeat_start) duplicate and induction are the positional scores of the second copy
  // alone, as the protocol defines them, whatever tokens R repeats inside itself.
  int repeat_start = 0, repeat_period = 0;
  // [n_q] at a copy step, the key position of the token being copied; -1 elsewhere. Empty:
  // retrieval is NaN.
  std::vector<int> copy_source;
  std::vector<double> out_norm;    // [n_q] |o_t| of the head (no-op); empty: no-op is NaN
  std::vector<double> value_norm;  // [n_k] |v_k| of the head's values
};

struct RoleOptions {
  int long_range = 32;  // D of the long-range role
};

// One query row of a head, as a detector sees it.
struct RoleRow {
  int i = 0;                  // query index
  int t = 0;                  // its key position
  int kend = 0;               // the keys it can see: [0, kend) (t + 1 causal, n_k otherwise)
  const double* p = nullptr;  // its probabilities over keys [0, n_k)
};

// A role's detector for one head: sees every query row once, in order, then gives the score.
class RoleDetector {
 public:
  virtual ~RoleDetector() = default;
  virtual void add(const RoleRow& row) = 0;
  virtual double score() const = 0;         // in [0, 1] (role_scores clamps it) or NaN
  virtual int offset() const { return 0; }  // the offset role's offset t - k; 0 for the others
};

struct HeadRole {
  std::string name;        // stable id in JSON and sessions: "previous_token"
  std::string title;       // panel and colour-bar title
  std::string definition;  // one line: what the number is
  std::string source;      // where the detector comes from
  // The atlas measures it on the repeated sequences BOS + R + R (head_atlas.h), else on the text
  // windows.
  bool repeated = false;
  // Its head-grid metric (head_metrics.h): id and chooser label; empty: not on the grid.
  std::string grid_id, grid_label;
  // A detector for head `h` (its sizes, ids, norms) with options `o`.
  std::function<std::unique_ptr<RoleDetector>(const HeadRows& h, const RoleOptions& o)> detector;
};

// Every role, in display order.
const std::vector<HeadRole>& head_roles();
// Index in head_roles(); throws Error(InvalidArgument) listing the names.
int head_role_index(const std::string& name);

struct RoleScores {
  std::vector<double> value;  // [head_roles()] in [0, 1] or NaN
  int offset = 0;             // the offset t - k of the positional (offset) score
  double get(const std::string& role) const { return value[size_t(head_role_index(role))]; }
};

// Scores of one head. Throws Error(InvalidArgument) for an empty head or ids of the wrong size.
RoleScores role_scores(const HeadRows& h, const RoleOptions& o = {});

// The same, handed the rows instead of fetching them (HeadRows::row unused): for a caller that
// computes a head's rows for more than its roles (the head grid compares them with dense too).
// Rows go in in order, i = 0 .. n_q - 1, each once. Keeps a reference to `h`.
class RoleScorer {
 public:
  explicit RoleScorer(const HeadRows& h, const RoleOptions& o = {});
  RoleScorer(const RoleScorer&) = delete;
  RoleScorer& operator=(const RoleScorer&) = delete;
  // Query row i's probabilities over keys [0, n_k).
  void add(int i, const double* p);
  RoleScores scores() const;  // once every row is in

 private:
  const HeadRows& h_;
  std::vector<std::unique_ptr<RoleDetector>> detectors_;
};

// Rows of a dense pattern f32 [n_q, n_k] (row-major), for patterns held in memory.
HeadRows pattern_rows(const float* pattern, int n_q, int n_k, bool causal = true);

}  // namespace attn::core
