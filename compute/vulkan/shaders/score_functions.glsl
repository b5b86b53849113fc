// Score modifiers and normalisers (compute/score_mod.h) as specialisation constants, shared by
// the attention and tile kernels. The host sets constants 4..14 (set_score_constants).

layout(constant_id = 4) const uint NORM = 0;   // normaliser, see NORM_* below
layout(constant_id = 5) const float NORM_A = 0.0;
layout(constant_id = 6) const uint NMODS = 0;  // score modifiers applied in order (up to 4)
layout(constant_id = 7) const uint MOD_KIND0 = 0;
layout(constant_id = 8) const uint MOD_KIND1 = 0;
layout(constant_id = 9) const uint MOD_KIND2 = 0;
layout(constant_id = 10) const uint MOD_KIND3 = 0;
layout(constant_id = 11) const float MOD_A0 = 1.0;
layout(constant_id = 12) const float MOD_A1 = 1.0;
layout(constant_id = 13) const float MOD_A2 = 1.0;
layout(constant_id = 14) const float MOD_A3 = 1.0;

const uint NORM_SOFTMAX = 0;
const uint NORM_SIGMOID = 1;
const uint NORM_RELU = 2;
const uint NORM_ENTMAX15 = 3;
const uint NORM_SOFTPLUS = 4;
const uint MOD_TEMPERATURE = 0;
const uint MOD_ALIBI = 1;
const uint MOD_SOFTCAP = 2;

// Number of ALiBi modifiers (arithmetic, not && / ||: glslang mis-compiles short-circuit
// operators over specialisation constants).
const uint ALIBI_MODS = uint(NMODS > 0) * uint(MOD_KIND0 == MOD_ALIBI) +
                        uint(NMODS > 1) * uint(MOD_KIND1 == MOD_ALIBI) +
                        uint(NMODS > 2) * uint(MOD_KIND2 == MOD_ALIBI) +
                        uint(NMODS > 3) * uint(MOD_KIND3 == MOD_ALIBI);
bool uses_kpos() { return ALIBI_MODS != 0; }

float mod_slope[4];  // ALiBi slope of each modifier for the current head

// ALiBi slopes 2^(-a (h+1) / H) of head h.
void init_mod_slopes(uint h, uint n_heads) {
  float hf = float(h + 1) / float(n_heads);
  mod_slope[0] = exp2(-MOD_A0 * hf);
  mod_slope[1] = exp2(-MOD_A1 * hf);
  mod_slope[2] = exp2(-MOD_A2 * hf);
  mod_slope[3] = exp2(-MOD_A3 * hf);
}

// tanh without the inf/inf of large arguments.
float safe_tanh(float x) {
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}

// log(1 + v) for v in [0, 1] to float precision, also for tiny v (a plain log(1 + v) loses the
// digits of v): 2 atanh(z) with z = v / (2 + v) <= 1/3, as its odd series.
float log1p_unit(float v) {
  float z = v / (2.0 + v), z2 = z * z;
  float series = 1.0 / 15.0;
  series = 1.0 / 13.0 + z2 * series;
  series = 1.0 / 11.0 + z2 * series;
  series = 1.0 / 9.0 + z2 * series;
  series = 1.0 / 7.0 + z2 * series;
  series = 1.0 / 5.0 + z2 * series;
  series = 1.0 / 3.0 + z2 * series;
  series = 1.0 + z2 * series;
  return 2.0 * z * series;
}

// log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)).
float softplus(float x) { return max(x, 0.0) + log1p_unit(exp(-abs(x))); }

float apply_mod(uint kind, float a, float slope, float sc, int qp, int kp) {
  if (kind == MOD_TEMPERATURE) return sc / a;
  if (kind == MOD_ALIBI) return sc - slope * float(qp - kp);
  return a * safe_tanh(sc / a);
}

// The modified score of a scaled score s = scale * q.k.
float apply_mods(float sc, int qp, int kp) {
  if (NMODS > 0) sc = apply_mod(MOD_KIND0, MOD_A0, mod_slope[0], sc, qp, kp);
  if (NMODS > 1) sc = apply_mod(MOD_KIND1, MOD_A1, mod_slope[1], sc, qp, kp);
  if (NMODS > 2) sc = apply_mod(MOD_KIND2, MOD_A2, mod_slope[2], sc, qp, kp);
  if (NMODS > 3) sc = apply_mod(MOD_KIND3, MOD_A3, mod_slope[3], sc, qp, kp);
  return sc;
}

// Unnormalised weight of the elementwise normalisers (sigmoid, ReLU, softplus).
float elementwise_weight(float sc, float log_nk, float n_k) {
  if (NORM == NORM_SIGMOID) return 1.0 / (1.0 + exp(-(sc - log_nk + NORM_A)));
  if (NORM == NORM_RELU) {
    if (sc <= 0.0) return 0.0;
    float pw = NORM_A == 1.0 ? sc : (NORM_A == 2.0 ? sc * sc : pow(sc, NORM_A));
    return pw / n_k;
  }
  return softplus(sc);  // NORM_SOFTPLUS
}
