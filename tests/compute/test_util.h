// Shared helpers for compute tests.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "compute/error.h"

namespace attn::test {

// ATTN_TEST_QUICK=1 (sanitizer builds) shrinks the largest cases.
inline bool quick() {
  const char* q = std::getenv("ATTN_TEST_QUICK");
  return q && std::string(q) == "1";
}

// The message of the attn::Error that f() throws; a test failure when f throws none, or one with
// another code than `want`.
template <typename F>
std::string error_of(F&& f, ErrorCode want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(want)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace attn::test
