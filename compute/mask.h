// Static patterns as element masks over token positions (FlexAttention's mask_mod), with a
// block classifier so block layouts come out analytically, without touching every entry.
#pragma once
#include <cstdint>
#include <vector>

namespace attn {

enum class BlockClass { Empty, Partial, Full };

class Mask {
 public:
  virtual ~Mask() = default;
  // True when query position qp may attend to key position kp (the causal rule is applied
  // separately; a mask never needs to repeat it).
  virtual bool keep(int32_t qp, int32_t kp) const = 0;
  // Classifies the position box [q_lo, q_hi] x [k_lo, k_hi] (inclusive). Must never say Empty or
  // Full wrongly; may say Partial when unsure. Default: exact, by visiting every entry.
  virtual BlockClass classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const;
  // Sets s[i] = -inf for each i < n where query position qp0 + i may not attend to key position
  // kp (one key's column of a score tile whose queries sit at consecutive positions). Default:
  // keep() per entry; masks with a cheaper rule override it.
  virtual void drop_column(int32_t qp0, int32_t kp, int n, float* s) const;
  // Appends j0 + i, ascending, for each i < n where query position qp may attend to key position
  // kp0 + i (one query's run of keys at consecutive positions). Default: keep() per entry.
  virtual void append_kept(int32_t qp, int32_t kp0, int n, int32_t j0,
                           std::vector<int32_t>& out) const;
};

}  // namespace attn
