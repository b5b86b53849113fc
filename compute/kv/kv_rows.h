// The bytes of a KV cache: one layer's keys or values, row by row, in the storage format of the
// policy's precision piece (compute/kv/kv_policy.h), and nothing else. Attention reads these
// bytes (compute/kv/kv_attend.h), dequantising in registers; bytes() is what the buffers
// allocated.
//
// Layout, per KV head (rows are the cache's physical rows: models/arch/kv_cache.h keeps which
// entry sits in which row):
//   codes  u8 [capacity, stride]   f32 4 bytes, bf16 / f16 2, fp8 1 per element; int-N codes
//                                   N bits each in blocks of 16 bytes: byte j of block b holds
//                                   elements b * E + j + 16 * s at bits s * N (E = 128 / N),
//                                   so 16 consecutive codes are one block shifted and masked
//   scales f32 [capacity, groups, 2]  per-token int: each group's minimum and scale
//   group  i32 [capacity]            per-channel int: the row's group in `table` (-1: none)
//   table  f32 [slots, 2, d]         per-channel int: minimum and scale of each channel
//   side   i32 [capacity]            int: the row's f32 copy in `pool` (-1: none): rows waiting
//                                    for their per-channel group to fill, and rows whose values
//                                    codes cannot hold (a group quantise_codes refuses)
//   pool   f32 [slots, d]
// A decoded element is exactly what the precision's rounding function in kv_precision.h returns
// for it (round_bf16, round_fp16, round_fp8, quantise_group).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// How a cached K or V tensor holds its elements.
struct KvFormat {
  enum class Kind : uint8_t { F32, Bf16, F16, E4m3, E5m2, Int };
  Kind kind = Kind::F32;
  int bits = 32;             // bits of one element's code (Int: 2, 4 or 8)
  int group = 0;             // Int: elements sharing a minimum and scale
  bool per_channel = false;  // Int: groups run along tokens, channel by channel (KIVI's keys)

  bool operator==(const KvFormat&) const = default;
};

// "f32", "bf16", "f16", "e4m3", "e5m2", "int4 g32 token", "int4 g32 channel".
std::string kv_format_name(const KvFormat& f);

class KvRows {
 public:
  KvRows() = default;
  KvRows(const KvFormat& format, int heads, int d);

  const KvFormat& format() const { return format_; }
  int heads() const { return int(heads_.size()); }
  int dim() const { return d_; }
  int capacity() const { return capacity_; }
  // Bytes of one row's codes.
  int stride() const { return stride_; }
  // Per-token int groups of a row: ceil(d / group).
  int groups() const { return groups_; }

  // Grows every head to `capacity` rows, keeping rows 0 .. capacity() - 1.
  void reserve(int capacity);
  // Stores rows x f32 [n, d] as head h's rows row0 .. row0 + n - 1 (rows that hold nothing:
  // new or released). Per-channel int keeps them in f32 until seal() groups them.
  void write(int h, int row0, const float* x, int n);
  // Per-channel int: quantises the n rows `rows` (written and not sealed), one group along
  // tokens per channel, as quantise_group would.
  void seal(int h, const int32_t* rows, int n);
  // Forgets row r's contents (its f32 copy, its share of a group).
  void release(int h, int r);
  // Row `to` (holding nothing) takes row `from`'s contents; `from` then holds nothing.
  void move(int h, int from, int to);
  // Row r of head h as attention reads it: f32 [d].
  void decode(int h, int r, float* out) const;
  // Bytes the buffers allocated (each buffer's capacity times its element size), summed.
  int64_t bytes() const;

  // ---- what the kernels read (compute/kv/kv_kernels.cpp) ----
  struct Head {
    std::vector<uint8_t> codes;  // u8 [capacity, stride] (the kernels never read past a row)
    std::vector<float> scales;   // f32 [capacity, groups, 2]: lo, scale (per-token int)
    std::vector<int32_t> group;  // i32 [capacity] (per-channel int)
    std::vector<float> table;    // f32 [slots, 2, d]: lo row, scale row (per-channel int)
    std::vector<int32_t> refs;   // i32 [slots]: rows using each table slot
    std::vector<int32_t> side;   // i32 [capacity] (int)
    std::vector<float> pool;     // f32 [slots, d]
    std::vector<int32_t> free_table, free_pool;  // unused slots
  };
  const Head& head(int h) const { return heads_[size_t(h)]; }

 private:
  int alloc_pool(Head& hd);
  int alloc_table(Head& hd);
  void encode(Head& hd, int r, const float* x);

  KvFormat format_;
  int d_ = 0, capacity_ = 0, stride_ = 0, groups_ = 0;
  std::vector<Head> heads_;
};

}  // namespace attn
