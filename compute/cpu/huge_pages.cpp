#include "compute/cpu/huge_pages.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
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

}  // namespace attn::cpu
