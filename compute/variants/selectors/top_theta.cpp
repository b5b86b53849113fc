// Top-Theta attention (Berestizshevsky et al. 2025): keep the entries whose scaled score
// s = scale q.k reaches a per-head threshold theta, instead of sorting each row for its top k.
// A threshold is a single compare per entry and transfers across inputs once calibrated; the
// paper calibrates per head so that a constant number of entries per row is kept.
//   theta      the threshold, used as given when calibrate = 0
//   calibrate  a target kept fraction in (0, 1]: each head's threshold becomes the (1 - f)
//              quantile of its visible scores on this input (rows sampled at an even stride,
//              at most 256 per head), so about that fraction is kept
// A row with no score at or above the threshold keeps its largest-score key (no row is empty).
// Selection computes every visible score once (f32 GEMMs over query tiles, as exact top-k does);
// the attention kernels then run only the kept entries. Scores are compared before any score
// modifier.
#include <algorithm>
#include <cmath>

#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/row_select.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

int n_visible(const Problem& p, int i) {
  return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
}

// Scaled scores of queries [i0, i1) of head h against keys [0, nv): f32 [i1 - i0, nv] at out.
void scores(const Problem& p, int h, int i0, int i1, int nv, float* out) {
  if (nv == 0) return;
  detail::gemm_abt(p.q_row(h, i0), p.d, p.k_row(h, 0), p.d, out, nv, i1 - i0, nv, p.d);
  const float scale = float(p.effective_scale());
  for (size_t e = 0, n = size_t(i1 - i0) * size_t(nv); e < n; ++e) out[e] *= scale;
}

class TopThetaPattern final : public Pattern {
 public:
  TopThetaPattern(double theta, double calibrate) : theta_(theta), calibrate_(calibrate) {}
  VariantInfo info() const override { return kTopThetaPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    std::vector<double> flops(size_t(p.n_heads), 0.0);
    parallel_for(p.n_heads, [&](int h) {
      const float theta = float(calibrate_ > 0 ? calibrated(p, h, &flops[size_t(h)]) : theta_);
      // Each row's keys collected by one vectorised compare pass, appended to the head's list.
      IndexLayout& x = l.indices[size_t(h)];
      x.row_ptr.assign(size_t(p.n_q) + 1, 0);
      // Room for every visible entry reserved once: only the pages a kept key lands on are ever
      // touched (huge ones), where growing the list would move it and fault fresh pages in again
      // and again (most of the selection's time on some hosts).
      size_t bound = 0;
      for (int i = 0; i < p.n_q; ++i) bound += size_t(std::max(0, n_visible(p, i)));
      x.col.reserve(std::max<size_t>(bound, 1));
      cpu::advise_huge_pages(x.col.data(), bound * sizeof(int32_t));
      std::vector<int32_t> cand(size_t(p.n_k) + 16);
      detail::RowScratch scratch;
      constexpr int kTile = 64;
      // One score tile for the widest query tile, sized once (huge pages): a tile resized as the
      // visible keys grow would be allocated and faulted in again for every tile.
      std::vector<float> s;
      cpu::resize_huge(s, size_t(kTile) * size_t(p.n_k));
      for (int i0 = 0; i0 < p.n_q; i0 += kTile) {
        const int i1 = std::min(i0 + kTile, p.n_q), nv_max = n_visible(p, i1 - 1);
        scores(p, h, i0, i1, nv_max, s.data());
        for (int i = i0; i < i1; ++i) {
          const int nv = n_visible(p, i);
          const float* row = s.data() + size_t(i - i0) * nv_max;
          int n = nv > 0 ? detail::keys_at_or_above(row, nv, theta, cand.data(), scratch) : 0;
          if (n == 0 && nv > 0) {  // no score reaches theta: the largest-score key alone
            int best = 0;
            for (int j = 1; j < nv; ++j)
              if (row[j] > row[best]) best = j;
            cand[0] = best;
            n = 1;
          }
          x.col.insert(x.col.end(), cand.begin(), cand.begin() + n);
          x.row_ptr[size_t(i) + 1] = int64_t(x.col.size());
          flops[size_t(h)] += 2.0 * p.d * nv;
        }
      }
    });
    if (stats)
      for (double f : flops) stats->flops += f;
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    const double rows = calibrate_ > 0 ? std::min(p.n_q, 256) : 0;
    return 2.0 * p.d * double(visible_entries(p)) * p.n_heads * (1.0 + rows / p.n_q);
  }

 private:
  // The (1 - calibrate) quantile of head h's visible scores over sampled rows.
  double calibrated(const Problem& p, int h, double* flops) const {
    const int sample = std::min(p.n_q, 256);
    std::vector<float> all;
    std::vector<float> s(size_t(p.n_k));
    for (int t = 0; t < sample; ++t) {
      const int i = int(int64_t(t) * p.n_q / sample);
      const int nv = n_visible(p, i);
      scores(p, h, i, i + 1, nv, s.data());
      all.insert(all.end(), s.data(), s.data() + nv);
      *flops += 2.0 * p.d * nv;
    }
    if (all.empty()) return theta_;
    // Keep ceil(f * count) scores: the threshold is the smallest of them.
    const size_t keep =
        std::clamp<size_t>(size_t(std::ceil(calibrate_ * double(all.size()))), 1, all.size());
    std::nth_element(all.begin(), all.begin() + ptrdiff_t(keep - 1), all.end(),
                     std::greater<float>());
    return all[keep - 1];
  }

  double theta_, calibrate_;
};

VariantInfo top_theta_info() {
  return {"top_theta",
          "Top-Theta (thresholds)",
          "dynamic",
          "Berestizshevsky et al. 2025, Top-Theta Attention: Sparsifying Transformers by "
          "Compensated Thresholding",
          "Keeps scores at or above a per-head threshold (optionally calibrated on the input to "
          "a kept fraction): one compare per entry instead of a top-k sort.",
          {float_param("theta", -1e30, 1e30, 0.0, "threshold on scale * q.k"),
           float_param("calibrate", 0, 1, 0,
                       "target kept fraction; > 0 calibrates each head's threshold on the input")}};
}

std::shared_ptr<const Pattern> make_top_theta(const Params& params) {
  return std::make_shared<TopThetaPattern>(params.at("theta"), params.at("calibrate"));
}

}  // namespace

const PatternFactory kTopThetaPattern = {top_theta_info, make_top_theta};

}  // namespace attn
