#include "compute/host_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace attn::detail {
namespace {
constexpr std::size_t kAlign = 64;
constexpr std::size_t kHuge = std::size_t(2) << 20;
}  // namespace

void* host_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // Huge-page alignment for big blocks so that madvise covers whole 2 MiB pages.
  const std::size_t align = bytes >= kHuge ? kHuge : kAlign;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (bytes >= kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // advisory: ignored where unsupported
#endif
  return p;
}

void host_free(void* p, std::size_t) noexcept {
  std::free(p);
}

}  // namespace attn::detail
