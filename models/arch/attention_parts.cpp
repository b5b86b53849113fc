#include "models/arch/attention_parts.h"

#include "compute/error.h"
#include "models/arch/model.h"

namespace attn::models {

float linear_weight(const Linear& l, int r, int c) {
  const size_t i = l.in_out ? size_t(r) * size_t(l.out) + size_t(c)  // Conv1D [in, out]
                            : size_t(c) * size_t(l.in) + size_t(r);  // nn.Linear [out, in]
  float v = 0;
  cpu::widen(l.w.type, static_cast<const char*>(l.w.data) + i * cpu::elem_size(l.w.type), 1, &v);
  return v;
}

AttentionParts Model::attention_parts(const ReverseTrace&, int) const {
  throw Error(ErrorCode::Unsupported, std::string("the ") + family_name(info_.family) +
                                          " architecture does not open its attention sublayer");
}

}  // namespace attn::models
