#include "compute/kv/kv_policy.h"

#include <algorithm>

#include "compute/error.h"
#include "compute/kv/kv_pieces.h"
#include "compute/params.h"
#include "compute/spec.h"

namespace attn {

namespace {

// The table of pieces, in display order: eviction, then precision. A new piece is one file in
// compute/kv/eviction/ or compute/kv/storage/ and one entry here (and its extern in kv_pieces.h).
const KvPieceFactory* const kKvPieces[] = {
    &kKvFull,      &kKvRecent, &kKvStreaming, &kKvH2o, &kKvTova, &kKvSnapKv,
    &kKvPyramidKv, &kKvQuest,  &kKvQuant,     &kKvFp8, &kKvFp16, &kKvBf16,
};

// The default storage: the f32 values themselves (no piece names it).
class F32Storage final : public KvStorage {
 public:
  bool exact() const override { return true; }
  KvFormat format(bool) const override { return {}; }
  double bytes_per_element(bool, int) const override { return 4; }
  void store_rows(float*, int, int, bool) const override {}
};

struct Piece {
  const KvPieceFactory* factory;
  VariantInfo info;
};

const std::vector<Piece>& pieces() {
  static const std::vector<Piece> all = [] {
    std::vector<Piece> v;
    for (const KvPieceFactory* f : kKvPieces) v.push_back({f, f->info()});
    return v;
  }();
  return all;
}

const Piece& piece(const std::string& id) {
  for (const Piece& p : pieces())
    if (p.info.id == id) return p;
  std::vector<std::string> ids;
  for (const Piece& p : pieces()) ids.push_back(p.info.id);
  throw Error(ErrorCode::UnknownVariant, "unknown KV-cache policy piece '" + id + "'" +
                                             did_you_mean(id, ids) + " (known: " + join_names(ids) +
                                             ")");
}

}  // namespace

ParamSpec kv_reposition_param() {
  return {"reposition",
          ParamSpec::Type::Bool,
          0,
          1,
          1,
          "kept tokens take their slot in the cache as position (else their stream position)",
          {}};
}

void kv_check(bool ok, const std::string& id, const std::string& what) {
  if (!ok) throw Error(ErrorCode::BadParameter, id + ": " + what);
}

const std::vector<const KvPieceFactory*>& kv_piece_table() {
  static const std::vector<const KvPieceFactory*> table(std::begin(kKvPieces), std::end(kKvPieces));
  return table;
}

const std::vector<VariantInfo>& kv_pieces() {
  static const std::vector<VariantInfo> infos = [] {
    std::vector<VariantInfo> v;
    for (const Piece& p : pieces()) v.push_back(p.info);
    return v;
  }();
  return infos;
}

KvPolicy::KvPolicy()
    : evict_params{{"reposition", 1}},
      evict(kKvFull.eviction(evict_params)),
      storage(std::make_shared<F32Storage>()) {}

KvPolicy make_kv_policy(const std::string& text) {
  KvPolicy p;
  std::vector<SpecPiece> specs = parse_spec(text);
  require(!specs.empty(), ErrorCode::InvalidArgument, "empty KV-cache policy");
  std::vector<SpecPiece> canon;
  std::string evict_id, prec_id;
  for (const SpecPiece& sp : specs) {
    const Piece& pc = piece(sp.id);
    const VariantInfo& info = pc.info;
    Params given;
    for (const auto& [name, value] : sp.params) {
      const ParamSpec* ps = nullptr;
      for (const ParamSpec& s : info.params)
        if (s.name == name) ps = &s;
      given[name] = param_from_text(ps, value, sp.id + "." + name);
    }
    const Params v = resolve_params(sp.id, info.params, given);
    SpecPiece c{sp.id, {}};
    for (const ParamSpec& s : info.params)
      c.params.emplace_back(s.name, param_to_text(s, v.at(s.name)));
    if (pc.factory->eviction) {
      require(evict_id.empty(), ErrorCode::InvalidArgument,
              "KV-cache policy '" + text + "' has two eviction pieces ('" + evict_id + "' and '" +
                  sp.id + "')");
      evict_id = sp.id;
      p.reposition = v.at("reposition") != 0;
      p.evict = pc.factory->eviction(v);
      p.evict_id = sp.id;
      p.evict_params = v;
    } else {
      require(prec_id.empty(), ErrorCode::InvalidArgument,
              "KV-cache policy '" + text + "' has two precision pieces ('" + prec_id + "' and '" +
                  sp.id + "')");
      prec_id = sp.id;
      p.storage = pc.factory->storage(v);
      p.storage_id = sp.id;
      p.storage_params = v;
    }
    canon.push_back(std::move(c));
  }
  // Canonical order: eviction (kv_full spelled out only when alone), then precision.
  std::stable_partition(canon.begin(), canon.end(),
                        [](const SpecPiece& c) { return piece(c.id).factory->eviction; });
  if (evict_id.empty()) {
    if (canon.empty()) canon.push_back({"kv_full", {{"reposition", "true"}}});
  }
  for (SpecPiece& c : canon)
    for (auto& [name, value] : c.params)
      if (name == "reposition") value = value == "1" ? "true" : "false";
  p.spec = format_spec(canon);
  return p;
}

}  // namespace attn
