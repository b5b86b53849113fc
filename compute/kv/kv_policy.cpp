#include "compute/kv/kv_policy.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/params.h"
#include "compute/spec.h"

namespace attn {

namespace {

using T = ParamSpec::Type;

ParamSpec int_param(const char* name, double min, double max, double def, const char* help) {
  return {name, T::Int, min, max, def, help, {}};
}
ParamSpec reposition_param() {
  return {"reposition",
          T::Bool,
          0,
          1,
          1,
          "kept tokens take their slot in the cache as position (else their stream position)",
          {}};
}

constexpr double kMaxLen = 1 << 24;
const char* const kStreamingSource =
    "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks";

std::vector<VariantInfo> build_pieces() {
  std::vector<VariantInfo> v;
  v.push_back({"kv_full",
               "Full cache",
               "kv eviction",
               "Vaswani et al. 2017, Attention Is All You Need",
               "Keeps every key and value (stops at the context of a learned-position model).",
               {reposition_param()}});
  v.push_back({"kv_recent",
               "Recent window",
               "kv eviction",
               kStreamingSource,
               "Keeps the last `window` tokens, the current one included (window attention).",
               {int_param("window", 1, kMaxLen, 256, "tokens seen per step, current included"),
                reposition_param()}});
  v.push_back(
      {"kv_streaming",
       "Sinks + window (StreamingLLM)",
       "kv eviction",
       kStreamingSource,
       "Keeps the first `sinks` tokens and the last `window`, the current one included.",
       {int_param("sinks", 0, kMaxLen, 4, "first tokens kept for ever"),
        int_param("window", 1, kMaxLen, 252, "recent tokens seen per step, current included"),
        reposition_param()}});
  v.push_back({"kv_h2o",
               "Heavy hitters (H2O)",
               "kv eviction",
               "Zhang et al. 2023, H2O: Heavy-Hitter Oracle for Efficient Generative Inference",
               "Keeps `recent` recent tokens and the budget's rest by accumulated attention; the "
               "keys of the h2o(heavy=budget-recent,recent=recent-1) pattern.",
               {int_param("budget", 1, kMaxLen, 256, "entries seen per step, current included"),
                int_param("recent", 1, kMaxLen, 128, "recent tokens kept, current included"),
                reposition_param()}});
  v.push_back({"kv_tova",
               "Token omission via attention (TOVA)",
               "kv eviction",
               "Oren et al. 2024, Transformers are Multi-State RNNs",
               "When full, drops the entry the current query attends to least (any entry).",
               {int_param("budget", 1, kMaxLen, 256, "entries seen per step, current included"),
                reposition_param()}});
  v.push_back({"kv_snapkv",
               "SnapKV (prompt compression)",
               "kv eviction",
               "Li et al. 2024, SnapKV: LLM Knows What You are Looking for Before Generation",
               "Once, after the prefill: keeps the last `window` prompt tokens and the prompt keys "
               "they attend to most (max-pooled over `kernel`); decoding appends without evicting.",
               {int_param("budget", 2, kMaxLen, 1024,
                          "prompt entries the first step sees, itself included"),
                int_param("window", 1, kMaxLen, 32, "observation window: last prompt tokens"),
                int_param("kernel", 1, 1024, 7, "max-pool width over key scores (odd)"),
                reposition_param()}});
  v.push_back(
      {"kv_pyramidkv",
       "PyramidKV (per-layer budgets)",
       "kv eviction",
       "Cai et al. 2024, PyramidKV: Dynamic KV Cache Compression based on Pyramidal "
       "Information Funneling",
       "SnapKV with budgets falling linearly with depth (lower layers keep more), "
       "`budget` on average.",
       {int_param("budget", 2, kMaxLen, 1024, "average prompt entries per layer, as snapkv"),
        int_param("window", 1, kMaxLen, 32, "observation window: last prompt tokens"),
        int_param("kernel", 1, 1024, 7, "max-pool width over key scores (odd)"),
        {"beta", T::Float, 1, 1000, 20, "top-to-bottom budget ratio", {}},
        reposition_param()}});
  v.push_back({"kv_quest",
               "Quest (query-aware pages)",
               "kv eviction",
               "Tang et al. 2024, Quest: Query-Aware Sparsity for Efficient Long-Context LLM "
               "Inference",
               "Evicts nothing; each decode step attends to the `k` pages of `page` entries whose "
               "per-channel key bounds give the highest score bound (the current page always).",
               {int_param("page", 1, 4096, 16, "entries per page"),
                int_param("k", 1, kMaxLen, 16, "pages attended per step, current page included"),
                reposition_param()}});
  v.push_back({"kv_quant",
               "Quantised cache (KIVI-style)",
               "kv precision",
               "Liu et al. 2024, KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
               "Asymmetric min/max integer codes per group: K per channel over `group` tokens "
               "(the newest incomplete group kept in full precision), V per token over `group` "
               "channels.",
               {{"bits", T::Int, 2, 8, 4, "bits per element: 2, 4 or 8", {}},
                int_param("group", 1, 4096, 32, "elements sharing a scale and minimum"),
                {"k_axis",
                 T::Enum,
                 0,
                 1,
                 0,
                 "K groups run along tokens per channel, or per token",
                 {"channel", "token"}},
                {"v_axis",
                 T::Enum,
                 0,
                 1,
                 0,
                 "V groups run along channels per token, or per channel",
                 {"token", "channel"}}}});
  v.push_back(
      {"kv_fp8",
       "FP8 cache",
       "kv precision",
       "Micikevicius et al. 2022, FP8 Formats for Deep Learning",
       "K and V rounded to 8-bit floats (nearest even, saturating at the largest finite).",
       {{"format", T::Enum, 0, 1, 0, "e4m3 (max 448) or e5m2 (max 57344)", {"e4m3", "e5m2"}}}});
  v.push_back({"kv_fp16",
               "FP16 cache",
               "kv precision",
               "IEEE 754-2008 binary16",
               "K and V rounded to half precision (nearest even).",
               {}});
  v.push_back({"kv_bf16",
               "BF16 cache",
               "kv precision",
               "Kalamkar et al. 2019, A Study of BFLOAT16 for Deep Learning Training",
               "K and V rounded to bfloat16 (nearest even).",
               {}});
  return v;
}

const VariantInfo& piece(const std::string& id) {
  for (const VariantInfo& info : kv_pieces())
    if (info.id == id) return info;
  std::vector<std::string> ids;
  for (const VariantInfo& info : kv_pieces()) ids.push_back(info.id);
  throw Error(ErrorCode::UnknownVariant, "unknown KV-cache policy piece '" + id + "'" +
                                             did_you_mean(id, ids) + " (known: " + join_names(ids) +
                                             ")");
}

void check(bool ok, const std::string& id, const std::string& what) {
  if (!ok) throw Error(ErrorCode::BadParameter, id + ": " + what);
}

}  // namespace

const std::vector<VariantInfo>& kv_pieces() {
  static const std::vector<VariantInfo> pieces = build_pieces();
  return pieces;
}

KvPolicy make_kv_policy(const std::string& text) {
  KvPolicy p;
  std::vector<SpecPiece> pieces = parse_spec(text);
  require(!pieces.empty(), ErrorCode::InvalidArgument, "empty KV-cache policy");
  std::vector<SpecPiece> canon;
  std::string evict_id, prec_id;
  for (const SpecPiece& sp : pieces) {
    const VariantInfo& info = piece(sp.id);
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
    const auto get = [&](const char* name) { return int(v.at(name)); };
    if (info.family == "kv eviction") {
      require(evict_id.empty(), ErrorCode::InvalidArgument,
              "KV-cache policy '" + text + "' has two eviction pieces ('" + evict_id + "' and '" +
                  sp.id + "')");
      evict_id = sp.id;
      p.reposition = v.at("reposition") != 0;
      if (sp.id == "kv_full") {
        p.evict = KvPolicy::Evict::Full;
      } else if (sp.id == "kv_recent") {
        p.evict = KvPolicy::Evict::Recent;
        p.window = get("window");
      } else if (sp.id == "kv_streaming") {
        p.evict = KvPolicy::Evict::Streaming;
        p.sinks = get("sinks");
        p.window = get("window");
      } else if (sp.id == "kv_h2o") {
        p.evict = KvPolicy::Evict::H2o;
        p.budget = get("budget");
        p.recent = get("recent");
        check(p.recent <= p.budget, sp.id,
              "recent (" + std::to_string(p.recent) + ") must not exceed budget (" +
                  std::to_string(p.budget) + ")");
      } else if (sp.id == "kv_tova") {
        p.evict = KvPolicy::Evict::Tova;
        p.budget = get("budget");
      } else if (sp.id == "kv_snapkv" || sp.id == "kv_pyramidkv") {
        p.evict = sp.id == "kv_snapkv" ? KvPolicy::Evict::SnapKv : KvPolicy::Evict::PyramidKv;
        p.budget = get("budget");
        p.window = get("window");
        p.kernel = get("kernel");
        if (p.evict == KvPolicy::Evict::PyramidKv) p.beta = v.at("beta");
        check(p.window < p.budget, sp.id,
              "window (" + std::to_string(p.window) + ") must be smaller than budget (" +
                  std::to_string(p.budget) + ")");
        check(p.kernel % 2 == 1, sp.id,
              "kernel must be odd (a centred pool), not " + std::to_string(p.kernel));
      } else {
        p.evict = KvPolicy::Evict::Quest;
        p.page = get("page");
        p.k = get("k");
      }
    } else {
      require(prec_id.empty(), ErrorCode::InvalidArgument,
              "KV-cache policy '" + text + "' has two precision pieces ('" + prec_id + "' and '" +
                  sp.id + "')");
      prec_id = sp.id;
      if (sp.id == "kv_quant") {
        p.precision = KvPolicy::Precision::Quant;
        p.bits = get("bits");
        check(p.bits == 2 || p.bits == 4 || p.bits == 8, sp.id,
              "bits must be 2, 4 or 8, not " + std::to_string(p.bits));
        p.group = get("group");
        p.k_per_channel = get("k_axis") == 0;
        p.v_per_channel = get("v_axis") == 1;
      } else if (sp.id == "kv_fp8") {
        p.precision = KvPolicy::Precision::Fp8;
        p.e4m3 = get("format") == 0;
      } else if (sp.id == "kv_fp16") {
        p.precision = KvPolicy::Precision::Fp16;
      } else {
        p.precision = KvPolicy::Precision::Bf16;
      }
    }
    canon.push_back(std::move(c));
  }
  // Canonical order: eviction (kv_full spelled out only when alone), then precision.
  std::stable_partition(canon.begin(), canon.end(),
                        [](const SpecPiece& c) { return piece(c.id).family == "kv eviction"; });
  if (evict_id.empty()) {
    if (canon.empty()) canon.push_back({"kv_full", {{"reposition", "true"}}});
  }
  for (SpecPiece& c : canon)
    for (auto& [name, value] : c.params)
      if (name == "reposition") value = value == "1" ? "true" : "false";
  p.spec = format_spec(canon);
  return p;
}

bool KvPolicy::needs_scores() const {
  return evict == Evict::H2o || evict == Evict::Tova || evict == Evict::SnapKv ||
         evict == Evict::PyramidKv;
}

bool KvPolicy::prefill_only() const {
  return evict == Evict::SnapKv || evict == Evict::PyramidKv;
}

int pyramid_layer_keep(int budget, int window, double beta, int layer, int n_layers) {
  const int avg = budget - window;
  const int min_keep = int(std::floor(avg / beta));
  const int max_keep = 2 * avg - min_keep;
  if (n_layers <= 1) return avg;
  const int step = (max_keep - min_keep) / (n_layers - 1);
  return max_keep - layer * step;
}

int KvPolicy::keep_after(int layer, int n_layers) const {
  switch (evict) {
    case Evict::Full:
    case Evict::Quest:
      return -1;
    case Evict::Recent:
      return window - 1;
    case Evict::Streaming:
      return sinks + window - 1;
    case Evict::H2o:
    case Evict::Tova:
      return budget - 1;
    case Evict::SnapKv:
      return budget - 1;
    case Evict::PyramidKv:
      return window + std::max(0, pyramid_layer_keep(budget, window, beta, layer, n_layers) - 1);
  }
  return -1;
}

double KvPolicy::key_bytes_per_element(int) const {
  switch (precision) {
    case Precision::F32:
      return 4;
    case Precision::Fp16:
    case Precision::Bf16:
      return 2;
    case Precision::Fp8:
      return 1;
    case Precision::Quant:
      return bits / 8.0 + 4.0 / group;
  }
  return 4;
}

double KvPolicy::value_bytes_per_element(int head_dim) const {
  return key_bytes_per_element(head_dim);
}

}  // namespace attn
