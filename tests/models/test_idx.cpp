// IDX files (models/formats/idx.h), plain and gzipped: round trips of files written here, the
// Fashion-MNIST test split where Debian's dataset-fashion-mnist is installed, and every malformed
// header and body giving Error(Format) that names the file and the fault.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compute/error.h"
#include "models/formats/idx.h"
#include "test_util.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, size_t payload) {
  std::vector<uint8_t> b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  for (size_t i = 0; i < payload; ++i) b.push_back(uint8_t(i * 7 + 3));
  return b;
}

std::string write(const std::string& name, const std::vector<uint8_t>& bytes, bool gz) {
  const fs::path p = fs::temp_directory_path() / ("attn_idx_" + name + (gz ? ".gz" : ""));
  if (gz) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  return p.string();
}

TEST(Idx, ReadsWhatWasWrittenPlainAndGzipped) {
  for (const bool gz : {false, true}) {
    const std::string p = write("ok", idx_bytes(0x08, {3, 5, 7}, 105), gz);
    const models::IdxArray a = models::read_idx(p);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 5, 7}));
    ASSERT_EQ(a.data.size(), 105u);
    for (size_t i = 0; i < 105; ++i) ASSERT_EQ(a.data[i], uint8_t(i * 7 + 3));
    const models::IdxArray labels = models::read_idx(write("labels", idx_bytes(0x08, {9}, 9), gz));
    EXPECT_EQ(labels.shape, (std::vector<int64_t>{9}));
  }
}

TEST(Idx, MalformedFilesNameTheFault) {
  for (const bool gz : {false, true}) {
    EXPECT_ATTN_ERROR(models::read_idx(write("short", {0, 0, 8}, gz)), ErrorCode::Format,
                      "too short");
    EXPECT_ATTN_ERROR(models::read_idx(write("magic", {1, 0, 8, 1, 0, 0, 0, 1, 0}, gz)),
                      ErrorCode::Format, "not an IDX file");
    EXPECT_ATTN_ERROR(models::read_idx(write("type", idx_bytes(0x0D, {2}, 8), gz)),
                      ErrorCode::Format, "0x0d is not supported");
    EXPECT_ATTN_ERROR(models::read_idx(write("ndim0", idx_bytes(0x08, {}, 0), gz)),
                      ErrorCode::Format, "0 dimensions");
    EXPECT_ATTN_ERROR(models::read_idx(write("ndim5", idx_bytes(0x08, {1, 1, 1, 1, 1}, 1), gz)),
                      ErrorCode::Format, "5 dimensions");
    EXPECT_ATTN_ERROR(models::read_idx(write("zero", idx_bytes(0x08, {4, 0}, 0), gz)),
                      ErrorCode::Format, "dimension 1 is zero");
    std::vector<uint8_t> cut = idx_bytes(0x08, {2, 3}, 6);
    cut.resize(9);  // inside the second dimension
    EXPECT_ATTN_ERROR(models::read_idx(write("dims", cut, gz)), ErrorCode::Format,
                      "inside its dimensions");
    EXPECT_ATTN_ERROR(models::read_idx(write("trunc", idx_bytes(0x08, {10, 10}, 99), gz)),
                      ErrorCode::Format, "truncated");
    EXPECT_ATTN_ERROR(models::read_idx(write("extra", idx_bytes(0x08, {10}, 11), gz)),
                      ErrorCode::Format, "bytes after");
    // A header promising 2^32 x 2^32 elements: refused before anything is allocated.
    EXPECT_ATTN_ERROR(
        models::read_idx(write("huge", idx_bytes(0x08, {0xFFFFFFFF, 0xFFFFFFFF}, 0), gz)),
        ErrorCode::Format, "tensor size limit");
  }
  // A gzip stream cut in half.
  const std::string whole = write("cut", idx_bytes(0x08, {64, 64}, 4096), true);
  std::ifstream in(whole, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.resize(bytes.size() / 2);
  const std::string half = (fs::temp_directory_path() / "attn_idx_half.gz").string();
  std::ofstream(half, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  EXPECT_THROW(models::read_idx(half), Error);
  EXPECT_ATTN_ERROR(models::read_idx("/nonexistent/t10k-images-idx3-ubyte.gz"), ErrorCode::Io,
                    "cannot open");
}

TEST(Idx, ReadsFashionMnistTest) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  const models::IdxArray images = models::read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  const models::IdxArray labels = models::read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(images.shape, (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(labels.shape, (std::vector<int64_t>{10000}));
  std::vector<int> per_class(10, 0);
  for (uint8_t l : labels.data) {
    ASSERT_LT(l, 10);
    ++per_class[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[size_t(c)], 1000) << c;  // balanced test set
  EXPECT_EQ(labels.data[0], 9);  // the first test image is an ankle boot
}

}  // namespace
}  // namespace attn
