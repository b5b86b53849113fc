// The fast CPU backend ("cpu"): tiled, multi-threaded kernels with an online softmax that
// execute a layout sparsely (only kept blocks or listed keys are computed). No N x N buffer:
// extra memory is a few tiles per thread, plus O(kBQ * n_k) per thread for entmax and selective
// rows, O(n_k) per head for selective's accumulator, a padded copy of V when d is not a whole
// number of vectors, and the copy of the layout kept in the Result (none through
// execute_owned, which moves it there). With RunOptions::precision bf16 or f16, Q, K and V are
// converted once per execute into 16-bit storage that the kernels read (half_rows.h); the
// backend keeps that storage for its next execute (2 bytes per element of Q, K and V, V twice
// for key lists on bf16 tiles).
// Kernels: flash_kernel (Dense, Blocks), gather_kernel (Indices), selective_kernel; each built
// for the baseline ISA and, in x86-64-v3 builds, for AVX-512 too, with bf16 tile products on
// AMX or vdpbf16ps where the CPU has them (kernel_set.h picks at run time; env
// ATTNSCOPE_CPU_ISA=avx512amx|avx512bf16|avx512|avx2 forces one). Threads: RunOptions::threads,
// else env ATTNSCOPE_THREADS, else all hardware threads.
//
// Conventions beyond score_mod.h: a query row with no kept key gets O = 0 and row stat 0.
// stats.counted.flops = 2d per computed score + 2d per probability applied to V; entries
// computed include masked-out ones inside computed key chunks (diagonal tiles, partial blocks);
// chunks whose probabilities are all zero (entmax) skip the V product and are not counted there.
// stats.counted.bytes = Q, K, V, O and row stats as read/written by the kernels (K and V once
// per query tile that uses them), plus layout indices and any padded copy of V.
#pragma once
#include <memory>
#include <mutex>

#include "compute/backend.h"
#include "compute/cpu/kernel_context.h"
#include "compute/cpu/kernel_set.h"

namespace attn {

std::unique_ptr<Backend> make_cpu_backend();

namespace cpu {

class ThreadPool;

class CpuBackend : public Backend {
 public:
  // `kernels`: the instruction-set build to run (null = best_kernels()).
  explicit CpuBackend(const KernelSet* kernels = nullptr);
  ~CpuBackend() override;
  const char* isa() const { return kernels_->isa; }
  std::string name() const override { return "cpu"; }
  bool supports(const Variant& v, const Problem& p, std::string* why) const override;
  Result execute(const Variant& v, const Problem& p, const Layout& layout,
                 const RunOptions& opt) override;
  Result execute_owned(const Variant& v, const Problem& p, Layout&& layout,
                       const RunOptions& opt) override;
  // The same, for a variant given as its parts. With `owned` (the address of `layout`), the
  // layout moves into the result instead of being copied.
  Result execute_spec(const KernelSpec& spec, const Problem& p, const Layout& layout,
                      const RunOptions& opt, Layout* owned = nullptr);

 private:
  std::mutex mu_;  // one execute at a time per backend object (the pool is shared)
  const KernelSet* kernels_;
  std::unique_ptr<ThreadPool> pool_;
  struct {
    HalfBuffer q, k, v, vt;
  } half_;  // 16-bit storage kept between executes (KernelContext::q16 ...)
};

}  // namespace cpu
}  // namespace attn
