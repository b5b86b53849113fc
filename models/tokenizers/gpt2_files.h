// GPT-2's original tokenizer files: vocab.json (token -> id, tokens in the byte alphabet) and
// merges.txt ("#version" line, then one "a b" merge per line, best first).
#pragma once
#include <memory>
#include <string>

#include "models/tokenizers/pipeline_tokenizer.h"

namespace attn::models {

// Builds the byte-level BPE tokenizer GPT-2 uses: GPT-2 regex split, no prefix space, no
// special tokens added on encode; "<|endoftext|>" (when in the vocabulary) is a special token
// and GPT-2's bos, eos and unk. Throws Error(Io) / Error(Format) naming the file and line.
std::unique_ptr<PipelineTokenizer> load_gpt2_bpe(const std::string& vocab_json,
                                                 const std::string& merges_txt);

}  // namespace attn::models
