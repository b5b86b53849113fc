#include "models/formats/hf_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "compute/error.h"
#include "models/arch/architectures.h"

namespace attn::models {
namespace {

using nlohmann::json;

// Looks keys up by any of their family spellings and reports type errors naming key and file.
class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  // The first of `keys` present and not null, or nullptr.
  const json* find(std::initializer_list<const char*> keys, std::string* found = nullptr) const {
    for (const char* k : keys) {
      auto it = j_.find(k);
      if (it != j_.end() && !it->is_null()) {
        if (found) *found = k;
        return &*it;
      }
    }
    return nullptr;
  }

  std::optional<int64_t> get_int(std::initializer_list<const char*> keys) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) {
      // Some configs write integers as 4096.0.
      // (Within int64's range first: converting a larger double is undefined.)
      const double d = v->is_number_float() ? v->get<double>() : 0.5;
      if (d >= -9.2e18 && d <= 9.2e18 && d == std::floor(d)) return int64_t(d);
      fail("key '" + key + "' must be an integer, found " + v->dump());
    }
    return v->get<int64_t>();
  }

  int64_t require_int(std::initializer_list<const char*> keys) const {
    auto v = get_int(keys);
    if (!v) fail("missing required key " + spell(keys));
    return *v;
  }

  std::optional<double> get_double(std::initializer_list<const char*> keys) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail("key '" + key + "' must be a number, found " + v->dump());
    return v->get<double>();
  }

  std::optional<bool> get_bool(std::initializer_list<const char*> keys) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail("key '" + key + "' must be true or false, found " + v->dump());
    return v->get<bool>();
  }

  std::optional<std::string> get_string(std::initializer_list<const char*> keys) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail("key '" + key + "' must be a string, found " + v->dump());
    return v->get<std::string>();
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::Format, source_ + ": " + what);
  }

 private:
  static std::string spell(std::initializer_list<const char*> keys) {
    std::string s;
    size_t i = 0;
    for (const char* k : keys) {
      s += (i == 0 ? "'" : i == 1 ? " (or '" : ", '") + std::string(k) + "'";
      ++i;
    }
    if (keys.size() > 1) s += ")";
    return s;
  }
  const json& j_;
  const std::string& source_;
};

RopeScaling parse_rope_scaling(const json& j, const std::string& source) {
  const std::string where = source + ": rope_scaling";
  if (!j.is_object()) throw Error(ErrorCode::Format, where + " must be an object");
  const std::string sub_source = source + ": rope_scaling";
  Reader r(j, sub_source);
  RopeScaling rs;
  auto type = r.get_string({"rope_type", "type"});
  if (!type) r.fail("missing required key 'rope_type' (or 'type')");
  rs.type = *type;
  if (rs.type == "default") return rs;
  auto factor = r.get_double({"factor"});
  if (!factor) r.fail("missing required key 'factor' for type '" + rs.type + "'");
  rs.factor = *factor;
  rs.low_freq_factor = r.get_double({"low_freq_factor"});
  rs.high_freq_factor = r.get_double({"high_freq_factor"});
  rs.original_max_position_embeddings = r.get_int({"original_max_position_embeddings"});
  rs.beta_fast = r.get_double({"beta_fast"});
  rs.beta_slow = r.get_double({"beta_slow"});
  rs.attention_factor = r.get_double({"attention_factor"});
  if (rs.type == "llama3") {
    if (!rs.low_freq_factor) r.fail("missing required key 'low_freq_factor' for type 'llama3'");
    if (!rs.high_freq_factor) r.fail("missing required key 'high_freq_factor' for type 'llama3'");
    if (!rs.original_max_position_embeddings) {
      r.fail("missing required key 'original_max_position_embeddings' for type 'llama3'");
    }
  }
  return rs;
}

// model_type and architectures; the architecture table (models/arch/architectures.h) decides
// what is accepted, before any other key is read. Its family picks the key spellings and
// defaults the other readers apply.
const Architecture& read_architecture(const Reader& r, HfConfig& c) {
  auto model_type = r.get_string({"model_type"});
  if (!model_type) r.fail("missing required key 'model_type'");
  c.model_type = *model_type;
  if (const json* a = r.find({"architectures"})) {
    if (!a->is_array()) r.fail("key 'architectures' must be a list of strings");
    for (const json& s : *a) {
      if (!s.is_string()) r.fail("key 'architectures' must be a list of strings");
      c.architectures.push_back(s.get<std::string>());
    }
  }
  const Architecture* arch = find_architecture(c.model_type);
  if (!arch) {
    std::string listed;
    for (const std::string& a : c.architectures) listed += (listed.empty() ? "" : ", ") + a;
    throw Error(ErrorCode::Unsupported,
                c.source + ": model_type '" + c.model_type + "'" +
                    (listed.empty() ? "" : " (architectures: " + listed + ")") +
                    " is not supported; supported model types: " + supported_model_types());
  }
  return *arch;
}

// Hidden size, layers, attention and KV heads, head_dim (hidden size / heads unless given).
void read_attention_shape(const Reader& r, HfConfig& c) {
  c.hidden_size = r.require_int({"hidden_size", "n_embd", "d_model"});
  c.num_hidden_layers = r.require_int({"num_hidden_layers", "n_layer", "num_layers"});
  c.num_attention_heads = r.require_int({"num_attention_heads", "n_head", "num_heads"});
  if (c.hidden_size <= 0) r.fail("hidden size must be positive");
  if (c.num_hidden_layers <= 0) r.fail("number of layers must be positive");
  if (c.num_attention_heads <= 0) r.fail("number of attention heads must be positive");
  c.num_key_value_heads =
      r.get_int({"num_key_value_heads", "num_kv_heads"}).value_or(c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    r.fail("num_key_value_heads (" + std::to_string(c.num_key_value_heads) +
           ") must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  }
  if (auto hd = r.get_int({"head_dim"})) {
    c.head_dim = *hd;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      r.fail("hidden size " + std::to_string(c.hidden_size) + " is not divisible by " +
             std::to_string(c.num_attention_heads) + " heads and 'head_dim' is not given");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
}

// The MLP's width, the vocabulary (or a vision model's image and patch sizes), the context
// length and BERT's segment vocabulary, with each family's defaults.
void read_sizes(const Reader& r, HfConfig& c, Family family) {
  const bool gpt2 = family == Family::Gpt2;
  if (gpt2) {
    c.intermediate_size = r.get_int({"n_inner"}).value_or(4 * c.hidden_size);
  } else if (auto ffn = r.get_int({"intermediate_size", "ffn_dim"})) {
    c.intermediate_size = *ffn;
  } else if (auto ratio = r.get_double({"mlp_ratio"})) {
    c.intermediate_size = int64_t(double(c.hidden_size) * *ratio);
  } else {
    r.fail("missing required key 'intermediate_size'");
  }

  if (family == Family::Vit) {
    c.vocab_size = r.get_int({"vocab_size"}).value_or(0);
    c.image_size = r.require_int({"image_size"});
    c.patch_size = r.require_int({"patch_size"});
    c.num_channels = r.get_int({"num_channels"}).value_or(3);
    if (c.patch_size <= 0 || c.image_size % c.patch_size != 0) {
      r.fail("image_size " + std::to_string(c.image_size) + " is not a multiple of patch_size " +
             std::to_string(c.patch_size));
    }
  } else {
    c.vocab_size = r.require_int({"vocab_size"});
  }
  const bool bert = family == Family::Bert;
  c.max_position_embeddings = r.get_int({"max_position_embeddings", "n_positions", "n_ctx"})
                                  .value_or(gpt2   ? 1024
                                            : bert ? 512
                                                   : 0);
  c.type_vocab_size = r.get_int({"type_vocab_size"}).value_or(bert ? 2 : 0);
}

// Norm epsilon, activation, tied embeddings and projection biases, with each family's
// defaults.
void read_layer_options(const Reader& r, HfConfig& c, Family family) {
  const bool gpt2 = family == Family::Gpt2;
  const bool llama_like = family == Family::Llama;
  const double eps_default = llama_like ? 1e-6 : (gpt2 ? 1e-5 : 1e-12);
  c.norm_eps = r.get_double({"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"})
                   .value_or(eps_default);
  c.hidden_act = r.get_string({"hidden_act", "activation_function", "hidden_activation"})
                     .value_or(gpt2         ? "gelu_new"
                               : llama_like ? "silu"
                                            : "gelu");
  // transformers: PretrainedConfig ties by default; the Llama-family configs untie by default.
  c.tie_word_embeddings = r.get_bool({"tie_word_embeddings"}).value_or(!llama_like);
  if (llama_like) {
    c.attention_bias = r.get_bool({"attention_bias"}).value_or(false);
  } else {
    c.attention_bias = r.get_bool({"qkv_bias", "attention_bias"}).value_or(true);
  }
  c.mlp_bias = r.get_bool({"mlp_bias"}).value_or(!llama_like);
}

// id2label: a classifier's label per integer class id.
void read_labels(const Reader& r, HfConfig& c) {
  const json* labels = r.find({"id2label"});
  if (!labels) return;
  if (!labels->is_object()) r.fail("key 'id2label' must be an object");
  for (auto it = labels->begin(); it != labels->end(); ++it) {
    int64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoll(it.key(), &used);
      if (used != it.key().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      r.fail("id2label key '" + it.key() + "' is not an integer");
    }
    if (!it.value().is_string()) r.fail("id2label value for " + it.key() + " is not a string");
    c.id2label[id] = it.value().get<std::string>();
  }
}

// bos, pad and eos token ids (eos_token_id may be one id or a list).
void read_special_tokens(const Reader& r, HfConfig& c) {
  c.bos_token_id = r.get_int({"bos_token_id"});
  c.pad_token_id = r.get_int({"pad_token_id"});
  const json* eos = r.find({"eos_token_id"});
  if (!eos) return;
  if (eos->is_number_integer()) {
    c.eos_token_ids.push_back(eos->get<int64_t>());
  } else if (eos->is_array()) {
    for (const json& e : *eos) {
      if (!e.is_number_integer()) r.fail("key 'eos_token_id' must be an integer or a list");
      c.eos_token_ids.push_back(e.get<int64_t>());
    }
  } else {
    r.fail("key 'eos_token_id' must be an integer or a list");
  }
}

}  // namespace

HfConfig parse_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error(ErrorCode::Format, source + ": config is not a JSON object");
  Reader r(j, source);
  HfConfig c;
  c.source = source;
  c.raw = j;
  const Architecture& arch = read_architecture(r, c);
  read_attention_shape(r, c);
  read_sizes(r, c, arch.family);
  c.rope_theta = r.get_double({"rope_theta"}).value_or(10000.0);
  if (const json* rs = r.find({"rope_scaling"})) c.rope_scaling = parse_rope_scaling(*rs, source);
  read_layer_options(r, c, arch.family);
  if (arch.configure) arch.configure(c);
  read_labels(r, c);
  read_special_tokens(r, c);
  return c;
}

HfConfig load_hf_config(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "config.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, p.string() + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, p.string() + ": not valid JSON: " + e.what());
  }
  return parse_hf_config(j, p.string());
}

}  // namespace attn::models
