#include "compute/cpu/cpu_backend.h"

#include <chrono>

#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/huge_pages.h"
#include "compute/cpu/thread_pool.h"
#include "compute/error.h"

namespace attn {

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<cpu::CpuBackend>();
}

namespace cpu {

namespace {

// The executed layout for the result: index layouts run to hundreds of MiB.
Layout copy_with_huge_pages(const Layout& l) {
  Layout out;
  out.kind = l.kind;
  out.blocks = l.blocks;
  out.mask = l.mask;
  out.lines = l.lines;
  out.indices.resize(l.indices.size());
  for (size_t h = 0; h < l.indices.size(); ++h) {
    out.indices[h].row_ptr = copy_huge(l.indices[h].row_ptr);
    out.indices[h].col = copy_huge(l.indices[h].col);
  }
  return out;
}

}  // namespace

CpuBackend::CpuBackend(const KernelSet* kernels) : kernels_(kernels ? kernels : &best_kernels()) {}
CpuBackend::~CpuBackend() = default;

bool CpuBackend::supports(const Variant& v, const Problem& p, std::string* why) const {
  // Every pattern, modifier and normaliser composition runs here; only shapes can be wrong.
  if (p.d <= 0 || p.n_q <= 0 || p.n_k <= 0 || p.n_heads <= 0 || p.n_kv_heads <= 0 ||
      p.n_heads % p.n_kv_heads != 0) {
    if (why) *why = "cpu backend: invalid problem shape";
    return false;
  }
  (void)v;
  return true;
}

Result CpuBackend::execute(const Variant& v, const Problem& p, const Layout& layout,
                           const RunOptions& opt) {
  KernelSpec spec;
  spec.mods = v.mods();
  spec.norm = v.normaliser();
  spec.selective = v.selective();
  return execute_spec(spec, p, layout, opt);
}

Result CpuBackend::execute_owned(const Variant& v, const Problem& p, Layout&& layout,
                                 const RunOptions& opt) {
  KernelSpec spec;
  spec.mods = v.mods();
  spec.norm = v.normaliser();
  spec.selective = v.selective();
  return execute_spec(spec, p, layout, opt, &layout);
}

Result CpuBackend::execute_spec(const KernelSpec& spec, const Problem& p, const Layout& layout,
                                const RunOptions& opt, Layout* owned) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string why;
  require(p.d > 0 && p.n_q > 0 && p.n_k > 0 && p.n_heads > 0 && p.n_kv_heads > 0 &&
              p.n_heads % p.n_kv_heads == 0 && p.q.size() == size_t(p.n_heads) * p.n_q * p.d &&
              p.k.size() == size_t(p.n_kv_heads) * p.n_k * p.d &&
              p.v.size() == size_t(p.n_kv_heads) * p.n_k * p.d,
          ErrorCode::InvalidArgument,
          "cpu backend: problem shapes are inconsistent (call validate(problem) for details)");
  check_layout(layout, p);
  const int threads = resolve_threads(opt.threads);
  if (!pool_ || pool_->size() != threads) pool_ = std::make_unique<ThreadPool>(threads);

  Result r;
  r.n_heads = p.n_heads;
  r.n_q = p.n_q;
  r.d = p.d;
  assign_huge(r.o, size_t(p.n_heads) * p.n_q * p.d, 0.0f);
  assign_huge(r.row_stat, size_t(p.n_heads) * p.n_q, 0.0f);

  const auto t0 = std::chrono::steady_clock::now();
  // Lines run as lines for a plain softmax over default positions (each row's diagonal keys
  // then lie next to its neighbours'); otherwise as the per-query lists they stand for.
  const Precision prec = opt.precision;
  const bool lines = layout.kind == Layout::Kind::Lines;
  const bool run_lines = lines && !spec.selective && spec.mods.empty() &&
                         spec.norm.kind == Normaliser::Kind::Softmax && p.q_pos.empty() &&
                         p.k_pos.empty();
  Layout listed;
  if (lines && !run_lines) listed = lines_to_indices(layout, p);
  KernelContext c(p, lines && !run_lines ? listed : layout, spec, kernels_->width, r.o.data(),
                  r.row_stat.data(), prec);
  if (prec != Precision::F32) {
    // bf16 tile products (AMX or vdpbf16ps) in the flash kernel: streaming normalisers, whole
    // 32-dim tile steps. Key lists use them in their dense tiles (no score modifiers there).
    const Layout::Kind kind = c.layout.kind;
    const bool tiled = prec == Precision::Bf16 && !spec.selective &&
                       spec.norm.kind != Normaliser::Kind::Entmax15 && p.d % 32 == 0 &&
                       (kind == Layout::Kind::Dense || kind == Layout::Kind::Blocks ||
                        (kind == Layout::Kind::Indices && spec.mods.empty()));
    c.tiles = tiled ? kernels_->tiles : TileUnit::None;
    // The storage of the previous execute, reused: fresh pages would be faulted in and zeroed.
    c.q16.swap(half_.q);
    c.k16.swap(half_.k);
    c.v16.swap(half_.v);
    c.vt16.swap(half_.vt);
    kernels_->convert(c, *pool_, amx::has_avx512_bf16() ? &amx::convert_bf16 : nullptr);
  }
  if (spec.selective)
    kernels_->selective(c, *pool_, opt.cancel);
  else if (run_lines)
    kernels_->lines(c, *pool_, opt.cancel);
  else if (c.layout.kind == Layout::Kind::Indices)
    kernels_->gather(c, *pool_, opt.cancel);
  else
    kernels_->flash(c, *pool_, opt.cancel);
  const auto t1 = std::chrono::steady_clock::now();
  if (prec != Precision::F32) {
    c.q16.swap(half_.q);
    c.k16.swap(half_.k);
    c.v16.swap(half_.v);
    c.vt16.swap(half_.vt);
  }

  r.layout = owned ? std::move(*owned) : copy_with_huge_pages(layout);
  r.stats.backend = "cpu";
  r.stats.precision = prec;
  r.stats.kernel_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.stats.counted.flops = 2.0 * p.d * double(c.qk_entries.load() + c.pv_entries.load());
  r.stats.counted.bytes = double(c.bytes.load());
  return r;
}

}  // namespace cpu
}  // namespace attn
