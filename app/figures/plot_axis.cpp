#include "app/figures/plot_axis.h"

#include <algorithm>

#include "app/figures/figure_painter.h"

namespace attn::fig {

// Linear from zero for non-negative data spanning under two decades; log otherwise (symlog when
// some values are 0). Ticks are round (1-2-5 steps or decades), as many as `fits` accepts.
Axis make_axis(std::vector<double> v, bool allow_log, bool from_zero,
               const std::function<bool(const Axis&)>& fits, double log_ratio) {
  Axis a;
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) v = {0, 1};
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  // Values below 1e-9 of the largest are rounding noise (dense against itself), not data.
  std::vector<double> pos;
  for (double x : v)
    if (x > std::abs(hi) * 1e-9) pos.push_back(x);
  if (allow_log && !pos.empty()) {
    const double plo = *std::min_element(pos.begin(), pos.end());
    if (hi / plo > log_ratio) {
      a.log = true;
      a.lo = std::pow(10.0, std::floor(std::log10(plo) + 1e-9));
      a.hi = std::pow(10.0, std::ceil(std::log10(hi * 1.5)));
      if (a.hi <= a.lo) a.hi = a.lo * 10;
      const bool zeros = lo < a.lo;
      a.zero_band = zeros ? 0.08 : 0;
      const std::vector<double> decades = log_ticks(a.lo, a.hi);
      // Every decade, else every 2nd, 3rd, ... (counted from the top) while labels crowd.
      for (size_t every = 1; every <= decades.size(); ++every) {
        a.ticks.clear();
        if (zeros) a.ticks.push_back(0);
        for (size_t i = 0; i < decades.size(); ++i)
          if ((decades.size() - 1 - i) % every == 0) a.ticks.push_back(decades[i]);
        if (fits(a)) break;
      }
      return a;
    }
  }
  if (from_zero) lo = std::min(lo, 0.0);
  for (int n = 6; n >= 2; --n) {
    a.ticks = cover_ticks(lo, hi, n);
    a.lo = a.ticks.front();
    a.hi = a.ticks.back();
    if (fits(a)) break;
  }
  return a;
}

}  // namespace attn::fig
