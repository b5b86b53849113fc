#include <cmath>
#include <cstring>
#include <random>

#include "models/formats/safetensors.h"
#include "models/formats/safetensors_writer.h"
#include "test_util.h"

namespace attn {
namespace {

using test::scratch_dir;

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// A file with a hand-written header, so malformed files can be made on purpose.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = uint8_t(i);
  return out;
}

std::string write_raw(const std::string& header, size_t data_bytes) {
  auto path = (scratch_dir() / "t.safetensors").string();
  test::write_bytes(path, raw_file(header, data_bytes));
  return path;
}

TEST(Safetensors, RoundTripExactValues) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> f32(3 * 5 * 7);
  for (float& v : f32) v = normal(rng);
  f32[0] = 0.0f;
  f32[1] = -0.0f;
  f32[2] = std::numeric_limits<float>::infinity();
  f32[3] = std::numeric_limits<float>::denorm_min();
  std::vector<uint16_t> f16(2 * 9), bf16(11);
  for (auto& v : f16) v = uint16_t(rng());
  for (auto& v : bf16) v = uint16_t(rng());
  f16[0] = 0x3C00;   // 1.0
  f16[1] = 0xC000;   // -2.0
  f16[2] = 0x7BFF;   // 65504, the largest half
  f16[3] = 0x0001;   // 2^-24, the smallest subnormal
  f16[4] = 0x7C00;   // +Inf
  f16[5] = 0x3555;   // 0.333251953125
  bf16[0] = 0x3F80;  // 1.0
  bf16[1] = 0xC049;  // -3.140625
  bf16[2] = 0x0001;  // bf16 subnormal 2^-133
  std::vector<int64_t> i64 = {-5, 0, 1LL << 40};
  std::vector<uint8_t> u8 = {0, 1, 255};
  std::vector<float> scalar = {42.5f};

  const auto path = (scratch_dir() / "m.safetensors").string();
  models::write_safetensors(path,
                            {{"a.f32", models::DType::F32, {3, 5, 7}, as_bytes(f32)},
                             {"b.f16", models::DType::F16, {2, 9}, as_bytes(f16)},
                             {"c.bf16", models::DType::BF16, {11}, as_bytes(bf16)},
                             {"d.i64", models::DType::I64, {3}, as_bytes(i64)},
                             {"e.u8", models::DType::U8, {3}, as_bytes(u8)},
                             {"f.scalar", models::DType::F32, {}, as_bytes(scalar)},
                             {"g.empty", models::DType::F32, {0, 4}, {}}},
                            {{"format", "pt"}});

  models::SafetensorsFile file(path);
  EXPECT_EQ(file.names().size(), 7u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const models::TensorView& a = file.tensor("a.f32");
  EXPECT_EQ(a.dtype, models::DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 5, 7}));
  ASSERT_EQ(a.numel(), f32.size());
  EXPECT_EQ(std::memcmp(a.data, f32.data(), a.nbytes), 0);
  auto a_view = a.f32();  // zero-copy: the header is padded so data is aligned
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a_view[i], &f32[i], 4), 0) << i;
  }

  const models::TensorView& b = file.tensor("b.f16");
  EXPECT_EQ(std::memcmp(b.data, f16.data(), b.nbytes), 0);
  auto bf = b.to_f32();
  EXPECT_EQ(bf[0], 1.0f);
  EXPECT_EQ(bf[1], -2.0f);
  EXPECT_EQ(bf[2], 65504.0f);
  EXPECT_EQ(bf[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(bf[4]) && bf[4] > 0);
  EXPECT_EQ(bf[5], 0.333251953125f);
  // Every half is exactly representable in f32, so the round trip back is the identity.
  for (size_t i = 0; i < f16.size(); ++i) {
    if (!std::isnan(bf[i])) {
      EXPECT_EQ(models::f32_to_f16(bf[i]), f16[i]) << i;
    }
  }

  auto cf = file.tensor("c.bf16").to_f32();
  EXPECT_EQ(cf[0], 1.0f);
  EXPECT_EQ(cf[1], -3.140625f);
  EXPECT_EQ(cf[2], std::ldexp(1.0f, -133));
  for (size_t i = 0; i < bf16.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &cf[i], 4);
    EXPECT_EQ(bits, uint32_t(bf16[i]) << 16) << i;
  }

  auto df = file.tensor("d.i64").to_f32();
  EXPECT_EQ(df, (std::vector<float>{-5.0f, 0.0f, 1099511627776.0f}));
  EXPECT_EQ(file.tensor("e.u8").to_f32(), (std::vector<float>{0.0f, 1.0f, 255.0f}));
  EXPECT_EQ(file.tensor("f.scalar").numel(), 1u);
  EXPECT_EQ(file.tensor("f.scalar").to_f32()[0], 42.5f);
  EXPECT_EQ(file.tensor("g.empty").numel(), 0u);

  EXPECT_ATTN_ERROR(file.tensor("b.f16").f32(), ErrorCode::Format, "b.f16", "is F16");
  // d.i64 starts at data byte 478 (after 420 + 36 + 22 bytes): no zero-copy int64 view there.
  EXPECT_ATTN_ERROR(file.tensor("d.i64").view<int64_t>(), ErrorCode::Format, "d.i64",
                    "not aligned");
  auto u8_view = file.tensor("e.u8").view<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(u8_view.begin(), u8_view.end()), u8);
  auto f16_bits = file.tensor("b.f16").view<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(f16_bits.begin(), f16_bits.end()), f16);
  EXPECT_ATTN_ERROR(file.tensor("d.i64").view<int32_t>(), ErrorCode::Format, "d.i64", "is I64");
}

TEST(Safetensors, ViewsPointIntoTheMapping) {
  std::vector<float> v(1000, 1.5f);
  const auto path = (scratch_dir() / "m.safetensors").string();
  models::write_safetensors(path, {{"w", models::DType::F32, {1000}, as_bytes(v)}});
  models::SafetensorsFile file(path);
  const auto& t = file.tensor("w");
  const auto bytes = test::read_bytes(path);
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(t.nbytes, 4000u);
  EXPECT_EQ(std::memcmp(t.data, bytes.data() + 8 + header_len, 4000), 0);
  // The data lies 8 + header bytes past a page-aligned mapping of the file, not in a copy.
  const auto base = reinterpret_cast<uintptr_t>(t.data) - (8 + header_len);
  EXPECT_EQ(base % 4096, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_len + 4000);
  EXPECT_EQ(header_len % 8, 0u);

  // A tensor at an aligned offset gives a zero-copy typed view.
  std::vector<int64_t> ids = {7, -8, 1LL << 60};
  models::write_safetensors(path, {{"ids", models::DType::I64, {3}, as_bytes(ids)},
                                   {"w", models::DType::F32, {1000}, as_bytes(v)}});
  models::SafetensorsFile again(path);
  auto view = again.tensor("ids").view<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(view.begin(), view.end()), ids);
}

TEST(Safetensors, F16AndBf16ConversionRoundsToNearestEven) {
  EXPECT_EQ(models::f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(models::f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(models::f32_to_f16(65520.0f), 0x7C00);  // halfway to the next: rounds to Inf
  EXPECT_EQ(models::f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(models::f32_to_f16(1.0f + 0x1p-11f), 0x3C00);  // tie, even stays
  EXPECT_EQ(models::f32_to_f16(1.0f + 0x3p-11f), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(models::f32_to_f16(0x1p-25f), 0x0000);         // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(models::f32_to_f16(0x3p-25f), 0x0002);         // tie between 1 and 2 ulps: 2
  EXPECT_EQ(models::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(models::f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(models::f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);  // tie, even stays
  EXPECT_EQ(models::f32_to_bf16(1.0f + 0x3p-8f), 0x3F82);
  EXPECT_TRUE(std::isnan(models::bf16_to_f32(models::f32_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(models::f16_to_f32(models::f32_to_f16(std::nanf("")))));
}

TEST(Safetensors, TruncatedFileIsRejected) {
  auto path = (scratch_dir() / "short.safetensors").string();
  test::write_bytes(path, {1, 0, 0});
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "short.safetensors",
                    "truncated");

  // A valid file cut short loses the tail of its last tensor.
  std::vector<float> v(16, 2.0f);
  auto full = (scratch_dir() / "cut.safetensors").string();
  models::write_safetensors(full, {{"x", models::DType::F32, {4}, as_bytes(std::vector<float>(4))},
                                   {"y", models::DType::F32, {16}, as_bytes(v)}});
  auto bytes = test::read_bytes(full);
  bytes.resize(bytes.size() - 5);
  test::write_bytes(full, bytes);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{full}, ErrorCode::Format, "cut.safetensors",
                    "tensor 'y'", "out of range");
}

TEST(Safetensors, HeaderLengthBeyondFile) {
  auto bytes = raw_file("{}", 0);
  bytes[0] = 200;  // claims a 200-byte header in a 10-byte file
  auto path = (scratch_dir() / "h.safetensors").string();
  test::write_bytes(path, bytes);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "h.safetensors",
                    "header length 200", "past the end");
  bytes = raw_file("{}", 0);
  bytes[7] = 0xff;  // a huge u64 must not wrap around
  test::write_bytes(path, bytes);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "past the end");
}

TEST(Safetensors, HeaderNotJson) {
  EXPECT_ATTN_ERROR(models::SafetensorsFile{write_raw("{\"a\": [1, 2", 0)}, ErrorCode::Format,
                    "t.safetensors", "not valid JSON");
  EXPECT_ATTN_ERROR(models::SafetensorsFile{write_raw("[1,2,3]", 0)}, ErrorCode::Format,
                    "not a JSON object");
}

TEST(Safetensors, OffsetsOutOfRange) {
  auto path = write_raw(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "t.safetensors", "tensor 'w'",
                    "[0, 16) out of range", "8 bytes");
}

TEST(Safetensors, ReversedOffsets) {
  auto path = write_raw(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})", 4);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "tensor 'w'", "reversed");
}

TEST(Safetensors, OverlappingOffsets) {
  auto path = write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                        12);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "t.safetensors", "tensor 'b'",
                    "overlap", "tensor 'a'");
}

TEST(Safetensors, HoleAndTrailingBytes) {
  auto path = write_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "tensor 'a'", "hole");
  path = write_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "cover 4 bytes", "has 9");
}

TEST(Safetensors, OffsetsDoNotMatchShapeTimesDtype) {
  auto path =
      write_raw(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 10]}})", 10);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "tensor 'w'", "hold 10 bytes",
                    "BF16 needs 12");
}

TEST(Safetensors, UnknownAndUnsupportedDtype) {
  auto path = write_raw(R"({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}})", 1);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Format, "t.safetensors", "tensor 'w'",
                    "unknown dtype 'Q7'");
  path = write_raw(R"({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1);
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path}, ErrorCode::Unsupported, "tensor 'w'", "F8_E4M3");
}

TEST(Safetensors, MalformedEntries) {
  EXPECT_ATTN_ERROR(
      models::SafetensorsFile{write_raw(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4)},
      ErrorCode::Format, "tensor 'w'", "dtype");
  EXPECT_ATTN_ERROR(models::SafetensorsFile{write_raw(
                        R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)},
                    ErrorCode::Format, "tensor 'w'", "non-negative");
  EXPECT_ATTN_ERROR(models::SafetensorsFile{write_raw(
                        R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4)},
                    ErrorCode::Format, "tensor 'w'", "data_offsets");
  EXPECT_ATTN_ERROR(
      models::SafetensorsFile{write_raw(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})",
          4)},
      ErrorCode::Format, "tensor 'w'", "overflows");
  EXPECT_ATTN_ERROR(models::SafetensorsFile{write_raw(R"({"__metadata__": {"k": 1}})", 0)},
                    ErrorCode::Format, "__metadata__");
}

TEST(Safetensors, MissingTensorAndMissingFile) {
  std::vector<float> v(2, 1.0f);
  const auto path = (scratch_dir() / "m.safetensors").string();
  models::write_safetensors(path, {{"w", models::DType::F32, {2}, as_bytes(v)}});
  models::SafetensorsFile file(path);
  EXPECT_ATTN_ERROR(file.tensor("nope"), ErrorCode::Format, "m.safetensors",
                    "missing tensor 'nope'");
  EXPECT_ATTN_ERROR(models::SafetensorsFile{path + ".absent"}, ErrorCode::Io,
                    "m.safetensors.absent", "cannot open");
}

TEST(Safetensors, WriterRejectsWrongByteCount) {
  std::vector<float> v(3);
  EXPECT_ATTN_ERROR(models::write_safetensors((scratch_dir() / "w.safetensors").string(),
                                              {{"w", models::DType::F32, {2, 2}, as_bytes(v)}}),
                    ErrorCode::InvalidArgument, "tensor 'w'", "12 bytes");
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir();
    models::write_safetensors((dir / "model-00001-of-00002.safetensors").string(),
                              {{"embed", models::DType::F32, {2, 2}, as_bytes(a)}});
    models::write_safetensors((dir / "model-00002-of-00002.safetensors").string(),
                              {{"head", models::DType::F32, {3}, as_bytes(b)},
                               {"norm", models::DType::F32, {1}, as_bytes(c)}});
  }
  void write_index(const std::string& weight_map) {
    test::write_text(dir / "model.safetensors.index.json",
                     R"({"metadata": {"total_size": 32}, "weight_map": )" + weight_map + "}");
  }
  std::filesystem::path dir;
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7}, c = {8};
};

TEST_F(ShardedCheckpoint, OpensEveryShard) {
  write_index(R"({"embed": "model-00001-of-00002.safetensors",
                  "head": "model-00002-of-00002.safetensors",
                  "norm": "model-00002-of-00002.safetensors"})");
  auto ck = models::SafetensorsCheckpoint::open(dir.string());  // the folder finds the index
  EXPECT_EQ(ck.num_files(), 2u);
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"embed", "head", "norm"}));
  EXPECT_EQ(ck.tensor("embed").to_f32(), a);
  EXPECT_EQ(ck.tensor("head").to_f32(), b);
  EXPECT_EQ(ck.tensor("norm").to_f32(), c);
  EXPECT_ATTN_ERROR(ck.tensor("lm_head"), ErrorCode::Format, "model.safetensors.index.json",
                    "missing tensor 'lm_head'");
}

TEST_F(ShardedCheckpoint, IndexErrorsNameTensorAndShard) {
  write_index(R"({"embed": "model-00002-of-00002.safetensors"})");
  EXPECT_ATTN_ERROR(models::SafetensorsCheckpoint::open(dir.string()), ErrorCode::Format,
                    "tensor 'embed'", "model-00002-of-00002.safetensors", "does not contain");
  write_index(R"({"embed": "model-00009-of-00009.safetensors"})");
  EXPECT_ATTN_ERROR(models::SafetensorsCheckpoint::open(dir.string()), ErrorCode::Io,
                    "model-00009-of-00009.safetensors");
  write_index(R"({"embed": "../elsewhere.safetensors"})");
  EXPECT_ATTN_ERROR(models::SafetensorsCheckpoint::open(dir.string()), ErrorCode::Format,
                    "tensor 'embed'", "must be relative");
  test::write_text(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_ATTN_ERROR(models::SafetensorsCheckpoint::open(dir.string()), ErrorCode::Format,
                    "weight_map");
}

TEST(SafetensorsCheckpointOpen, SingleFileAndEmptyFolder) {
  auto dir = scratch_dir();
  EXPECT_ATTN_ERROR(models::SafetensorsCheckpoint::open(dir.string()), ErrorCode::Io,
                    "no model.safetensors");
  std::vector<float> v = {3, 1, 4};
  models::write_safetensors((dir / "model.safetensors").string(),
                            {{"w", models::DType::F32, {3}, as_bytes(v)}});
  auto ck = models::SafetensorsCheckpoint::open(dir.string());
  EXPECT_EQ(ck.num_files(), 1u);
  EXPECT_EQ(ck.tensor("w").to_f32(), v);
}

}  // namespace
}  // namespace attn
