// Incremental decoding: what models without a KV-cache path say (encoders, vision models).
#include "compute/error.h"
#include "models/arch/model.h"

namespace attn::models {

ModelOutput Model::decode(const std::vector<int32_t>&, KvCache&, const ForwardOptions&) const {
  throw Error(ErrorCode::Unsupported,
              "incremental decoding needs a causal language model (GPT-2 or the Llama family); " +
                  info_.model_type + " is not one");
}

}  // namespace attn::models
