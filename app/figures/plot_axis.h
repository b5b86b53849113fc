// Plot axes shared by the line and scatter presets (trade-off, stream): linear, log or symlog,
// with round ticks that fit.
#pragma once
#include <QString>
#include <cmath>
#include <functional>
#include <vector>

namespace attn::fig {

// A linear, log or symlog axis. Symlog: a log axis whose bottom band [0, lo) is linear, so that
// values of 0 (dense against itself, an exact variant) are drawn at "0" instead of dropped.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double zero_band = 0;  // symlog: the fraction of the axis below lo
  std::vector<double> ticks;
  double frac(double v) const {
    if (!log) return (v - lo) / (hi - lo);
    if (v < lo) return zero_band > 0 ? std::max(0.0, v) / lo * zero_band : -1;
    return zero_band +
           (1 - zero_band) * (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  }
  bool shows(double v) const { return std::isfinite(v) && (!log || v >= lo || zero_band > 0); }
  QString suffix() const { return !log ? QString() : zero_band > 0 ? " (symlog)" : " (log)"; }
};

// Linear from zero for non-negative data spanning under `log_ratio` (two decades by default);
// log otherwise (symlog when some values are 0). Ticks are round (1-2-5 steps or decades), as
// many as `fits` accepts.
Axis make_axis(std::vector<double> v, bool allow_log, bool from_zero,
               const std::function<bool(const Axis&)>& fits, double log_ratio = 100);

}  // namespace attn::fig
