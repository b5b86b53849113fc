#version 450
// One textured quad per panel, placed by push constants (no vertex buffer): a 4-vertex strip.
layout(push_constant) uniform PC {
  vec4 rect;  // x0, y0, x1, y1 in normalised device coordinates
  vec4 uv;    // u0, v0, u1, v1 of the cell texture
} pc;
layout(location = 0) out vec2 v_uv;
void main() {
  vec2 c = vec2(gl_VertexIndex & 1, (gl_VertexIndex >> 1) & 1);
  v_uv = mix(pc.uv.xy, pc.uv.zw, c);
  gl_Position = vec4(mix(pc.rect.xy, pc.rect.zw, c), 0.0, 1.0);
}
