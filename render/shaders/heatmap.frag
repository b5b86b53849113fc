#version 450
// Colours pooled attention cells. Texels hold (variant probability, dense probability, kept
// fraction, unused); the colormaps are rows of a 256-wide lookup texture.
layout(set = 0, binding = 0) uniform sampler2D cells;  // rgba32f, nearest
layout(set = 0, binding = 1) uniform sampler2D lut;    // rgba8 [rows, 256], linear
layout(push_constant) uniform PC {
  vec4 rect;
  vec4 uv;
  vec4 range;  // vmin, vmax, log floor
  ivec4 mode;  // x: 0 probabilities, 1 kept set over dense, 2 difference; y: colormap row;
               // z: 1 = log scale; w: diverging colormap row
} pc;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 color;

const float kRows = 4.0;

vec3 cmap(int row, float t) {
  float u = (clamp(t, 0.0, 1.0) * 255.0 + 0.5) / 256.0;
  return texture(lut, vec2(u, (float(row) + 0.5) / kRows)).rgb;
}

float scale01(float v) {
  if (pc.mode.z == 1) {
    float lo = max(pc.range.z, 1e-12);
    float hi = max(pc.range.y, lo * 1.0001);
    return (log(max(v, lo)) - log(lo)) / (log(hi) - log(lo));
  }
  return (v - pc.range.x) / max(pc.range.y - pc.range.x, 1e-12);
}

void main() {
  vec4 c = texture(cells, v_uv);
  vec3 rgb;
  if (pc.mode.x == 2) {
    float d = c.r - c.g;
    float hi = max(pc.range.y, 1e-12);
    float s;
    if (pc.mode.z == 1) {
      float lo = max(pc.range.z, 1e-12);
      s = sign(d) * log(1.0 + abs(d) / lo) / log(1.0 + hi / lo);
    } else {
      s = d / hi;
    }
    rgb = cmap(pc.mode.w, 0.5 + 0.5 * clamp(s, -1.0, 1.0));
  } else if (pc.mode.x == 1) {
    float t = clamp(scale01(c.g), 0.0, 1.0);
    vec3 kept = cmap(pc.mode.y, t);
    // Dropped entries: dark grey, turning red with the dense mass that was dropped.
    vec3 dropped = mix(vec3(0.10, 0.10, 0.12), vec3(0.95, 0.15, 0.20), t);
    rgb = mix(dropped, kept, clamp(c.b, 0.0, 1.0));
  } else {
    rgb = cmap(pc.mode.y, scale01(c.r));
  }
  color = vec4(rgb, 1.0);
}
