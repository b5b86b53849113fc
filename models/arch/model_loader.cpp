// Loads a model folder: config.json's model_type picks the architecture (architectures.h).
#include <filesystem>

#include "compute/error.h"
#include "models/arch/architectures.h"
#include "models/tokenizers/factory.h"

namespace attn::models {
namespace fs = std::filesystem;

const char* family_name(Family f) {
  switch (f) {
    case Family::Gpt2:
      return "gpt2";
    case Family::Llama:
      return "llama";
    case Family::Bert:
      return "bert";
    case Family::Vit:
      return "vit";
  }
  return "?";
}

std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir) {
  for (const char* f : {"tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model"}) {
    if (fs::exists(fs::path(dir) / f)) return load_tokenizer(dir);
  }
  return nullptr;
}

int config_int(const HfConfig& c, int64_t value, const char* key) {
  require(value >= 0 && value <= (int64_t(1) << 30), ErrorCode::Format,
          c.source + ": '" + key + "' = " + std::to_string(value) + " is out of range");
  return int(value);
}

void fill_text_info(ModelInfo& info, const std::string& dir, const HfConfig& c, Family family) {
  info.dir = dir;
  info.family = family;
  info.model_type = c.model_type;
  info.architecture = c.architectures.empty() ? "" : c.architectures[0];
  info.n_layers = config_int(c, c.num_hidden_layers, "num_hidden_layers");
  info.n_heads = config_int(c, c.num_attention_heads, "num_attention_heads");
  info.n_kv_heads = config_int(c, c.num_key_value_heads, "num_key_value_heads");
  info.head_dim = config_int(c, c.head_dim, "head_dim");
  info.hidden = config_int(c, c.hidden_size, "hidden_size");
  info.max_tokens = config_int(c, c.max_position_embeddings, "max_position_embeddings");
  info.causal = family == Family::Gpt2 || family == Family::Llama;
  info.vision = false;
}

void check_token_ids(const ModelInfo& info, const ModelInput& in, int rows) {
  require(!in.ids.empty(), ErrorCode::InvalidArgument, "no input tokens: nothing to run");
  if (info.max_tokens > 0) {
    require(int64_t(in.ids.size()) <= info.max_tokens, ErrorCode::InvalidArgument,
            std::to_string(in.ids.size()) + " tokens exceed the model's context of " +
                std::to_string(info.max_tokens) + " (truncate the input first)");
  }
  for (size_t i = 0; i < in.ids.size(); ++i) {
    require(in.ids[i] >= 0 && in.ids[i] < rows, ErrorCode::InvalidArgument,
            "token id " + std::to_string(in.ids[i]) + " at position " + std::to_string(i) +
                " is outside the vocabulary [0, " + std::to_string(rows) + ")");
  }
  require(in.positions.empty() || in.positions.size() == in.ids.size(), ErrorCode::InvalidArgument,
          "positions has " + std::to_string(in.positions.size()) + " entries for " +
              std::to_string(in.ids.size()) + " tokens");
  for (size_t i = 0; i < in.positions.size(); ++i)
    require(in.positions[i] >= 0 && (info.max_tokens <= 0 || info.family == Family::Llama ||
                                     in.positions[i] < info.max_tokens),
            ErrorCode::InvalidArgument,
            "position " + std::to_string(in.positions[i]) + " of token " + std::to_string(i) +
                " is outside the model's positions [0, " + std::to_string(info.max_tokens) + ")");
  require(in.token_types.empty() || in.token_types.size() == in.ids.size(),
          ErrorCode::InvalidArgument,
          "token_types has " + std::to_string(in.token_types.size()) + " entries for " +
              std::to_string(in.ids.size()) + " tokens");
}

std::unique_ptr<Model> load_model(const std::string& dir) {
  std::error_code ec;
  require(fs::is_directory(dir, ec), ErrorCode::Io, dir + ": not a model folder");
  require(fs::exists(fs::path(dir) / "config.json", ec), ErrorCode::Io,
          dir +
              ": no config.json (a model folder holds config.json, model.safetensors and "
              "tokenizer or preprocessor files)");
  // The parser checks model_type against the architecture table before any other key, so an
  // unsupported model is named as such rather than by the first key its family spells
  // differently; what it accepts, the table loads.
  const HfConfig c = load_hf_config(dir);
  return find_architecture(c.model_type)->make(dir, c);
}

}  // namespace attn::models
