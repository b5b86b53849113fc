#include "models/arch/architectures.h"
#include "models/formats/hf_config.h"
#include "test_util.h"

namespace attn {
namespace {

models::HfConfig parse(const std::string& text) {
  return models::parse_hf_config(nlohmann::json::parse(text), "config.json");
}

TEST(HfConfig, Gpt2KeysAndDefaults) {
  auto c = parse(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "bos_token_id": 50256, "eos_token_id": 50256, "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
    "n_positions": 1024, "vocab_size": 50257})");
  EXPECT_EQ(c.model_type, "gpt2");
  EXPECT_EQ(c.architectures, std::vector<std::string>{"GPT2LMHeadModel"});
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 3072);  // n_inner absent: 4 x n_embd
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.bos_token_id, 50256);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{50256});
  EXPECT_EQ(c.raw["n_ctx"], 1024);
}

TEST(HfConfig, Llama3WithRopeScalingAndGqa) {
  auto c = parse(R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
    "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 128256})");
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(*c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(*c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(*c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.raw["torch_dtype"], "bfloat16");
}

TEST(HfConfig, LlamaDefaultsAndOldRopeTypeKey) {
  auto c = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
    "rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);  // LlamaConfig unties by default
  EXPECT_EQ(c.rope_scaling->type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 2.0);
  EXPECT_FALSE(c.rope_scaling->low_freq_factor.has_value());
}

TEST(HfConfig, Qwen2HasQkvBias) {
  auto c = parse(R"({"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
    "vocab_size": 151936, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-06})");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
}

TEST(HfConfig, BertAndVit) {
  auto bert = parse(R"({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
    "hidden_act": "gelu", "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
    "type_vocab_size": 2})");
  EXPECT_DOUBLE_EQ(bert.norm_eps, 1e-12);
  EXPECT_EQ(bert.type_vocab_size, 2);
  EXPECT_TRUE(bert.attention_bias);
  EXPECT_TRUE(bert.mlp_bias);

  auto vit = parse(R"({"model_type": "vit", "hidden_size": 192, "num_hidden_layers": 12,
    "num_attention_heads": 3, "intermediate_size": 768, "image_size": 224, "patch_size": 16,
    "num_channels": 3, "qkv_bias": true, "layer_norm_eps": 1e-12,
    "id2label": {"0": "tench", "1": "goldfish", "999": "toilet tissue"}})");
  EXPECT_EQ(vit.vocab_size, 0);
  EXPECT_EQ(vit.image_size, 224);
  EXPECT_EQ(vit.patch_size, 16);
  EXPECT_EQ(vit.num_channels, 3);
  EXPECT_EQ(vit.head_dim, 64);
  EXPECT_EQ(vit.id2label.size(), 3u);
  EXPECT_EQ(vit.id2label.at(999), "toilet tissue");

  auto ratio = parse(R"({"model_type": "vit", "hidden_size": 384, "num_hidden_layers": 12,
    "num_attention_heads": 6, "mlp_ratio": 4, "image_size": 518, "patch_size": 14})");
  EXPECT_EQ(ratio.intermediate_size, 1536);
  EXPECT_EQ(ratio.num_channels, 3);
}

// What the architecture table lacks is refused before any other key is read (these configs are
// otherwise complete), naming the type and the checkpoint's class and listing the supported ones.
TEST(HfConfig, ModelTypesOutsideTheArchitectureTableAreRefused) {
  const std::string supported = "supported model types: " + models::supported_model_types();
  for (const std::string type : {"mistral", "gemma", "phi3", "dinov2", "mamba"}) {
    const std::string named = "model_type '" + type + "' (architectures: SomeModel)";
    EXPECT_ATTN_ERROR(parse(R"({"model_type": ")" + type + R"(", "architectures": ["SomeModel"],
      "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100, "image_size": 32, "patch_size": 8})"),
                      ErrorCode::Unsupported, "config.json", named.c_str(), supported.c_str());
  }
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "mistral"})"), ErrorCode::Unsupported, "mistral");
}

TEST(HfConfig, MissingRequiredKeysNameKeyAndFile) {
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "config.json", "missing required key 'hidden_size'",
                    "'n_embd'");
  EXPECT_ATTN_ERROR(parse(R"({"hidden_size": 8})"), ErrorCode::Format, "config.json",
                    "'model_type'");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8})"),
                    ErrorCode::Format, "'vocab_size'");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "vit", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "image_size": 32})"),
                    ErrorCode::Format, "'patch_size'");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}})"),
                    ErrorCode::Format, "rope_scaling", "'low_freq_factor'");
}

TEST(HfConfig, WrongTypesAndInconsistentShapes) {
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "config.json", "'hidden_size'", "integer");
  // Integers written as floats are read, but not beyond int64 (converting those is undefined).
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": 184467440737095516154,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "'hidden_size'", "integer");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": -1e300, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "'hidden_size'", "integer");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "num_key_value_heads (3)", "num_attention_heads (4)");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "llama", "hidden_size": 10, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10})"),
                    ErrorCode::Format, "not divisible");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "gpt2", "n_embd": 8, "n_layer": 1, "n_head": 2,
    "vocab_size": 10, "tie_word_embeddings": "yes"})"),
                    ErrorCode::Format, "'tie_word_embeddings'");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "vit", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "image_size": 32, "patch_size": 5})"),
                    ErrorCode::Format, "multiple of patch_size");
  EXPECT_ATTN_ERROR(parse(R"({"model_type": "vit", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 8, "image_size": 32, "patch_size": 8,
    "id2label": {"cat": "dog"}})"),
                    ErrorCode::Format, "id2label key 'cat'");
}

TEST(HfConfig, LoadFromFolderAndFileErrors) {
  auto dir = test::scratch_dir();
  EXPECT_ATTN_ERROR(models::load_hf_config(dir.string()), ErrorCode::Io, "config.json",
                    "cannot open");
  test::write_text(dir / "config.json", "{\"model_type\": ");
  EXPECT_ATTN_ERROR(models::load_hf_config(dir.string()), ErrorCode::Format, "config.json",
                    "not valid JSON");
  test::write_text(dir / "config.json", R"({"model_type": "gpt2", "n_embd": 8, "n_layer": 1,
    "n_head": 2, "vocab_size": 10})");
  auto c = models::load_hf_config(dir.string());
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.source, (dir / "config.json").string());
}

}  // namespace
}  // namespace attn
