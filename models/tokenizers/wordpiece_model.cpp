#include "models/tokenizers/wordpiece_model.h"

#include "compute/error.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

WordPieceModel::WordPieceModel(std::unordered_map<std::string, int32_t> vocab,
                               WordPieceOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const size_t table = checked_vocab_table_size(vocab_, "WordPiece vocabulary");
  id_to_token_.resize(table);
  has_id_.assign(table, false);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[size_t(id)] = tok;
    has_id_[size_t(id)] = true;
  }
  auto it = vocab_.find(options_.unk_token);
  require(it != vocab_.end(), ErrorCode::Format,
          "WordPiece vocabulary lacks the unknown token '" + options_.unk_token + "'");
  unk_id_ = it->second;
}

std::optional<int32_t> WordPieceModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* WordPieceModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || !has_id_[size_t(id)]) return nullptr;
  return &id_to_token_[size_t(id)];
}

void WordPieceModel::tokenize(std::string_view word, bool, std::vector<VocabToken>& out) const {
  if (word.empty()) return;
  // Character boundaries, so candidate ends never cut a character.
  std::vector<size_t> bounds;
  for (size_t i = 0; i < word.size();) {
    bounds.push_back(i);
    utf8_next(word, i);
  }
  bounds.push_back(word.size());
  const size_t nchars = bounds.size() - 1;
  if (nchars > options_.max_input_chars_per_word) {
    out.push_back({unk_id_, 0, word.size()});
    return;
  }
  const size_t first = out.size();
  std::string candidate;
  size_t start = 0;  // index into bounds
  while (start < nchars) {
    size_t end = nchars;
    int32_t found = -1;
    while (end > start) {
      candidate.clear();
      if (start > 0) candidate += options_.continuing_subword_prefix;
      candidate.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      auto it = vocab_.find(candidate);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {
      out.resize(first);
      out.push_back({unk_id_, 0, word.size()});
      return;
    }
    out.push_back({found, bounds[start], bounds[end]});
    start = end;
  }
}

}  // namespace attn::models
