// SentencePiece: tiny BPE (with byte fallback) and unigram models trained at test time by
// Debian's python3-sentencepiece, whose encode gives the reference ids.
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/error.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "test_util.h"
#include "tokenizer_checks.h"

namespace attn {
namespace {

using test::ids_of;

std::string script() {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/sentencepiece_ref.py";
}

class SentencePiece : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::python_has("sentencepiece")) {
      GTEST_SKIP() << "/usr/bin/python3 cannot import sentencepiece (Debian: "
                      "python3-sentencepiece); no model to test with";
    }
    dir_ = test::scratch_dir();
    ASSERT_EQ(test::run_command("/usr/bin/python3 " + script() + " train " + dir_.string()), 0);
  }

  std::vector<std::vector<int32_t>> python_ids(const std::string& model,
                                               const std::vector<std::string>& texts) {
    test::write_text(dir_ / "in.json", nlohmann::json(texts).dump());
    EXPECT_EQ(
        test::run_command("/usr/bin/python3 " + script() + " encode " + (dir_ / model).string() +
                          " " + (dir_ / "in.json").string() + " " + (dir_ / "out.json").string()),
        0);
    std::ifstream in(dir_ / "out.json");
    return nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
  }

  std::vector<std::string> texts() {
    std::mt19937 rng(17);
    std::vector<std::string> t = {"The people of the world were there.",
                                  "Café naïve über straße 東京 привет 2024",
                                  "  leading,   inner   and trailing  spaces ",
                                  "emoji 👋🌍 and unseen glyphs ☃ ∑", "<s> is text to the library"};
    for (int i = 0; i < 100; ++i) t.push_back(test::random_text(rng, 1 + rng() % 50));
    return t;
  }

  std::filesystem::path dir_;
};

void expect_ordered_spans(const std::vector<models::Token>& tokens, const std::string& text) {
  size_t pos = 0;
  for (const models::Token& t : tokens) {
    EXPECT_LE(pos, t.begin) << text;
    EXPECT_LE(t.begin, t.end) << text;
    EXPECT_LE(t.end, text.size()) << text;
    pos = t.end;
  }
}

TEST_F(SentencePiece, IdsMatchPythonForBpeAndUnigram) {
  const auto inputs = texts();
  for (const char* model : {"bpe.model", "unigram.model"}) {
    models::SentencePieceTokenizer tok((dir_ / model).string());
    EXPECT_EQ(tok.kind(), "sentencepiece");
    const auto want = python_ids(model, inputs);
    ASSERT_EQ(want.size(), inputs.size());
    int mismatches = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto t = tok.encode(inputs[i], {.add_special_tokens = false, .parse_special = false});
      if (ids_of(t) != want[i] && ++mismatches <= 5) {
        ADD_FAILURE() << model << " '" << inputs[i] << "': " << ::testing::PrintToString(ids_of(t))
                      << " vs Python " << ::testing::PrintToString(want[i]);
      }
      expect_ordered_spans(t, inputs[i]);
    }
    EXPECT_EQ(mismatches, 0) << model;
  }
}

TEST_F(SentencePiece, SpansPointAtTheWords) {
  models::SentencePieceTokenizer tok((dir_ / "bpe.model").string());
  const std::string text = "The people of the world";
  auto t = tok.encode(text, {.add_special_tokens = false});
  ASSERT_FALSE(t.empty());
  // Pieces tile the text (the space before a word belongs to the word's piece).
  size_t pos = 0;
  std::string surfaces;
  for (const models::Token& k : t) {
    EXPECT_EQ(k.begin, pos) << k.piece;
    surfaces += text.substr(k.begin, k.end - k.begin);
    pos = k.end;
  }
  EXPECT_EQ(surfaces, text);
  // A character outside the vocabulary falls back to byte pieces that share its bytes.
  auto e = tok.encode("☃", {.add_special_tokens = false});
  std::vector<std::string> pieces;
  for (const models::Token& k : e) pieces.push_back(k.piece);
  EXPECT_NE(std::find(pieces.begin(), pieces.end(), "<0xE2>"), pieces.end())
      << ::testing::PrintToString(pieces);
  for (const models::Token& k : e) EXPECT_LE(k.end, 3u);
}

TEST_F(SentencePiece, BosAndSpecialTokensAndRoundTrip) {
  models::SentencePieceTokenizer tok((dir_ / "unigram.model").string());
  ASSERT_TRUE(tok.special_tokens().bos.has_value());
  const int32_t bos = *tok.special_tokens().bos;
  auto t = tok.encode("the world");
  ASSERT_GE(t.size(), 2u);
  EXPECT_EQ(t[0].id, bos);
  EXPECT_TRUE(t[0].special);
  EXPECT_EQ(t[0].end, 0u);
  auto s = tok.encode("a <s> b", {.add_special_tokens = false});
  bool found = false;
  for (const models::Token& k : s) {
    if (k.id == bos) {
      found = true;
      EXPECT_EQ(k.begin, 2u);
      EXPECT_EQ(k.end, 5u);
    }
  }
  EXPECT_TRUE(found);
  for (const std::string text : {"The people of the world were there.", "Café naïve 東京 2024"}) {
    EXPECT_EQ(tok.decode(tok.encode_ids(text)), text);
  }
  EXPECT_EQ(tok.decode(std::vector<int32_t>{bos}, false), "<s>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{bos}), "");
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_ATTN_ERROR(tok.encode("\x80"), ErrorCode::InvalidArgument, "UTF-8");
  EXPECT_ATTN_ERROR(tok.decode(std::vector<int32_t>{int32_t(tok.vocab_size())}),
                    ErrorCode::InvalidArgument, "outside the vocabulary");
}

TEST_F(SentencePiece, FactoryPicksTokenizerModelAndReadsConfig) {
  auto folder = dir_ / "model";
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(dir_ / "bpe.model", folder / "tokenizer.model");
  auto tok = models::load_tokenizer(folder.string());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->encode("hi")[0].id, *tok->special_tokens().bos);
  test::write_text(folder / "tokenizer_config.json", R"({"add_bos_token": false})");
  tok = models::load_tokenizer(folder.string());
  EXPECT_NE(tok->encode("hi")[0].id, *tok->special_tokens().bos);
  // A tokenizer.json this library cannot run (Unigram) falls back to tokenizer.model.
  test::write_text(folder / "tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_EQ(models::load_tokenizer(folder.string())->kind(), "sentencepiece");
}

TEST(SentencePieceFiles, BadModelFile) {
  auto dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.model", "not a protobuf");
  EXPECT_ATTN_ERROR(models::SentencePieceTokenizer((dir / "tokenizer.model").string()),
                    ErrorCode::Format, "tokenizer.model", "not a SentencePiece model");
  EXPECT_ATTN_ERROR(models::SentencePieceTokenizer((dir / "absent.model").string()), ErrorCode::Io,
                    "absent.model");
}

}  // namespace
}  // namespace attn
