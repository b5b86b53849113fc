#include "compute/approximation.h"

namespace attn {

Result approx_result(const Problem& p, const char* backend) {
  Result r;
  r.n_heads = p.n_heads;
  r.n_q = p.n_q;
  r.d = p.d;
  r.o.assign(size_t(p.n_heads) * p.n_q * p.d, 0.0f);
  r.row_stat.assign(size_t(p.n_heads) * p.n_q, 0.0f);
  r.layout.kind = Layout::Kind::Dense;
  r.stats.backend = backend;
  return r;
}

}  // namespace attn
