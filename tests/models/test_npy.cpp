#include <cmath>
#include <cstring>

#include "models/formats/npy.h"
#include "test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

std::vector<float> base_values() {  // np.arange(24).reshape(2, 3, 4) * 0.5 - 3
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = float(i) * 0.5f - 3.0f;
  return v;
}

template <typename T>
models::NpyArray make(models::DType dtype, std::vector<int64_t> shape,
                      const std::vector<T>& values) {
  models::NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <typename T>
std::vector<T> values_of(const models::NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// Runs npy_fixtures.py; skips the test when NumPy is not there.
#define NEED_NUMPY()                                    \
  if (!test::python_has("numpy"))                       \
  GTEST_SKIP() << "/usr/bin/python3 with NumPy is not " \
                  "installed (Debian: python3-numpy)"

std::string fixtures_script() {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/npy_fixtures.py";
}

TEST(Npy, RoundTripEveryDtypeAndShape) {
  auto dir = test::scratch_dir();
  const std::vector<models::NpyArray> arrays = {
      models::NpyArray::from_f32({2, 3, 4}, base_values()),
      make<uint16_t>(models::DType::F16, {3}, {0x3C00, 0xC000, 0x7BFF}),
      make<double>(models::DType::F64, {2}, {1.0 / 3.0, -1e300}),
      make<int32_t>(models::DType::I32, {1, 2}, {-7, 1 << 30}),
      make<int64_t>(models::DType::I64, {2}, {-(1LL << 50), 3}),
      make<uint8_t>(models::DType::U8, {4}, {0, 1, 128, 255}),
      make<uint8_t>(models::DType::Bool, {2}, {1, 0}),
      make<float>(models::DType::F32, {}, {9.5f}),
      make<float>(models::DType::F32, {0}, {}),
      make<float>(models::DType::F32, {3, 0, 2}, {}),
  };
  for (size_t i = 0; i < arrays.size(); ++i) {
    const auto path = (dir / "a").concat(std::to_string(i)).concat(".npy").string();
    models::write_npy(path, arrays[i]);
    const auto bytes = test::read_bytes(path);
    // Version 1.0 header, data starting at a multiple of 64 as NumPy writes it.
    EXPECT_EQ(bytes[6], 1);
    const size_t header_len = bytes[8] | bytes[9] << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    const models::NpyArray back = models::read_npy(path);
    EXPECT_EQ(back.dtype, arrays[i].dtype) << i;
    EXPECT_EQ(back.shape, arrays[i].shape) << i;
    EXPECT_EQ(back.data, arrays[i].data) << i;
  }
  EXPECT_EQ(models::read_npy((dir / "a7.npy").string()).numel(), 1u);
  EXPECT_EQ(models::read_npy((dir / "a8.npy").string()).numel(), 0u);
}

TEST(Npy, NpzRoundTripStoredAndDeflated) {
  auto dir = test::scratch_dir();
  std::map<std::string, models::NpyArray> arrays = {
      {"w", models::NpyArray::from_f32({2, 3, 4}, base_values())},
      {"ids", make<int64_t>(models::DType::I64, {3}, {3, 1, 4})}};
  for (bool compress : {false, true}) {
    const auto path = (dir / (compress ? "d.npz" : "s.npz")).string();
    models::write_npz(path, arrays, compress);
    auto back = models::read_npz(path);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back["w"].data, arrays["w"].data);
    EXPECT_EQ(back["w"].shape, arrays["w"].shape);
    EXPECT_EQ(back["ids"].data, arrays["ids"].data);
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  NEED_NUMPY();
  auto dir = test::scratch_dir();
  ASSERT_EQ(test::run_command("/usr/bin/python3 " + fixtures_script() + " write " + dir.string()),
            0);
  const auto p = [&](const char* n) { return (dir / n).string(); };
  const auto base = base_values();

  auto f4 = models::read_npy(p("f4.npy"));
  EXPECT_EQ(f4.dtype, models::DType::F32);
  EXPECT_EQ(f4.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f4.to_f32(), base);
  auto f8 = models::read_npy(p("f8.npy"));
  EXPECT_EQ(f8.dtype, models::DType::F64);
  auto f8v = values_of<double>(f8);
  for (size_t i = 0; i < base.size(); ++i) EXPECT_EQ(f8v[i], double(base[i]) / 3.0) << i;
  auto f2 = models::read_npy(p("f2.npy"));
  EXPECT_EQ(f2.dtype, models::DType::F16);
  EXPECT_EQ(f2.to_f32(), base);  // all of these are exact in half precision
  EXPECT_EQ(values_of<int32_t>(models::read_npy(p("i4.npy"))),
            (std::vector<int32_t>{INT32_MIN, -1, 0, 7, INT32_MAX}));
  auto i8 = models::read_npy(p("i8.npy"));
  EXPECT_EQ(i8.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values_of<int64_t>(i8), (std::vector<int64_t>{-(1LL << 40), 3, 5, 1LL << 40}));
  EXPECT_EQ(values_of<uint8_t>(models::read_npy(p("u1.npy"))),
            (std::vector<uint8_t>{0, 51, 102, 153, 204, 255}));
  auto b1 = models::read_npy(p("b1.npy"));
  EXPECT_EQ(b1.dtype, models::DType::Bool);
  EXPECT_EQ(b1.to_f32(), (std::vector<float>{1, 0, 1}));
  auto scalar = models::read_npy(p("scalar.npy"));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.to_f32(), std::vector<float>{2.5f});
  auto empty = models::read_npy(p("empty.npy"));
  EXPECT_EQ(empty.shape, std::vector<int64_t>{0});
  EXPECT_EQ(empty.numel(), 0u);
  EXPECT_EQ(models::read_npy(p("vector.npy")).shape, std::vector<int64_t>{3});
  EXPECT_EQ(models::read_npy(p("big_endian.npy")).to_f32(), base);
  for (const char* v : {"v1.npy", "v2.npy", "v3.npy"}) {
    EXPECT_EQ(models::read_npy(p(v)).to_f32(), base) << v;
  }

  auto stored = models::read_npz(p("stored.npz"));
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored.at("weights").to_f32(), base);
  EXPECT_EQ(values_of<int64_t>(stored.at("ids")), (std::vector<int64_t>{3, 1, 4}));
  auto deflated = models::read_npz(p("deflated.npz"));
  EXPECT_EQ(deflated.at("weights").to_f32(), base);
  EXPECT_EQ(deflated.at("mask").to_f32(), (std::vector<float>{1, 0}));
}

TEST(Npy, HalfConversionMatchesNumpyOnEveryBitPattern) {
  NEED_NUMPY();
  auto dir = test::scratch_dir();
  ASSERT_EQ(test::run_command("/usr/bin/python3 " + fixtures_script() + " write " + dir.string()),
            0);
  auto halves = models::read_npy((dir / "all_f16.npy").string());
  auto numpy_f32 = values_of<uint32_t>(models::read_npy((dir / "all_f16_as_f32.npy").string()));
  ASSERT_EQ(halves.numel(), 65536u);
  auto ours = halves.to_f32();
  size_t mismatches = 0;
  for (size_t i = 0; i < 65536; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &ours[i], 4);
    if (bits != numpy_f32[i] && mismatches++ < 5) {
      ADD_FAILURE() << "half 0x" << std::hex << i << ": ours 0x" << bits << ", NumPy 0x"
                    << numpy_f32[i];
    }
  }
  EXPECT_EQ(mismatches, 0u);

  auto src = models::read_npy((dir / "round_src.npy").string()).to_f32();
  auto want = values_of<uint16_t>(models::read_npy((dir / "round_f16.npy").string()));
  ASSERT_EQ(src.size(), want.size());
  mismatches = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (models::f32_to_f16(src[i]) != want[i] && mismatches++ < 5) {
      ADD_FAILURE() << "f32 " << src[i] << ": ours 0x" << std::hex << models::f32_to_f16(src[i])
                    << ", NumPy 0x" << want[i];
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Npy, NumpyReadsWhatWeWrite) {
  NEED_NUMPY();
  auto dir = test::scratch_dir();
  const auto p = [&](const char* n) { return (dir / n).string(); };
  auto w = models::NpyArray::from_f32({2, 3, 4}, base_values());
  models::write_npy(p("ours_f4.npy"), w);
  std::vector<uint16_t> halves;
  for (float v : base_values()) halves.push_back(models::f32_to_f16(v));
  models::write_npy(p("ours_f2.npy"), make<uint16_t>(models::DType::F16, {2, 3, 4}, halves));
  models::write_npy(p("ours_i8.npy"), make<int64_t>(models::DType::I64, {1, 2}, {-5, 6}));
  models::write_npy(p("ours_b1.npy"), make<uint8_t>(models::DType::Bool, {2}, {0, 1}));
  models::write_npy(p("ours_scalar.npy"), make<double>(models::DType::F64, {}, {7.0}));
  models::write_npy(p("ours_empty.npy"), make<int32_t>(models::DType::I32, {2, 0}, {}));
  std::map<std::string, models::NpyArray> z = {
      {"w", w}, {"u8", make<uint8_t>(models::DType::U8, {3}, {9, 8, 7})}};
  models::write_npz(p("ours_stored.npz"), z, false);
  models::write_npz(p("ours_deflated.npz"), z, true);
  EXPECT_EQ(test::run_command("/usr/bin/python3 " + fixtures_script() + " check " + dir.string()),
            0);
}

TEST(Npy, ClearErrors) {
  NEED_NUMPY();
  auto dir = test::scratch_dir();
  ASSERT_EQ(test::run_command("/usr/bin/python3 " + fixtures_script() + " write " + dir.string()),
            0);
  const auto p = [&](const char* n) { return (dir / n).string(); };
  EXPECT_ATTN_ERROR(models::read_npy(p("fortran.npy")), ErrorCode::Unsupported, "fortran.npy",
                    "fortran_order True", "ascontiguousarray");
  EXPECT_ATTN_ERROR(models::read_npy(p("complex.npy")), ErrorCode::Unsupported, "complex.npy",
                    "dtype '<c8'");
  auto bytes = test::read_bytes(p("f4.npy"));
  bytes.resize(bytes.size() - 3);
  test::write_bytes(dir / "cut.npy", bytes);
  EXPECT_ATTN_ERROR(models::read_npy(p("cut.npy")), ErrorCode::Format, "cut.npy", "truncated",
                    "needs 96 bytes");
  bytes = test::read_bytes(p("f4.npy"));
  bytes[0] = 'X';
  test::write_bytes(dir / "magic.npy", bytes);
  EXPECT_ATTN_ERROR(models::read_npy(p("magic.npy")), ErrorCode::Format, "magic.npy", "magic");
  bytes = test::read_bytes(p("f4.npy"));
  bytes[6] = 9;
  test::write_bytes(dir / "version.npy", bytes);
  EXPECT_ATTN_ERROR(models::read_npy(p("version.npy")), ErrorCode::Format, "version 9.0");
  bytes = test::read_bytes(p("f4.npy"));
  bytes[8] = 0xff;
  bytes[9] = 0xff;
  bytes.resize(200);
  test::write_bytes(dir / "hlen.npy", bytes);
  EXPECT_ATTN_ERROR(models::read_npy(p("hlen.npy")), ErrorCode::Format, "header length 65535");
  EXPECT_ATTN_ERROR(models::read_npy(p("absent.npy")), ErrorCode::Io, "absent.npy", "cannot open");
  test::write_text(dir / "junk.npz", "this is not a zip archive at all");
  EXPECT_ATTN_ERROR(models::read_npz(p("junk.npz")), ErrorCode::Format, "junk.npz");
  EXPECT_ATTN_ERROR(models::read_npz(p("absent.npz")), ErrorCode::Io, "absent.npz");
}

TEST(Npy, MalformedHeaders) {
  const auto with_header = [](const std::string& h) {
    std::vector<uint8_t> b(10 + h.size() + 64, 0);
    const uint8_t prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(h.size()), 0};
    std::memcpy(b.data(), prefix, 10);
    std::memcpy(b.data() + 10, h.data(), h.size());
    return b;
  };
  EXPECT_ATTN_ERROR(models::parse_npy(with_header("{'descr': '<f4', 'shape': (2,), }"), "x.npy"),
                    ErrorCode::Format, "x.npy", "lacks 'fortran_order'");
  EXPECT_ATTN_ERROR(
      models::parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }"),
                        "x.npy"),
      ErrorCode::Format, "malformed header");
  EXPECT_ATTN_ERROR(
      models::parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': 2, }"),
                        "x.npy"),
      ErrorCode::Format, "'shape' must be a tuple");
  EXPECT_ATTN_ERROR(
      models::parse_npy(
          with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"),
          "x.npy"),
      ErrorCode::Unsupported, "structured");
  // Python 2 era headers: long suffixes and double quotes.
  auto a = models::parse_npy(
      with_header("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 3L)}"), "x.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
}

// The dtype table (dtype.cpp) read both ways: safetensors names, NumPy codes and sizes.
TEST(Npy, DTypeTableReadsBothWays) {
  using models::DType;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::Bool}) {
    DType back = DType::F32;
    ASSERT_TRUE(models::dtype_from_name(models::dtype_name(d), &back)) << models::dtype_name(d);
    EXPECT_EQ(back, d);
    const char* code = models::dtype_numpy_code(d);
    if (d == DType::BF16) {
      EXPECT_EQ(code, nullptr);
      continue;
    }
    ASSERT_NE(code, nullptr) << models::dtype_name(d);
    back = DType::BF16;
    ASSERT_TRUE(models::dtype_from_numpy_code(code, &back)) << code;
    EXPECT_EQ(back, d);
    EXPECT_EQ(models::npy_descr(d), (models::dtype_size(d) == 1 ? "|" : "<") + std::string(code));
  }
  EXPECT_EQ(models::dtype_size(DType::BF16), 2u);
  EXPECT_EQ(models::dtype_size(DType::I64), 8u);
  EXPECT_EQ(models::npy_descr(DType::F32), "<f4");
  EXPECT_EQ(models::npy_descr(DType::Bool), "|b1");
  EXPECT_STREQ(models::dtype_name(DType::Bool), "BOOL");
  DType unknown;
  EXPECT_FALSE(models::dtype_from_numpy_code("c8", &unknown));
  EXPECT_FALSE(models::dtype_from_name("F8", &unknown));
  EXPECT_THROW(models::npy_descr(DType::BF16), Error);
}

}  // namespace
}  // namespace attn
