// What the packed-panel GEMM paths share: how they split C among threads (gemm_avx512.cpp,
// gemm_dpbf16.cpp), and the dpbf16 path's store of kept weights (GemmPackScope).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "compute/cpu/gemm.h"

namespace attn::cpu {

// Calls block(m0, m1, n0, n1) for each part of C on up to `threads` threads (0 = all): columns
// split in whole nr-wide micro-panels while every thread gets at least two, else rows in whole
// mr-row steps as well. Each call packs its own panels.
void gemm_split(const GemmArgs& g, int threads, int mr, int nr,
                const std::function<void(int, int, int, int)>& block);

// The dpbf16 path's weights packed whole, kept while a GemmPackScope lives on the calling thread
// (gemm.h; the scope installs the store, gemm_dpbf16.cpp fills it): k block i's micro-panels of
// every column at offset[i], as one per-call packing of all n columns would write them.
struct DpPackedB {
  struct Free {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  const void* b = nullptr;
  ElemType type = ElemType::F32;
  int ldb = 0, k = 0, n = 0;
  bool nk = false;
  std::vector<size_t> offset;
  std::unique_ptr<uint32_t[], Free> data;
  bool same(const GemmArgs& g) const {
    return b == g.b && type == g.b_type && ldb == g.ldb && k == g.k && n == g.n && nk == g.b_nk;
  }
  void describe(const GemmArgs& g) {  // what same() compares
    b = g.b, type = g.b_type, ldb = g.ldb, k = g.k, n = g.n, nk = g.b_nk;
  }
};
struct DpPackStore {
  size_t budget = 0, bytes = 0;
  std::vector<std::unique_ptr<DpPackedB>> entries;
};
extern thread_local DpPackStore* t_dp_pack_store;

}  // namespace attn::cpu
