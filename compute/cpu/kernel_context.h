// What every cpu kernel shares for one execute(): the problem, the layout, the variant's score
// modifiers and normaliser, positions and causal limits materialised once, V padded to a whole
// number of vectors when d needs it, the outputs and the work counters; with a 16-bit precision,
// Q, K and V converted once into that storage, which the kernels then read instead.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "compute/host_buffer.h"
#include "compute/layout.h"
#include "compute/precision.h"
#include "compute/problem.h"
#include "compute/score_mod.h"

namespace attn::cpu {

// The parts of a variant the kernels execute.
struct KernelSpec {
  std::vector<ScoreMod> mods;  // applied in order to the scaled score
  Normaliser norm;
  bool selective = false;  // Leviathan et al. 2024 selective attention
};

// Where bf16 storage runs its tile products (the flash kernel's tiles, key lists' dense tiles):
// nowhere (rows widened to f32 for the f32 micro-kernels), AMX tiles, or vdpbf16ps
// (dpbf16_tiles.h) on CPUs with AVX512-BF16 and no AMX.
enum class TileUnit : uint8_t { None, Amx, Dpbf16 };

// 16-bit storage (bf16 or f16 bit patterns), 64-byte aligned, not zeroed on resize.
using HalfBuffer = std::vector<uint16_t, UninitAllocator<uint16_t>>;

struct KernelContext {
  // `width`: floats per vector of the kernels that will run (V rows and O are padded to it).
  // `prec`: storage of Q, K and V; 16-bit storage is filled by the kernel set's convert().
  KernelContext(const Problem& p, const Layout& layout, const KernelSpec& spec, int width, float* o,
                float* row_stat, Precision prec = Precision::F32);

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

  // Reduced precision (prec != F32): Q, K and V as 16-bit values, rounded to nearest even.
  Precision prec = Precision::F32;
  // bf16 tile products (set before convert(): V is then stored transposed too).
  TileUnit tiles = TileUnit::None;
  bool bf16_tiles() const { return tiles != TileUnit::None; }
  HalfBuffer q16;   // u16 [H, n_q, d]
  HalfBuffer k16;   // u16 [H_kv, n_k, d], then kPadRows rows of zeros (whole tiles read past)
  HalfBuffer v16;   // u16 [H_kv, n_k, dv] (not with bf16 tiles but for key lists)
  HalfBuffer vt16;  // u16 [H_kv, dv, vt_ld]: V transposed, keys past n_k zero (bf16 tiles only)
  size_t vt_ld = 0;
  static constexpr int kPadRows = 16;
  bool half() const { return prec != Precision::F32; }
  const uint16_t* q16_row(int h, int i) const { return q16.data() + (size_t(h) * n_q + i) * d; }
  const uint16_t* k16_row(int h, int j) const {
    return k16.data() + (size_t(p.kv_head(h)) * n_k + j) * d;
  }
  const uint16_t* v16_row(int h, int j) const {
    return v16.data() + (size_t(p.kv_head(h)) * n_k + j) * dv;
  }
  // Dimension 0 of V^T for head h, from key j (row c at + c * vt_ld).
  const uint16_t* vt16_at(int h, int j) const {
    return vt16.data() + size_t(p.kv_head(h)) * dv * vt_ld + j;
  }
  // Key lists read V^T only in their dense tiles, which often cover few keys (a top-k's early
  // rows): there convert() leaves V^T to be filled on first use, kVtBlock keys at a time, by
  // fill(kv head, j0, j1). ensure_vt makes keys [j0, j1) of head h's V^T ready (any thread; a
  // block another thread is filling is waited for). A no-op where V^T was filled up front.
  static constexpr int kVtBlock = 256;
  void ensure_vt(int h, int j0, int j1);
  void make_vt_lazy(std::function<void(int g, int j0, int j1)> fill);

 private:
  std::function<void(int g, int j0, int j1)> vt_fill_;
  std::unique_ptr<std::atomic<uint8_t>[]> vt_state_;  // per (kv head, block): 0, 1 filling, 2 ready
  int vt_blocks_ = 0;                                 // blocks per kv head
  std::vector<float> v_pad_;                          // f32 [H_kv, n_k, dv] when dv != d
  const float* v_base_ = nullptr;
  size_t v_ld_ = 0;
};

// Checks the layout against the problem; throws Error(InvalidArgument) naming the bad field.
void check_layout(const Layout& l, const Problem& p);

}  // namespace attn::cpu
