// A model folder's config.json as each architecture interprets it (load_model), with the real
// weights of the small reference models in tests/ref/goldens: the model_type picks the folder
// (gpt2, llama, qwen2, bert, vit, deit; anything else goes to gpt2's). Input: config.json,
// optionally followed by a NUL byte and the folder's preprocessor_config.json (vision models).
// A model that loads then runs a short forward pass, and a decode step when it is causal.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/arch/model.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;
namespace fs = std::filesystem;

namespace {

const char* kFolders[] = {"gpt2", "llama", "qwen2", "bert", "vit", "deit"};

std::string folder(const std::string& name) {
  return fuzz::scratch_dir() + "/" + name;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The weights, tokenizer and preprocessor files of each reference model; not its config or
  // golden outputs.
  for (const char* name : kFolders) {
    const fs::path from = fs::path(fuzz::source_dir()) / "tests/ref/goldens" / name;
    fs::create_directories(folder(name));
    for (const auto& e : fs::directory_iterator(from)) {
      const std::string f = e.path().filename().string();
      if (f == "config.json" || f.starts_with("golden_") || f.ends_with(".png")) continue;
      fs::copy_file(e.path(), folder(name) + "/" + f, fs::copy_options::overwrite_existing);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all = fuzz::as_text(data, size);
  const size_t nul = all.find('\0');
  const std::string_view config = all.substr(0, nul);

  std::string name = "gpt2";
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("model_type") && j["model_type"].is_string()) {
    const std::string t = j["model_type"].get<std::string>();
    for (const char* f : kFolders)
      if (t == f) name = f;
  }
  const std::string dir = folder(name);
  fuzz::write_scratch(name + "/config.json", config);
  const bool vision = name == "vit" || name == "deit";
  if (vision) {
    static const std::string vit_pre =
        read_file(fs::path(fuzz::source_dir()) / "tests/ref/goldens/vit/preprocessor_config.json");
    static const std::string deit_pre =
        read_file(fs::path(fuzz::source_dir()) / "tests/ref/goldens/deit/preprocessor_config.json");
    const std::string_view own = name == "vit" ? vit_pre : deit_pre;
    fuzz::write_scratch(name + "/preprocessor_config.json",
                        nul == std::string_view::npos ? own : all.substr(nul + 1));
  }

  fuzz::refuse_only_with_attn_error([&] {
    const std::unique_ptr<models::Model> model = models::load_model(dir);
    const models::ModelInfo& info = model->info();
    models::ForwardOptions opt;
    opt.threads = 1;
    models::ModelInput in;
    if (info.vision) {
      models::Image8 img;
      img.height = 19;
      img.width = 23;
      img.channels = model->preprocessor().channels;
      img.data.resize(size_t(img.height) * img.width * img.channels);
      for (size_t i = 0; i < img.data.size(); ++i) img.data[i] = uint8_t(i * 7);
      in.image = model->preprocessor()(img);
      (void)model->forward(in, opt);
      return;
    }
    const int64_t vocab = model->config().vocab_size;
    for (int i = 0; i < 5; ++i) in.ids.push_back(vocab > 0 ? int32_t((i * 3 + 1) % vocab) : i);
    (void)model->forward(in, opt);
    if (info.causal) {
      models::KvCache cache;
      (void)model->decode(in.ids, cache, opt);
      (void)model->decode({in.ids[0]}, cache, opt);
    }
  });
  return 0;
}
