#include "models/tokenizers/bpe_model.h"

#include <cstdio>
#include <queue>

#include "compute/error.h"
#include "models/tokenizers/byte_level.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const size_t table = checked_vocab_table_size(vocab_, "BPE vocabulary");
  id_to_token_.resize(table);
  has_id_.assign(table, false);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[size_t(id)] = tok;
    has_id_[size_t(id)] = true;
  }
  const size_t prefix_len = options_.continuing_subword_prefix.size();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a);
    auto ib = vocab_.find(b);
    // The merged token drops the continuing prefix of its right part.
    std::string merged = a;
    merged +=
        prefix_len && b.starts_with(options_.continuing_subword_prefix) ? b.substr(prefix_len) : b;
    auto im = vocab_.find(merged);
    if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end()) {
      const std::string missing = ia == vocab_.end() ? a : ib == vocab_.end() ? b : merged;
      throw Error(ErrorCode::Format, "BPE merge " + std::to_string(rank + 1) + " '" + a + " " + b +
                                         "': token '" + missing + "' is not in the vocabulary");
    }
    // The first listing of a pair wins, as in the reference implementation's hash map insert.
    merges_.try_emplace(key(ia->second, ib->second), Merge{int32_t(rank), im->second});
  }
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(name);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || !has_id_[size_t(id)]) return nullptr;
  return &id_to_token_[size_t(id)];
}

void BpeModel::tokenize(std::string_view piece, bool byte_level,
                        std::vector<VocabToken>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    auto it = vocab_.find(byte_level ? byte_level::encode(piece) : std::string(piece));
    if (it != vocab_.end()) {
      out.push_back({it->second, 0, piece.size()});
      return;
    }
  }

  struct Symbol {
    int32_t id;
    size_t begin, end;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(piece.size());
  std::string lookup;
  auto push = [&](int32_t id, size_t b, size_t e, bool unknown) {
    if (unknown && options_.fuse_unk && !syms.empty() && syms.back().id == id && unk_id_ &&
        id == *unk_id_ && syms.back().end == b) {
      syms.back().end = e;
      return;
    }
    const int n = int(syms.size());
    syms.push_back({id, b, e, n - 1, n + 1, true});
  };

  // Initial symbols: one per byte (byte-level) or per character.
  size_t i = 0;
  while (i < piece.size()) {
    const size_t b = i;
    if (byte_level) {
      ++i;
    } else {
      i += utf8_len(static_cast<unsigned char>(piece[b]));
      i = std::min(i, piece.size());
    }
    lookup.clear();
    if (b > 0) lookup += options_.continuing_subword_prefix;
    if (byte_level) {
      lookup += byte_level::char_for_byte(static_cast<uint8_t>(piece[b]));
    } else {
      lookup.append(piece.substr(b, i - b));
    }
    if (i == piece.size()) lookup += options_.end_of_word_suffix;
    auto it = vocab_.find(lookup);
    if (it != vocab_.end()) {
      push(it->second, b, i, false);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (size_t k = b; k < i; ++k) all = all && byte_ids_[static_cast<uint8_t>(piece[k])] >= 0;
      if (all) {
        for (size_t k = b; k < i; ++k)
          push(byte_ids_[static_cast<uint8_t>(piece[k])], k, k + 1, false);
        continue;
      }
    }
    if (unk_id_) push(*unk_id_, b, i, true);
    // Without an unknown token the character is dropped, as the reference implementation does.
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  // Merge the best-ranked adjacent pair, leftmost first among equal ranks, until none applies.
  struct Candidate {
    int32_t rank;
    int left;
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = syms[size_t(left)].next;
    if (right < 0) return;
    auto it = merges_.find(key(syms[size_t(left)].id, syms[size_t(right)].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, left, syms[size_t(left)].id, syms[size_t(right)].id});
    }
  };
  for (int s = 0; s + 1 < int(syms.size()); ++s) consider(s);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[size_t(c.left)];
    if (!l.alive || l.id != c.left_id || l.next < 0) continue;
    Symbol& r = syms[size_t(l.next)];
    if (r.id != c.right_id) continue;  // stale: a neighbour changed since this was queued
    l.id = merges_.at(key(c.left_id, c.right_id)).result;
    l.end = r.end;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) syms[size_t(r.next)].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  for (int s = 0; s >= 0; s = syms[size_t(s)].next) {
    out.push_back({syms[size_t(s)].id, syms[size_t(s)].begin, syms[size_t(s)].end});
  }
}

}  // namespace attn::models
