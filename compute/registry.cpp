#include "compute/registry.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "compute/error.h"
#include "compute/spec.h"
#include "compute/variants/patterns.h"

namespace attn {

namespace {

const PatternFactory* const kPatterns[] = {
    &kWindowPattern,  &kSinksWindowPattern,   &kStridedPattern,   &kFixedPattern,
    &kDilatedPattern, &kBigBirdPattern,       &kBlockTopkPattern, &kTopkPattern,
    &kTopPPattern,    &kVerticalSlashPattern, &kH2oPattern,       &kSketchWalkPattern,
};

const char* const kVaswani = "Vaswani et al. 2017, Attention Is All You Need";

std::vector<PieceInfo> build_pieces() {
  std::vector<PieceInfo> out;
  out.push_back({PieceKind::Dense,
                 {"dense",
                  "Dense",
                  "dense",
                  kVaswani,
                  "Every visible key (the baseline every variant is compared with).",
                  {}}});
  for (const PatternFactory* f : kPatterns) out.push_back({PieceKind::Pattern, f->info()});
  out.push_back({PieceKind::ScoreMod,
                 {"temperature",
                  "Temperature",
                  "score-mod",
                  kVaswani,
                  "Divides the scaled scores by t (t < 1 sharpens, t > 1 flattens).",
                  {float_param("t", 0.01, 100, 1, "temperature")}}});
  out.push_back({PieceKind::ScoreMod,
                 {"alibi",
                  "ALiBi",
                  "score-mod",
                  "Press, Smith, Lewis 2022, Train Short, Test Long: Attention with Linear Biases "
                  "Enables Input Length Extrapolation",
                  "Subtracts a per-head slope times the distance qp - kp (slopes 2^(-8(h+1)/H)).",
                  {}}});
  out.push_back({PieceKind::ScoreMod,
                 {"softcap",
                  "Soft-capping",
                  "score-mod",
                  "Gemma Team 2024, Gemma 2: Improving Open Language Models at a Practical Size",
                  "Squashes scores smoothly into (-cap, cap): cap * tanh(s / cap).",
                  {float_param("cap", 0.1, 1000, 50, "cap on the absolute score")}}});
  out.push_back({PieceKind::Normaliser,
                 {"softmax",
                  "Softmax",
                  "normaliser",
                  kVaswani,
                  "exp(s) normalised over the kept keys (the default).",
                  {}}});
  out.push_back({PieceKind::Normaliser,
                 {"sigmoid",
                  "Sigmoid",
                  "normaliser",
                  "Ramapuram et al. 2024, Theory, Analysis, and Best Practices for Sigmoid "
                  "Self-Attention",
                  "Independent sigmoid(s + b) per entry, b = -log(n_k) + bias_offset; rows do not "
                  "sum to one.",
                  {float_param("bias_offset", -100, 100, 0, "added to the -log(n_k) bias")}}});
  out.push_back({PieceKind::Normaliser,
                 {"relu",
                  "ReLU",
                  "normaliser",
                  "Wortsman, Lee, Gilmer, Kornblith 2023, Replacing softmax with ReLU in Vision "
                  "Transformers",
                  "max(s, 0) / n_k per entry; rows do not sum to one.",
                  {}}});
  out.push_back({PieceKind::Normaliser,
                 {"relu2",
                  "Squared ReLU",
                  "normaliser",
                  "Hua, Dai, Liu, Le 2022, Transformer Quality in Linear Time",
                  "max(s, 0)^2 / n_k per entry; rows do not sum to one.",
                  {}}});
  out.push_back({PieceKind::Normaliser,
                 {"entmax15",
                  "1.5-entmax",
                  "normaliser",
                  "Peters, Niculae, Martins 2019, Sparse Sequence-to-Sequence Models",
                  "Sparse normaliser: [s/2 - tau]_+^2 with tau making each row sum to one.",
                  {}}});
  out.push_back({PieceKind::Normaliser,
                 {"softplus",
                  "Softplus / L1",
                  "normaliser",
                  "Gao, Spratling 2025, Softplus Attention with Re-weighting Boosts Length "
                  "Extrapolation in Large Language Models",
                  "softplus(s) normalised by its row sum (an L1-normalised, non-exponential "
                  "softmax).",
                  {}}});
  out.push_back({PieceKind::Selective,
                 {"selective",
                  "Selective attention",
                  "score-mod",
                  "Leviathan, Kalman, Matias 2024, Selective Attention Improves Transformer",
                  "Subtracts from each logit the ReLU'd logits earlier queries gave that key "
                  "(tokens mask what they make redundant).",
                  {}}});
  return out;
}

std::string known_ids() {
  std::string s;
  for (const PieceInfo& p : registry_pieces()) s += (s.empty() ? "" : ", ") + p.info.id;
  return s;
}

// Shortest text that reads back as the same double.
std::string format_value(double v, ParamSpec::Type type) {
  char buf[64];
  auto res = type == ParamSpec::Type::Float ? std::to_chars(buf, buf + sizeof buf, v)
                                            : std::to_chars(buf, buf + sizeof buf, int64_t(v));
  return std::string(buf, res.ptr);
}

// One piece with its values as numbers.
struct PieceSpec {
  std::string id;
  Params given;
};

// Spec values as numbers: "true"/"false" are 1/0, anything else must read whole as a double.
std::vector<PieceSpec> numeric_pieces(const std::string& spec) {
  std::vector<PieceSpec> out;
  for (const SpecPiece& sp : parse_spec(spec)) {
    PieceSpec piece{sp.id, {}};
    for (const auto& [name, text] : sp.params) {
      double v;
      if (text == "true") {
        v = 1;
      } else if (text == "false") {
        v = 0;
      } else {
        char* end = nullptr;
        v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size())
          throw Error(ErrorCode::InvalidArgument,
                      "malformed variant spec '" + spec + "' in piece '" + format_spec_piece(sp) +
                          "': '" + text + "' is not a number (" + sp.id + "." + name + ")");
      }
      piece.given[name] = v;
    }
    out.push_back(std::move(piece));
  }
  return out;
}

std::string piece_text(const VariantInfo& info, const Params& values) {
  if (info.params.empty()) return info.id;
  std::string s = info.id + "(";
  for (size_t t = 0; t < info.params.size(); ++t) {
    const ParamSpec& ps = info.params[t];
    s += (t ? "," : "") + ps.name + "=" + format_value(values.at(ps.name), ps.type);
  }
  return s + ")";
}

Variant build(const std::vector<PieceSpec>& pieces, const std::string& original) {
  std::shared_ptr<const Pattern> pattern;
  std::string pattern_id, pattern_text, norm_id, norm_text;
  std::vector<ScoreMod> mods;
  std::vector<std::string> mod_texts;
  Normaliser norm;
  bool selective = false;
  for (const PieceSpec& ps : pieces) {
    const PieceInfo& piece = registry_piece(ps.id);
    Params values = resolve_params(ps.id, piece.info.params, ps.given);
    std::string text = piece_text(piece.info, values);
    switch (piece.kind) {
      case PieceKind::Dense:
      case PieceKind::Pattern:
        if (!pattern_id.empty())
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' has two patterns ('" + pattern_id +
                          "' and '" + ps.id + "'); a variant has at most one");
        pattern_id = ps.id;
        pattern_text = text;
        if (piece.kind == PieceKind::Pattern)
          for (const PatternFactory* f : kPatterns)
            if (f->info().id == ps.id) pattern = f->make(values);
        break;
      case PieceKind::ScoreMod: {
        ScoreMod m;
        if (ps.id == "temperature") m = {ScoreMod::Kind::Temperature, float(values.at("t"))};
        if (ps.id == "alibi") m = {ScoreMod::Kind::Alibi, 8.0f};
        if (ps.id == "softcap") m = {ScoreMod::Kind::Softcap, float(values.at("cap"))};
        mods.push_back(m);
        mod_texts.push_back(text);
        break;
      }
      case PieceKind::Normaliser:
        if (!norm_id.empty())
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' has two normalisers ('" + norm_id +
                          "' and '" + ps.id + "'); a variant has at most one");
        norm_id = ps.id;
        norm_text = text;
        if (ps.id == "softmax") norm = {Normaliser::Kind::Softmax, 0.0f};
        if (ps.id == "sigmoid") norm = {Normaliser::Kind::Sigmoid, float(values.at("bias_offset"))};
        if (ps.id == "relu") norm = {Normaliser::Kind::Relu, 1.0f};
        if (ps.id == "relu2") norm = {Normaliser::Kind::Relu, 2.0f};
        if (ps.id == "entmax15") norm = {Normaliser::Kind::Entmax15, 0.0f};
        if (ps.id == "softplus") norm = {Normaliser::Kind::SoftplusL1, 0.0f};
        break;
      case PieceKind::Selective:
        if (selective)
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' names 'selective' twice");
        selective = true;
        break;
    }
  }
  // Canonical: pattern, modifiers in order, normaliser unless softmax, selective; "dense" only
  // when nothing else is left.
  std::vector<std::string> parts;
  if (pattern) parts.push_back(pattern_text);
  for (const auto& t : mod_texts) parts.push_back(t);
  if (!norm_id.empty() && norm_id != "softmax") parts.push_back(norm_text);
  if (selective) parts.push_back("selective");
  if (parts.empty()) parts.push_back("dense");
  std::string spec;
  for (const auto& t : parts) spec += (spec.empty() ? "" : "+") + t;
  return Variant(spec, pattern, mods, norm, selective);
}

}  // namespace

const std::vector<PieceInfo>& registry_pieces() {
  static const std::vector<PieceInfo> pieces = build_pieces();
  return pieces;
}

const PieceInfo& registry_piece(const std::string& id) {
  for (const PieceInfo& p : registry_pieces())
    if (p.info.id == id) return p;
  throw Error(ErrorCode::UnknownVariant,
              "unknown variant piece '" + id + "' (known: " + known_ids() + ")");
}

Variant make_variant(const std::string& spec) {
  return build(numeric_pieces(spec), spec);
}

Variant make_variant(const std::string& id, const Params& params) {
  return build({PieceSpec{id, params}}, id);
}

std::string spec_pattern_id(const std::string& spec) {
  for (const SpecPiece& piece : parse_spec(spec)) {
    const PieceKind kind = registry_piece(piece.id).kind;
    if (kind == PieceKind::Pattern || kind == PieceKind::Dense) return piece.id;
  }
  return "dense";
}

}  // namespace attn
