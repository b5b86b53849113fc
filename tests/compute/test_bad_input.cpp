// Bad input reaches the user as a clear error, never a crash.
#include <gtest/gtest.h>

#include <cmath>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "test_util.h"

using namespace attn;
using attn::test::error_of;

namespace {

TEST(BadInput, RunRejectsBrokenProblems) {
  for (const char* backend_name : {"reference", "cpu"}) {
    auto backend = make_backend(backend_name);
    Variant v = make_variant("window(size=8)");
    Problem p = random_problem(2, 2, 9, 9, 16, true, 1);
    p.v.resize(p.v.size() - 3);
    EXPECT_NE(error_of([&] { run(v, p, *backend); }, ErrorCode::InvalidArgument).find("V has"),
              std::string::npos);
    p = random_problem(2, 2, 9, 9, 16, true, 1);
    p.d = 0;
    error_of([&] { run(v, p, *backend); }, ErrorCode::InvalidArgument);
    p = random_problem(2, 2, 9, 9, 16, true, 1);
    p.q[5] = NAN;
    error_of([&] { run(v, p, *backend); }, ErrorCode::NonFinite);
    p = random_problem(2, 2, 9, 9, 16, true, 1);
    p.k[7] = -INFINITY;
    error_of([&] { run(v, p, *backend); }, ErrorCode::NonFinite);
    p = random_problem(2, 2, 0, 0, 16, true, 1);
    error_of([&] { run(v, p, *backend); }, ErrorCode::InvalidArgument);
  }
}

TEST(BadInput, UnknownNamesAreListed) {
  std::string m = error_of([] { make_variant("windw(size=3)"); }, ErrorCode::UnknownVariant);
  EXPECT_NE(m.find("windw"), std::string::npos) << m;
  EXPECT_NE(m.find("window"), std::string::npos) << "known ids should be listed: " << m;
  m = error_of([] { make_backend("tpu"); }, ErrorCode::InvalidArgument);
  EXPECT_NE(m.find("cpu"), std::string::npos) << m;
}

TEST(BadInput, ParametersAreRangeChecked) {
  std::string m = error_of([] { make_variant("window(size=-5)"); }, ErrorCode::BadParameter);
  EXPECT_NE(m.find("size"), std::string::npos) << m;
  error_of([] { make_variant("window(size=2.5)"); }, ErrorCode::BadParameter);
  error_of([] { make_variant("window(width=3)"); }, ErrorCode::BadParameter);
  error_of([] { make_variant("sinks_window(sinks=4,window=1e12)"); }, ErrorCode::BadParameter);
}

TEST(BadInput, CancelFlagStopsWork) {
  Problem p = random_problem(4, 4, 512, 512, 32, true, 1);
  std::atomic<bool> cancel{true};
  RunOptions opt;
  opt.cancel = &cancel;
  for (const char* backend_name : {"reference", "cpu"}) {
    auto backend = make_backend(backend_name);
    error_of([&] { run(make_variant("dense"), p, *backend, opt); }, ErrorCode::Cancelled);
  }
}

}  // namespace
