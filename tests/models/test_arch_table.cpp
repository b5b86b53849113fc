// The architecture table (models/arch/architectures.h): every model_type in it parses and loads
// its tiny random checkpoint (tests/ref/goldens/<model_type>) and reproduces the reference
// logits; a type outside it is refused alike, with the same message, by the config parser and
// the loader; models/arch/README.md lists exactly the table.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "arch_test_util.h"
#include "models/arch/architectures.h"
#include "models/arch/image.h"
#include "models/arch/model.h"
#include "models/formats/hf_config.h"
#include "test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

TEST(ArchTable, EveryModelTypeParsesLoadsAndRunsItsCheckpoint) {
  std::set<std::string> types;
  for (const models::Architecture& a : models::architectures()) {
    ASSERT_NE(a.make, nullptr) << a.name;
    ASSERT_FALSE(a.model_types.empty()) << a.name;
    for (const std::string& t : a.model_types) {
      SCOPED_TRACE(t);
      EXPECT_TRUE(types.insert(t).second) << "listed twice";
      EXPECT_EQ(models::find_architecture(t), &a);
      const std::string dir = test::golden_dir(t);
      EXPECT_EQ(models::load_hf_config(dir).model_type, t);
      const std::unique_ptr<models::Model> model = models::load_model(dir);
      EXPECT_EQ(model->info().model_type, t);
      EXPECT_EQ(model->info().family, a.family);
      models::ModelInput in;
      if (model->info().vision) {
        const models::ImagePreprocessor& pp = model->preprocessor();
        in.image = pp(models::load_image(dir + "/image.png", pp.channels));
      } else {
        in.ids = test::golden_ints(t, "golden_ids");
        if (fs::exists(dir + "/golden_token_types.npy"))
          in.token_types = test::golden_ints(t, "golden_token_types");
      }
      const models::ModelOutput out = model->forward(in);
      EXPECT_LE(test::max_rel_error(out.logits, test::golden(t, "golden_logits").to_f32()), 1e-4);
    }
  }
  // Every reference checkpoint is a table entry's (a type dropped from the table shows here).
  for (const auto& e : fs::directory_iterator(test::golden_dir(""))) {
    if (!fs::exists(e.path() / "config.json")) continue;
    const std::string t = nlohmann::json::parse(std::ifstream(e.path() / "config.json"))
                              .value("model_type", std::string());
    if (e.path().filename() == t) {
      EXPECT_TRUE(types.count(t)) << t;
    }
  }
  EXPECT_EQ(models::find_architecture("mistral"), nullptr);
}

// Types the parser used to read but no architecture loads (and one never read) are refused by
// the parser and the loader with one message: the type, the checkpoint's class, the table.
TEST(ArchTable, TypesOutsideTheTableAreRefusedByParserAndLoaderAlike) {
  for (const std::string type : {"mistral", "gemma", "phi3", "dinov2", "mamba"}) {
    SCOPED_TRACE(type);
    const std::string dir = test::copy_model("llama");  // a fresh copy each time
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
    j["model_type"] = type;
    j["architectures"] = {"TheirForCausalLM"};
    test::write_text(dir + "/config.json", j.dump());
    std::string from_parser, from_loader;
    try {
      models::load_hf_config(dir);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      from_parser = e.what();
    }
    try {
      models::load_model(dir);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      from_loader = e.what();
    }
    EXPECT_EQ(from_parser, from_loader);
    EXPECT_NE(from_loader.find("model_type '" + type + "' (architectures: TheirForCausalLM)"),
              std::string::npos)
        << from_loader;
    EXPECT_NE(from_loader.find("supported model types: gpt2, llama, qwen2, bert, vit, deit"),
              std::string::npos)
        << from_loader;
  }
}

// models/arch/README.md's table of files: its model_type column (the types before " (") is the
// architecture table's, in order.
TEST(ArchTable, ArchReadmeListsTheTable) {
  std::ifstream in(std::string(ATTN_TEST_SOURCE_DIR) + "/../../models/arch/README.md");
  ASSERT_TRUE(in);
  std::vector<std::string> listed, want;
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| file | model_type |", 0) == 0) table = true;
    if (!table || line.rfind("| `", 0) != 0) {
      if (table && line.empty()) break;
      continue;
    }
    const size_t a = line.find('|', 1) + 1, b = line.find('|', a);
    std::string types = line.substr(a, b - a);
    types = types.substr(0, types.find(" ("));
    std::stringstream ss(types);
    for (std::string t; std::getline(ss, t, ',');) {
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
      listed.push_back(t);
    }
  }
  for (const models::Architecture& a : models::architectures())
    for (const std::string& t : a.model_types) want.push_back(t);
  EXPECT_EQ(listed, want);
}

}  // namespace
}  // namespace attn
