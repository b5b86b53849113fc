// Bad input to model loading and inputs: every case gives attn::Error naming the file, tensor or
// input at fault, never a crash.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "arch_test_util.h"
#include "models/arch/image.h"
#include "models/arch/model.h"
#include "models/arch/text_input.h"
#include "models/formats/safetensors.h"
#include "models/formats/safetensors_writer.h"
#include "test_util.h"

namespace attn {
namespace {

using test::copy_model;
using test::golden_dir;
namespace fs = std::filesystem;

// Rewrites dir/model.safetensors through `edit` (which may drop or reshape tensors).
void rewrite_checkpoint(const std::string& dir,
                        const std::function<void(std::vector<models::TensorToWrite>&)>& edit) {
  std::vector<uint8_t> bytes = test::read_bytes(dir + "/model.safetensors");
  const std::string copy = dir + "/orig.safetensors.bak";
  test::write_bytes(copy, bytes);
  models::SafetensorsFile f(copy);
  std::vector<models::TensorToWrite> tensors;
  for (const std::string& n : f.names()) {
    const models::TensorView& t = f.tensor(n);
    tensors.push_back({n, t.dtype, t.shape, {t.data, t.nbytes}});
  }
  edit(tensors);
  write_safetensors(dir + "/model.safetensors", tensors);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  edit(j);
  test::write_text(dir + "/config.json", j.dump());
}

TEST(ArchBadInput, TruncatedCheckpoint) {
  const std::string dir = copy_model("gpt2");
  std::vector<uint8_t> bytes = test::read_bytes(dir + "/model.safetensors");
  bytes.resize(bytes.size() / 2);
  test::write_bytes(dir + "/model.safetensors", bytes);
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Format, "model.safetensors");
}

TEST(ArchBadInput, HeaderBeyondFile) {
  const std::string dir = copy_model("llama");
  std::vector<uint8_t> bytes = test::read_bytes(dir + "/model.safetensors");
  const uint64_t len = bytes.size() + 100;
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(len >> (8 * i));
  test::write_bytes(dir + "/model.safetensors", bytes);
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Format, "model.safetensors",
                    "past the end");
}

TEST(ArchBadInput, ShapeMismatchWithConfig) {
  const std::string dir = copy_model("gpt2");
  edit_config(dir, [](nlohmann::json& j) { j["n_inner"] = 60; });
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Format, "transformer.h.0.mlp.c_fc.weight",
                    "[16, 64]", "[16, 60]");
  const std::string dir2 = copy_model("bert");
  rewrite_checkpoint(dir2, [](std::vector<models::TensorToWrite>& t) {
    for (auto& x : t) {
      if (x.name == "bert.encoder.layer.1.attention.self.key.weight") x.shape = {8, 32};
    }
  });
  EXPECT_ATTN_ERROR(models::load_model(dir2), ErrorCode::Format,
                    "bert.encoder.layer.1.attention.self.key.weight", "[8, 32]", "[16, 16]");
}

TEST(ArchBadInput, MissingTensor) {
  const std::string dir = copy_model("gpt2");
  rewrite_checkpoint(dir, [](std::vector<models::TensorToWrite>& t) {
    std::erase_if(
        t, [](const models::TensorToWrite& x) { return x.name == "transformer.h.1.ln_2.bias"; });
  });
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Format, "missing tensor", "h.1.ln_2.bias");
  const std::string dir2 = copy_model("llama");  // untied lm_head must be stored
  rewrite_checkpoint(dir2, [](std::vector<models::TensorToWrite>& t) {
    std::erase_if(t, [](const models::TensorToWrite& x) { return x.name == "lm_head.weight"; });
  });
  EXPECT_ATTN_ERROR(models::load_model(dir2), ErrorCode::Format, "missing tensor",
                    "lm_head.weight");
}

TEST(ArchBadInput, FolderProblems) {
  EXPECT_ATTN_ERROR(models::load_model("/nonexistent/model"), ErrorCode::Io, "/nonexistent/model");
  const std::string empty = test::scratch_dir().string();
  EXPECT_ATTN_ERROR(models::load_model(empty), ErrorCode::Io, "no config.json");
  const std::string dir = copy_model("gpt2");
  fs::rename(dir + "/model.safetensors", dir + "/pytorch_model.bin");
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Io, "pytorch_model.bin", "safetensors");
}

TEST(ArchBadInput, UnsupportedArchitectureNamesIt) {
  const std::string dir = copy_model("gpt2");
  edit_config(dir, [](nlohmann::json& j) {
    j["model_type"] = "mamba";
    j["architectures"] = {"MambaForCausalLM"};
  });
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Unsupported, "mamba", "MambaForCausalLM",
                    "gpt2, llama");
  const std::string dir2 = copy_model("llama");
  edit_config(dir2, [](nlohmann::json& j) {
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  });
  EXPECT_ATTN_ERROR(models::load_model(dir2), ErrorCode::Unsupported, "yarn");
  const std::string dir3 = copy_model("gpt2");
  edit_config(dir3, [](nlohmann::json& j) { j["activation_function"] = "swiglu_x"; });
  EXPECT_ATTN_ERROR(models::load_model(dir3), ErrorCode::Unsupported, "swiglu_x");
}

TEST(ArchBadInput, EmptyTextAndNonUtf8) {
  auto model = models::load_model(golden_dir("gpt2"));
  EXPECT_ATTN_ERROR(models::encode_for_model(*model, "", "--text"), ErrorCode::InvalidArgument,
                    "--text", "empty");
  EXPECT_ATTN_ERROR(models::encode_for_model(*model, "ok \xC3\x28 bad", "notes.txt"),
                    ErrorCode::InvalidArgument, "notes.txt", "UTF-8");
  EXPECT_ATTN_ERROR(models::ids_for_model(*model, {}), ErrorCode::InvalidArgument, "no token ids");
  EXPECT_ATTN_ERROR(models::ids_for_model(*model, {3, -1}), ErrorCode::InvalidArgument,
                    "position 1");
  models::ModelInput in;
  EXPECT_ATTN_ERROR(model->forward(in), ErrorCode::InvalidArgument, "no input tokens");
  auto llama = models::load_model(golden_dir("llama"));  // no tokenizer files
  EXPECT_ATTN_ERROR(models::encode_for_model(*llama, "hi"), ErrorCode::InvalidArgument,
                    "no tokenizer");
}

TEST(ArchBadInput, TextLongerThanContextIsTruncatedWithNotice) {
  auto model = models::load_model(golden_dir("gpt2"));  // n_positions = 32
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat ";
  const models::TextInput in = models::encode_for_model(*model, text);
  EXPECT_TRUE(in.truncated);
  EXPECT_EQ(in.ids.size(), 32u);
  EXPECT_EQ(in.labels.size(), 32u);
  EXPECT_NE(in.notice.find("only the first 32"), std::string::npos) << in.notice;
  models::ModelInput mi;
  mi.ids = in.ids;
  EXPECT_EQ(model->forward(mi).n_tokens, 32);
  // Feeding too many ids to forward() itself is an error, not a silent cut.
  mi.ids.push_back(1);
  EXPECT_ATTN_ERROR(model->forward(mi), ErrorCode::InvalidArgument, "33 tokens", "32");
}

TEST(ArchBadInput, Images) {
  const auto dir = test::scratch_dir();
  test::write_text(dir / "not.png", "this is text, not pixels");
  EXPECT_ATTN_ERROR(models::load_image((dir / "not.png").string()), ErrorCode::Format, "not.png",
                    "not an image");
  test::write_text(dir / "zero.pgm", "P5\n0 0\n255\n");
  EXPECT_ATTN_ERROR(models::load_image((dir / "zero.pgm").string()), ErrorCode::Format, "zero.pgm");
  test::write_text(dir / "huge.pgm", "P5\n20000 20000\n255\n");  // header only: never decoded
  EXPECT_ATTN_ERROR(models::load_image((dir / "huge.pgm").string()), ErrorCode::Format, "huge.pgm",
                    "20000x20000");
  std::vector<uint8_t> png = test::read_bytes(golden_dir("vit") + "/image.png");
  png.resize(png.size() / 2);  // pixels cut off
  test::write_bytes(dir / "cut.png", png);
  EXPECT_ATTN_ERROR(models::load_image((dir / "cut.png").string()), ErrorCode::Format, "cut.png");
  test::write_bytes(dir / "empty.png", {});
  EXPECT_ATTN_ERROR(models::load_image((dir / "empty.png").string()), ErrorCode::Format,
                    "empty.png");
  EXPECT_ATTN_ERROR(models::load_image((dir / "missing.png").string()), ErrorCode::Io,
                    "missing.png");
  // A header number past int (stb would overflow reading it), in a comment-separated header.
  test::write_text(dir / "long.pgm", "P5 5 3 # size\n2577777777777\n\x10\x80");
  EXPECT_ATTN_ERROR(models::load_image((dir / "long.pgm").string()), ErrorCode::Format, "long.pgm",
                    "header number is too large");
  test::write_text(dir / "at_int_max.pgm", "P5 2 1 2147483648\n\x10\x80");
  EXPECT_ATTN_ERROR(models::load_image((dir / "at_int_max.pgm").string()), ErrorCode::Format,
                    "header number is too large");
  // A valid tiny image decodes.
  test::write_text(dir / "ok.pgm", "P5\n2 1\n255\n\x10\x80");
  const models::Image8 ok = models::load_image((dir / "ok.pgm").string(), 3);
  EXPECT_EQ(ok.width, 2);
  EXPECT_EQ(ok.data, (std::vector<uint8_t>{16, 16, 16, 128, 128, 128}));
}

TEST(ArchBadInput, VisionInputs) {
  auto model = models::load_model(golden_dir("vit"));
  models::ModelInput in;
  EXPECT_ATTN_ERROR(model->forward(in), ErrorCode::InvalidArgument, "vision model");
  in.image = {1, 16, 16, std::vector<float>(256, 0.0f)};
  EXPECT_ATTN_ERROR(model->forward(in), ErrorCode::InvalidArgument, "1 channels");
  in.image = {3, 3, 3, std::vector<float>(27, 0.0f)};
  EXPECT_ATTN_ERROR(model->forward(in), ErrorCode::InvalidArgument, "smaller than one");
  models::Image8 gray{8, 8, 1, std::vector<uint8_t>(64, 7)};
  EXPECT_ATTN_ERROR(model->preprocessor()(gray), ErrorCode::InvalidArgument, "1 channels");
  const std::string dir = copy_model("vit");
  test::write_text(dir + "/preprocessor_config.json", R"({"image_mean": [0.5, 0.5]})");
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Format, "preprocessor_config.json",
                    "image_mean");
  test::write_text(dir + "/preprocessor_config.json", R"({"resample": 5})");
  EXPECT_ATTN_ERROR(models::load_model(dir), ErrorCode::Unsupported, "resample 5");
}

TEST(ArchBadInput, HookSelectionBeyondTheModel) {
  auto model = models::load_model(golden_dir("gpt2"));
  models::ModelInput in;
  in.ids = {1, 2, 3};
  models::Capture cap(models::HookSelection::parse("blocks.7.attn.pattern"));
  EXPECT_ATTN_ERROR(model->forward(in, {.capture = &cap}), ErrorCode::InvalidArgument,
                    "blocks.7.attn.pattern", "2 layers");
}

}  // namespace
}  // namespace attn
