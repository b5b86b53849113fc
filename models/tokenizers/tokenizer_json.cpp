#include "models/tokenizers/tokenizer_json.h"

#include <fstream>
#include <iterator>

#include "compute/error.h"
#include "models/formats/limits.h"
#include "models/tokenizers/bpe_model.h"
#include "models/tokenizers/wordpiece_model.h"

namespace attn::models {
namespace {

using nlohmann::json;

std::unordered_map<std::string, int32_t> read_vocab(const json& model, const std::string& source) {
  auto it = model.find("vocab");
  if (it == model.end() || !it->is_object()) {
    throw Error(ErrorCode::Format, source + ": model.vocab must be an object of token -> id");
  }
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(it->size());
  for (auto v = it->begin(); v != it->end(); ++v) {
    if (!v.value().is_number_integer() || v.value().get<int64_t>() < 0 ||
        v.value().get<int64_t>() > kMaxVocabId) {
      throw Error(ErrorCode::Format, source + ": model.vocab['" + v.key() +
                                         "'] = " + v.value().dump() + " is not an id in [0, " +
                                         std::to_string(kMaxVocabId) + "] (kMaxVocabId)");
    }
    vocab.emplace(v.key(), v.value().get<int32_t>());
  }
  return vocab;
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& model,
                                                             const std::string& source) {
  std::vector<std::pair<std::string, std::string>> merges;
  auto it = model.find("merges");
  if (it == model.end() || it->is_null()) return merges;
  if (!it->is_array()) throw Error(ErrorCode::Format, source + ": model.merges must be a list");
  merges.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw Error(ErrorCode::Format, source + ": merge " + std::to_string(i + 1) + " '" + s +
                                           "' is not two tokens separated by one space");
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw Error(ErrorCode::Format,
                  source + ": merge " + std::to_string(i + 1) + " is neither \"a b\" nor [a, b]");
    }
  }
  return merges;
}

std::optional<std::string> opt_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// Prefixes component errors with the file name.
template <typename F>
auto with_source(const std::string& source, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), source + ": " + e.what());
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, source + ": " + e.what());
  }
}

std::unique_ptr<VocabModel> model_from_json(const json& model, const std::string& source,
                                            std::string* kind) {
  if (!model.is_object()) throw Error(ErrorCode::Format, source + ": missing object 'model'");
  std::string type = model.value("type", std::string());
  if (type.empty()) {
    // Older files omit the type; BPE is the one with merges.
    type = model.contains("merges") ? "BPE" : model.contains("vocab") ? "WordPiece" : "";
  }
  if (type == "BPE") {
    BpeOptions o;
    o.unk_token = opt_string(model, "unk_token");
    o.fuse_unk = model.value("fuse_unk", false);
    o.byte_fallback = model.value("byte_fallback", false);
    o.ignore_merges = model.value("ignore_merges", false);
    o.continuing_subword_prefix = opt_string(model, "continuing_subword_prefix").value_or("");
    o.end_of_word_suffix = opt_string(model, "end_of_word_suffix").value_or("");
    *kind = "bpe";
    auto vocab = read_vocab(model, source);
    const auto merges = read_merges(model, source);
    return with_source(source, [&]() -> std::unique_ptr<VocabModel> {
      return std::make_unique<BpeModel>(std::move(vocab), merges, o);
    });
  }
  if (type == "WordPiece") {
    WordPieceOptions o;
    o.unk_token = opt_string(model, "unk_token").value_or("[UNK]");
    o.continuing_subword_prefix = opt_string(model, "continuing_subword_prefix").value_or("##");
    o.max_input_chars_per_word = model.value("max_input_chars_per_word", size_t(100));
    *kind = "wordpiece";
    auto vocab = read_vocab(model, source);
    return with_source(source, [&]() -> std::unique_ptr<VocabModel> {
      return std::make_unique<WordPieceModel>(std::move(vocab), o);
    });
  }
  throw Error(ErrorCode::Unsupported,
              source + ": tokenizer model type '" + type + "' is not supported (BPE, WordPiece)");
}

}  // namespace

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, path + ": cannot open");
  // Parsing from memory is several times faster than from a stream for large vocabularies.
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, path + ": not valid JSON: " + e.what());
  }
}

void read_special_tokens(const json& config,
                         const std::function<std::optional<int32_t>(const std::string&)>& lookup,
                         SpecialTokens* special) {
  if (!config.is_object()) return;
  auto read = [&](const char* key, std::optional<int32_t>* slot) {
    auto it = config.find(key);
    if (it == config.end()) return;
    std::string content;
    if (it->is_string()) {
      content = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      content = (*it)["content"].get<std::string>();
    } else {
      return;
    }
    if (auto id = lookup(content)) *slot = id;
  };
  read("bos_token", &special->bos);
  read("eos_token", &special->eos);
  read("unk_token", &special->unk);
  read("pad_token", &special->pad);
  read("cls_token", &special->cls);
  read("sep_token", &special->sep);
  read("mask_token", &special->mask);
}

namespace {

std::unique_ptr<PipelineTokenizer> build_tokenizer(const json& j, const std::string& source,
                                                   const json& config) {
  if (!j.is_object()) throw Error(ErrorCode::Format, source + ": not a JSON object");
  PipelineParts parts;
  parts.model = model_from_json(j.value("model", json()), source, &parts.kind);
  parts.normalizer =
      with_source(source, [&] { return normalizer_from_json(j.value("normalizer", json())); });
  parts.pre_tokenizer = with_source(
      source, [&] { return pre_tokenizer_from_json(j.value("pre_tokenizer", json())); });
  parts.post_processor = with_source(
      source, [&] { return post_processor_from_json(j.value("post_processor", json())); });
  parts.decoder =
      with_source(source, [&] { return decoder_from_json(j.value("decoder", json())); });
  for (const json& t : j.value("added_tokens", json::array())) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      throw Error(ErrorCode::Format, source + ": added_tokens entries need 'id' and 'content'");
    }
    if (t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() > kMaxVocabId) {
      throw Error(ErrorCode::Format, source + ": added token '" + t["content"].get<std::string>() +
                                         "' has id " + t["id"].dump() + ", outside [0, " +
                                         std::to_string(kMaxVocabId) + "] (kMaxVocabId)");
    }
    AddedToken a;
    a.id = t["id"].get<int32_t>();
    a.content = t["content"].get<std::string>();
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.single_word = t.value("single_word", false);
    a.normalized = t.value("normalized", !a.special);
    parts.added.add(a);
  }
  const VocabModel& model = *parts.model;
  const AddedVocabulary& added = parts.added;
  read_special_tokens(
      config,
      [&](const std::string& s) -> std::optional<int32_t> {
        if (auto id = added.id_of(s)) return id;
        return model.token_to_id(s);
      },
      &parts.special);
  if (!parts.special.unk) {
    if (auto unk = opt_string(j["model"], "unk_token")) parts.special.unk = model.token_to_id(*unk);
  }
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace

std::unique_ptr<PipelineTokenizer> tokenizer_from_json(const json& j, const std::string& source,
                                                       const json& config) {
  // A field of the wrong type anywhere (an added token's "special": 1, a model's "fuse_unk":
  // "yes") is a format error of this file, not nlohmann's type_error escaping.
  try {
    return build_tokenizer(j, source, config);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, source + ": " + e.what());
  }
}

std::unique_ptr<PipelineTokenizer> load_tokenizer_json(const std::string& path,
                                                       const std::string& config_path) {
  const json j = read_json_file(path);
  json config;
  if (!config_path.empty()) config = read_json_file(config_path);
  return tokenizer_from_json(j, path, config);
}

}  // namespace attn::models
