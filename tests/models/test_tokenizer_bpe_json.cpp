// BPE tokenizer.json pipelines on small vocabularies written by the test, with hand-checked ids
// and spans: Llama 3 style regex Split + ByteLevel, Qwen2 style NFC, SmolLM style Digits,
// Llama 2 style Metaspace with byte fallback.
#include "compute/error.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/tokenizer_json.h"
#include "test_util.h"
#include "tokenizer_checks.h"

namespace attn {
namespace {

using nlohmann::json;
using test::ids_of;

// GPT-2's byte alphabet, written out here independently of the library.
std::string byte_char(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
    int n = 0;
    for (int k = 0; k < b; ++k) {
      if (!((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174)) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  models::utf8_append(s, char32_t(cp));
  return s;
}

const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Bytes 0..255 have ids 0..255; merges make ids 256..267; "Ġhello" is 268 (no merge makes it).
json byte_level_bpe(bool ignore_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},   {"l", "l"},    {"he", "ll"},   {"hell", "o"}, {"Ġ", "w"},  {"o", "r"},
      {"Ġw", "or"}, {"Ġwor", "l"}, {"Ġworl", "d"}, {"1", "2"},    {"12", "3"}, {"'", "s"}};
  json merge_list = json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  vocab["Ġhello"] = 268;
  return {{"type", "BPE"},     {"dropout", nullptr},     {"unk_token", nullptr},
          {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", ignore_merges},
          {"vocab", vocab},    {"merges", merge_list}};
}

json llama3_style(bool ignore_merges) {
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|begin_of_text|>"}, {"special", true}},
        {{"id", 301}, {"content", "<|eot_id|>"}, {"special", true}},
        {{"id", 302}, {"content", "<tool>"}, {"special", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", kLlama3Split}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{"<|begin_of_text|>",
           {{"id", "<|begin_of_text|>"}, {"ids", {300}}, {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", byte_level_bpe(ignore_merges)}};
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

TEST(BpeTokenizerJson, RegexSplitByteLevelHandChecked) {
  auto tok = models::tokenizer_from_json(llama3_style(true), "tokenizer.json");
  EXPECT_EQ(tok->vocab_size(), 303u);
  EXPECT_EQ(tok->special_tokens().bos, 300);
  // Split: "hello" " world" " " "123" "4" "!"; the BOS comes from the template.
  expect_tokens(tok->encode("hello world 1234!"),
                {{300, 0, 0},
                 {259, 0, 5},
                 {264, 5, 11},
                 {32, 11, 12},
                 {266, 12, 15},
                 {52, 15, 16},
                 {33, 16, 17}},
                "hello world 1234!");
  EXPECT_EQ(tok->encode("hello world 1234!")[2].piece, "Ġworld");
  EXPECT_EQ(tok->encode_ids("hello", {.add_special_tokens = false}), std::vector<int32_t>{259});
  // Case-insensitive contractions: "'S" is split off but only "'s" has a merge.
  EXPECT_EQ(tok->encode_ids("IT'S", {.add_special_tokens = false}),
            (std::vector<int32_t>{73, 84, 39, 83}));
  EXPECT_EQ(tok->encode_ids("it's", {.add_special_tokens = false}),
            (std::vector<int32_t>{105, 116, 267}));
  // A two-byte character stays two byte tokens with one byte each.
  expect_tokens(tok->encode("héllo", {.add_special_tokens = false}),
                {{104, 0, 1}, {195, 1, 2}, {169, 2, 3}, {257, 3, 5}, {111, 5, 6}}, "héllo");
}

TEST(BpeTokenizerJson, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  auto with = models::tokenizer_from_json(llama3_style(true), "tokenizer.json");
  auto without = models::tokenizer_from_json(llama3_style(false), "tokenizer.json");
  EXPECT_EQ(with->encode_ids(" hello", {.add_special_tokens = false}), std::vector<int32_t>{268});
  EXPECT_EQ(without->encode_ids(" hello", {.add_special_tokens = false}),
            (std::vector<int32_t>{32, 259}));
}

TEST(BpeTokenizerJson, AddedTokensBeforePreTokenization) {
  auto tok = models::tokenizer_from_json(llama3_style(true), "tokenizer.json");
  const std::string text = "<|eot_id|>hello<tool>";
  auto t = tok->encode(text, {.add_special_tokens = false});
  expect_tokens(t, {{301, 0, 10}, {259, 10, 15}, {302, 15, 21}}, text);
  EXPECT_TRUE(t[0].special);
  EXPECT_FALSE(t[2].special);  // an added token that is not special
  // Without special-token parsing, <|eot_id|> is text but the non-special <tool> still matches.
  auto plain = tok->encode(text, {.add_special_tokens = false, .parse_special = false});
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(plain.front().id, '<');
  EXPECT_EQ(plain.back().id, 302);
  test::expect_byte_level_spans(plain, text);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{300, 259, 264, 301}), "hello world");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{300, 259, 264, 301}, false),
            "<|begin_of_text|>hello world<|eot_id|>");
}

TEST(BpeTokenizerJson, NfcNormalizerKeepsSpansOnTheInput) {
  json j = llama3_style(true);
  j["normalizer"] = {{"type", "NFC"}};
  auto tok = models::tokenizer_from_json(j, "tokenizer.json");
  // "e" + combining acute (3 bytes) becomes "é" (C3 A9): both byte tokens span the 3 input bytes.
  const std::string text = "e\u0301";
  expect_tokens(tok->encode(text, {.add_special_tokens = false}), {{195, 0, 3}, {169, 0, 3}}, text);
  EXPECT_EQ(tok->decode(tok->encode_ids(text)), "\u00e9");
}

TEST(BpeTokenizerJson, DigitsThenByteLevelRegex) {
  json j = llama3_style(true);
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  auto tok = models::tokenizer_from_json(j, "tokenizer.json");
  expect_tokens(tok->encode("hello 123", {.add_special_tokens = false}),
                {{259, 0, 5}, {32, 5, 6}, {49, 6, 7}, {50, 7, 8}, {51, 8, 9}}, "hello 123");
}

TEST(BpeTokenizerJson, ByteLevelPrefixSpace) {
  json j = llama3_style(false);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  j["post_processor"] = nullptr;
  auto tok = models::tokenizer_from_json(j, "tokenizer.json");
  // The added space has no input bytes: "Ġworld" covers only "world".
  expect_tokens(tok->encode("world"), {{264, 0, 5}}, "world");
}

TEST(BpeTokenizerJson, MetaspaceWithByteFallback) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  vocab["▁"] = 259;
  vocab["h"] = 260;
  vocab["i"] = 261;
  vocab["▁h"] = 262;
  vocab["▁hi"] = 263;
  json j = {{"added_tokens",
             {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
              {{"id", 1}, {"content", "<s>"}, {"special", true}},
              {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
            {"normalizer",
             {{"type", "Sequence"},
              {"normalizers",
               {{{"type", "Prepend"}, {"prepend", "▁"}},
                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
            {"pre_tokenizer", nullptr},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single",
               {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
            {"decoder",
             {{"type", "Sequence"},
              {"decoders",
               {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                {{"type", "ByteFallback"}},
                {{"type", "Fuse"}},
                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
            {"model",
             {{"type", "BPE"},
              {"unk_token", "<unk>"},
              {"fuse_unk", true},
              {"byte_fallback", true},
              {"vocab", vocab},
              {"merges", {"▁ h", "▁h i"}}}}};
  auto tok = models::tokenizer_from_json(j, "tokenizer.json");
  const std::string text = "hi hi€";
  // "▁hi▁hi€": € (E2 82 AC) is not in the vocabulary and falls back to its bytes.
  expect_tokens(tok->encode(text),
                {{1, 0, 0}, {263, 0, 2}, {263, 2, 5}, {229, 5, 6}, {133, 6, 7}, {175, 7, 8}}, text);
  EXPECT_EQ(tok->decode(tok->encode_ids(text)), text);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{263, 229, 133}), "hi\uFFFD\uFFFD");
}

TEST(BpeTokenizerJson, MalformedAndUnsupportedFiles) {
  json j = llama3_style(true);
  j["model"]["merges"].push_back("x zzz");
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Format, "tok.json",
                    "merge 13", "'zzz'", "not in the vocabulary");
  j = llama3_style(true);
  j["model"]["merges"].push_back("a b c");
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Format, "tok.json",
                    "merge 13");
  j = llama3_style(true);
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Format, "tok.json",
                    "(unclosed", "does not compile");
  j = llama3_style(true);
  j["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Unsupported, "tok.json",
                    "'Unigram'");
  j = llama3_style(true);
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Unsupported, "tok.json",
                    "'Precompiled'");
  j = llama3_style(true);
  j.erase("model");
  EXPECT_ATTN_ERROR(models::tokenizer_from_json(j, "tok.json"), ErrorCode::Format, "tok.json",
                    "model");
  auto dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.json", "{\"model\": ");
  EXPECT_ATTN_ERROR(models::load_tokenizer_json((dir / "tokenizer.json").string()),
                    ErrorCode::Format, "tokenizer.json", "not valid JSON");
  EXPECT_ATTN_ERROR(models::load_tokenizer((dir / "nowhere").string()), ErrorCode::Io, "nowhere");
  std::filesystem::remove(dir / "tokenizer.json");
  EXPECT_ATTN_ERROR(models::load_tokenizer(dir.string()), ErrorCode::Io, "no tokenizer found",
                    "tokenizer.json", "vocab.txt", "tokenizer.model");
}

TEST(BpeTokenizerJson, FactoryReadsSpecialTokensFromConfig) {
  auto dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.json", llama3_style(true).dump());
  test::write_text(dir / "tokenizer_config.json",
                   R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>"}})");
  auto tok = models::load_tokenizer(dir.string());
  EXPECT_EQ(tok->special_tokens().bos, 300);
  EXPECT_EQ(tok->special_tokens().eos, 301);
  EXPECT_EQ(tok->encode_ids("hello"), (std::vector<int32_t>{300, 259}));
}

}  // namespace
}  // namespace attn
