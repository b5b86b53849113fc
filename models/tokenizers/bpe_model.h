// Byte-pair encoding: a vocabulary and a ranked list of merges. A piece starts as single
// characters (or bytes, in byte-level mode) and the lowest-ranked adjacent pair is merged until
// no listed merge applies, as in GPT-2, RoBERTa, Llama 3, Qwen2 and SmolLM.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/tokenizers/vocab_model.h"

namespace attn::models {

struct BpeOptions {
  std::optional<std::string> unk_token;   // used for characters missing from the vocabulary
  bool fuse_unk = false;                  // consecutive unknowns become one unknown token
  bool byte_fallback = false;             // unknown characters become <0xAB> byte tokens
  bool ignore_merges = false;             // a piece that is itself in the vocabulary is one token
  std::string continuing_subword_prefix;  // prefix of non-initial symbols (rare)
  std::string end_of_word_suffix;         // suffix of the last symbol (rare)
};

class BpeModel : public VocabModel {
 public:
  // `vocab` maps token strings to ids; `merges` are pairs of token strings, best first. Throws
  // Error(Format) naming the merge when one of its parts or its result is not in the vocabulary.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  void tokenize(std::string_view piece, bool byte_level,
                std::vector<VocabToken>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t size() const override { return id_to_token_.size(); }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // ids of "<0x00>".."<0xFF>" (byte_fallback), -1 when absent
};

}  // namespace attn::models
