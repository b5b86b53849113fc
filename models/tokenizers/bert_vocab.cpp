#include "models/tokenizers/bert_vocab.h"

#include <fstream>

#include "compute/error.h"
#include "models/tokenizers/wordpiece_model.h"

namespace attn::models {

std::unique_ptr<PipelineTokenizer> load_bert_vocab(const std::string& vocab_txt,
                                                   const BertVocabOptions& options) {
  std::ifstream in(vocab_txt, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, vocab_txt + ": cannot open");
  std::unordered_map<std::string, int32_t> vocab;
  std::string line;
  int32_t id = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab[line] = id++;  // a repeated token keeps its last line, as transformers' load_vocab
  }
  if (vocab.empty()) throw Error(ErrorCode::Format, vocab_txt + ": empty vocabulary");

  PipelineParts parts;
  parts.kind = "wordpiece";
  BertNormalizerOptions norm;
  norm.lowercase = options.do_lower_case;
  norm.strip_accents = options.strip_accents;
  norm.handle_chinese_chars = options.tokenize_chinese_chars;
  parts.normalizer = make_bert_normalizer(norm);
  parts.pre_tokenizer = make_bert_pre_tokenizer();
  parts.decoder = make_wordpiece_decoder();
  auto find = [&](const char* t) -> std::optional<int32_t> {
    auto it = vocab.find(t);
    if (it == vocab.end()) return std::nullopt;
    return it->second;
  };
  struct Named {
    const char* text;
    std::optional<int32_t>* slot;
  };
  for (Named n : {Named{"[PAD]", &parts.special.pad}, Named{"[UNK]", &parts.special.unk},
                  Named{"[CLS]", &parts.special.cls}, Named{"[SEP]", &parts.special.sep},
                  Named{"[MASK]", &parts.special.mask}}) {
    if (auto tid = find(n.text)) {
      *n.slot = tid;
      parts.added.add({n.text, *tid, /*special=*/true});
    }
  }
  if (parts.special.cls && parts.special.sep) {
    Token cls{*parts.special.cls, "[CLS]", 0, 0, true};
    Token sep{*parts.special.sep, "[SEP]", 0, 0, true};
    parts.post_processor = make_wrap_post_processor({cls}, {sep});
  }
  try {
    parts.model = std::make_unique<WordPieceModel>(std::move(vocab), WordPieceOptions{});
  } catch (const Error& e) {
    throw Error(e.code(), vocab_txt + ": " + e.what());
  }
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace attn::models
