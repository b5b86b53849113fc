// WordPiece (BERT) from a vocab.txt written by the test, with hand-checked ids and spans, and
// the equivalent tokenizer.json giving the same result.
#include "compute/error.h"
#include "models/tokenizers/bert_vocab.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/tokenizer_json.h"
#include "test_util.h"
#include "tokenizer_checks.h"

namespace attn {
namespace {

using test::ids_of;

// Line number = id.
const char* kVocab[] = {"[PAD]", "[UNK]",   "[CLS]", "[SEP]",  "[MASK]", "the",   "quick", "brown",
                        "fox",   "un",      "##aff", "##able", ",",      ".",     "!",     "hello",
                        "world", "##world", "jump",  "##ed",   "##ing",  "中",    "文",    "cafe",
                        "a",     "##a",     "'",     "s",      "Hello",  "naive", "##s"};

std::filesystem::path write_vocab(const std::filesystem::path& dir) {
  std::string text;
  for (const char* t : kVocab) text += std::string(t) + "\n";
  test::write_text(dir / "vocab.txt", text);
  return dir / "vocab.txt";
}

struct Expect {
  int32_t id;
  size_t begin, end;
};
void expect_tokens(const std::vector<models::Token>& got, const std::vector<Expect>& want,
                   const std::string& text) {
  ASSERT_EQ(got.size(), want.size()) << text << ": " << ::testing::PrintToString(ids_of(got));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << text << " token " << i;
    EXPECT_EQ(got[i].begin, want[i].begin) << text << " token " << i;
    EXPECT_EQ(got[i].end, want[i].end) << text << " token " << i;
  }
}

class WordPiece : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir();
    tok_ = models::load_bert_vocab(write_vocab(dir_).string());
  }
  std::filesystem::path dir_;
  std::unique_ptr<models::PipelineTokenizer> tok_;
};

TEST_F(WordPiece, LowerCasePunctuationAndSpecialWrapping) {
  EXPECT_EQ(tok_->kind(), "wordpiece");
  EXPECT_EQ(tok_->vocab_size(), std::size(kVocab));
  EXPECT_EQ(tok_->special_tokens().cls, 2);
  EXPECT_EQ(tok_->special_tokens().sep, 3);
  EXPECT_EQ(tok_->special_tokens().unk, 1);
  const std::string text = "Hello, World!";
  auto t = tok_->encode(text);
  expect_tokens(t, {{2, 0, 0}, {15, 0, 5}, {12, 5, 6}, {16, 7, 12}, {14, 12, 13}, {3, 13, 13}},
                text);
  EXPECT_EQ(t[1].piece, "hello");
  EXPECT_TRUE(t[0].special);
  EXPECT_EQ(tok_->decode(ids_of(t)), "hello, world!");
  EXPECT_EQ(tok_->decode(ids_of(t), false), "[CLS] hello, world! [SEP]");
}

TEST_F(WordPiece, SubwordsWithContinuationPrefix) {
  const models::EncodeOptions plain{.add_special_tokens = false};
  expect_tokens(tok_->encode("unaffable", plain), {{9, 0, 2}, {10, 2, 5}, {11, 5, 9}}, "unaffable");
  EXPECT_EQ(tok_->encode_ids("The quick brown fox jumped", plain),
            (std::vector<int32_t>{5, 6, 7, 8, 18, 19}));
  EXPECT_EQ(tok_->encode_ids("jumping naive's", plain), (std::vector<int32_t>{18, 20, 29, 26, 27}));
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{9, 10, 11, 18, 20}), "unaffable jumping");
}

TEST_F(WordPiece, AccentsCjkControlAndWhitespace) {
  const models::EncodeOptions plain{.add_special_tokens = false};
  expect_tokens(tok_->encode("Café", plain), {{23, 0, 5}}, "Café");  // é is 2 bytes
  expect_tokens(tok_->encode("Naïve", plain), {{29, 0, 6}}, "Naïve");
  expect_tokens(tok_->encode("中文", plain), {{21, 0, 3}, {22, 3, 6}}, "中文");
  // U+200B (a format character) is removed, joining the two words.
  expect_tokens(tok_->encode("hello\u200bworld", plain), {{15, 0, 5}, {17, 8, 13}}, "zwsp");
  expect_tokens(tok_->encode("  hello\t\n world  ", plain), {{15, 2, 7}, {16, 10, 15}}, "ws");
  EXPECT_TRUE(tok_->encode(" \t\n ", plain).empty());
}

TEST_F(WordPiece, UnknownWordsAndTheLengthLimit) {
  const models::EncodeOptions plain{.add_special_tokens = false};
  expect_tokens(tok_->encode("xyz hello", plain), {{1, 0, 3}, {15, 4, 9}}, "xyz");
  // "helloq": "hello" matches but "##q" does not, so the whole word is unknown.
  expect_tokens(tok_->encode("helloq", plain), {{1, 0, 6}}, "helloq");
  const std::string a100(100, 'a'), a101(101, 'a');
  auto t = tok_->encode(a100, plain);
  ASSERT_EQ(t.size(), 100u);
  EXPECT_EQ(t[0].id, 24);
  EXPECT_EQ(t[99].id, 25);
  EXPECT_EQ(t[99].begin, 99u);
  expect_tokens(tok_->encode(a101, plain), {{1, 0, 101}}, "a x 101");
}

TEST_F(WordPiece, SpecialTokensInText) {
  expect_tokens(tok_->encode("hello [MASK] world", {.add_special_tokens = false}),
                {{15, 0, 5}, {4, 6, 12}, {16, 13, 18}}, "mask");
  // Lower-casing must not reach the special token, and "[mask]" is ordinary text.
  EXPECT_EQ(tok_->encode_ids("[mask]", {.add_special_tokens = false}),
            (std::vector<int32_t>{1, 1, 1}));  // "[", "mask", "]" are not in the vocabulary
}

TEST_F(WordPiece, CasedVocabularyFromTokenizerConfig) {
  test::write_text(dir_ / "tokenizer_config.json", R"({"do_lower_case": false})");
  auto cased = models::load_tokenizer(dir_.string());
  EXPECT_EQ(cased->kind(), "wordpiece");
  EXPECT_EQ(cased->encode_ids("Hello hello Café", {.add_special_tokens = false}),
            (std::vector<int32_t>{28, 15, 1}));
}

TEST_F(WordPiece, TokenizerJsonGivesTheSameTokens) {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < std::size(kVocab); ++i) vocab[kVocab[i]] = i;
  nlohmann::json added = nlohmann::json::array();
  for (int i : {0, 1, 2, 3, 4}) {
    added.push_back({{"id", i}, {"content", kVocab[i]}, {"special", true}, {"normalized", false}});
  }
  const nlohmann::json j = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab}}}};
  auto from_json = models::tokenizer_from_json(j, "tokenizer.json");
  std::mt19937 rng(2);
  std::vector<std::string> texts = {"Hello, World!",       "unaffable jumped",
                                    "Café 中文 naïve's",   "hello [MASK] world",
                                    std::string(101, 'a'), "xyz\u200bq"};
  for (int i = 0; i < 50; ++i) texts.push_back(test::random_text(rng, 1 + rng() % 40));
  for (const auto& text : texts) {
    auto a = tok_->encode(text), b = from_json->encode(text);
    ASSERT_EQ(ids_of(a), ids_of(b)) << text;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].begin, b[i].begin) << text;
      EXPECT_EQ(a[i].end, b[i].end) << text;
    }
  }
  EXPECT_EQ(from_json->special_tokens().cls, 2);
  EXPECT_EQ(from_json->decode(from_json->encode_ids("Hello, World!")), "hello, world!");
}

TEST_F(WordPiece, BadFiles) {
  test::write_text(dir_ / "vocab.txt", "[PAD]\nhello\n");
  EXPECT_ATTN_ERROR(models::load_bert_vocab((dir_ / "vocab.txt").string()), ErrorCode::Format,
                    "vocab.txt", "[UNK]");
  EXPECT_ATTN_ERROR(models::load_bert_vocab((dir_ / "absent.txt").string()), ErrorCode::Io,
                    "absent.txt");
  EXPECT_ATTN_ERROR(tok_->encode("caf\xe9"), ErrorCode::InvalidArgument, "UTF-8", "byte 3");
}

}  // namespace
}  // namespace attn
