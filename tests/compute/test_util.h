// Shared helpers for compute tests.
#pragma once
#include <cstdlib>
#include <string>

namespace attn::test {

// ATTN_TEST_QUICK=1 (sanitizer builds) shrinks the largest cases.
inline bool quick() {
  const char* q = std::getenv("ATTN_TEST_QUICK");
  return q && std::string(q) == "1";
}

}  // namespace attn::test
