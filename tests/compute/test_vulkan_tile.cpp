// The GPU tile query must give the cells of tile_probabilities() (compute/probabilities.h) for
// the same result, through the r32f image the renderer samples.
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "compute/vulkan/tile_query.h"
#include "test_vulkan_util.h"

using namespace attn;

namespace {

using VulkanTileTest = test::VulkanTest;

void expect_tile_matches(std::shared_ptr<vk::Context> ctx, const std::string& spec, bool causal,
                         Pool pool, TileRequest t, int n = 301, int d = 24) {
  Problem p = random_problem(2, 1, n, n, d, causal, 99);
  Variant v = make_variant(spec);
  auto gpu = make_backend("vulkan");
  Result r = run(v, p, *gpu);
  t.pool = pool;
  Tile want = tile_probabilities(v, p, r, t);
  Tile got = vk::tile_probabilities_vulkan(ctx, v, p, r, t);
  ASSERT_EQ(got.w, want.w) << spec;
  ASSERT_EQ(got.h, want.h) << spec;
  double top = 0;
  for (float x : want.cells) top = std::max(top, double(x));
  EXPECT_GT(top, 0.0) << spec << ": the tile should not be empty";
  for (int y = 0; y < got.h; ++y)
    for (int x = 0; x < got.w; ++x) {
      double a = got.cells[size_t(y) * got.w + x], b = want.cells[size_t(y) * got.w + x];
      ASSERT_NEAR(a, b, 1e-4 * std::max(1e-2, b)) << spec << " cell " << y << "," << x;
    }
}

TEST_F(VulkanTileTest, DenseMaxPoolWholeMatrixOddCells) {
  expect_tile_matches(ctx_, "dense", true, Pool::Max, {1, 0, 301, 0, 301, 37, 23});
}
TEST_F(VulkanTileTest, DenseMeanPoolSubTile) {
  expect_tile_matches(ctx_, "dense", false, Pool::Mean, {0, 17, 250, 3, 299, 41, 19});
}
TEST_F(VulkanTileTest, BlockSparseWithPartialBlocks) {
  expect_tile_matches(ctx_, "window(size=32)", true, Pool::Mean, {1, 0, 301, 0, 301, 64, 64});
  expect_tile_matches(ctx_, "sinks_window(sinks=4,window=16)", true, Pool::Max,
                      {1, 100, 110, 0, 7, 50, 50});  // more cells than entries: clamped
  expect_tile_matches(ctx_, "block_topk(block=16,k=3)+sigmoid", false, Pool::Max,
                      {0, 0, 301, 0, 301, 90, 70});
}
TEST_F(VulkanTileTest, IndexSparse) {
  expect_tile_matches(ctx_, "topk(k=8)+relu2", true, Pool::Mean, {1, 5, 300, 0, 301, 33, 31});
}
TEST_F(VulkanTileTest, NormalisersAndModifiers) {
  expect_tile_matches(ctx_, "window(size=20)+alibi+entmax15", true, Pool::Max,
                      {1, 0, 301, 0, 301, 30, 30});
  expect_tile_matches(ctx_, "dense+softplus+softcap(cap=5)", false, Pool::Mean,
                      {0, 0, 301, 0, 301, 16, 16});
}
// Cells far larger than one invocation's share: rows are split into strips over dispatches.
TEST_F(VulkanTileTest, CoarseCellsUseStrips) {
  expect_tile_matches(ctx_, "dense", true, Pool::Mean, {0, 0, 1500, 0, 1500, 3, 2}, 1500, 32);
  expect_tile_matches(ctx_, "window(size=100)", true, Pool::Max, {0, 0, 1500, 0, 1500, 2, 3}, 1500,
                      32);
}

TEST_F(VulkanTileTest, ImageIsLeftForSampling) {
  Problem p = random_problem(1, 1, 64, 64, 16, true, 3);
  Variant v = make_variant("dense");
  auto gpu = make_backend("vulkan");
  Result r = run(v, p, *gpu);
  vk::TileImage image(ctx_);
  EXPECT_FALSE(image.written());
  vk::tile_probabilities_to_image(*ctx_, v, p, r, {0, 0, 64, 0, 64, 100, 10, Pool::Max}, image);
  EXPECT_TRUE(image.written());
  EXPECT_EQ(image.width(), 64);  // clamped to the tile's 64 keys
  EXPECT_EQ(image.height(), 10);
  EXPECT_NE(image.view(), VkImageView(VK_NULL_HANDLE));
  EXPECT_EQ(image.format(), VK_FORMAT_R32_SFLOAT);
  Tile t = image.read_back();
  Tile want = tile_probabilities(v, p, r, {0, 0, 64, 0, 64, 100, 10, Pool::Max});
  ASSERT_EQ(t.cells.size(), want.cells.size());
  for (size_t i = 0; i < t.cells.size(); ++i) EXPECT_NEAR(t.cells[i], want.cells[i], 1e-5);
}

TEST_F(VulkanTileTest, SelectiveAndBadRequestsAreErrors) {
  Problem p = random_problem(1, 1, 20, 20, 16, true, 4);
  Variant sel = make_variant("selective");
  Result r = run(sel, p, *make_backend("cpu"));
  try {
    vk::tile_probabilities_vulkan(ctx_, sel, p, r, {0, 0, 20, 0, 20, 4, 4});
    ADD_FAILURE() << "selective tiles must stay on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
  Variant v = make_variant("dense");
  Result d = run(v, p, *make_backend("vulkan"));
  for (TileRequest bad : {TileRequest{1, 0, 20, 0, 20, 4, 4}, TileRequest{0, 5, 5, 0, 20, 4, 4},
                          TileRequest{0, 0, 21, 0, 20, 4, 4}, TileRequest{0, 0, 20, 0, 20, 0, 4}}) {
    try {
      vk::tile_probabilities_vulkan(ctx_, v, p, d, bad);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    }
  }
}

}  // namespace
#endif  // ATTN_HAVE_VULKAN
