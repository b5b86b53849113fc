// The fast CPU backend ("cpu"): tiled, multi-threaded kernels with an online softmax that
// execute a layout sparsely (only kept blocks or listed keys are computed), with extra memory
// O(n_k * d) per kv head plus O(kBQ * n_k) per thread at most (entmax, selective).
//
// Conventions beyond score_mod.h: a query row with no kept key gets O = 0 and row stat 0.
// stats.counted.flops = 2d per computed score + 2d per probability applied to V; entries
// computed include masked-out ones inside computed key chunks (diagonal tiles, partial blocks).
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
  // The same, for a variant given as its parts.
  Result execute_spec(const KernelSpec& spec, const Problem& p, const Layout& layout,
                      const RunOptions& opt);

 private:
  std::mutex mu_;  // one execute at a time per backend object (the pool is shared)
  const KernelSet* kernels_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace cpu
}  // namespace attn
