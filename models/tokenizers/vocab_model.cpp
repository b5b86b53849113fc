#include "models/tokenizers/vocab_model.h"

#include "compute/error.h"
#include "models/formats/limits.h"

namespace attn::models {

size_t checked_vocab_table_size(const std::unordered_map<std::string, int32_t>& vocab,
                                const std::string& what) {
  const std::string* max_token = nullptr;
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab) {
    require(id >= 0, ErrorCode::Format, what + ": token '" + tok + "' has a negative id");
    require(id <= kMaxVocabId, ErrorCode::Format,
            what + ": token '" + tok + "' has id " + std::to_string(id) + ", over the limit of " +
                std::to_string(kMaxVocabId) + " (kMaxVocabId)");
    if (id > max_id) {
      max_id = id;
      max_token = &tok;
    }
  }
  const int64_t most = int64_t(vocab.size()) * 2 + kMaxVocabHoles;
  require(int64_t(max_id) < most, ErrorCode::Format,
          what + ": token '" + (max_token ? *max_token : std::string()) + "' has id " +
              std::to_string(max_id) + " but there are only " + std::to_string(vocab.size()) +
              " entries; ids may leave at most " + std::to_string(vocab.size()) + " + " +
              std::to_string(kMaxVocabHoles) + " holes (kMaxVocabHoles)");
  return size_t(max_id + 1);
}

}  // namespace attn::models
