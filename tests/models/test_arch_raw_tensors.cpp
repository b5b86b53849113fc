// Raw Q/K/V .npy files as a Problem source.
#include <cmath>
#include <span>

#include "compute/backend.h"
#include "compute/metrics.h"
#include "compute/registry.h"
#include "models/arch/raw_tensors.h"
#include "models/formats/npy.h"
#include "test_util.h"

namespace attn {
namespace {

using test::scratch_dir;

void write(const std::filesystem::path& p, std::vector<int64_t> shape, std::span<const float> v) {
  write_npy(p.string(), models::NpyArray::from_f32(std::move(shape), v));
}

TEST(ArchRawTensors, LoadsGqaProblemWithLabelsAndRunsIt) {
  const Problem src = random_problem(4, 2, 5, 7, 3, true, 11);
  const auto dir = scratch_dir();
  write(dir / "q.npy", {4, 5, 3}, src.q);
  write(dir / "k.npy", {2, 7, 3}, src.k);
  write(dir / "v.npy", {2, 7, 3}, src.v);
  test::write_text(dir / "labels.json", R"(["a","b","c","d","e","f","g"])");
  const Problem p = models::load_problem_dir(dir.string());
  EXPECT_EQ(p.n_heads, 4);
  EXPECT_EQ(p.n_kv_heads, 2);
  EXPECT_EQ(p.n_q, 5);
  EXPECT_EQ(p.n_k, 7);
  EXPECT_EQ(p.d, 3);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.labels.size(), 7u);
  EXPECT_EQ(p.labels[6], "g");
  EXPECT_EQ(p.q, src.q);
  EXPECT_EQ(p.v, src.v);
  auto ref = make_backend("reference");
  const Variant dense = make_variant("dense");
  EXPECT_EQ(relative_error(run(dense, p, *ref).o, run(dense, src, *ref).o), 0.0);
}

TEST(ArchRawTensors, TwoDimensionalIsOneHeadAndHookDumpsLoad) {
  const Problem src = random_problem(1, 1, 6, 6, 4, false, 3);
  const auto dir = scratch_dir();
  write(dir / "blocks.2.attn.q.npy", {6, 4}, src.q);
  write(dir / "blocks.2.attn.k.npy", {1, 6, 4}, src.k);
  write(dir / "blocks.2.attn.v.npy", {1, 6, 4}, src.v);
  models::RawTensorOptions o;
  o.causal = false;
  const Problem p = load_problem_dir(dir.string(), 2, o);
  EXPECT_EQ(p.n_heads, 1);
  EXPECT_FALSE(p.causal);
  EXPECT_ATTN_ERROR(models::load_problem_dir(dir.string(), 3), ErrorCode::Io,
                    "blocks.3.attn.q.npy");
  EXPECT_ATTN_ERROR(models::load_problem_dir(dir.string()), ErrorCode::Io, "q.npy");
}

TEST(ArchRawTensors, BadShapesAndValuesNameTheFile) {
  const auto dir = scratch_dir();
  const std::string q = (dir / "q.npy").string(), k = (dir / "k.npy").string(),
                    v = (dir / "v.npy").string(), bad = (dir / "bad.npy").string();
  write(q, {3, 4, 2}, std::vector<float>(24, 0.5f));
  write(k, {2, 4, 2}, std::vector<float>(16, 0.5f));
  write(v, {2, 4, 2}, std::vector<float>(16, 0.5f));
  EXPECT_ATTN_ERROR(models::load_problem_npy(q, k, v), ErrorCode::InvalidArgument, "q.npy",
                    "3 heads");
  write(q, {4, 4, 3}, std::vector<float>(48, 0.5f));
  EXPECT_ATTN_ERROR(models::load_problem_npy(q, k, v), ErrorCode::InvalidArgument,
                    "head dimension");
  write(q, {2, 4, 2}, std::vector<float>(16, 0.5f));
  write(v, {2, 5, 2}, std::vector<float>(20, 0.5f));
  EXPECT_ATTN_ERROR(models::load_problem_npy(q, k, v), ErrorCode::InvalidArgument, "same shape");
  write(v, {2, 4, 2}, std::vector<float>(16, 0.5f));
  write(bad, {2, 2, 2, 2}, std::vector<float>(16, 0.5f));
  EXPECT_ATTN_ERROR(models::load_problem_npy(bad, k, v), ErrorCode::InvalidArgument, "bad.npy",
                    "[2, 2, 2, 2]");
  std::vector<float> nan(16, 0.5f);
  nan[3] = NAN;
  write(bad, {2, 4, 2}, nan);
  EXPECT_ATTN_ERROR(models::load_problem_npy(bad, k, v), ErrorCode::NonFinite, "bad.npy");
  test::write_text(dir / "labels.json", R"(["x"])");
  EXPECT_ATTN_ERROR(models::load_problem_npy(q, k, v, (dir / "labels.json").string()),
                    ErrorCode::InvalidArgument, "1 labels for 4 keys");
  test::write_bytes(bad, {1, 2, 3});
  EXPECT_ATTN_ERROR(models::load_problem_npy(bad, k, v), ErrorCode::Format, "bad.npy");
}

}  // namespace
}  // namespace attn
