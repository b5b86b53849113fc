#include "models/tokenizers/factory.h"

#include <filesystem>

#include "compute/error.h"
#include "models/tokenizers/bert_vocab.h"
#include "models/tokenizers/gpt2_files.h"
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "models/tokenizers/tokenizer_json.h"

namespace attn::models {
namespace fs = std::filesystem;

namespace {

nlohmann::json read_config(const fs::path& dir) {
  const fs::path p = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return nlohmann::json::object();
  return read_json_file(p.string());
}

std::optional<bool> config_bool(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

std::unique_ptr<Tokenizer> load_bert(const fs::path& vocab, const nlohmann::json& config) {
  BertVocabOptions o;
  o.do_lower_case = config_bool(config, "do_lower_case").value_or(true);
  o.strip_accents = config_bool(config, "strip_accents");
  o.tokenize_chinese_chars = config_bool(config, "tokenize_chinese_chars").value_or(true);
  return load_bert_vocab(vocab.string(), o);
}

std::unique_ptr<Tokenizer> load_sentencepiece(const fs::path& model, const nlohmann::json& config) {
  SentencePieceOptions o;
  o.add_bos = config_bool(config, "add_bos_token");
  o.add_eos = config_bool(config, "add_eos_token").value_or(false);
  return std::make_unique<SentencePieceTokenizer>(model.string(), o);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    const fs::path dir = p.parent_path();
    const nlohmann::json config = read_config(dir);
    const std::string name = p.filename().string();
    if (p.extension() == ".model") return load_sentencepiece(p, config);
    if (name == "vocab.txt" || p.extension() == ".txt") return load_bert(p, config);
    if (name == "vocab.json" || name == "encoder.json") {
      const fs::path merges =
          fs::exists(dir / "merges.txt") ? dir / "merges.txt" : dir / "vocab.bpe";
      return load_gpt2_bpe(p.string(), merges.string());
    }
    return tokenizer_from_json(read_json_file(p.string()), p.string(), config);
  }
  if (!fs::is_directory(p, ec)) throw Error(ErrorCode::Io, path + ": no such file or folder");

  const nlohmann::json config = read_config(p);
  std::string skipped;
  if (fs::exists(p / "tokenizer.json")) {
    try {
      return tokenizer_from_json(read_json_file((p / "tokenizer.json").string()),
                                 (p / "tokenizer.json").string(), config);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Unsupported) throw;
      skipped = std::string(" (tokenizer.json skipped: ") + e.what() + ")";
    }
  }
  if (fs::exists(p / "vocab.json") && fs::exists(p / "merges.txt")) {
    return load_gpt2_bpe((p / "vocab.json").string(), (p / "merges.txt").string());
  }
  if (fs::exists(p / "vocab.txt")) return load_bert(p / "vocab.txt", config);
  if (fs::exists(p / "tokenizer.model")) return load_sentencepiece(p / "tokenizer.model", config);
  if (!skipped.empty())
    throw Error(ErrorCode::Unsupported, path + ": no usable tokenizer" + skipped);
  throw Error(ErrorCode::Io, path +
                                 ": no tokenizer found (looked for tokenizer.json, vocab.json + "
                                 "merges.txt, vocab.txt, tokenizer.model)");
}

}  // namespace attn::models
