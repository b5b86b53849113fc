// Picks and loads the tokenizer of a model folder from the files it holds.
#pragma once
#include <memory>
#include <string>

#include "models/tokenizers/tokenizer.h"

namespace attn::models {

// `path` is a model folder, or one tokenizer file (tokenizer.json, vocab.json, vocab.txt,
// *.model). In a folder the first usable of these is taken:
//   tokenizer.json            (BPE or WordPiece pipeline; skipped if it needs an unsupported part)
//   vocab.json + merges.txt   (GPT-2 byte-level BPE)
//   vocab.txt                 (BERT WordPiece; do_lower_case from tokenizer_config.json)
//   tokenizer.model           (SentencePiece)
// tokenizer_config.json, when present, names the special tokens (bos, eos, ...).
// Throws Error(Io) naming the folder and the files looked for when none is there.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace attn::models
