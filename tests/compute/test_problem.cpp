#include <gtest/gtest.h>

#include <cmath>

#include "compute/error.h"
#include "compute/problem.h"

using namespace attn;

TEST(Problem, ValidRandomProblemPasses) {
  Problem p = random_problem(4, 2, 7, 7, 32, true, 1);
  EXPECT_NO_THROW(validate(p));
  EXPECT_EQ(p.kv_head(3), 1);
  EXPECT_EQ(p.qpos(0), 0);
  EXPECT_FLOAT_EQ(p.effective_scale(), 1.0f / std::sqrt(32.0f));
}

TEST(Problem, BadShapesGiveClearErrors) {
  Problem p = random_problem(2, 2, 5, 5, 16, true, 1);
  p.d = 0;
  try {
    validate(p);
    FAIL() << "d = 0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("head dimension"), std::string::npos);
  }
  p = random_problem(3, 2, 5, 5, 16, true, 1);
  EXPECT_THROW(validate(p), Error);  // 3 heads over 2 kv heads
  p = random_problem(2, 2, 5, 5, 16, true, 1);
  p.k.pop_back();
  try {
    validate(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K has"), std::string::npos) << e.what();
  }
}

TEST(Problem, NonFiniteInputsAreNamed) {
  Problem p = random_problem(2, 1, 5, 5, 8, false, 3);
  p.v[1 * 8 + 3] = NAN;
  try {
    validate(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NonFinite);
    EXPECT_NE(
        std::string(e.what()).find("V has a non-finite value (NaN) at head 0, token 1, dim 3"),
        std::string::npos)
        << e.what();
  }
  p = random_problem(2, 1, 5, 5, 8, false, 3);
  p.q.back() = INFINITY;
  EXPECT_THROW(validate(p), Error);
}

TEST(Problem, PositionsMustIncrease) {
  Problem p = random_problem(1, 1, 3, 3, 8, true, 3);
  p.k_pos = {0, 2, 1};
  EXPECT_THROW(validate(p), Error);
  p.k_pos = {0, 1};
  EXPECT_THROW(validate(p), Error);
}
