// The loaders' limits (models/formats/limits.h) and their checks of sizes read from files: every
// case is a small crafted file whose header lies (a shape, a length, an offset, an image size,
// a zip entry size, a vocabulary id). Each must give attn::Error naming the limit or the mismatch,
// and loading it must not raise the process's peak RSS (VmHWM) by more than a few MiB, which
// catches an allocation sized by the lying field before it was checked.
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch_test_util.h"
#include "models/arch/image.h"
#include "models/arch/model.h"
#include "models/arch/raw_tensors.h"
#include "models/arch/text_input.h"
#include "models/formats/limits.h"
#include "models/formats/npy.h"
#include "models/formats/safetensors.h"
#include "models/tokenizers/factory.h"
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// ---- peak RSS ------------------------------------------------------------------------------

constexpr int64_t kMaxGrowthKiB = 8 << 10;  // "a few MiB": allocator noise, message strings

int64_t vm_hwm_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Peak RSS growth while `f` runs, in KiB. The peak is reset first (clear_refs 5), so an earlier
// test's peak cannot hide this one's.
int64_t peak_growth_kib(const std::function<void()>& f) {
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const int64_t before = vm_hwm_kib();
  f();
  return vm_hwm_kib() - before;
}

#define EXPECT_SMALL_PEAK(stmt)                                                        \
  do {                                                                                 \
    const int64_t grew_ = peak_growth_kib([&] { stmt; });                              \
    EXPECT_LE(grew_, kMaxGrowthKiB) << "peak RSS grew by " << grew_ << " KiB: " #stmt; \
  } while (0)

// ---- byte builders -------------------------------------------------------------------------

void put16le(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v));
  b.push_back(uint8_t(v >> 8));
}
void put32le(Bytes& b, uint32_t v) {
  put16le(b, v & 0xFFFF);
  put16le(b, v >> 16);
}
void put16be(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v >> 8));
  b.push_back(uint8_t(v));
}
void put32be(Bytes& b, uint32_t v) {
  put16be(b, v >> 16);
  put16be(b, v & 0xFFFF);
}
void append(Bytes& b, const std::string& s) {
  b.insert(b.end(), s.begin(), s.end());
}

uint32_t crc32(const Bytes& b) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t x : b) {
    c ^= x;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A .npy v1.0 file with `dict` as its header and `data` after it.
Bytes npy_bytes(const std::string& dict, const Bytes& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put16le(b, uint32_t(header.size()));
  append(b, header);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A one-entry zip archive whose directory records `claimed_size` as the entry's uncompressed
// size; `payload` is stored as is (method 0) or wrapped in one stored deflate block (method 8).
Bytes zip_bytes(const std::string& name, const Bytes& content, bool deflate,
                uint32_t claimed_size) {
  Bytes payload;
  if (deflate) {
    payload = {0x01};  // BFINAL, BTYPE 00 (stored)
    put16le(payload, uint32_t(content.size()));
    put16le(payload, uint32_t(~content.size() & 0xFFFF));
  }
  payload.insert(payload.end(), content.begin(), content.end());
  const uint32_t crc = crc32(content);
  const uint16_t method = deflate ? 8 : 0;
  auto common = [&](Bytes& b) {
    put16le(b, 20);  // version needed
    put16le(b, 0);   // flags
    put16le(b, method);
    put16le(b, 0);       // time
    put16le(b, 0x0021);  // date: 1980-01-01
    put32le(b, crc);
    put32le(b, uint32_t(payload.size()));
    put32le(b, claimed_size);
    put16le(b, uint32_t(name.size()));
    put16le(b, 0);  // extra
  };
  Bytes z;
  put32le(z, 0x04034b50);
  common(z);
  append(z, name);
  z.insert(z.end(), payload.begin(), payload.end());
  const uint32_t cd_offset = uint32_t(z.size());
  put32le(z, 0x02014b50);
  put16le(z, 20);  // version made by
  common(z);
  put16le(z, 0);  // comment
  put16le(z, 0);  // disk
  put16le(z, 0);  // internal attributes
  put32le(z, 0);  // external attributes
  put32le(z, 0);  // local header offset
  append(z, name);
  const uint32_t cd_size = uint32_t(z.size()) - cd_offset;
  put32le(z, 0x06054b50);
  put16le(z, 0);
  put16le(z, 0);
  put16le(z, 1);
  put16le(z, 1);
  put32le(z, cd_size);
  put32le(z, cd_offset);
  put16le(z, 0);
  return z;
}

// A safetensors file: u64 header length, the JSON header, `data_bytes` zero bytes.
Bytes safetensors_bytes(const std::string& header, size_t data_bytes, uint64_t claimed_len = 0) {
  Bytes b;
  const uint64_t len = claimed_len ? claimed_len : header.size();
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(len >> (8 * i)));
  append(b, header);
  b.resize(b.size() + data_bytes, 0);
  return b;
}

std::string path_of(const fs::path& dir, const char* name, const Bytes& bytes) {
  test::write_bytes(dir / name, bytes);
  return (dir / name).string();
}

// ---- .npy / .npz ---------------------------------------------------------------------------

TEST(Limits, NpyShapeOverTheTensorLimit) {
  const fs::path dir = test::scratch_dir();
  // 10^12 float32 elements claimed by a 128-byte file.
  const std::string huge = path_of(
      dir, "huge.npy",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", {}));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::read_npy(huge), ErrorCode::Format, "huge.npy",
                                      "4000000000000 bytes", "kMaxTensorBytes"));
  // Under the limit but far beyond the file: the mismatch is named.
  const std::string lying = path_of(
      dir, "lying.npy",
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000,), }", {1, 2, 3, 4}));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::read_npy(lying), ErrorCode::Format, "lying.npy",
                                      "needs 400000000 bytes", "file has 4"));
}

TEST(Limits, NpyHeaderLengthPastTheFile) {
  const fs::path dir = test::scratch_dir();
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
  put32le(b, 0xFFFFFF00u);
  append(b, "{'descr': '<f4'}");
  const std::string p = path_of(dir, "hlen.npy", b);
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::read_npy(p), ErrorCode::Format, "hlen.npy",
                                      "header length 4294967040", "past the end"));
}

Bytes small_npy() {
  models::NpyArray a = models::NpyArray::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4});
  return serialize_npy(a);
}

TEST(Limits, NpzStoredEntryClaimsAHugeSize) {
  const fs::path dir = test::scratch_dir();
  // The directory says 256 MiB; the archive holds ~150 bytes.
  const std::string p =
      path_of(dir, "bomb.npz", zip_bytes("q.npy", small_npy(), false, 256u << 20));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::read_npz(p), ErrorCode::Format, "bomb.npz", "'q.npy'",
                                      "claims 268435456 bytes uncompressed"));
  // The same archive with the true size reads.
  const Bytes npy = small_npy();
  const auto arrays = models::read_npz(
      path_of(dir, "good.npz", zip_bytes("q.npy", npy, false, uint32_t(npy.size()))));
  ASSERT_EQ(arrays.count("q"), 1u);
  EXPECT_EQ(arrays.at("q").to_f32(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Limits, NpzDeflatedEntryClaimsMoreThanDeflateCanExpand) {
  const fs::path dir = test::scratch_dir();
  const std::string p = path_of(dir, "bomb.npz", zip_bytes("k.npy", small_npy(), true, 256u << 20));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::read_npz(p), ErrorCode::Format, "bomb.npz", "'k.npy'",
                                      "claims 268435456 bytes uncompressed", "at most"));
  const Bytes npy = small_npy();
  const auto arrays = models::read_npz(
      path_of(dir, "good.npz", zip_bytes("k.npy", npy, true, uint32_t(npy.size()))));
  ASSERT_EQ(arrays.count("k"), 1u);
  EXPECT_EQ(arrays.at("k").shape, (std::vector<int64_t>{2, 2}));
}

// ---- safetensors ---------------------------------------------------------------------------

TEST(Limits, SafetensorsHeaderLengthPastTheFile) {
  const fs::path dir = test::scratch_dir();
  const std::string p =
      path_of(dir, "hlen.safetensors", safetensors_bytes("{}", 0, uint64_t(1) << 40));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::SafetensorsFile{p}, ErrorCode::Format,
                                      "hlen.safetensors", "header length 1099511627776",
                                      "past the end"));
}

TEST(Limits, SafetensorsTensorOverTheLimit) {
  const fs::path dir = test::scratch_dir();
  // 2^36 float32 = 256 GiB claimed, with offsets to match, in a ~100-byte file.
  const std::string p = path_of(
      dir, "big.safetensors",
      safetensors_bytes(
          R"({"w": {"dtype": "F32", "shape": [68719476736], "data_offsets": [0, 274877906944]}})",
          0));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::SafetensorsFile{p}, ErrorCode::Format,
                                      "big.safetensors", "'w'", "274877906944 bytes",
                                      "kMaxTensorBytes"));
}

TEST(Limits, SafetensorsDataOffsetsPastTheFile) {
  const fs::path dir = test::scratch_dir();
  const std::string p = path_of(
      dir, "off.safetensors",
      safetensors_bytes(
          R"({"w": {"dtype": "F32", "shape": [1048576], "data_offsets": [0, 4194304]}})", 16));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::SafetensorsFile{p}, ErrorCode::Format,
                                      "off.safetensors", "'w'", "out of range", "16 bytes"));
}

TEST(Limits, SafetensorsDimensionOverInt64) {
  const fs::path dir = test::scratch_dir();
  // numel 0, so the size checks pass; the second dimension does not fit an int64 shape.
  const std::string p = path_of(
      dir, "dim.safetensors",
      safetensors_bytes(
          R"({"w": {"dtype": "F32", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})",
          0));
  EXPECT_ATTN_ERROR(models::SafetensorsFile{p}, ErrorCode::Format, "dim.safetensors", "'w'",
                    "shape overflows");
}

// ---- images --------------------------------------------------------------------------------

Bytes bmp_header(uint32_t w, uint32_t h) {
  Bytes b = {'B', 'M'};
  put32le(b, 54 + w * h * 3);
  put32le(b, 0);
  put32le(b, 54);
  put32le(b, 40);
  put32le(b, w);
  put32le(b, h);
  put16le(b, 1);
  put16le(b, 24);
  for (int i = 0; i < 6; ++i) put32le(b, 0);
  b.resize(b.size() + 16, 0x7F);  // a few pixels, then the file ends
  return b;
}

Bytes gif_header(uint32_t w, uint32_t h) {
  Bytes b;
  append(b, "GIF89a");
  put16le(b, w);
  put16le(b, h);
  b.insert(b.end(), {0x80, 0, 0, 0, 0, 0, 255, 255, 255});  // 2-entry colour table
  b.push_back(0x2C);
  put16le(b, 0);
  put16le(b, 0);
  put16le(b, w);
  put16le(b, h);
  b.insert(b.end(), {0x00, 0x02, 0x02, 0x4C, 0x01, 0x00, 0x3B});
  return b;
}

Bytes jpeg_header(uint32_t w, uint32_t h) {
  Bytes b = {0xFF, 0xD8, 0xFF, 0xC0};
  put16be(b, 11);
  b.push_back(8);
  put16be(b, h);
  put16be(b, w);
  b.insert(b.end(), {1, 1, 0x11, 0, 0xFF, 0xD9});
  return b;
}

Bytes png_header(uint32_t w, uint32_t h) {
  Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  Bytes ihdr;
  append(ihdr, "IHDR");
  put32be(ihdr, w);
  put32be(ihdr, h);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  put32be(b, 13);
  b.insert(b.end(), ihdr.begin(), ihdr.end());
  put32be(b, crc32(ihdr));
  put32be(b, 0);
  append(b, "IEND");
  put32be(b, 0xAE426082u);
  return b;
}

// An 8-bit grayscale RLE TGA of w x h pixels, `packets` runs of 128 at value 200 (stb reads
// zeros past the end of a file that runs short).
Bytes tga_rle_gray(uint32_t w, uint32_t h, size_t packets) {
  Bytes b = {0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  put16le(b, w);
  put16le(b, h);
  b.insert(b.end(), {8, 0});
  for (size_t i = 0; i < packets; ++i) b.insert(b.end(), {0xFF, 200});
  return b;
}

// TGA at its densest, runs of 128 pixels in two bytes, still decodes: the bound is 64 per byte.
TEST(Limits, DensestTgaDecodes) {
  const Bytes b = tga_rle_gray(256, 256, 256 * 256 / 128);
  const models::Image8 img = models::decode_image(b, "dense.tga", 1);
  ASSERT_EQ(img.width, 256);
  ASSERT_EQ(img.height, 256);
  for (uint8_t v : img.data) ASSERT_EQ(v, 200);
}

TEST(Limits, ImageOverTheSideLimit) {
  const fs::path dir = test::scratch_dir();
  const std::string p = path_of(dir, "wide.bmp", bmp_header(100000, 100000));
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::load_image(p), ErrorCode::Format, "wide.bmp",
                                      "100000x100000", "kMaxImageSide", "kMaxImagePixels"));
}

TEST(Limits, ImageHeaderClaimsMorePixelsThanTheFileHolds) {
  const fs::path dir = test::scratch_dir();
  // Within the side and pixel limits, but each file is a few dozen bytes: stb_image would
  // allocate (and for BMP, GIF and JPEG fill) the whole image before noticing.
  struct Case {
    const char* name;
    Bytes bytes;
    const char* format;
  };
  const Case cases[] = {
      {"cut.bmp", bmp_header(4000, 4000), "BMP"},      {"cut.gif", gif_header(4000, 4000), "GIF"},
      {"cut.jpg", jpeg_header(4000, 4000), "JPEG"},    {"cut.png", png_header(16000, 8000), "PNG"},
      {"cut.tga", tga_rle_gray(4000, 4000, 8), "TGA"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = path_of(dir, c.name, c.bytes);
    EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::load_image(p), ErrorCode::Format, c.name,
                                        "header claims", c.format, "holds at most"));
  }
}

// ---- tokenizers ----------------------------------------------------------------------------

TEST(Limits, TokenizerJsonIdOverTheVocabularyLimit) {
  const fs::path dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.json", R"({"model": {"type": "BPE",
    "vocab": {"a": 0, "b": 1, "ab": 8000000}, "merges": ["a b"]}})");
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::load_tokenizer((dir / "tokenizer.json").string()),
                                      ErrorCode::Format, "tokenizer.json", "8000000",
                                      "kMaxVocabId"));
}

TEST(Limits, TokenizerJsonIdsFarSparserThanTheEntries) {
  const fs::path dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.json", R"({"model": {"type": "WordPiece",
    "vocab": {"[UNK]": 0, "a": 1, "b": 1000000}}})");
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::load_tokenizer((dir / "tokenizer.json").string()),
                                      ErrorCode::Format, "tokenizer.json", "'b'", "id 1000000",
                                      "3 entries", "kMaxVocabHoles"));
  // Holes within the allowance load.
  test::write_text(dir / "ok.json", R"({"model": {"type": "WordPiece",
    "vocab": {"[UNK]": 0, "a": 1, "b": 1000}}})");
  EXPECT_EQ(models::load_tokenizer((dir / "ok.json").string())->vocab_size(), 1001u);
}

TEST(Limits, Gpt2VocabJsonIdOverTheLimit) {
  const fs::path dir = test::scratch_dir();
  test::write_text(dir / "vocab.json", R"({"a": 0, "b": 1, "ab": 5000000})");
  test::write_text(dir / "merges.txt", "#version: 0.2\na b\n");
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::load_tokenizer(dir.string()), ErrorCode::Format,
                                      "vocab.json", "5000000", "kMaxVocabId"));
}

TEST(Limits, AddedTokenIdOverTheLimit) {
  const fs::path dir = test::scratch_dir();
  test::write_text(dir / "tokenizer.json", R"({"model": {"type": "WordPiece",
    "vocab": {"[UNK]": 0, "a": 1}},
    "added_tokens": [{"id": 3000000000, "content": "<x>", "special": true}]})");
  EXPECT_ATTN_ERROR(models::load_tokenizer((dir / "tokenizer.json").string()), ErrorCode::Format,
                    "tokenizer.json", "<x>", "3000000000", "kMaxVocabId");
}

TEST(Limits, SentencePieceLengthPrefixPastTheFile) {
  const fs::path dir = test::scratch_dir();
  // Field 1 (pieces), length-delimited, length 2^32 - 1, then 8 bytes.
  const std::string p =
      path_of(dir, "tokenizer.model", {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_SMALL_PEAK(EXPECT_ATTN_ERROR(models::SentencePieceTokenizer{p}, ErrorCode::Format,
                                      "tokenizer.model", "not a SentencePiece model"));
}

// ---- raw tensors and the token limit ---------------------------------------------------------

TEST(Limits, RawTensorsWithMoreTokensThanTheLimit) {
  const fs::path dir = test::scratch_dir();
  const int64_t n = models::kMaxInputTokens + 10;
  const models::NpyArray a =
      models::NpyArray::from_f32({1, n, 1}, std::vector<float>(size_t(n), 0.5f));
  for (const char* f : {"q.npy", "k.npy", "v.npy"}) write_npy((dir / f).string(), a);
  EXPECT_ATTN_ERROR(models::load_problem_dir(dir.string()), ErrorCode::InvalidArgument, "q.npy",
                    "has 65546 tokens", "kMaxInputTokens");
}

// A llama test model whose config allows 2^20 positions, with GPT-2's tokenizer files.
std::unique_ptr<models::Model> model_with_long_context() {
  const std::string dir = test::copy_model("llama");
  const fs::path cfg = fs::path(dir) / "config.json";
  std::ifstream in(cfg);
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  j["max_position_embeddings"] = 1 << 20;
  test::write_text(cfg, j.dump());
  for (const char* f : {"vocab.json", "merges.txt"}) {
    fs::copy_file(fs::path(test::golden_dir("gpt2")) / f, fs::path(dir) / f,
                  fs::copy_options::overwrite_existing);
  }
  return models::load_model(dir);
}

TEST(Limits, TextOverTheTokenLimitIsCutWithNotice) {
  auto model = model_with_long_context();
  ASSERT_GT(model->info().max_tokens, models::kMaxInputTokens);
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "the cat ";  // 80000 tokens
  const models::TextInput in = encode_for_model(*model, text, "notes.txt");
  EXPECT_TRUE(in.truncated);
  EXPECT_EQ(in.ids.size(), size_t(models::kMaxInputTokens));
  EXPECT_EQ(in.tokens.size(), size_t(models::kMaxInputTokens));
  EXPECT_NE(in.notice.find("kMaxInputTokens"), std::string::npos) << in.notice;
  EXPECT_NE(in.notice.find("only the first 65536"), std::string::npos) << in.notice;

  const models::TextInput ids = ids_for_model(*model, std::vector<int32_t>(70000, 1));
  EXPECT_TRUE(ids.truncated);
  EXPECT_EQ(ids.ids.size(), size_t(models::kMaxInputTokens));

  const std::string huge(models::kMaxInputTextBytes + 1, 'a');
  EXPECT_ATTN_ERROR(encode_for_model(*model, huge, "big.txt"), ErrorCode::InvalidArgument,
                    "big.txt", "has 67108865 bytes", "kMaxInputTextBytes");
}

}  // namespace
}  // namespace attn
