#version 450
// Heatmap cells arrive coloured (render/cell_colors.cpp); this only fetches them (nearest, no
// filtering or level-of-detail work, which is what software rasterisers pay most for).
layout(set = 0, binding = 0) uniform sampler2D cells;  // rgba8
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 color;
void main() {
  ivec2 size = textureSize(cells, 0);
  ivec2 texel = clamp(ivec2(v_uv * vec2(size)), ivec2(0), size - 1);
  color = texelFetch(cells, texel, 0);
}
