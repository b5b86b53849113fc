#include "models/arch/architectures.h"

namespace attn::models {

namespace {

// Qwen2 always has q/k/v biases; its config has no key for them.
void qwen2_config(HfConfig& c) {
  c.attention_bias = true;
}

}  // namespace

const std::vector<Architecture>& architectures() {
  // The table, in display order. A model_type appears once.
  static const std::vector<Architecture> kArchitectures = {
      {{"gpt2"}, Family::Gpt2, "GPT-2", nullptr, make_gpt2},
      {{"llama"}, Family::Llama, "Llama (Llama 2/3, SmolLM2, TinyLlama)", nullptr, make_llama},
      {{"qwen2"}, Family::Llama, "Qwen2 (Llama with q/k/v biases)", qwen2_config, make_llama},
      {{"bert"}, Family::Bert, "BERT (BERT, MiniLM)", nullptr, make_bert},
      {{"vit", "deit"}, Family::Vit, "ViT (ViT, DeiT, DINO)", nullptr, make_vit},
  };
  return kArchitectures;
}

const Architecture* find_architecture(const std::string& model_type) {
  for (const Architecture& a : architectures())
    for (const std::string& t : a.model_types)
      if (t == model_type) return &a;
  return nullptr;
}

std::string supported_model_types() {
  std::string s;
  for (const Architecture& a : architectures())
    for (const std::string& t : a.model_types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace attn::models
