// Hugging Face config.json, read into one struct for every supported family (GPT-2, Llama
// family, BERT family, ViT family). Family-specific key names (GPT-2's n_embd, n_layer, ...) and
// the defaults of the transformers config classes are applied here, so callers see one vocabulary.
// A model_type is accepted exactly when the architecture table (models/arch/architectures.h)
// loads it.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace attn::models {

// rope_scaling, as in transformers' rope utilities. `type` is "linear", "dynamic", "llama3",
// "yarn", ... (also read from the newer key "rope_type"); fields a type does not use stay unset.
struct RopeScaling {
  std::string type;
  double factor = 1.0;
  std::optional<double> low_freq_factor;                    // llama3
  std::optional<double> high_freq_factor;                   // llama3
  std::optional<int64_t> original_max_position_embeddings;  // llama3, yarn
  std::optional<double> beta_fast, beta_slow;               // yarn
  std::optional<double> attention_factor;                   // yarn
};

struct HfConfig {
  std::string source;                      // file it came from, for messages
  std::string model_type;                  // "gpt2", "llama", "qwen2", "bert", "vit", ...
  std::vector<std::string> architectures;  // e.g. {"LlamaForCausalLM"}

  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // = num_attention_heads unless grouped-query attention
  int64_t head_dim = 0;             // = hidden_size / num_attention_heads unless given
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;               // 0 for vision models without a vocabulary
  int64_t max_position_embeddings = 0;  // 0 when the model has no limit in its config
  int64_t type_vocab_size = 0;          // BERT segment embeddings

  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  double norm_eps = 1e-5;  // rms_norm_eps | layer_norm_eps | layer_norm_epsilon
  std::string hidden_act;  // "silu", "gelu", "gelu_new", ...
  bool tie_word_embeddings = true;
  bool attention_bias = false;  // q, k, v (and o, per family) projections have biases
  bool mlp_bias = false;

  // Vision transformers.
  int64_t image_size = 0;
  int64_t patch_size = 0;
  int64_t num_channels = 0;
  std::map<int64_t, std::string> id2label;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // one or several (Llama 3.1 lists three)
  std::optional<int64_t> pad_token_id;

  nlohmann::json raw;  // the whole file, for keys this struct does not name
};

// Reads `path` (a config.json, or a folder holding one). Throws Error(Io) when unreadable and
// Error(Format) naming the key and the file when a required key is missing or has the wrong type,
// and Error(Unsupported) naming a model_type the table lacks and listing those it has.
HfConfig load_hf_config(const std::string& path);
// Same from parsed JSON; `source` names it in messages.
HfConfig parse_hf_config(const nlohmann::json& json, const std::string& source);

}  // namespace attn::models
