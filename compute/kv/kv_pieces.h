// The table of KV-cache policy pieces: one factory per piece, one file per piece in
// compute/kv/eviction/ and compute/kv/storage/, listed once in kv_policy.cpp (kKvPieces). The
// parser, `attnscope variants --kv`, the decode dialog and the README test all read that table.
//
// A new piece: a file defining its factory (info + the code), an `extern` line here, and its
// line in kKvPieces. Nothing else switches on piece ids.
#pragma once
#include <memory>
#include <string>

#include "compute/kv/kv_policy.h"
#include "compute/params.h"

namespace attn {

// Family strings of the two kinds of piece (VariantInfo::family).
inline constexpr const char* kKvEvictionFamily = "kv eviction";
inline constexpr const char* kKvPrecisionFamily = "kv precision";

// One piece. `info()` gives the id, display name, family (kKvEvictionFamily for eviction,
// kKvPrecisionFamily for precision), source and parameter schema (eviction pieces end with
// kv_reposition_param()). Exactly one of `eviction` and `storage` is set: it builds the piece
// from parameters already resolved by resolve_params (defaults filled, ranges checked) and
// checks the cross-parameter rules with kv_check.
struct KvPieceFactory {
  VariantInfo (*info)();
  std::shared_ptr<const KvEviction> (*eviction)(const Params& params) = nullptr;
  std::shared_ptr<const KvStorage> (*storage)(const Params& params) = nullptr;
};

// Eviction pieces (compute/kv/eviction/).
extern const KvPieceFactory kKvFull;       // kv_full(reposition)
extern const KvPieceFactory kKvRecent;     // kv_recent(window, reposition)
extern const KvPieceFactory kKvStreaming;  // kv_streaming(sinks, window, reposition)
extern const KvPieceFactory kKvH2o;        // kv_h2o(budget, recent, reposition)
extern const KvPieceFactory kKvTova;       // kv_tova(budget, reposition)
extern const KvPieceFactory kKvSnapKv;     // kv_snapkv(budget, window, kernel, reposition)
extern const KvPieceFactory kKvPyramidKv;  // kv_pyramidkv(budget, window, kernel, beta, ...)
extern const KvPieceFactory kKvQuest;      // kv_quest(page, k, reposition)
// Precision pieces (compute/kv/storage/).
extern const KvPieceFactory kKvQuant;  // kv_quant(bits, group, k_axis, v_axis)
extern const KvPieceFactory kKvFp8;    // kv_fp8(format)
extern const KvPieceFactory kKvFp16;   // kv_fp16
extern const KvPieceFactory kKvBf16;   // kv_bf16

// The table, in display order (eviction first, then precision).
const std::vector<const KvPieceFactory*>& kv_piece_table();

// ---- shorthand for the pieces' files ----

// Upper bound of token counts in schemas.
inline constexpr double kKvMaxLen = 1 << 24;
inline ParamSpec kv_int_param(const char* name, double min, double max, double def,
                              const char* help) {
  return {name, ParamSpec::Type::Int, min, max, def, help, {}};
}
// The parameter every eviction piece takes last.
ParamSpec kv_reposition_param();
// The builder of an eviction piece whose constructor reads its resolved parameters.
template <class Piece>
std::shared_ptr<const KvEviction> kv_make_eviction(const Params& p) {
  return std::make_shared<Piece>(p);
}
// Throws Error(BadParameter) "<id>: <what>" unless `ok`.
void kv_check(bool ok, const std::string& id, const std::string& what);

}  // namespace attn
