#include "compute/cpu/huge_pages.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace attn::cpu {

void advise_huge_pages(const void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (!p || bytes < 2 * kHuge) return;
  const uintptr_t lo = (uintptr_t(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (uintptr_t(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

void reuse_freed_memory() {
#if defined(__GLIBC__)
  // 32 MiB is the largest mmap threshold glibc accepts; a set threshold also stops its dynamic
  // one, which would otherwise trim what the next call needs.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace attn::cpu
