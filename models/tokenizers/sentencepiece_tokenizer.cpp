#include "models/tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>

#include "compute/error.h"

namespace attn::models {
namespace {

// ---- what libsentencepiece (0.1.97, Debian 12) does not check ------------------------------
// Its pieces' text: see check_pieces. Its normalizer follows the model's precompiled character map,
// a darts-clone double-array trie followed by NUL-terminated replacement strings, without any
// bounds check: a crafted map makes it read outside the model (found by tests/fuzz). Before the
// library sees a model, the maps of normalizer_spec (field 3) and denormalizer_spec (field 5) are
// walked here: every trie node reachable for any input byte lies in the trie, and every value it
// yields starts a NUL-terminated string inside the map.

// A protobuf varint at `p`; false when truncated or longer than 10 bytes.
bool read_varint(std::string_view b, size_t& p, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= b.size()) return false;
    const auto c = uint8_t(b[p++]);
    v |= uint64_t(c & 0x7F) << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

// Calls f(field number, bytes) for each length-delimited field of a message; false when the
// message does not parse (or uses groups, which sentencepiece_model.proto has none of).
bool for_each_bytes_field(std::string_view msg,
                          const std::function<bool(uint64_t, std::string_view)>& f) {
  size_t p = 0;
  while (p < msg.size()) {
    uint64_t key = 0, v = 0;
    if (!read_varint(msg, p, key)) return false;
    switch (key & 7) {
      case 0:
        if (!read_varint(msg, p, v)) return false;
        break;
      case 1:
        if (msg.size() - p < 8) return false;
        p += 8;
        break;
      case 2:
        if (!read_varint(msg, p, v) || v > msg.size() - p) return false;
        if (!f(key >> 3, msg.substr(p, size_t(v)))) return false;
        p += size_t(v);
        break;
      case 5:
        if (msg.size() - p < 4) return false;
        p += 4;
        break;
      default:
        return false;
    }
  }
  return true;
}

// A precompiled character map: u32 trie size, the trie (u32 units), the replacement strings.
bool charsmap_is_safe(std::string_view blob) {
  if (blob.empty()) return true;  // no map: text passes unchanged
  uint32_t trie_bytes = 0;
  if (blob.size() < 4) return false;
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes < 4 || trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4) return false;
  const char* trie = blob.data() + 4;
  const size_t n = trie_bytes / 4;
  const std::string_view strings = blob.substr(4 + size_t(trie_bytes));
  auto unit = [&](size_t i) {
    uint32_t u = 0;
    std::memcpy(&u, trie + 4 * i, 4);
    return u;
  };
  // darts-clone's DoubleArrayUnit.
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); };
  auto label = [](uint32_t u) { return u & ((1U << 31) | 0xFF); };
  // A node from which the search reads unit (node ^ byte) for the next input byte.
  auto in_trie = [&](uint32_t node) { return (size_t(node) | 0xFF) < n; };
  std::vector<uint8_t> seen(n, 0);
  std::vector<uint32_t> todo = {offset(unit(0))};
  if (!in_trie(todo[0])) return false;
  seen[todo[0]] = 1;
  while (!todo.empty()) {
    const uint32_t node = todo.back();
    todo.pop_back();
    for (uint32_t c = 0; c < 256; ++c) {
      const uint32_t child = node ^ c;
      const uint32_t u = unit(child);
      if (label(u) != c) continue;
      const uint32_t next = child ^ offset(u);
      if (!in_trie(next)) return false;
      if ((u >> 8) & 1) {  // has a leaf: its value indexes the replacement strings
        const uint32_t value = unit(next) & ((1U << 31) - 1);
        if (value >= strings.size() || strings.find('\0', value) == std::string_view::npos) {
          return false;
        }
      }
      if (!seen[next]) {
        seen[next] = 1;
        todo.push_back(next);
      }
    }
  }
  return true;
}

// Refuses a model whose character maps could make libsentencepiece read out of bounds.
void check_charsmaps(std::string_view model, const std::string& path) {
  std::optional<std::string_view> maps[2];  // normalizer, denormalizer: the last one wins
  const bool parsed = for_each_bytes_field(model, [&](uint64_t field, std::string_view spec) {
    if (field != 3 && field != 5) return true;
    return for_each_bytes_field(spec, [&](uint64_t f, std::string_view bytes) {
      if (f == 2) maps[field == 3 ? 0 : 1] = bytes;
      return true;
    });
  });
  require(parsed, ErrorCode::Format,
          path + ": not a SentencePiece model (the file is not a protocol buffer message)");
  for (int i = 0; i < 2; ++i) {
    require(!maps[i] || charsmap_is_safe(*maps[i]), ErrorCode::Format,
            path + ": not a SentencePiece model: its " + (i == 0 ? "normalizer" : "denormalizer") +
                " character map (precompiled_charsmap) is corrupt");
  }
}

// Refuses a model with an empty piece or a piece holding a NUL byte: libsentencepiece builds a
// darts-clone trie of its pieces (the unigram vocabulary, the user-defined symbols), whose
// builder throws on such a key, and the exception ends the process (found by tests/fuzz).
void check_pieces(std::string_view model, const std::string& path) {
  int index = 0;
  std::string bad;
  for_each_bytes_field(model, [&](uint64_t field, std::string_view piece_msg) {
    if (field != 1) return true;  // ModelProto.pieces
    bool has_piece = false, ok = true;
    for_each_bytes_field(piece_msg, [&](uint64_t f, std::string_view text) {
      if (f != 1) return true;  // SentencePiece.piece
      has_piece = true;
      ok = ok && !text.empty() && text.find('\0') == std::string_view::npos;
      return true;
    });
    if (!(has_piece && ok) && bad.empty())
      bad = "piece " + std::to_string(index) +
            (has_piece ? " is empty or holds a NUL byte" : " has no text");
    ++index;
    return true;
  });
  require(bad.empty(), ErrorCode::Format, path + ": not a SentencePiece model: " + bad);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path,
                                               const SentencePieceOptions& options)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    throw Error(ErrorCode::Io, model_path + ": cannot open");
  }
  // libprotobuf parses at most 2 GiB; a larger file is refused before it is read.
  const auto bytes = std::filesystem::file_size(model_path, ec);
  if (!ec && bytes > uint64_t(INT32_MAX)) {
    throw Error(ErrorCode::Format, model_path + ": not a SentencePiece model (" +
                                       std::to_string(bytes) + " bytes; at most 2 GiB)");
  }
  std::ifstream in(model_path, std::ios::binary);
  const std::string model(std::istreambuf_iterator<char>(in), {});
  if (!in.good() && !in.eof()) throw Error(ErrorCode::Io, model_path + ": cannot read");
  check_charsmaps(model, model_path);
  check_pieces(model, model_path);
  const auto status = sp_->LoadFromSerializedProto(model);
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

}  // namespace attn::models
