// Constructors of the architectures (one file each) and what they share. load_model() in
// model_loader.cpp picks one from config.json.
#pragma once
#include <memory>
#include <string>

#include "models/arch/model.h"

namespace attn {

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

}  // namespace attn
