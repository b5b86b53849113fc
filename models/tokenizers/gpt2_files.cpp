#include "models/tokenizers/gpt2_files.h"

#include <fstream>

#include "compute/error.h"
#include "models/formats/limits.h"
#include "models/tokenizers/bpe_model.h"
#include "models/tokenizers/tokenizer_json.h"

namespace attn::models {

std::unique_ptr<PipelineTokenizer> load_gpt2_bpe(const std::string& vocab_json,
                                                 const std::string& merges_txt) {
  const nlohmann::json j = read_json_file(vocab_json);
  if (!j.is_object()) throw Error(ErrorCode::Format, vocab_json + ": not a JSON object");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > kMaxVocabId) {
      throw Error(ErrorCode::Format, vocab_json + ": id of '" + it.key() +
                                         "' = " + it.value().dump() + " is not an id in [0, " +
                                         std::to_string(kMaxVocabId) + "] (kMaxVocabId)");
    }
    vocab.emplace(it.key(), it.value().get<int32_t>());
  }

  std::ifstream in(merges_txt, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, merges_txt + ": cannot open");
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.starts_with("#version"))) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || line.find(' ', sp + 1) != std::string::npos) {
      throw Error(ErrorCode::Format, merges_txt + ": line " + std::to_string(lineno) + " '" + line +
                                         "' is not two tokens separated by one space");
    }
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }

  PipelineParts parts;
  parts.kind = "bpe";
  parts.pre_tokenizer = make_byte_level_pre_tokenizer(/*add_prefix_space=*/false,
                                                      /*use_regex=*/true);
  parts.decoder = make_byte_level_decoder();
  auto eot = vocab.find("<|endoftext|>");
  if (eot != vocab.end()) {
    parts.added.add({"<|endoftext|>", eot->second, /*special=*/true});
    parts.special.bos = parts.special.eos = parts.special.unk = eot->second;
  }
  try {
    parts.model = std::make_unique<BpeModel>(std::move(vocab), merges, BpeOptions{});
  } catch (const Error& e) {
    throw Error(e.code(), merges_txt + ": " + e.what());
  }
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace attn::models
