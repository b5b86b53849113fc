// What every cpu kernel shares for one execute(): the problem, the layout, the variant's score
// modifiers and normaliser, positions and causal limits materialised once, V padded to a whole
// number of vectors when d needs it, the outputs and the work counters.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "compute/layout.h"
#include "compute/problem.h"
#include "compute/score_mod.h"

namespace attn::cpu {

// The parts of a variant the kernels execute.
struct KernelSpec {
  std::vector<ScoreMod> mods;  // applied in order to the scaled score
  Normaliser norm;
  bool selective = false;  // Leviathan et al. 2024 selective attention
};

struct KernelContext {
  // `width`: floats per vector of the kernels that will run (V rows and O are padded to it).
  KernelContext(const Problem& p, const Layout& layout, const KernelSpec& spec, int width, float* o,
                float* row_stat);

  const Problem& p;
  const Layout& layout;
  const KernelSpec& spec;
  int H = 0, n_q = 0, n_k = 0, d = 0;
  int dv = 0;       // d rounded up to a multiple of the vector width (V rows, O accumulators)
  float scale = 0;  // effective score scale
  std::vector<int32_t> qpos;  // i32 [n_q]
  std::vector<int32_t> kpos;  // i32 [n_k]
  std::vector<int32_t> lim;   // i32 [n_q]: query i sees keys [0, lim[i]) under the causal rule
  float* o = nullptr;         // f32 [H, n_q, d]
  float* row_stat = nullptr;  // f32 [H, n_q]

  // Counted work, summed by all threads.
  std::atomic<int64_t> qk_entries{0};  // scores computed (2d flops each)
  std::atomic<int64_t> pv_entries{0};  // probabilities applied to V (2d flops each)
  std::atomic<int64_t> bytes{0};       // bytes read and written by the kernels

  const float* v_row(int h, int j) const {
    return v_base_ + (size_t(p.kv_head(h)) * n_k + j) * v_ld_;
  }
  size_t v_ld() const { return v_ld_; }
  // Score scale folded into Q: log2(e) too when the kernel can work in base 2 directly.
  bool base2_softmax() const;

 private:
  std::vector<float> v_pad_;  // f32 [H_kv, n_k, dv] when dv != d
  const float* v_base_ = nullptr;
  size_t v_ld_ = 0;
};

// Checks the layout against the problem; throws Error(InvalidArgument) naming the bad field.
void check_layout(const Layout& l, const Problem& p);

}  // namespace attn::cpu
