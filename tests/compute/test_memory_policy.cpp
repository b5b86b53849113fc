// The allocator policy the executables set at start (reuse_freed_memory): blocks of the sizes a
// reverse pass allocates, freed and allocated again, come back without faulting pages in afresh.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "compute/cpu/huge_pages.h"

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Minor page faults while 32 blocks of 3 MiB are allocated and written once.
long faults_of_one_round(std::vector<void*>& blocks) {
  constexpr size_t kBlock = size_t(3) << 20;
  const long before = minor_faults();
  for (void*& b : blocks) {
    b = std::malloc(kBlock);
    std::memset(b, 1, kBlock);
  }
  return minor_faults() - before;
}

TEST(MemoryPolicy, FreedBlocksAreReusedWithoutFaultingPagesInAgain) {
#if !defined(__GLIBC__) || !defined(__linux__)
  GTEST_SKIP() << "the policy is glibc's (elsewhere the call does nothing)";
#endif
  if (kSanitized) GTEST_SKIP() << "a sanitizer's allocator replaces glibc's";
  attn::cpu::reuse_freed_memory();
  std::vector<void*> blocks(32);
  const long first = faults_of_one_round(blocks);
  for (void* b : blocks) std::free(b);
  const long second = faults_of_one_round(blocks);
  for (void* b : blocks) std::free(b);
  // 96 MiB is 24,576 pages of 4 KiB (fewer where huge pages back it): the first round faults
  // them in; the second reuses them. With glibc's defaults each block is mapped afresh.
  EXPECT_GT(first, 40);
  EXPECT_LT(second, first / 10) << "first round " << first << " faults, second " << second;
}

}  // namespace
