// The architectures attnscope runs, as one table (architectures.cpp): the config.json model_type
// strings each loads, its family, what its config fixes apart from the family's defaults, and
// its constructor (one file each: gpt2.cpp, llama.cpp, bert.cpp, vit.cpp). parse_hf_config
// (models/formats/hf_config.h) and load_model() both read it, so a model_type is accepted
// exactly when it loads. Also what the constructors share.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/arch/model.h"

namespace attn::models {

// One table entry. A new architecture: its file with a make_<arch> constructor declared below,
// and its line in kArchitectures (architectures.cpp); a new family also adds its Family value and
// its config defaults in parse_hf_config.
struct Architecture {
  std::vector<std::string> model_types;  // config.json model_type values it loads: {"vit", "deit"}
  Family family;
  std::string name;  // for lists: "Qwen2 (Llama with q/k/v biases)"
  // Applied by parse_hf_config after the family's defaults: what the type fixes (qwen2's q/k/v
  // biases, which its config has no key for); null = nothing.
  void (*configure)(HfConfig& config);
  std::unique_ptr<Model> (*make)(const std::string& dir, const HfConfig& config);
};

// Every architecture, in display order.
const std::vector<Architecture>& architectures();
// The entry that loads `model_type`, or null.
const Architecture* find_architecture(const std::string& model_type);
// Every supported model_type in table order, comma-separated ("gpt2, llama, qwen2, ...").
std::string supported_model_types();

std::unique_ptr<Model> make_gpt2(const std::string& dir, const HfConfig& config);
std::unique_ptr<Model> make_llama(const std::string& dir, const HfConfig& config);
std::unique_ptr<Model> make_bert(const std::string& dir, const HfConfig& config);
std::unique_ptr<Model> make_vit(const std::string& dir, const HfConfig& config);

// The folder's tokenizer, or null when it holds no tokenizer file at all (a broken one throws).
std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir);

// Fills the ModelInfo fields every text model shares from its config.
void fill_text_info(ModelInfo& info, const std::string& dir, const HfConfig& c, Family family);

// Throws Error(InvalidArgument) for no ids, more than info.max_tokens, or an id outside
// [0, rows) (`rows`: rows of the embedding matrix).
void check_token_ids(const ModelInfo& info, const ModelInput& in, int rows);

// Int view of a config value, with a Format error naming the key when it does not fit.
int config_int(const HfConfig& c, int64_t value, const char* key);

}  // namespace attn::models
