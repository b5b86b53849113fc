// 16-bit checkpoints used as stored: a BF16 (or F16) Llama-shaped checkpoint is read in place
// from the memory map (the heap does not grow by an f32 copy: measured with mallinfo2, not
// assumed), and its forward pass equals the f32 pass over the same (rounded) values: exactly on
// the widening GEMM path, within bf16 activation rounding on the bf16 paths (AMX, vdpbf16ps).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "compute/error.h"
#include "models/arch/kv_cache.h"
#include "models/arch/model.h"
#include "models/arch/reverse.h"
#include "models/arch/weights.h"
#include "models/formats/safetensors_writer.h"
#include "tests/models/arch_test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = 4096, kHidden = 256, kHeads = 4, kKv = 2, kDim = 64, kInter = 704;
constexpr int kLayers = 2;

// Writes a random Llama checkpoint whose matrices are stored as `dtype` (vectors f32) to `dir`;
// when `as_f32` is set, the same values (already rounded to `dtype`) are stored as F32.
void write_llama(const std::string& dir, models::DType dtype, bool as_f32) {
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({"model_type": "llama",
    "architectures": ["LlamaForCausalLM"], "vocab_size": 4096, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "num_hidden_layers": 2, "intermediate_size": 704, "max_position_embeddings": 512,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": false})";
  std::mt19937 rng(17);
  std::normal_distribution<float> g(0.0f, 0.05f);
  std::vector<std::vector<uint8_t>> store;
  std::vector<models::TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    const bool vector = shape.size() == 1;
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < n; ++i) {
      float v = vector ? 1.0f + g(rng) : g(rng);
      const uint16_t h =
          dtype == models::DType::BF16 ? models::f32_to_bf16(v) : models::f32_to_f16(v);
      if (!vector)
        v = dtype == models::DType::BF16 ? models::bf16_to_f32(h) : models::f16_to_f32(h);
      if (vector || as_f32) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        bytes.insert(bytes.end(), p, p + 4);
      } else {
        const auto* p = reinterpret_cast<const uint8_t*>(&h);
        bytes.insert(bytes.end(), p, p + 2);
      }
    }
    store.push_back(std::move(bytes));
    tensors.push_back({name,
                       vector || as_f32 ? models::DType::F32 : dtype,
                       std::move(shape),
                       {store.back().data(), store.back().size()}});
  };
  add("model.embed_tokens.weight", {kVocab, kHidden});
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    add(b + "input_layernorm.weight", {kHidden});
    add(b + "post_attention_layernorm.weight", {kHidden});
    add(b + "self_attn.q_proj.weight", {kHeads * kDim, kHidden});
    add(b + "self_attn.k_proj.weight", {kKv * kDim, kHidden});
    add(b + "self_attn.v_proj.weight", {kKv * kDim, kHidden});
    add(b + "self_attn.o_proj.weight", {kHidden, kHeads * kDim});
    add(b + "mlp.gate_proj.weight", {kInter, kHidden});
    add(b + "mlp.up_proj.weight", {kInter, kHidden});
    add(b + "mlp.down_proj.weight", {kHidden, kInter});
  }
  add("model.norm.weight", {kHidden});
  add("lm_head.weight", {kVocab, kHidden});
  models::write_safetensors(dir + "/model.safetensors", tensors);
}

std::string scratch(const std::string& name) {
  return (fs::temp_directory_path() / ("attnscope_half_" + name + "_" + std::to_string(getpid())))
      .string();
}

size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

models::ModelInput ids(int n) {
  models::ModelInput in;
  for (int i = 0; i < n; ++i) in.ids.push_back((i * 977 + 13) % kVocab);
  return in;
}

TEST(HalfWeights, Bf16CheckpointIsNotCopiedToF32) {
  const std::string dir = scratch("heap");
  write_llama(dir, models::DType::BF16, false);
  const size_t f32_bytes =
      size_t(2 * kVocab * kHidden + kLayers * (2 * kHeads * kDim * kHidden +
                                               2 * kKv * kDim * kHidden + 3 * kInter * kHidden)) *
      4;
  const size_t before = heap_bytes();
  auto model = models::load_model(dir);
  const size_t grew = heap_bytes() - before;
  EXPECT_LT(grew, f32_bytes / 20) << "loading grew the heap by " << grew << " bytes; an f32 copy "
                                  << "of the matrices is " << f32_bytes;
  models::WeightStore ws(dir);
  ws.set_prefixes({"model."});
  const models::Matrix m = ws.get_matrix("embed_tokens.weight", {kVocab, kHidden});
  EXPECT_EQ(m.type, cpu::ElemType::Bf16);
  EXPECT_EQ(ws.converted_bytes(), 0u);
  EXPECT_EQ(ws.mapped_bytes(), size_t(kVocab) * kHidden * 2);
  fs::remove_all(dir);
}

// The forward pass of a 16-bit checkpoint against the f32 checkpoint holding the same values.
void check_forward(models::DType dtype) {
  const std::string d16 = scratch("w16"), d32 = scratch("w32");
  write_llama(d16, dtype, false);
  write_llama(d32, dtype, true);
  auto m16 = models::load_model(d16);
  auto m32 = models::load_model(d32);
  for (int n : {5, 40}) {  // the matrix-vector path (< 8 rows) and the GEMM
    const models::ModelOutput ref = m32->forward(ids(n));
    setenv("ATTNSCOPE_GEMM", "avx512", 1);  // widening: exact (eigen where there is no AVX-512)
    const models::ModelOutput exact = m16->forward(ids(n));
    unsetenv("ATTNSCOPE_GEMM");
    EXPECT_LT(test::max_rel_error(exact.logits, ref.logits), 2e-5)
        << models::dtype_name(dtype) << " n=" << n;
    const models::ModelOutput fast = m16->forward(ids(n));
    const std::string path = cpu::gemm_path(cpu::ElemType::Bf16);
    const bool rounds =
        n >= 8 && dtype == models::DType::BF16 && (path == "amx" || path == "dpbf16");
    // The bf16 paths round activations to bf16 (8 significant bits) at each GEMM input.
    EXPECT_LT(test::max_rel_error(fast.logits, ref.logits), rounds ? 3e-2 : 2e-5)
        << models::dtype_name(dtype) << " n=" << n << " path " << path;
    if (rounds) {
      EXPECT_GT(test::max_rel_error(fast.logits, ref.logits), 1e-6) << path << " path not taken";
    }
  }
  fs::remove_all(d16);
  fs::remove_all(d32);
}

TEST(HalfWeights, Bf16ForwardMatchesF32OfTheSameValues) {
  check_forward(models::DType::BF16);
}
TEST(HalfWeights, F16ForwardMatchesF32OfTheSameValues) {
  check_forward(models::DType::F16);
}

// The reverse pass (attribution) and incremental decoding run on the stored 16-bit weights too:
// on the widening path they equal the f32 checkpoint of the same values.
TEST(HalfWeights, ReverseAndDecodeReadTheStoredWeights) {
  const std::string d16 = scratch("rev16"), d32 = scratch("rev32");
  write_llama(d16, models::DType::BF16, false);
  write_llama(d32, models::DType::BF16, true);
  auto m16 = models::load_model(d16);
  auto m32 = models::load_model(d32);
  setenv("ATTNSCOPE_GEMM", "avx512", 1);
  models::ReverseTarget target;
  models::ReverseOptions ro;
  const models::Reverse r16 = m16->reverse(ids(12), target, ro);
  const models::Reverse r32 = m32->reverse(ids(12), target, ro);
  EXPECT_LT(test::max_rel_error(r16.input_grad, r32.input_grad), 1e-4);
  EXPECT_LT(test::max_rel_error(r16.input, r32.input), 1e-6);
  models::KvCache c16, c32;
  const std::vector<int32_t> prompt = ids(9).ids;
  m16->decode(prompt, c16);
  m32->decode(prompt, c32);
  const models::ModelOutput s16 = m16->decode({42}, c16), s32 = m32->decode({42}, c32);
  EXPECT_LT(test::max_rel_error(s16.logits, s32.logits), 2e-5);
  unsetenv("ATTNSCOPE_GEMM");
  fs::remove_all(d16);
  fs::remove_all(d32);
}

TEST(HalfWeights, IntegerMatrixGivesAClearError) {
  const std::string dir = scratch("int");
  fs::create_directories(dir);
  std::vector<int32_t> v(16 * 4, 1);
  models::write_safetensors(dir + "/model.safetensors",
                            {{"w",
                              models::DType::I32,
                              {16, 4},
                              {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}}});
  models::WeightStore ws(dir);
  try {
    ws.get_matrix("w", {16, 4});
    FAIL() << "an I32 matrix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has dtype I32, expected a floating-point type"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn
