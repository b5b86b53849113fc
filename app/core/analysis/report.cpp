#include "app/core/analysis/report.h"

#include <cmath>

#include "app/core/analysis/views.h"
#include "app/core/export/data_export.h"
#include "app/core/heads/head_metrics.h"
#include "compute/cpu/gemm.h"

namespace attn::core {
namespace {

using nlohmann::json;

json num(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json metrics_json(const Metrics& m) {
  double ent = 0;
  for (float e : m.entropy) ent += e;
  return {{"rel_error", num(m.rel_error)},
          {"mass_recall", num(m.mass_recall)},
          {"row_kl", num(m.row_kl)},
          {"density", num(m.density)},
          {"entropy_mean", num(m.entropy.empty() ? NAN : ent / double(m.entropy.size()))},
          {"sinks", m.sinks}};
}

json end_to_end_json(const models::EndToEnd& e) {
  json j;
  if (e.has_tokens) {
    // The model's next-token KL (not the per-head row KL of the attention comparisons).
    j["next_token_kl_mean"] = num(e.mean_kl);
    j["next_token_kl_max"] = num(e.max_kl);
    std::vector<json> kl;
    for (float x : e.kl) kl.push_back(num(x));
    j["next_token_kl"] = kl;
    j["top1_agreement"] = num(e.top1_agreement);
    j["perplexity_dense"] = num(e.ppl_dense);
    j["perplexity_variant"] = num(e.ppl_variant);
  }
  if (e.has_class) {
    j["class_dense"] = e.class_dense;
    j["class_variant"] = e.class_variant;
    j["class_agree"] = e.class_agree;
  }
  j["cls_cosine"] = num(e.cls_cosine);
  // The logits against dense's: largest absolute and relative Frobenius difference.
  j["logits_max_abs_diff"] = num(e.logits_max_abs);
  j["logits_rel_diff"] = num(e.logits_rel);
  return j;
}

json model_json(const models::ModelInfo& i) {
  return {{"dir", i.dir},
          {"family", family_name(i.family)},
          {"model_type", i.model_type},
          {"architecture", i.architecture},
          {"layers", i.n_layers},
          {"heads", i.n_heads},
          {"kv_heads", i.n_kv_heads},
          {"head_dim", i.head_dim},
          {"hidden", i.hidden},
          {"vocab", i.vocab},
          {"classes", i.n_classes},
          {"max_tokens", i.max_tokens},
          {"causal", i.causal},
          {"weights",
           {{"dtype", i.weight_dtype},
            {"gemm", cpu::gemm_path(i.weight_dtype == "bf16"  ? cpu::ElemType::Bf16
                                    : i.weight_dtype == "f16" ? cpu::ElemType::F16
                                                              : cpu::ElemType::F32)},
            {"bytes_mapped", i.weight_bytes_mapped},
            {"bytes_converted", i.weight_bytes_converted}}}};
}

json input_json(const Analysis& a) {
  const SessionInput& in = a.session.input;
  json j = {{"kind", in.kind}, {"n_tokens", a.n_tokens()}, {"labels", a.labels}};
  if (in.kind == "image") {
    j["file"] = in.image;
    j["height"] = a.input.image.height;
    j["width"] = a.input.image.width;
  } else if (in.kind == "text" || in.kind == "ids") {
    j["ids"] = a.input.ids;
    j["pieces"] = a.input.labels;
    j["truncated"] = !a.notice.empty();
    j["notice"] = a.notice;
  }
  return j;
}

json tensors_json(const Analysis& a) {
  const Problem& p = a.problem(0);
  return {{"dir", a.session.input.tensors},
          {"heads", p.n_heads},
          {"kv_heads", p.n_kv_heads},
          {"n_q", p.n_q},
          {"n_k", p.n_k},
          {"head_dim", p.d},
          {"causal", p.causal},
          {"labels", p.labels}};
}

json dense_json(const Analysis& a) {
  json layers = json::array();
  const Panel& dense = a.panels[0];
  for (int l = 0; l < a.n_layers(); ++l) {
    const Metrics& m = dense.layer[size_t(l)];
    json lj = {{"layer", l}, {"sinks", m.sinks}, {"sink_score", m.sink_score}};
    if (size_t(l) < a.resid.size()) {
      const models::ResidualStats& rs = a.resid[size_t(l)];
      json massive = json::array();
      for (size_t i = 0; i < rs.massive.size() && i < 16; ++i)
        massive.push_back({{"token", rs.massive[i].token},
                           {"dim", rs.massive[i].dim},
                           {"value", rs.massive[i].value},
                           {"ratio_to_median", num(rs.massive[i].ratio_to_median)}});
      lj["resid_token_norm"] = rs.token_norm;
      lj["resid_dim_absmax"] = rs.dim_absmax;
      lj["resid_median_abs"] = rs.median_abs;
      lj["massive_activations"] = massive;
    }
    layers.push_back(lj);
  }
  json j = {{"forward_seconds", a.forward_seconds}, {"layers", layers}};
  if (a.predicted_class() >= 0) {
    j["class"] = a.predicted_class();
    j["class_name"] = a.predicted_name();
    j["logits"] = std::vector<float>(a.dense_out().logits.begin(), a.dense_out().logits.end());
  }
  return j;
}

json panel_json(const Analysis& a, int v) {
  const Panel& pn = a.panels[size_t(v)];
  const auto& table = head_metrics();
  const int H = a.n_heads();
  json layers = json::array();
  for (int l = 0; l < a.n_layers(); ++l) {
    const Result& r = pn.result(l);
    json lj = metrics_json(pn.layer[size_t(l)]);
    lj["layer"] = l;
    lj["flops"] = r.stats.counted.flops;
    lj["predicted_flops"] = r.stats.predicted.flops;
    lj["kernel_seconds"] = r.stats.kernel_seconds;
    lj["select_seconds"] = r.stats.select_seconds;
    lj["backend"] = r.stats.backend;
    lj["heads"] = json::array();
    for (int h = 0; h < H; ++h) {
      json hj = pn.heads.empty() ? json::object() : metrics_json(pn.heads[size_t(l)][size_t(h)]);
      hj["head"] = h;
      for (size_t m = 0; m < table.size() && m < pn.head_values.size(); ++m)
        hj[table[m].name] = num(pn.head_values[m][size_t(l) * size_t(H) + size_t(h)]);
      lj["heads"].push_back(hj);
    }
    layers.push_back(lj);
  }
  json j = {{"spec", pn.spec},
            {"backend", pn.backend},
            {"precision", precision_name(pn.precision())},
            {"notes", pn.notes},
            {"layers", layers}};
  if (pn.e2e) {
    j["end_to_end"] = end_to_end_json(*pn.e2e);
    j["end_to_end"]["forward_seconds"] = pn.forward_seconds;
  }
  if (!pn.head_values.empty()) j["head_grid"] = to_json(head_grid(a, v));
  return j;
}

}  // namespace

nlohmann::json analysis_json(const Analysis& a, int max_cells) {
  const Session& s = a.session;
  json j = {
      {"attnscope", "analyze"},
      {"version", 3},  // 3: end-to-end KLs named next_token_kl*
      {"input", input_json(a)},
      {"selection", {{"layer", a.layer()}, {"head", a.head()}}},
      {"substitution",
       {{"layers", s.substitute_layers}, {"heads", s.substitute_heads}, {"backend", s.backend}}},
      {"head_metrics", json::array()}};
  for (const HeadMetric& m : head_metrics())
    j["head_metrics"].push_back(
        {{"name", m.name}, {"title", m.title}, {"definition", m.definition}});
  if (a.info) j["model"] = model_json(*a.info);
  if (!s.ablation.empty()) {
    // Every number below comes from the ablated model; "effect" compares it with the plain one
    // (its "perplexity_dense" is the plain model's, "perplexity_variant" the ablated one's).
    j["ablation"] = {{"heads", s.ablation.heads}, {"mode", s.ablation.mode}};
    if (a.ablation_effect) j["ablation"]["effect"] = end_to_end_json(*a.ablation_effect);
  }
  if (s.input.kind == "tensors") j["tensors"] = tensors_json(a);
  if (a.has_metrics()) j["dense"] = dense_json(a);
  // The session's variants (the dense reference is panel 0 and always present).
  j["variants"] = json::array();
  for (size_t v = 1; v < a.panels.size(); ++v) j["variants"].push_back(panel_json(a, int(v)));
  j["reference"] = panel_json(a, 0);
  j["heatmaps"] = json::array();
  for (const HeatmapData& h : heatmaps(a, max_cells)) j["heatmaps"].push_back(to_json(h));
  j["tradeoff"] = json::array();
  for (const TradeoffPoint& t : tradeoff(a)) j["tradeoff"].push_back(to_json(t));
  return j;
}

}  // namespace attn::core
