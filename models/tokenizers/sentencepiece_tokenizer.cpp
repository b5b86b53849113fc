#include "models/tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "compute/error.h"

namespace attn {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path,
                                               const SentencePieceOptions& options)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    throw Error(ErrorCode::Io, model_path + ": cannot open");
  }
  const auto status = sp_->Load(model_path);
  if (!status.ok()) {
    throw Error(ErrorCode::Format,
                model_path + ": not a SentencePiece model: " + status.ToString());
  }
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if (sp_->IsControl(id) || sp_->IsUnknown(id)) {
      control_.add({sp_->IdToPiece(id), id, /*special=*/true});
    }
  }
  if (sp_->unk_id() >= 0) special_.unk = sp_->unk_id();
  if (sp_->bos_id() >= 0) special_.bos = sp_->bos_id();
  if (sp_->eos_id() >= 0) special_.eos = sp_->eos_id();
  if (sp_->pad_id() >= 0) special_.pad = sp_->pad_id();
  add_bos_ = options.add_bos.value_or(true) && special_.bos.has_value();
  add_eos_ = options.add_eos && special_.eos.has_value();
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<Token> SentencePieceTokenizer::encode_valid(std::string_view text,
                                                        const EncodeOptions& options) const {
  std::vector<Token> tokens;
  for (const auto& seg : control_.split(text, options.parse_special)) {
    if (seg.id >= 0) {
      tokens.push_back({seg.id, sp_->IdToPiece(seg.id), seg.begin, seg.end, true});
      continue;
    }
    const auto spt = sp_->EncodeAsImmutableProto(text.substr(seg.begin, seg.end - seg.begin));
    for (const auto& p : spt.pieces()) {
      // begin/end are byte offsets of the piece's surface in the segment given to the library.
      tokens.push_back(
          {int32_t(p.id()), p.piece(), seg.begin + p.begin(), seg.begin + p.end(), false});
    }
  }
  if (options.add_special_tokens) {
    if (add_bos_)
      tokens.insert(tokens.begin(),
                    Token{*special_.bos, sp_->IdToPiece(*special_.bos), 0, 0, true});
    if (add_eos_) {
      tokens.push_back(
          {*special_.eos, sp_->IdToPiece(*special_.eos), text.size(), text.size(), true});
    }
  }
  return tokens;
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) {
    throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) +
                                                " is outside the vocabulary (size " +
                                                std::to_string(sp_->GetPieceSize()) + ")");
  }
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<int> keep;
  std::string out;
  auto flush = [&] {
    if (keep.empty()) return;
    std::string text;
    const auto status = sp_->Decode(keep, &text);
    if (!status.ok()) throw Error(ErrorCode::InvalidArgument, path_ + ": " + status.ToString());
    out += text;
    keep.clear();
  };
  for (int32_t id : ids) {
    check_id(id);
    if (sp_->IsControl(id)) {
      // The library drops control pieces; show them when asked to keep special tokens.
      if (!skip_special) {
        flush();
        out += sp_->IdToPiece(id);
      }
      continue;
    }
    keep.push_back(id);
  }
  flush();
  return out;
}

size_t SentencePieceTokenizer::vocab_size() const {
  return size_t(sp_->GetPieceSize());
}

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  if (id < 0 || sp_->IdToPiece(id) != piece) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::id_to_piece(int32_t id) const {
  check_id(id);
  return sp_->IdToPiece(id);
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < sp_->GetPieceSize() && (sp_->IsControl(id) || sp_->IsUnknown(id));
}

}  // namespace attn
