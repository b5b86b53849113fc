// Hugging Face tokenizer.json: a BPE model (byte-level as GPT-2, or with a regex Split
// pre-tokenizer as Llama 3, Qwen2, SmolLM) or a WordPiece model (BERT), with its normalizer,
// pre-tokenizer, added tokens, post-processor and decoder.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizers/pipeline_tokenizer.h"

namespace attn::models {

// Reads `path`. When `config_path` names a tokenizer_config.json, its bos/eos/unk/pad/cls/sep/
// mask tokens fill SpecialTokens. Throws Error(Io) when unreadable, Error(Format) naming the file
// and the part when malformed, Error(Unsupported) for a model or component type this library
// does not implement (e.g. Unigram, or SentencePiece's Precompiled normalizer).
std::unique_ptr<PipelineTokenizer> load_tokenizer_json(const std::string& path,
                                                       const std::string& config_path = "");
// Same from parsed JSON; `source` names it in messages.
std::unique_ptr<PipelineTokenizer> tokenizer_from_json(const nlohmann::json& j,
                                                       const std::string& source,
                                                       const nlohmann::json& config = {});

// Fills `special` from a tokenizer_config.json object (token strings looked up with `lookup`).
void read_special_tokens(const nlohmann::json& config,
                         const std::function<std::optional<int32_t>(const std::string&)>& lookup,
                         SpecialTokens* special);

// Parses a JSON file, with errors naming it.
nlohmann::json read_json_file(const std::string& path);

}  // namespace attn::models
