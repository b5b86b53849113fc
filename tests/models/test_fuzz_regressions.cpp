// Inputs the fuzz targets (tests/fuzz) found crashing or misbehaving, kept in
// tests/fuzz/regressions/<target>/: each loader must now refuse them with attn::Error naming the
// problem. The last test replays every committed regression of the model-file targets through
// its loader, so that an input added there is covered by this suite too (and by its sanitizer
// run in CI), not only by the fuzz smoke run.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/arch/image.h"
#include "models/formats/hf_config.h"
#include "models/formats/npy.h"
#include "models/formats/safetensors.h"
#include "models/tokenizers/bert_vocab.h"
#include "models/tokenizers/gpt2_files.h"
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "models/tokenizers/tokenizer_json.h"
#include "test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

fs::path regressions(const std::string& target) {
  return fs::path(ATTN_TEST_SOURCE_DIR) / "../fuzz/regressions" / target;
}

// stb_image v2.27 wrote past a JPEG Huffman table's 257 size bytes when a DHT segment declared
// more than 256 codes (already while reading the header for the image size).
TEST(FuzzRegressions, JpegHuffmanTableWithTooManyCodes) {
  const auto bytes =
      test::read_bytes(regressions("image") / "jpeg_huffman_table_over_256_codes.jpg");
  EXPECT_ATTN_ERROR(models::decode_image(bytes, "dht.jpg"), ErrorCode::Format, "dht.jpg",
                    "Huffman table defines more than 256 codes");
}

// The same table at the end of the file, its counts cut short: stb reads zeros past the end.
TEST(FuzzRegressions, JpegHuffmanCountsPastTheEnd) {
  std::vector<uint8_t> bytes = {0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x13, 0x10};
  for (int i = 0; i < 3; ++i) bytes.push_back(0xFF);
  EXPECT_ATTN_ERROR(models::decode_image(bytes, "cut.jpg"), ErrorCode::Format, "Huffman");
  // A table that fits is not refused by that check.
  std::vector<uint8_t> fits = {0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x14, 0x00, 1};
  for (int i = 0; i < 15; ++i) fits.push_back(0);
  fits.push_back(0);  // the one value
  try {
    models::decode_image(fits, "fits.jpg");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("Huffman"), std::string::npos) << e.what();
  }
}

// libsentencepiece 0.1.97 followed a corrupt precompiled character map out of bounds (a trie
// value past the replacement strings; a trie node past the trie) when normalising text.
TEST(FuzzRegressions, SentencePieceCorruptCharacterMaps) {
  for (const char* f : {"charsmap_value_past_strings.model", "charsmap_node_past_trie.model"}) {
    SCOPED_TRACE(f);
    const std::string path = (regressions("sentencepiece") / f).string();
    EXPECT_ATTN_ERROR(models::SentencePieceTokenizer{path}, ErrorCode::Format, f,
                      "normalizer character map (precompiled_charsmap) is corrupt");
  }
}

// A scan whose component names a Huffman table that no DHT segment defined: stb_image v2.27
// decodes it with the table's uninitialised heap bytes, and after 1.09 million fuzz inputs that
// leftover memory sent its symbol lookup to values[-849]. Its decoder state now comes from
// calloc: an undefined table is all zeros, decodes every code as symbol 0 (a zero DC difference,
// then end of block) and the image is flat mid-grey whatever the heap held before. The heap is
// dirtied first with 0xFF bytes (as glibc hands a freed block straight back, the old build read
// those: a fast-table miss and delta -1 give values[-1], and the decode failed).
TEST(FuzzRegressions, JpegScanWithUndefinedHuffmanTables) {
  std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x43, 0x00};  // SOI, DQT table 0
  jpeg.insert(jpeg.end(), 64, 1);
  // SOF0: 8 bits, 8 x 8, one component (id 1, 1x1 sampling, table 0); SOS: that component with
  // DC table 0 and AC table 0, neither defined; no entropy-coded bytes; EOI.
  for (const uint8_t b :
       {0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 0x08, 0x00, 0x08, 0x01, 0x01, 0x11, 0x00,
        0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00, 0xFF, 0xD9})
    jpeg.push_back(b);
  for (const int size : {16384, 20000, 32768, 65536}) {
    std::vector<char*> blocks;
    for (int i = 0; i < 4; ++i) {
      blocks.push_back(static_cast<char*>(std::malloc(size_t(size))));
      std::memset(blocks.back(), 0xFF, size_t(size));
    }
    for (char* b : blocks) std::free(b);
    const models::Image8 img = models::decode_image(jpeg, "undefined_tables.jpg");
    ASSERT_EQ(img.height, 8);
    ASSERT_EQ(img.width, 8);
    for (const uint8_t v : img.data) ASSERT_EQ(v, 128) << "dirtied with blocks of " << size;
  }
  // The fuzz input itself (its second and third components use AC table 1, never defined) is
  // refused for what stb finds after the scan, never read outside a table.
  EXPECT_ATTN_ERROR(
      models::decode_image(
          test::read_bytes(regressions("image") / "jpeg_scan_uses_undefined_huffman_table.jpg"),
          "scan.jpg"),
      ErrorCode::Format, "scan.jpg");
}

// A piece holding a NUL byte: libsentencepiece's trie builder threw while loading the model and
// the process ended (std::terminate); an empty piece takes the same path.
TEST(FuzzRegressions, SentencePiecePieceWithNulByte) {
  const std::string path = (regressions("sentencepiece") / "piece_with_nul_byte.model").string();
  EXPECT_ATTN_ERROR(models::SentencePieceTokenizer{path}, ErrorCode::Format,
                    "piece_with_nul_byte.model", "piece 3 is empty or holds a NUL byte");
  // The same model with that piece's byte made printable loads and encodes.
  std::string bytes;
  {
    const auto raw = test::read_bytes(path);
    bytes.assign(raw.begin(), raw.end());
  }
  const std::string nul_piece("\x0a\x01\x00", 3);
  const size_t at = bytes.find(nul_piece);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] = 'x';
  const fs::path fixed = fs::temp_directory_path() / "attnscope_piece_fixed.model";
  {
    std::ofstream out(fixed, std::ios::binary);
    out << bytes;
  }
  models::SentencePieceTokenizer ok(fixed.string());
  EXPECT_FALSE(ok.encode("xx").empty());
  // An empty piece.
  bytes[at + 1] = 0;  // length 0; the former byte now starts the next field
  bytes.erase(at + 2, 1);
  bytes[at - 1] = char(uint8_t(bytes[at - 1]) - 1);  // the enclosing piece message is one shorter
  {
    std::ofstream out(fixed, std::ios::binary);
    out << bytes;
  }
  EXPECT_ATTN_ERROR(models::SentencePieceTokenizer{fixed.string()}, ErrorCode::Format,
                    "is empty or holds a NUL byte");
  fs::remove(fixed);
}

// An added token whose "special" is a number: nlohmann's type_error escaped the loader.
TEST(FuzzRegressions, TokenizerJsonFieldOfTheWrongType) {
  const std::string path =
      (regressions("tokenizer_json") / "added_token_special_not_bool.json").string();
  EXPECT_ATTN_ERROR(models::load_tokenizer_json(path), ErrorCode::Format,
                    "added_token_special_not_bool.json", "type must be boolean");
}

// Every committed regression of the model-file targets goes through its loader: it may load or
// throw attn::Error, nothing else.
TEST(FuzzRegressions, EveryCommittedInputIsRefusedOrLoaded) {
  using Loader = std::function<void(const fs::path&)>;
  const std::map<std::string, Loader> loaders = {
      {"npy",
       [](const fs::path& p) { models::parse_npy(test::read_bytes(p), p.string()).to_f32(); }},
      {"npz", [](const fs::path& p) { models::read_npz(p.string()); }},
      {"safetensors",
       [](const fs::path& p) {
         const auto ck = models::SafetensorsCheckpoint::open(p.string());
         for (const auto& n : ck.names()) ck.tensor(n).to_f32();
       }},
      {"hf_config", [](const fs::path& p) { models::load_hf_config(p.string()); }},
      {"tokenizer_json",
       [](const fs::path& p) { models::load_tokenizer_json(p.string())->encode("Hello world"); }},
      {"wordpiece_vocab",
       [](const fs::path& p) { models::load_bert_vocab(p.string())->encode("Hello world"); }},
      {"sentencepiece",
       [](const fs::path& p) { models::SentencePieceTokenizer(p.string()).encode("Hello world"); }},
      {"image",
       [](const fs::path& p) {
         models::decode_image(test::read_bytes(p), p.string(), 3);
         models::decode_image(test::read_bytes(p), p.string(), 1);
       }},
  };
  int replayed = 0;
  for (const auto& [target, load] : loaders) {
    const fs::path dir = regressions(target);
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      SCOPED_TRACE(e.path().string());
      try {
        load(e.path());
      } catch (const Error&) {
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace attn
