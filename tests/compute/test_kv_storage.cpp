// The KV cache's own bytes (compute/kv/kv_rows.h) and the decode kernel that reads them
// (compute/kv/kv_attend.h), format by format: every element decodes to exactly what the
// precision's rounding function says, the reported bytes are what the buffers allocated
// (counted by a wrapper around operator new in this binary), the kernel matches an f64
// reference over the rounded values within a tolerance derived from the format, tightly enough
// that a rounding the other way on ties fails it, and every instruction set gives the same bits.
// Shapes are odd on purpose: head dimensions that are not multiples of 16, groups that do not
// divide the row, chunks with a tail.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compute/kv/kv_attend.h"
#include "compute/kv/kv_policy.h"
#include "compute/kv/kv_precision.h"
#include "compute/kv/kv_rows.h"

// ---- counting allocator: the bytes this binary's live allocations asked for ----
// Each block carries its requested size in a header of max(64, alignment) bytes in front of it.

namespace {
std::atomic<int64_t> g_live_bytes{0};

void* counted(std::size_t n, std::size_t align) {
  const std::size_t header = std::max<std::size_t>(64, align);
  void* base = nullptr;
  if (posix_memalign(&base, header, n + header) != 0) throw std::bad_alloc();
  std::memcpy(base, &n, sizeof n);
  g_live_bytes += int64_t(n);
  return static_cast<char*>(base) + header;
}
void uncount(void* p, std::size_t align) {
  if (!p) return;
  const std::size_t header = std::max<std::size_t>(64, align);
  void* base = static_cast<char*>(p) - header;
  std::size_t n;
  std::memcpy(&n, base, sizeof n);
  g_live_bytes -= int64_t(n);
  std::free(base);
}
}  // namespace

void* operator new(std::size_t n) {
  return counted(n, 0);
}
void* operator new[](std::size_t n) {
  return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted(n, std::size_t(a));
}
void operator delete(void* p) noexcept {
  uncount(p, 0);
}
void operator delete[](void* p) noexcept {
  uncount(p, 0);
}
void operator delete(void* p, std::size_t) noexcept {
  uncount(p, 0);
}
void operator delete[](void* p, std::size_t) noexcept {
  uncount(p, 0);
}
void operator delete(void* p, std::align_val_t a) noexcept {
  uncount(p, std::size_t(a));
}
void operator delete[](void* p, std::align_val_t a) noexcept {
  uncount(p, std::size_t(a));
}
void operator delete(void* p, std::size_t, std::align_val_t a) noexcept {
  uncount(p, std::size_t(a));
}
void operator delete[](void* p, std::size_t, std::align_val_t a) noexcept {
  uncount(p, std::size_t(a));
}
// The nothrow forms too (std::stable_sort's buffer uses them): a sanitizer runtime that
// supplies its own would otherwise hand this delete blocks without the header.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted(n, std::size_t(a));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted(n, std::size_t(a));
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  uncount(p, 0);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  uncount(p, 0);
}
void operator delete(void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
  uncount(p, std::size_t(a));
}
void operator delete[](void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
  uncount(p, std::size_t(a));
}

namespace attn {
namespace {

using Kind = KvFormat::Kind;

struct FormatCase {
  const char* name;
  KvFormat f;
};

std::vector<FormatCase> formats() {
  return {{"f32", {}},
          {"bf16", {Kind::Bf16, 16, 0, false}},
          {"f16", {Kind::F16, 16, 0, false}},
          {"e4m3", {Kind::E4m3, 8, 0, false}},
          {"e5m2", {Kind::E5m2, 8, 0, false}},
          {"int4_g32_token", {Kind::Int, 4, 32, false}},
          {"int2_g7_token", {Kind::Int, 2, 7, false}},
          {"int8_g16_token", {Kind::Int, 8, 16, false}},
          {"int4_g5_channel", {Kind::Int, 4, 5, true}},
          {"int2_g32_channel", {Kind::Int, 2, 32, true}},
          {"int8_g3_channel", {Kind::Int, 8, 3, true}}};
}

// The rounding function of a float format.
float round_in(const KvFormat& f, float x) {
  switch (f.kind) {
    case Kind::Bf16:
      return round_bf16(x);
    case Kind::F16:
      return round_fp16(x);
    case Kind::E4m3:
      return round_fp8(x, true);
    case Kind::E5m2:
      return round_fp8(x, false);
    default:
      return x;
  }
}

// What rows x f32 [n, d], written in order as rows 0 .. n-1, decode to by the format's
// definition: the rounding functions, quantise_group per token group, or per channel over each
// completed group of `group` rows (the rest stay f32).
std::vector<float> spec_values(const KvFormat& f, std::vector<float> x, int n, int d) {
  if (f.kind != Kind::Int) {
    for (float& v : x) v = round_in(f, v);
    return x;
  }
  if (!f.per_channel) {
    for (int r = 0; r < n; ++r)
      for (int c0 = 0; c0 < d; c0 += f.group)
        quantise_group(x.data() + size_t(r) * d + c0, std::min(f.group, d - c0), 1, f.bits);
    return x;
  }
  for (int g0 = 0; g0 + f.group <= n; g0 += f.group)
    for (int c = 0; c < d; ++c) quantise_group(x.data() + size_t(g0) * d + c, f.group, d, f.bits);
  return x;
}

// Writes rows x f32 [n, d] as head h's rows 0 .. n-1, as the cache does (per channel: one row at
// a time, sealing each group as it fills).
void fill(KvRows& rows, int h, const std::vector<float>& x, int n) {
  const int d = rows.dim();
  if (!rows.format().per_channel) {
    rows.write(h, 0, x.data(), n);
    return;
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  int done = 0;
  for (int i = 0; i < n; ++i) {
    rows.write(h, i, x.data() + size_t(i) * d, 1);
    if (i + 1 - done >= rows.format().group) {
      rows.seal(h, order.data() + done, rows.format().group);
      done += rows.format().group;
    }
  }
}

// Values full of rounding ties: float formats get the midpoint between a random value's
// rounding and the next representable value up (half of them) or plain normals; int formats
// get groups whose values sit at lo + (k + 1/2) * step, with each group's minimum and maximum
// present, so every quantised value is a tie (power-of-two steps keep it exact).
std::vector<float> tie_rich(const KvFormat& f, int n, int d, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z;
  std::vector<float> x(size_t(n) * d);
  if (f.kind == Kind::F32) {
    for (float& v : x) v = spread * z(rng);
    return x;
  }
  if (f.kind != Kind::Int) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = spread * z(rng), r = round_in(f, v);
      if (i % 2 || !std::isfinite(r) || r == 0) {
        x[i] = v;
        continue;
      }
      // The next representable value above |r|: where the first f32 step that rounds
      // elsewhere lands (none past the largest finite value).
      const float a = std::fabs(r);
      float up = a;
      for (float step = a * 0x1p-12f; step <= a && up == a; step *= 2) up = round_in(f, a + step);
      x[i] = up == a || !std::isfinite(up) ? v : std::copysign(a + (up - a) / 2, r);  // exact
    }
    return x;
  }
  const int levels = (1 << f.bits) - 1;
  const float step = std::ldexp(1.0f, -f.bits), lo = -0.5f;
  std::uniform_int_distribution<int> k(0, levels - 1);
  for (float& v : x) v = lo + (float(k(rng)) + 0.5f) * step;
  if (!f.per_channel) {
    for (int r = 0; r < n; ++r)
      for (int c0 = 0; c0 + 1 < d; c0 += f.group) {
        if (std::min(f.group, d - c0) < 2) continue;
        x[size_t(r) * d + c0] = lo;
        x[size_t(r) * d + c0 + 1] = lo + float(levels) * step;
      }
  } else {
    for (int g0 = 0; g0 + f.group <= n; g0 += f.group)
      for (int c = 0; c < d && f.group >= 2; ++c) {
        x[size_t(g0) * d + c] = lo;
        x[size_t(g0 + 1) * d + c] = lo + float(levels) * step;
      }
  }
  return x;
}

// Ties rounded the other way: where x sits exactly between its rounding y and the reflected
// value 2x - y, and that value is representable, the mutant takes it.
std::vector<float> mutated(const KvFormat& f, const std::vector<float>& x,
                           const std::vector<float>& y) {
  std::vector<float> m = y;
  for (size_t i = 0; i < x.size(); ++i) {
    const float other = 2 * x[i] - y[i];
    if (other == y[i] || !std::isfinite(other)) continue;
    const bool representable = f.kind == Kind::Int ? true : round_in(f, other) == other;
    if (representable) m[i] = other;
  }
  return m;
}

// Unit roundoff of a format (half a step relative to the values' scale), and the kernel's
// tolerance derived from it: a sixteenth of it (with f32's accumulation as the floor).
double unit_roundoff(const KvFormat& f) {
  switch (f.kind) {
    case Kind::F32:
      return 0x1p-24;
    case Kind::Bf16:
      return 0x1p-8;
    case Kind::F16:
      return 0x1p-11;
    case Kind::E4m3:
      return 0x1p-4;
    case Kind::E5m2:
      return 0x1p-3;
    case Kind::Int:
      return 0.5 / double((1 << f.bits) - 1);
  }
  return 0;
}
double kernel_tolerance(const KvFormat& f) {
  return std::max(unit_roundoff(f) / 16, 0x1p-19);
}

bool same_value(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// ---- storage ----

TEST(KvRows, EveryFormatDecodesToWhatItsRoundingFunctionSays) {
  for (const FormatCase& fc : formats()) {
    SCOPED_TRACE(fc.name);
    for (int d : {13, 40, 128}) {
      const int n = 37, heads = 2;
      KvRows rows(fc.f, heads, d);
      rows.reserve(n);
      for (int h = 0; h < heads; ++h) {
        std::vector<float> x = tie_rich(fc.f, n, d, 11u + unsigned(h), h ? 40.0f : 1.0f);
        if (fc.f.kind != Kind::Int) {  // the edges of the float formats
          const float edges[] = {0.0f,   -0.0f,    1e-8f, -3e-6f, 65504.0f, 70000.0f,  448.0f,
                                 500.0f, 57344.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
          std::copy(std::begin(edges), std::end(edges), x.begin());
        } else if (h == 1) {  // a non-finite value: its group stays as quantise_group leaves it
          x[size_t(3) * d + 2] = NAN;
        }
        fill(rows, h, x, n);
        const std::vector<float> want = spec_values(fc.f, x, n, d);
        std::vector<float> got(static_cast<size_t>(d)), fast(size_t(n) * d);
        std::vector<int32_t> all(static_cast<size_t>(n));
        std::iota(all.begin(), all.end(), 0);
        for (const std::string& isa : kv_kernel_isas()) {  // the kernels' decoding, bit for bit
          kv_decode_rows(rows, h, all.data(), n, fast.data(), isa.c_str());
          for (size_t i = 0; i < fast.size(); ++i)
            ASSERT_TRUE(same_value(fast[i], want[i])) << isa << " element " << i;
        }
        for (int r = 0; r < n; ++r) {
          rows.decode(h, r, got.data());
          for (int c = 0; c < d; ++c)
            ASSERT_TRUE(same_value(got[size_t(c)], want[size_t(r) * d + c]))
                << "d " << d << " head " << h << " row " << r << " element " << c << ": x "
                << x[size_t(r) * d + c] << " decodes to " << got[size_t(c)] << ", the rounding "
                << want[size_t(r) * d + c];
        }
      }
    }
  }
}

TEST(KvRows, QuantiseCodesAreTheValuesQuantiseGroupLeaves) {
  std::mt19937 rng(3);
  std::normal_distribution<float> z;
  for (int bits : {2, 4, 8})
    for (int n : {1, 2, 5, 32}) {
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& v : x) v = trial % 7 == 0 ? 1.5f : z(rng) * float(1 + trial);
        std::vector<float> q = x;
        quantise_group(q.data(), n, 1, bits);
        std::vector<uint8_t> codes(static_cast<size_t>(n));
        float lo, scale;
        ASSERT_TRUE(quantise_codes(x.data(), n, 1, bits, codes.data(), lo, scale));
        for (int i = 0; i < n; ++i) {
          EXPECT_LE(codes[size_t(i)], (1 << bits) - 1);
          EXPECT_EQ(std::fma(float(codes[size_t(i)]), scale, lo), q[size_t(i)]) << bits << " " << n;
        }
      }
    }
  float bad[] = {1.0f, NAN, 2.0f};
  uint8_t codes[3];
  float lo, scale;
  EXPECT_FALSE(quantise_codes(bad, 3, 1, 4, codes, lo, scale));
}

// The storage follows its rows when the cache moves and forgets them: a moved row decodes as
// before, a released row's f32 copy and group share are reused, not leaked.
TEST(KvRows, MovedRowsKeepTheirValuesAndReleasedOnesAreReused) {
  for (const FormatCase& fc : formats()) {
    SCOPED_TRACE(fc.name);
    const int d = 24, n = 40;
    KvRows rows(fc.f, 1, d);
    rows.reserve(n);
    const std::vector<float> x = tie_rich(fc.f, n, d, 5, 1.0f);
    fill(rows, 0, x, n);
    std::vector<float> before(static_cast<size_t>(d)), after(before.size());
    rows.decode(0, n - 1, before.data());
    rows.release(0, 3);
    rows.move(0, n - 1, 3);
    rows.decode(0, 3, after.data());
    EXPECT_EQ(before, after);
    int64_t b1 = 0;
    for (int round = 0; round < 20; ++round) {  // release and refill the same rows
      for (int r = 0; r < n - 1; ++r) rows.release(0, r);
      fill(rows, 0, x, n - 1);
      if (round == 0) b1 = rows.bytes();
    }
    EXPECT_EQ(rows.bytes(), b1) << "released rows are reused";
  }
}

// What each format's rows take: the bytes the buffers allocated, as the allocator saw them, and
// the format's size per element (f32 4 bytes, bf16 / f16 2, fp8 1, int-N N/8 plus its groups'
// minimum and scale and a row's f32 copy index).
TEST(KvRows, ReportedBytesAreWhatItAllocated) {
  for (const FormatCase& fc : formats()) {
    SCOPED_TRACE(fc.name);
    const int d = 40, n = 1000, heads = 3;
    const std::vector<float> x = tie_rich(fc.f, n, d, 9, 1.0f);
    const int64_t bytes0 = g_live_bytes;
    {
      KvRows rows(fc.f, heads, d);
      rows.reserve(n);
      for (int h = 0; h < heads; ++h) fill(rows, h, x, n);
      EXPECT_EQ(g_live_bytes - bytes0, rows.bytes()) << "what the allocator handed out";
      const double per_element = double(rows.bytes()) / (double(heads) * n * d);
      // Besides the codes: int groups' f32 minimum and scale (per-channel tables grow by
      // doubling), the f32 rows waiting for a per-channel group and the per-row indices.
      const double bound = fc.f.kind == Kind::Int ? fc.f.bits / 8.0 + 2 * 8.0 / fc.f.group +
                                                        8.0 * fc.f.group / n + 8.0 / d + 0.05
                                                  : fc.f.bits / 8.0 + 0.01;
      EXPECT_LE(per_element, bound) << "bytes per element";
      EXPECT_GE(per_element, fc.f.bits / 8.0) << "bytes per element";
      std::printf("[kv] %-18s %.3f bytes per element (codes %.3f)\n", fc.name, per_element,
                  fc.f.bits / 8.0);
    }
    EXPECT_EQ(g_live_bytes, bytes0) << "everything freed";
  }
}

// ---- the decode kernel ----

struct Shape {
  int H, hkv, d, len;
  bool rope;
};

// A rotary table of random angles for `targets` positions and each row's target.
struct RopeCase {
  std::vector<float> table;     // f32 [targets, d]
  std::vector<int32_t> target;  // i32 [hkv, capacity]
  KvRope rope;
};
RopeCase make_rope(int targets, int d, int hkv, int capacity, unsigned seed) {
  RopeCase rc;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
  rc.table.resize(size_t(targets) * d);
  for (int t = 0; t < targets; ++t)
    for (int i = 0; i < d / 2; ++i) {
      const float a = angle(rng);
      rc.table[size_t(t) * d + i] = std::cos(a);
      rc.table[size_t(t) * d + d / 2 + i] = std::sin(a);
    }
  std::uniform_int_distribution<int> pick(0, targets - 1);
  rc.target.resize(size_t(hkv) * capacity);
  for (int32_t& t : rc.target) t = pick(rng);
  rc.rope = {rc.table.data(), rc.target.data(), capacity};
  return rc;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(KvAttend, EachFormatMatchesTheF64ReferenceOfItsRoundedValues) {
  const std::vector<Shape> shapes = {{6, 2, 40, 300, true},  {2, 2, 13, 257, false},
                                     {4, 1, 64, 70, true},   {3, 3, 48, 33, false},
                                     {2, 2, 128, 300, true}, {4, 4, 64, 20, true},
                                     {2, 1, 64, 2 * kKvChunkRows + 45, true}};  // chunks merged
  const std::vector<std::string> isas = kv_kernel_isas();
  for (const FormatCase& fc : formats())
    for (const Shape& s : shapes) {
      SCOPED_TRACE(std::string(fc.name) + " H " + std::to_string(s.H) + " hkv " +
                   std::to_string(s.hkv) + " d " + std::to_string(s.d) + " len " +
                   std::to_string(s.len) + (s.rope ? " rope" : ""));
      const int d = s.d, len = s.len, H = s.H;
      KvRows k(fc.f, s.hkv, d), v(fc.f, s.hkv, d);
      KvRows k_spec({}, s.hkv, d), v_spec(k_spec.format(), s.hkv, d),
          k_mut(k_spec.format(), s.hkv, d), v_mut(k_spec.format(), s.hkv, d);
      for (KvRows* r : {&k, &v, &k_spec, &v_spec, &k_mut, &v_mut}) r->reserve(len);
      bool any_tie = false;  // false when nothing was rounded (per-channel groups never filled)
      for (int g = 0; g < s.hkv; ++g) {
        const std::vector<float> xk = tie_rich(fc.f, len, d, 100u + g, 1.0f);
        const std::vector<float> xv = tie_rich(fc.f, len, d, 200u + g, 1.0f);
        fill(k, g, xk, len);
        fill(v, g, xv, len);
        const std::vector<float> yk = spec_values(fc.f, xk, len, d);
        const std::vector<float> yv = spec_values(fc.f, xv, len, d);
        k_spec.write(g, 0, yk.data(), len);
        v_spec.write(g, 0, yv.data(), len);
        const std::vector<float> mk = mutated(fc.f, xk, yk), mv = mutated(fc.f, xv, yv);
        any_tie = any_tie || mk != yk || mv != yv;
        k_mut.write(g, 0, mk.data(), len);
        v_mut.write(g, 0, mv.data(), len);
      }
      std::mt19937 rng(7);
      std::normal_distribution<float> z;
      std::vector<float> q(size_t(H) * d);
      for (float& x : q) x = 3.0f * z(rng);  // peaked attention: a few rows carry most weight
      const float scale = 1.0f / std::sqrt(float(d));
      const RopeCase rc = make_rope(50, d, s.hkv, len, 3);
      const KvRope* rope = s.rope ? &rc.rope : nullptr;
      std::vector<double> ref_o(size_t(H) * d), ref_p(size_t(H) * len), mut_o(ref_o.size()),
          mut_p(ref_p.size());
      kv_attend_rows_reference(k_spec, v_spec, len, q.data(), H, scale, rope, ref_o.data(),
                               ref_p.data());
      kv_attend_rows_reference(k_mut, v_mut, len, q.data(), H, scale, rope, mut_o.data(),
                               mut_p.data());
      const double tol = kernel_tolerance(fc.f), vmax = max_abs(ref_o) + 1e-30;
      std::vector<float> first_o, first_p;
      for (const std::string& isa : isas) {
        SCOPED_TRACE(isa);
        std::vector<float> o(size_t(H) * d), p(size_t(H) * len);
        kv_attend_rows(k, v, len, q.data(), H, scale, rope, o.data(), p.data(), 2, isa.c_str());
        double err_o = 0, err_p = 0, mut_err = 0;
        for (size_t i = 0; i < o.size(); ++i) {
          ASSERT_TRUE(std::isfinite(o[i]));
          err_o = std::max(err_o, std::fabs(o[i] - ref_o[i]) / vmax);
          mut_err = std::max(mut_err, std::fabs(o[i] - mut_o[i]) / vmax);
        }
        for (size_t i = 0; i < p.size(); ++i) {
          err_p = std::max(err_p, std::fabs(p[i] - ref_p[i]));
          mut_err = std::max(mut_err, std::fabs(p[i] - mut_p[i]));
        }
        EXPECT_LE(err_o, tol) << "output vs the f64 reference over the rounded values";
        EXPECT_LE(err_p, tol) << "probabilities vs the f64 reference";
        if (any_tie) {
          EXPECT_GT(mut_err, tol) << "ties rounded the other way must fail this tolerance";
        }
        if (first_o.empty()) {
          first_o = o;
          first_p = p;
        } else {  // every instruction set computes the same bits
          EXPECT_EQ(std::memcmp(o.data(), first_o.data(), o.size() * 4), 0) << "output bits";
          EXPECT_EQ(std::memcmp(p.data(), first_p.data(), p.size() * 4), 0) << "probability bits";
        }
      }
    }
}

// Results do not depend on the thread count (chunks merge in a fixed order).
TEST(KvAttend, ThreadCountDoesNotChangeTheBits) {
  const KvFormat f{Kind::Int, 4, 32, true};
  const int hkv = 4, H = 8, d = 64, len = 2 * kKvChunkRows + 100;
  KvRows k(f, hkv, d), v(KvFormat{Kind::Int, 4, 32, false}, hkv, d);
  k.reserve(len);
  v.reserve(len);
  for (int g = 0; g < hkv; ++g) {
    fill(k, g, tie_rich(k.format(), len, d, 1u + g, 1.0f), len);
    fill(v, g, tie_rich(v.format(), len, d, 9u + g, 1.0f), len);
  }
  std::vector<float> q(size_t(H) * d, 0.25f), a(q.size()), b(q.size());
  kv_attend_rows(k, v, len, q.data(), H, 0.125f, nullptr, a.data(), nullptr, 1);
  kv_attend_rows(k, v, len, q.data(), H, 0.125f, nullptr, b.data(), nullptr, 3);
  EXPECT_EQ(a, b);
}

TEST(KvAttend, TheBestInstructionSetIsListedFirst) {
  const std::vector<std::string> isas = kv_kernel_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), kv_best_isa());
// The AVX-512 build exists where kv_kernels_avx512.cpp compiles it (GCC; clang builds, such as
// the sanitizer build, have the baseline only).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    EXPECT_EQ(isas.front(), "avx512") << "this CPU runs AVX-512";
  }
#endif
}

// The precision pieces name the formats their caches store.
TEST(KvRows, PrecisionPiecesNameTheirStorageFormats) {
  EXPECT_EQ(make_kv_policy("kv_full").storage->format(true), KvFormat{});
  EXPECT_EQ(make_kv_policy("kv_bf16").storage->format(false).kind, Kind::Bf16);
  EXPECT_EQ(make_kv_policy("kv_fp16").storage->format(true).kind, Kind::F16);
  EXPECT_EQ(make_kv_policy("kv_fp8").storage->format(true).kind, Kind::E4m3);
  EXPECT_EQ(make_kv_policy("kv_fp8(format=e5m2)").storage->format(true).kind, Kind::E5m2);
  const KvPolicy q = make_kv_policy("kv_quant(bits=2,group=16,v_axis=channel)");
  EXPECT_EQ(q.storage->format(true), (KvFormat{Kind::Int, 2, 16, true}));
  EXPECT_EQ(q.storage->format(false), (KvFormat{Kind::Int, 2, 16, true}));
  EXPECT_EQ(make_kv_policy("kv_quant(k_axis=token)").storage->format(true),
            (KvFormat{Kind::Int, 4, 32, false}));
}

}  // namespace
}  // namespace attn
