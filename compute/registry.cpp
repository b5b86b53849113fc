#include "compute/registry.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "compute/approximation.h"
#include "compute/error.h"
#include "compute/spec.h"
#include "compute/variants/modifiers/normalisers.h"
#include "compute/variants/modifiers/score_mods.h"
#include "compute/variants/patterns.h"

namespace attn {

namespace {

// The tables of pieces, in display order. A new pattern or approximation is one file in
// compute/variants/{patterns,selectors,approximations}/ and one entry here; a new score modifier
// or normaliser is one row of its table in compute/variants/modifiers/.
const PatternFactory* const kPatterns[] = {
    &kWindowPattern,   &kSinksWindowPattern,   &kStridedPattern,   &kFixedPattern,
    &kDilatedPattern,  &kBigBirdPattern,       &kBlockTopkPattern, &kTopkPattern,
    &kTopPPattern,     &kVerticalSlashPattern, &kH2oPattern,       &kSketchWalkPattern,
    &kTopThetaPattern, &kLshPattern,           &kKmeansPattern,    &kLokiPattern,
    &kHyperPattern,
};
const ApproximationFactory* const kApproximations[] = {
    &kLinearApprox,  &kPerformerApprox, &kCosformerApprox, &kNystromApprox, &kLinformerApprox,
    &kQuantQkApprox, &kFp8QkApprox,     &kVqApprox,        &kDeltaApprox,
};

// The factory registered under `id` in one table (build() has checked the id's kind already).
template <typename Factory, size_t N>
const Factory& factory(const Factory* const (&table)[N], const std::string& id) {
  for (const Factory* f : table)
    if (f->info().id == id) return *f;
  throw Error(ErrorCode::UnknownVariant, "no factory registered for piece '" + id + "'");
}

// The row registered under `id` in a modifier table (score_mods.h, normalisers.h).
template <class Piece>
const ModifierEntry<Piece>& entry(const std::vector<ModifierEntry<Piece>>& table,
                                  const std::string& id) {
  for (const ModifierEntry<Piece>& e : table)
    if (e.info.id == id) return e;
  throw Error(ErrorCode::UnknownVariant, "no factory registered for piece '" + id + "'");
}

std::vector<PieceInfo> build_pieces() {
  std::vector<PieceInfo> out;
  out.push_back({PieceKind::Dense,
                 {"dense",
                  "Dense",
                  "dense",
                  kVaswaniSource,
                  "Every visible key (the baseline every variant is compared with).",
                  {}}});
  for (const PatternFactory* f : kPatterns) out.push_back({PieceKind::Pattern, f->info()});
  for (const auto& e : score_mod_table()) out.push_back({PieceKind::ScoreMod, e.info});
  for (const auto& e : normaliser_table()) out.push_back({PieceKind::Normaliser, e.info});
  out.push_back({PieceKind::Selective,
                 {"selective",
                  "Selective attention",
                  "score-mod",
                  "Leviathan, Kalman, Matias 2024, Selective Attention Improves Transformer",
                  "Subtracts from each logit the ReLU'd logits earlier queries gave that key "
                  "(tokens mask what they make redundant).",
                  {}}});
  for (const ApproximationFactory* f : kApproximations)
    out.push_back({PieceKind::Approximation, f->info()});
  return out;
}

std::vector<std::string> known_ids() {
  std::vector<std::string> ids;
  for (const PieceInfo& p : registry_pieces()) ids.push_back(p.info.id);
  return ids;
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
      const ParamSpec* enum_spec = nullptr;
      for (const PieceInfo& known : registry_pieces())
        if (known.info.id == sp.id)
          for (const ParamSpec& ps : known.info.params)
            if (ps.name == name && ps.type == ParamSpec::Type::Enum) enum_spec = &ps;
      if (enum_spec) {
        v = param_from_text(enum_spec, text, sp.id + "." + name);
      } else if (text == "true") {
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

// Every parameter spelled out, in schema order.
SpecPiece canonical_piece(const VariantInfo& info, const Params& values) {
  SpecPiece out{info.id, {}};
  for (const ParamSpec& ps : info.params)
    out.params.emplace_back(ps.name, param_to_text(ps, values.at(ps.name)));
  return out;
}

Variant build(const std::vector<PieceSpec>& pieces, const std::string& original) {
  std::shared_ptr<const Pattern> pattern;
  std::string pattern_id, norm_id;
  SpecPiece pattern_piece, norm_piece;
  std::vector<ScoreMod> mods;
  std::vector<SpecPiece> mod_pieces;
  Normaliser norm;
  bool selective = false;
  std::shared_ptr<const Approximation> approx;
  SpecPiece approx_piece;
  for (const PieceSpec& ps : pieces) {
    const PieceInfo& piece = registry_piece(ps.id);
    Params values = resolve_params(ps.id, piece.info.params, ps.given);
    SpecPiece canon = canonical_piece(piece.info, values);
    switch (piece.kind) {
      case PieceKind::Dense:
      case PieceKind::Pattern:
        if (!pattern_id.empty())
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' has two patterns ('" + pattern_id +
                          "' and '" + ps.id + "'); a variant has at most one");
        pattern_id = ps.id;
        pattern_piece = canon;
        if (piece.kind == PieceKind::Pattern) pattern = factory(kPatterns, ps.id).make(values);
        break;
      case PieceKind::ScoreMod:
        mods.push_back(entry(score_mod_table(), ps.id).make(values));
        mod_pieces.push_back(canon);
        break;
      case PieceKind::Normaliser:
        if (!norm_id.empty())
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' has two normalisers ('" + norm_id +
                          "' and '" + ps.id + "'); a variant has at most one");
        norm_id = ps.id;
        norm_piece = canon;
        norm = entry(normaliser_table(), ps.id).make(values);
        break;
      case PieceKind::Selective:
        if (selective)
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' names 'selective' twice");
        selective = true;
        break;
      case PieceKind::Approximation:
        if (approx)
          throw Error(ErrorCode::InvalidArgument,
                      "variant spec '" + original + "' has two approximations ('" +
                          approx_piece.id + "' and '" + ps.id + "'); a variant has at most one");
        approx = factory(kApproximations, ps.id).make(values);
        approx_piece = canon;
        break;
    }
  }
  if (approx) {
    const std::string& id = approx_piece.id;
    require(!selective, ErrorCode::InvalidArgument,
            "variant spec '" + original + "': '" + id +
                "' cannot be combined with 'selective' (selective attention is sequential along "
                "queries)");
    if (approx->kind() == Approximation::Kind::Replace) {
      std::string other = pattern ? pattern_id : !mods.empty() ? mod_pieces[0].id : norm_id;
      require(other.empty(), ErrorCode::InvalidArgument,
              "variant spec '" + original + "': '" + id +
                  "' replaces the whole attention computation, so it stands alone; remove '" +
                  other + "' (write just \"" + format_spec_piece(approx_piece) + "\")");
    }
  }
  // Canonical: pattern, modifiers in order, normaliser unless softmax, selective; "dense" only
  // when nothing else is left.
  std::vector<SpecPiece> parts;
  if (pattern) parts.push_back(pattern_piece);
  for (const SpecPiece& t : mod_pieces) parts.push_back(t);
  if (!norm_id.empty() && norm_id != "softmax") parts.push_back(norm_piece);
  if (selective) parts.push_back({"selective", {}});
  if (approx) parts.push_back(approx_piece);
  if (parts.empty()) parts.push_back({"dense", {}});
  return Variant(format_spec(parts), pattern, mods, norm, selective, approx);
}

}  // namespace

const char* piece_kind_name(PieceKind kind) {
  static constexpr const char* kNames[] = {"pattern", "score-mod", "normaliser",
                                           "dense",   "selective", "approximation"};
  static_assert(std::size(kNames) == size_t(PieceKind::Approximation) + 1, "a name per kind");
  return kNames[size_t(kind)];
}

const std::vector<PieceInfo>& registry_pieces() {
  static const std::vector<PieceInfo> pieces = build_pieces();
  return pieces;
}

const PieceInfo& registry_piece(const std::string& id) {
  for (const PieceInfo& p : registry_pieces())
    if (p.info.id == id) return p;
  const std::vector<std::string> ids = known_ids();
  throw Error(ErrorCode::UnknownVariant, "unknown variant piece '" + id + "'" +
                                             did_you_mean(id, ids) + " (known: " + join_names(ids) +
                                             ")");
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

std::string spec_family_id(const std::string& spec) {
  const std::vector<SpecPiece> pieces = parse_spec(spec);
  const std::string pattern = spec_pattern_id(spec);
  if (pattern != "dense" || pieces.empty()) return pattern;
  for (const SpecPiece& piece : pieces)
    if (registry_piece(piece.id).kind == PieceKind::Approximation) return piece.id;
  return pieces.front().id;
}

}  // namespace attn
