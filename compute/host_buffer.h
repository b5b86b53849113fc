// Large host arrays that the kernels fill completely (logits, captured patterns): resizing them
// leaves the elements uninitialised instead of zeroing them on one thread first, so the pages are
// first touched by the parallel kernels that write them. Big blocks ask for transparent huge
// pages, which turns ~25k page faults for 100 MB of logits into ~50.
#pragma once
#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

namespace attn {

namespace detail {
void* host_alloc(std::size_t bytes);  // 64-byte aligned; huge pages requested from 2 MiB
void host_free(void* p, std::size_t bytes) noexcept;
}  // namespace detail

// 64-byte aligned storage (huge pages from 2 MiB) with std::vector's usual zeroing resize. Q, K
// and V rows live in it: with a row stride of a whole number of lines (d = 16, 32, 64, ...) every
// row then starts on a line, where malloc's 16-byte alignment split each row read by the gather
// and lines kernels over one line more (their L2-bound loads ran ~2x slower, tests/bench's
// cpu_gather_ceiling rows).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(detail::host_alloc(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { detail::host_free(p, n * sizeof(T)); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

// The same storage whose resize(n) default-initialises: no write at all for trivial T.
// resize(n, v) still fills.
template <typename T>
struct UninitAllocator : AlignedAllocator<T> {
  static_assert(std::is_trivially_default_constructible_v<T>);
  using value_type = T;
  UninitAllocator() = default;
  template <typename U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// f32 array whose resize() does not zero: every element must be written before it is read.
using FloatBuffer = std::vector<float, UninitAllocator<float>>;

using AlignedFloats = std::vector<float, AlignedAllocator<float>>;

}  // namespace attn
