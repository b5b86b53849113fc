// Numbers as the views, the panel headers and the figures print them: no "-0.00", and 0 for a
// value below the resolution a quantity is meaningful at (a dense error of 3.1e-13 is 0). Plain
// C++ (library attn_colormap), so the renderer, the app core and the figures share it.
#pragma once
#include <string>

namespace attn::render {

// `x` to `digits` significant digits (printf "%g": 0.0123, 1.5e+03), "0" when |x| < resolution
// or x rounds to zero, never a negative zero; "nan", "inf" and "-inf" as such.
std::string format_number(double x, int digits = 3, double resolution = 1e-9);

// `x` with `decimals` decimals (printf "%.*f"), never "-0.00": a value that rounds to zero
// prints as zero with its decimals ("0.00"), and |x| < resolution as well.
std::string format_fixed(double x, int decimals, double resolution = 0);

}  // namespace attn::render
