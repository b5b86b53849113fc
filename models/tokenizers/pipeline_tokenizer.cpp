#include "models/tokenizers/pipeline_tokenizer.h"

#include "compute/error.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

PipelineTokenizer::PipelineTokenizer(PipelineParts parts) : p_(std::move(parts)) {
  require(p_.model != nullptr, ErrorCode::InvalidArgument, "PipelineTokenizer needs a model");
  vocab_size_ = p_.model->size();
  for (const AddedToken& t : p_.added.tokens()) {
    vocab_size_ = std::max(vocab_size_, size_t(t.id) + 1);
  }
  special_ = p_.special;
  if (p_.post_processor) {
    // What the post-processor adds is what the model expects at the start and the end.
    auto pre = p_.post_processor->prefix();
    auto suf = p_.post_processor->suffix();
    const bool wordpiece = p_.kind == "wordpiece";
    auto& first = wordpiece ? special_.cls : special_.bos;
    auto& last = wordpiece ? special_.sep : special_.eos;
    if (!pre.empty() && !first) first = pre.front().id;
    if (!suf.empty() && !last) last = suf.back().id;
  }
}

std::vector<Token> PipelineTokenizer::encode_valid(std::string_view text,
                                                   const EncodeOptions& options) const {
  std::vector<Token> tokens;
  std::vector<NormalizedText> pieces;
  std::vector<VocabToken> model_tokens;
  const bool byte_level = p_.pre_tokenizer && p_.pre_tokenizer->byte_level();
  for (const auto& seg : p_.added.split(text, options.parse_special)) {
    if (seg.id >= 0) {
      const AddedToken* t = p_.added.by_id(seg.id);
      tokens.push_back({seg.id, t->content, seg.begin, seg.end, t->special});
      continue;
    }
    NormalizedText normalized(text.substr(seg.begin, seg.end - seg.begin), seg.begin);
    if (p_.normalizer) p_.normalizer->normalize(normalized);
    pieces.clear();
    if (!normalized.empty()) pieces.push_back(std::move(normalized));
    if (p_.pre_tokenizer) p_.pre_tokenizer->split(pieces, seg.begin == 0);
    for (const NormalizedText& piece : pieces) {
      model_tokens.clear();
      p_.model->tokenize(piece.text(), byte_level, model_tokens);
      for (const VocabToken& mt : model_tokens) {
        const auto [b, e] = piece.input_span(mt.begin, mt.end);
        const std::string* s = p_.model->id_to_token(mt.id);
        tokens.push_back({mt.id, s ? *s : std::string(), b, e, false});
      }
    }
  }
  if (options.add_special_tokens && p_.post_processor) {
    p_.post_processor->process(tokens, text.size());
  }
  return tokens;
}

std::string PipelineTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    pieces.push_back(id_to_piece(id));
  }
  if (p_.decoder) p_.decoder->decode_chain(pieces);
  std::string out;
  for (const auto& p : pieces) out += p;
  return utf8_repair(out);
}

std::optional<int32_t> PipelineTokenizer::token_to_id(std::string_view piece) const {
  if (auto id = p_.added.id_of(piece)) return id;
  return p_.model->token_to_id(piece);
}

std::string PipelineTokenizer::id_to_piece(int32_t id) const {
  if (const AddedToken* t = p_.added.by_id(id)) return t->content;
  if (const std::string* s = p_.model->id_to_token(id)) return *s;
  throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) +
                                              " is outside the vocabulary (size " +
                                              std::to_string(vocab_size_) + ")");
}

bool PipelineTokenizer::is_special(int32_t id) const {
  const AddedToken* t = p_.added.by_id(id);
  return t && t->special;
}

}  // namespace attn::models
