// Decoders: turn a list of vocabulary pieces back into text (byte alphabet back to bytes,
// "##" continuations glued, "▁" back to spaces, <0xAB> byte tokens back to bytes).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attn::models {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the pieces in place; the decoded text is their concatenation.
  virtual void decode_chain(std::vector<std::string>& pieces) const = 0;
};

std::unique_ptr<Decoder> make_byte_level_decoder();
// BERT's: "##" pieces glue to the previous one, others are preceded by a space; with `cleanup`,
// spaces before punctuation and in contractions are removed (" ." -> ".", " n't" -> "n't").
std::unique_ptr<Decoder> make_wordpiece_decoder(std::string prefix = "##", bool cleanup = true);

// From a tokenizer.json "decoder": ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, Fuse,
// Strip, BPEDecoder, Sequence. nullptr for null; Error(Unsupported) for other types.
std::unique_ptr<Decoder> decoder_from_json(const nlohmann::json& j);

}  // namespace attn::models
