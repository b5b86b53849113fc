#include "compute/reference/reference_backend.h"

#include <chrono>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn {

namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  bool supports(const Variant&, const Problem&, std::string*) const override { return true; }

  Result execute(const Variant& v, const Problem& p, const Layout& layout,
                 const RunOptions& opt) override {
    auto t0 = std::chrono::steady_clock::now();
    Result r;
    r.n_heads = p.n_heads;
    r.n_q = p.n_q;
    r.d = p.d;
    r.o.assign(size_t(p.n_heads) * p.n_q * p.d, 0.0f);
    r.row_stat.assign(size_t(p.n_heads) * p.n_q, 0.0f);
    std::vector<int64_t> computed(p.n_heads, 0);
    // Selective attention carries state along queries, so a head is one sequential work item.
    if (v.selective()) {
      parallel_for(p.n_heads, [&](int h) {
        std::vector<double> acc(p.n_k, 0.0);
        for (int i = 0; i < p.n_q; ++i) computed[h] += row(v, p, layout, h, i, &acc, r, opt);
      }, opt.threads);
    } else {
      int chunks = p.n_heads * ((p.n_q + 63) / 64);
      std::vector<int64_t> per_chunk(chunks, 0);
      parallel_for(chunks, [&](int c) {
        int per_head = (p.n_q + 63) / 64;
        int h = c / per_head, i0 = (c % per_head) * 64;
        for (int i = i0; i < std::min(i0 + 64, p.n_q); ++i)
          per_chunk[c] += row(v, p, layout, h, i, nullptr, r, opt);
      }, opt.threads);
      for (int c = 0; c < chunks; ++c) computed[c / ((p.n_q + 63) / 64)] += per_chunk[c];
    }
    int64_t entries = 0;
    for (int64_t c : computed) entries += c;
    r.stats.backend = name();
    r.stats.counted.flops = 4.0 * p.d * double(entries);
    r.stats.counted.bytes = 4.0 * p.d * (2.0 * p.n_heads * p.n_q + 2.0 * double(entries));
    r.stats.kernel_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.layout = layout;
    return r;
  }

 private:
  // Computes one output row in double; returns the number of kept entries.
  static int64_t row(const Variant& v, const Problem& p, const Layout& layout, int h, int i,
                     std::vector<double>* acc, Result& r, const RunOptions& opt) {
    if (opt.cancel && opt.cancel->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Cancelled, "reference: cancelled");
    std::vector<int32_t> keys;
    layout_row_keys(layout, p, h, i, keys);
    const int m = int(keys.size());
    const double scale = p.effective_scale();
    const int32_t qp = p.qpos(i);
    const float* q = p.q_row(h, i);
    std::vector<double> s(m), raw(m);
    for (int e = 0; e < m; ++e) {
      const float* k = p.k_row(h, keys[e]);
      double dot = 0;
      for (int c = 0; c < p.d; ++c) dot += double(q[c]) * double(k[c]);
      raw[e] = apply_score_mods(v.mods(), scale * dot, h, p.n_heads, qp, p.kpos(keys[e]));
      s[e] = acc ? raw[e] - (*acc)[keys[e]] : raw[e];
    }
    if (acc) {
      // Selective attention: this query's positive logits mask those keys for later queries;
      // a token never masks itself and the first token is exempt (Leviathan et al. 2024).
      for (int e = 0; e < m; ++e) {
        int32_t kp = p.kpos(keys[e]);
        if (kp != qp && kp != 0 && raw[e] > 0) (*acc)[keys[e]] += raw[e];
      }
    }
    const Normaliser& norm = v.normaliser();
    double stat = normaliser_row_stat(norm, s.data(), m);
    std::vector<double> out(p.d, 0.0);
    for (int e = 0; e < m; ++e) {
      double pr = normalised_prob(norm, s[e], stat, p.n_k);
      const float* vv = p.v_row(h, keys[e]);
      for (int c = 0; c < p.d; ++c) out[c] += pr * double(vv[c]);
    }
    float* o = r.o.data() + (size_t(h) * p.n_q + i) * p.d;
    for (int c = 0; c < p.d; ++c) o[c] = float(out[c]);
    r.row_stat[size_t(h) * p.n_q + i] = float(stat);
    return m;
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace attn
