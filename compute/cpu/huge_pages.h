// Large buffers backed by transparent huge pages where the kernel offers them (Linux, THP in
// "madvise" mode). Faulting in fresh 4 KiB pages costs far more than filling them on some hosts
// (virtual machines above all: ~4 ms per MiB against ~0.2 ms with 2 MiB pages), and layouts,
// outputs and score tiles run to hundreds of MiB. A hint only: elsewhere nothing changes.
#pragma once
#include <cstddef>
#include <vector>

namespace attn::cpu {

// The process's allocator keeps freed blocks below 32 MiB for reuse (glibc: from its heap, and
// up to 1 GiB of freed heap kept mapped) instead of mapping and faulting them in afresh on every
// call. A reverse pass allocates ~250 MiB of traces and gradients in blocks of 1-3 MiB; with
// glibc's defaults each call maps them anew, and on a virtual machine the faults doubled its
// time. Called once at start by the executables (attnscope, attn_bench, attn_gui_bench);
// elsewhere a no-op.
void reuse_freed_memory();

// Asks for huge pages over the 2 MiB-aligned part of [p, p + bytes) (not yet touched, for the
// hint to matter). Does nothing for small ranges or where unsupported.
void advise_huge_pages(const void* p, size_t bytes);

// v.resize(n) (new elements value-initialised), advising huge pages before the new storage is
// first touched when it has to grow.
template <class T, class A>
void resize_huge(std::vector<T, A>& v, size_t n) {
  if (n > v.capacity()) {
    std::vector<T, A> grown;
    grown.reserve(n);
    advise_huge_pages(grown.data(), n * sizeof(T));
    grown.assign(v.begin(), v.end());
    v.swap(grown);
  }
  v.resize(n);
}

// v.assign(n, x) with the same hint.
template <class T>
void assign_huge(std::vector<T>& v, size_t n, const T& x) {
  if (n > v.capacity()) {
    std::vector<T>().swap(v);
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
  }
  v.assign(n, x);
}

// A copy of `src` whose storage got the hint.
template <class T>
std::vector<T> copy_huge(const std::vector<T>& src) {
  std::vector<T> out;
  out.reserve(src.size());
  advise_huge_pages(out.data(), src.size() * sizeof(T));
  out.assign(src.begin(), src.end());
  return out;
}

}  // namespace attn::cpu
