#include "compute/kv/kv_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "compute/error.h"
#include "compute/half_bits.h"
#include "compute/kv/kv_precision.h"

namespace attn {

namespace {

uint16_t f16_bits(float x) {
  return f16_value_to_bits(x);  // exact for the values round_fp16 returns
}

float f16_value(uint16_t b) {
  return f16_bits_to_float(b);
}

uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);  // a quiet NaN
  return uint16_t(u >> 16);  // round_bf16 cleared the low half
}

// OCP FP8 codes of values round_fp8 returned (finite or NaN). e4m3 is an f16 with the exponent
// field's top bit and the low 7 mantissa bits dropped, scaled by 2^-8; e5m2 is an f16's top byte.
uint8_t e4m3_bits(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7F;
  const uint16_t h = f16_bits(x * (1.0f / 256));
  return uint8_t(sign | ((h >> 7) & 0x7F));
}

uint8_t e5m2_bits(float x) {
  return uint8_t(f16_bits(x) >> 8);
}

float e4m3_value(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return (b & 0x80) ? -NAN : NAN;
  return f16_value(uint16_t(((b & 0x80) << 8) | ((b & 0x7F) << 7))) * 256.0f;
}

float e5m2_value(uint8_t b) {
  return f16_value(uint16_t(b << 8));
}

// Where element c of a row sits: byte j of 16-byte block b holds elements b * E + j + 16 * s at
// bits s * bits (E = 128 / bits elements per block), so 16 consecutive elements are one block
// shifted and masked.
int code_byte(int c, int bits) {
  const int per_block = 128 / bits;
  return c / per_block * 16 + c % 16;
}
int code_shift(int c, int bits) {
  return c % (128 / bits) / 16 * bits;
}

void put_code(uint8_t* row, int c, int bits, uint8_t v) {
  row[code_byte(c, bits)] = uint8_t(row[code_byte(c, bits)] | (v << code_shift(c, bits)));
}

uint8_t get_code(const uint8_t* row, int c, int bits) {
  return uint8_t((row[code_byte(c, bits)] >> code_shift(c, bits)) & ((1 << bits) - 1));
}

// Bytes of a row of d elements: f32, bf16, f16 and fp8 d times their size; int codes their
// blocks, the last one only as far as its highest byte.
int row_bytes(const KvFormat& f, int d) {
  if (f.kind != KvFormat::Kind::Int) return d * (f.kind == KvFormat::Kind::F32 ? 4 : f.bits / 8);
  const int per_block = 128 / f.bits, full = d / per_block, rest = d % per_block;
  return full * 16 + std::min(rest, 16);
}

template <class T>
int64_t allocated(const std::vector<T>& v) {
  return int64_t(v.capacity() * sizeof(T));
}

// A new vector of `n` elements `fill` whose first `keep` come from `old`: allocates exactly n.
template <class T>
void regrow(std::vector<T>& v, size_t n, size_t keep, T fill) {
  std::vector<T> g(n, fill);
  std::copy_n(v.data(), std::min(keep, v.size()), g.data());
  v.swap(g);
}

}  // namespace

std::string kv_format_name(const KvFormat& f) {
  switch (f.kind) {
    case KvFormat::Kind::F32:
      return "f32";
    case KvFormat::Kind::Bf16:
      return "bf16";
    case KvFormat::Kind::F16:
      return "f16";
    case KvFormat::Kind::E4m3:
      return "e4m3";
    case KvFormat::Kind::E5m2:
      return "e5m2";
    case KvFormat::Kind::Int:
      return "int" + std::to_string(f.bits) + " g" + std::to_string(f.group) +
             (f.per_channel ? " channel" : " token");
  }
  return "?";
}

KvRows::KvRows(const KvFormat& format, int heads, int d) : format_(format), d_(d) {
  const bool is_int = format.kind == KvFormat::Kind::Int;
  require(d > 0 && heads > 0, ErrorCode::InvalidArgument, "KV rows: empty shape");
  require(
      !is_int || ((format.bits == 2 || format.bits == 4 || format.bits == 8) && format.group >= 1),
      ErrorCode::InvalidArgument, "KV rows: int codes take 2, 4 or 8 bits and a group");
  stride_ = row_bytes(format, d);
  groups_ = is_int && !format.per_channel ? (d + format.group - 1) / format.group : 0;
  heads_.resize(size_t(heads));
}

void KvRows::reserve(int capacity) {
  if (capacity <= capacity_) return;
  const bool is_int = format_.kind == KvFormat::Kind::Int;
  const size_t old = size_t(capacity_), cap = size_t(capacity);
  for (Head& hd : heads_) {
    regrow(hd.codes, cap * stride_, old * stride_, uint8_t(0));
    if (groups_ > 0) regrow(hd.scales, cap * groups_ * 2, old * groups_ * 2, 0.0f);
    if (format_.per_channel) regrow(hd.group, cap, old, -1);
    if (is_int) regrow(hd.side, cap, old, -1);
  }
  capacity_ = capacity;
}

int KvRows::alloc_pool(Head& hd) {
  if (!hd.free_pool.empty()) {
    const int s = hd.free_pool.back();
    hd.free_pool.pop_back();
    return s;
  }
  const int s = int(hd.pool.size() / size_t(d_));
  hd.pool.resize(hd.pool.size() + size_t(d_));
  return s;
}

int KvRows::alloc_table(Head& hd) {
  if (!hd.free_table.empty()) {
    const int s = hd.free_table.back();
    hd.free_table.pop_back();
    return s;
  }
  const int s = int(hd.refs.size());
  hd.refs.push_back(0);
  hd.table.resize(hd.table.size() + 2 * size_t(d_));
  return s;
}

void KvRows::encode(Head& hd, int r, const float* x) {
  uint8_t* row = hd.codes.data() + size_t(r) * stride_;
  const int d = d_;
  switch (format_.kind) {
    case KvFormat::Kind::F32:
      std::memcpy(row, x, size_t(d) * 4);
      return;
    case KvFormat::Kind::Bf16:
      for (int c = 0; c < d; ++c) {
        const uint16_t b = bf16_bits(round_bf16(x[c]));
        std::memcpy(row + 2 * c, &b, 2);
      }
      return;
    case KvFormat::Kind::F16:
      for (int c = 0; c < d; ++c) {
        const uint16_t b = f16_bits(round_fp16(x[c]));
        std::memcpy(row + 2 * c, &b, 2);
      }
      return;
    case KvFormat::Kind::E4m3:
      for (int c = 0; c < d; ++c) row[c] = e4m3_bits(round_fp8(x[c], true));
      return;
    case KvFormat::Kind::E5m2:
      for (int c = 0; c < d; ++c) row[c] = e5m2_bits(round_fp8(x[c], false));
      return;
    case KvFormat::Kind::Int:
      break;
  }
  // Per-token int: each group of `group` channels its codes, minimum and scale; a row with a
  // group that codes cannot hold keeps its values (as quantise_group leaves them) in f32.
  const int bits = format_.bits, group = format_.group;
  std::fill_n(row, stride_, uint8_t(0));
  std::vector<uint8_t> codes(static_cast<size_t>(group));
  float* sc = hd.scales.data() + size_t(r) * groups_ * 2;
  for (int g = 0; g < groups_; ++g) {
    const int c0 = g * group, n = std::min(group, d - c0);
    if (!quantise_codes(x + c0, n, 1, bits, codes.data(), sc[2 * g], sc[2 * g + 1])) {
      const int s = alloc_pool(hd);
      float* y = hd.pool.data() + size_t(s) * d;
      std::copy_n(x, d, y);
      for (int g2 = 0; g2 < groups_; ++g2)
        quantise_group(y + g2 * group, std::min(group, d - g2 * group), 1, bits);
      hd.side[size_t(r)] = s;
      return;
    }
    for (int j = 0; j < n; ++j) put_code(row, c0 + j, bits, codes[size_t(j)]);
  }
}

void KvRows::write(int h, int row0, const float* x, int n) {
  Head& hd = heads_[size_t(h)];
  for (int i = 0; i < n; ++i) {
    const int r = row0 + i;
    const float* src = x + size_t(i) * d_;
    if (format_.per_channel) {  // waits for its group in f32
      const int s = alloc_pool(hd);
      std::copy_n(src, d_, hd.pool.data() + size_t(s) * d_);
      hd.side[size_t(r)] = s;
      hd.group[size_t(r)] = -1;
    } else {
      encode(hd, r, src);
    }
  }
}

void KvRows::seal(int h, const int32_t* rows, int n) {
  require(format_.per_channel, ErrorCode::InvalidArgument, "KV rows: seal() groups channels");
  Head& hd = heads_[size_t(h)];
  const int d = d_, bits = format_.bits;
  std::vector<float> col(static_cast<size_t>(n)), lo(static_cast<size_t>(d)),
      scale(static_cast<size_t>(d));
  std::vector<uint8_t> codes(size_t(n) * d);
  const auto value = [&](int j, int c) -> float& {
    return hd.pool[size_t(hd.side[size_t(rows[j])]) * d + c];
  };
  bool coded = true;
  for (int c = 0; c < d && coded; ++c) {
    for (int j = 0; j < n; ++j) col[size_t(j)] = value(j, c);
    coded = quantise_codes(col.data(), n, 1, bits, codes.data() + size_t(c) * n, lo[size_t(c)],
                           scale[size_t(c)]);
  }
  if (!coded) {  // the rows keep their values in f32, each channel as quantise_group leaves it
    for (int c = 0; c < d; ++c) {
      for (int j = 0; j < n; ++j) col[size_t(j)] = value(j, c);
      quantise_group(col.data(), n, 1, bits);
      for (int j = 0; j < n; ++j) value(j, c) = col[size_t(j)];
    }
    return;
  }
  const int g = alloc_table(hd);
  std::copy(lo.begin(), lo.end(), hd.table.begin() + ptrdiff_t(g) * 2 * d);
  std::copy(scale.begin(), scale.end(), hd.table.begin() + ptrdiff_t(g) * 2 * d + d);
  hd.refs[size_t(g)] = n;
  for (int j = 0; j < n; ++j) {
    const int r = rows[j];
    uint8_t* row = hd.codes.data() + size_t(r) * stride_;
    std::fill_n(row, stride_, uint8_t(0));
    for (int c = 0; c < d; ++c) put_code(row, c, bits, codes[size_t(c) * n + j]);
    hd.free_pool.push_back(hd.side[size_t(r)]);
    hd.side[size_t(r)] = -1;
    hd.group[size_t(r)] = g;
  }
}

void KvRows::release(int h, int r) {
  Head& hd = heads_[size_t(h)];
  if (!hd.side.empty() && hd.side[size_t(r)] >= 0) {
    hd.free_pool.push_back(hd.side[size_t(r)]);
    hd.side[size_t(r)] = -1;
  }
  if (!hd.group.empty() && hd.group[size_t(r)] >= 0) {
    const int g = hd.group[size_t(r)];
    if (--hd.refs[size_t(g)] == 0) hd.free_table.push_back(g);
    hd.group[size_t(r)] = -1;
  }
}

void KvRows::move(int h, int from, int to) {
  Head& hd = heads_[size_t(h)];
  std::memcpy(hd.codes.data() + size_t(to) * stride_, hd.codes.data() + size_t(from) * stride_,
              size_t(stride_));
  if (groups_ > 0)
    std::copy_n(hd.scales.data() + size_t(from) * groups_ * 2, groups_ * 2,
                hd.scales.data() + size_t(to) * groups_ * 2);
  for (std::vector<int32_t>* ids : {&hd.side, &hd.group}) {
    if (ids->empty()) continue;
    (*ids)[size_t(to)] = (*ids)[size_t(from)];
    (*ids)[size_t(from)] = -1;
  }
}

void KvRows::decode(int h, int r, float* out) const {
  const Head& hd = heads_[size_t(h)];
  const int d = d_;
  if (!hd.side.empty() && hd.side[size_t(r)] >= 0) {
    std::copy_n(hd.pool.data() + size_t(hd.side[size_t(r)]) * d, d, out);
    return;
  }
  const uint8_t* row = hd.codes.data() + size_t(r) * stride_;
  switch (format_.kind) {
    case KvFormat::Kind::F32:
      std::memcpy(out, row, size_t(d) * 4);
      return;
    case KvFormat::Kind::Bf16:
      for (int c = 0; c < d; ++c) {
        uint16_t b;
        std::memcpy(&b, row + 2 * c, 2);
        out[c] = std::bit_cast<float>(uint32_t(b) << 16);
      }
      return;
    case KvFormat::Kind::F16:
      for (int c = 0; c < d; ++c) {
        uint16_t b;
        std::memcpy(&b, row + 2 * c, 2);
        out[c] = f16_value(b);
      }
      return;
    case KvFormat::Kind::E4m3:
      for (int c = 0; c < d; ++c) out[c] = e4m3_value(row[c]);
      return;
    case KvFormat::Kind::E5m2:
      for (int c = 0; c < d; ++c) out[c] = e5m2_value(row[c]);
      return;
    case KvFormat::Kind::Int:
      break;
  }
  const int bits = format_.bits;
  if (format_.per_channel) {
    const int g = hd.group[size_t(r)];
    const float* lo = hd.table.data() + size_t(g) * 2 * d;
    const float* scale = lo + d;
    for (int c = 0; c < d; ++c) out[c] = std::fma(float(get_code(row, c, bits)), scale[c], lo[c]);
    return;
  }
  const float* sc = hd.scales.data() + size_t(r) * groups_ * 2;
  for (int c = 0; c < d; ++c) {
    const int g = c / format_.group;
    out[c] = std::fma(float(get_code(row, c, bits)), sc[2 * g + 1], sc[2 * g]);
  }
}

int64_t KvRows::bytes() const {
  int64_t b = allocated(heads_);
  for (const Head& hd : heads_)
    b += allocated(hd.codes) + allocated(hd.scales) + allocated(hd.group) + allocated(hd.table) +
         allocated(hd.refs) + allocated(hd.side) + allocated(hd.pool) + allocated(hd.free_table) +
         allocated(hd.free_pool);
  return b;
}

}  // namespace attn
