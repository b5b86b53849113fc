// Attention in reduced-precision arithmetic (compute/arith_precision.h): in f32 both forms match
// fp64, the tiled online softmax in exact arithmetic is the materialised softmax, fewer mantissa
// bits give larger errors, and rounding every partial sum costs more than f32 accumulation.
#include <gtest/gtest.h>

#include "compute/arith_precision.h"
#include "compute/error.h"

namespace attn {
namespace {

TEST(ArithPrecision, F32MatchesFp64AndTilingChangesLittle) {
  for (bool causal : {true, false})
    for (int tile : {1, 7, 64, 1000}) {
      const Problem p = random_problem(2, 1, 67, 67, 24, causal, 3);
      const std::vector<double> ref = attention_fp64(p);
      for (bool tiled : {false, true}) {
        const ArithError e =
            arith_error(attention_in_precision(p, {ArithFormat::F32, true, tiled, tile}), ref);
        EXPECT_LT(e.max_abs, 2e-6) << causal << " tile " << tile << " tiled " << tiled;
      }
    }
}

TEST(ArithPrecision, FewerBitsAndRoundedSumsGiveLargerErrors) {
  const Problem p = random_problem(2, 2, 300, 300, 64, true, 5);
  const std::vector<double> ref = attention_fp64(p);
  const auto err = [&](ArithFormat f, bool acc, bool tiled) {
    return arith_error(attention_in_precision(p, {f, acc, tiled, 64}), ref).mean_abs;
  };
  for (bool tiled : {false, true}) {
    const double f32 = err(ArithFormat::F32, true, tiled),
                 fp16 = err(ArithFormat::Fp16, true, tiled),
                 bf16 = err(ArithFormat::Bf16, true, tiled);
    EXPECT_LT(f32 * 50, fp16) << tiled;
    EXPECT_LT(fp16 * 3, bf16) << tiled;  // 10 mantissa bits against 7
    EXPECT_LT(bf16, 0.05) << tiled;
    EXPECT_GT(err(ArithFormat::Bf16, false, tiled), bf16) << tiled;
  }
}

TEST(ArithPrecision, BadOptionsAndSizesSaySo) {
  const Problem p = random_problem(1, 1, 8, 8, 4, true, 1);
  EXPECT_THROW(attention_in_precision(p, {ArithFormat::Bf16, true, true, 0}), Error);
  EXPECT_THROW(arith_error(std::vector<float>(3), std::vector<double>(4)), Error);
}

}  // namespace
}  // namespace attn
