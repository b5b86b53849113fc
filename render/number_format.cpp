#include "render/number_format.h"

#include <cmath>
#include <cstdio>

namespace attn::render {
namespace {

std::string non_finite(double x) {
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

// "-0", "-0.00", "-0e+00": a minus sign before nothing but zeros.
std::string drop_negative_zero(std::string s) {
  if (s.empty() || s[0] != '-') return s;
  for (size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == 'e' || c == 'E') break;
    if (c != '0' && c != '.') return s;
  }
  return s.substr(1);
}

}  // namespace

std::string format_number(double x, int digits, double resolution) {
  if (!std::isfinite(x)) return non_finite(x);
  if (std::fabs(x) < resolution || x == 0) return "0";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits < 1 ? 1 : digits, x);
  return drop_negative_zero(b);
}

std::string format_fixed(double x, int decimals, double resolution) {
  if (!std::isfinite(x)) return non_finite(x);
  if (std::fabs(x) < resolution) x = 0;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals < 0 ? 0 : decimals, x);
  return drop_negative_zero(b);
}

}  // namespace attn::render
