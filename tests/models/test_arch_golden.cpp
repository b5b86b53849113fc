// Forward passes of every architecture against golden outputs of an independent PyTorch
// implementation (tests/ref/make_goldens.py, float64): logits, last hidden state, attention
// patterns, and for Llama the queries/keys after RoPE. Tolerance: 1e-4 relative.
#include <cstdio>
#include <filesystem>

#include "arch_test_util.h"
#include "models/arch/image.h"
#include "models/arch/model.h"
#include "models/arch/weights.h"
#include "models/formats/safetensors_writer.h"
#include "test_util.h"

namespace attn {
namespace {

using test::golden;
using test::golden_dir;
using test::golden_ints;
using test::max_rel_error;

constexpr double kTol = 1e-4;

// Checks one output against its golden and prints the error (the report quotes these).
void expect_close(const std::string& model, const std::string& what, std::span<const float> got,
                  const models::NpyArray& want, double tol = kTol) {
  const double err = max_rel_error(got, want.to_f32());
  std::printf("[golden] %-6s %-18s max rel error %.3g\n", model.c_str(), what.c_str(), err);
  EXPECT_LE(err, tol) << model << " " << what;
}

void check_text_model(const std::string& name, int last_layer, bool rope) {
  auto model = models::load_model(golden_dir(name));
  models::ModelInput in;
  in.ids = golden_ints(name, "golden_ids");
  if (name == "bert") in.token_types = golden_ints(name, "golden_token_types");
  const std::string last = std::to_string(last_layer);
  models::Capture cap(models::HookSelection::parse(
      "blocks.0.attn.pattern,blocks." + last + ".attn.pattern,blocks.0.attn.q,blocks.0.attn.k"));
  models::ModelOutput out = model->forward(in, {.capture = &cap});
  ASSERT_EQ(out.n_tokens, int(in.ids.size()));
  expect_close(name, "logits", out.logits, golden(name, "golden_logits"));
  expect_close(name, "hidden", out.hidden_state, golden(name, "golden_hidden"));
  expect_close(name, "pattern 0", cap.layers[0].pattern, golden(name, "golden_pattern_0"));
  expect_close(name, "pattern " + last, cap.layers[size_t(last_layer)].pattern,
               golden(name, "golden_pattern_" + last));
  if (rope) {
    const Problem* p = cap.problem(0);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->n_heads, 4);
    EXPECT_EQ(p->n_kv_heads, 2);  // GQA kept in the captured problem
    expect_close(name, "q after rope", p->q, golden(name, "golden_q_0"));
    expect_close(name, "k after rope", p->k, golden(name, "golden_k_0"));
  }
}

TEST(ArchGolden, Gpt2) {
  check_text_model("gpt2", 1, false);
}
TEST(ArchGolden, LlamaGqaLlama3Rope) {
  check_text_model("llama", 1, true);
}
TEST(ArchGolden, Qwen2QkvBiasTied) {
  check_text_model("qwen2", 1, true);
}
TEST(ArchGolden, BertMaskedLm) {
  check_text_model("bert", 1, false);
}

void check_vision_model(const std::string& name, int last_layer) {
  auto model = models::load_model(golden_dir(name));
  ASSERT_TRUE(model->info().vision);
  EXPECT_EQ(model->info().n_classes, 5);
  // Preprocessing of a PNG of another size (Pillow resize + rescale + normalise in the golden).
  const models::ImagePreprocessor& pp = model->preprocessor();
  const models::Image img = pp(models::load_image(golden_dir(name) + "/image.png", pp.channels));
  expect_close(name, "pixels", img.data, golden(name, "golden_pixels"), 1e-5);
  const std::string last = std::to_string(last_layer);
  models::Capture cap(
      models::HookSelection::parse("blocks.0.attn.pattern,blocks." + last + ".attn.pattern"));
  models::ModelInput in;
  in.image = img;
  models::ModelOutput out = model->forward(in, {.capture = &cap});
  expect_close(name, "logits", out.logits, golden(name, "golden_logits"));
  expect_close(name, "hidden", out.hidden_state, golden(name, "golden_hidden"));
  expect_close(name, "pattern 0", cap.layers[0].pattern, golden(name, "golden_pattern_0"));
  expect_close(name, "pattern " + last, cap.layers[size_t(last_layer)].pattern,
               golden(name, "golden_pattern_" + last));
}

TEST(ArchGolden, Vit) {
  check_vision_model("vit", 1);
}
TEST(ArchGolden, DeitDistillationToken) {
  check_vision_model("deit", 0);
}

TEST(ArchGolden, VitOtherSizeInterpolatesPositions) {
  auto model = models::load_model(golden_dir("vit"));
  const models::NpyArray px = golden("vit", "golden_pixels_24");
  models::ModelInput in;
  in.image.channels = 3;
  in.image.height = in.image.width = 24;
  in.image.data = px.to_f32();
  models::ModelOutput out = model->forward(in);
  EXPECT_EQ(out.n_tokens, 1 + 36);
  expect_close("vit", "logits 24x24", out.logits, golden("vit", "golden_logits_24"));
  expect_close("vit", "hidden 24x24", out.hidden_state, golden("vit", "golden_hidden_24"));
}

// The same checkpoint stored as F16 / BF16: converted once at load, logits close to the f32 run.
void check_half(models::DType dtype, double tol) {
  const std::string dir = test::copy_model("gpt2");
  models::SafetensorsFile src(golden_dir("gpt2") + "/model.safetensors");
  std::vector<std::vector<uint16_t>> bits;
  std::vector<models::TensorToWrite> tensors;
  for (const std::string& name : src.names()) {
    const models::TensorView& t = src.tensor(name);
    std::vector<float> f = t.to_f32();
    bits.emplace_back();
    for (float v : f)
      bits.back().push_back(dtype == models::DType::F16 ? models::f32_to_f16(v)
                                                        : models::f32_to_bf16(v));
    tensors.push_back({name,
                       dtype,
                       t.shape,
                       {reinterpret_cast<const uint8_t*>(bits.back().data()), f.size() * 2}});
  }
  write_safetensors(dir + "/model.safetensors", tensors);
  models::WeightStore ws(dir);
  ws.get("transformer.wte.weight", src.tensor("transformer.wte.weight").shape);
  EXPECT_EQ(ws.converted_bytes(), src.tensor("transformer.wte.weight").numel() * sizeof(float));
  auto model = models::load_model(dir);
  models::ModelInput in;
  in.ids = golden_ints("gpt2", "golden_ids");
  models::ModelOutput out = model->forward(in);
  expect_close("gpt2", dtype == models::DType::F16 ? "logits f16" : "logits bf16", out.logits,
               golden("gpt2", "golden_logits"), tol);
}

TEST(ArchGolden, Float16Checkpoint) {
  check_half(models::DType::F16, 5e-3);
}
TEST(ArchGolden, BFloat16Checkpoint) {
  check_half(models::DType::BF16, 5e-2);
}

TEST(ArchGolden, F32WeightsAreUsedInPlace) {
  models::WeightStore ws(golden_dir("gpt2"));
  models::SafetensorsFile f(golden_dir("gpt2") + "/model.safetensors");
  const models::TensorView& t = f.tensor("transformer.wte.weight");
  ws.get("transformer.wte.weight", t.shape);
  EXPECT_EQ(ws.converted_bytes(), 0u);
}

}  // namespace
}  // namespace attn
