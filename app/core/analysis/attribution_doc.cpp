#include "app/core/analysis/attribution_doc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "app/core/heads/interventions.h"
#include "app/core/session/labels.h"
#include "app/core/session/model_catalog.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "models/arch/image.h"

namespace attn::core {
namespace {

std::string num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const AttributionMethod& method_info(const std::string& id) {
  return attribution_methods()[size_t(attribution_method_index(id))];
}

// "Occlusion (leave one out)" -> "Occlusion": what fits beside a matrix cell or in a legend.
std::string short_title(const std::string& title) {
  const size_t p = title.find(" (");
  return p == std::string::npos ? title : title.substr(0, p);
}

// The token's text in the input, or "" when the analysis has no spans for it.
std::string token_text(const Analysis& a, int t) {
  if (t < 0 || size_t(t) >= a.tokens.size()) return {};
  const Token& tk = a.tokens[size_t(t)];
  const std::string& text = a.session.input.text;
  if (tk.begin >= tk.end || tk.end > text.size()) return {};
  return text.substr(tk.begin, tk.end - tk.begin);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Text units: display labels, word starts and line ends, from the analysis's tokens when they
// are the attributed ones, else from the pieces' markers ("Ġ", "▁", "Ċ").
void fill_text_units(const Attribution& at, const Analysis* a, render::AttributionDoc& d) {
  const int U = at.units();
  const bool spans = a && int(a->tokens.size()) == at.n_tokens &&
                     int(a->labels.size()) == at.n_tokens && !a->session.input.text.empty();
  d.labels.resize(size_t(U));
  d.word_start.assign(size_t(U), 0);
  d.line_break.assign(size_t(U), 0);
  std::vector<uint8_t> newline(size_t(U), 0);
  for (int u = 0; u < U; ++u) {
    const int t = at.first_unit + u;
    if (spans) {
      std::string label = a->labels[size_t(t)];
      if (label == "\u21b5") label = "\u00b6";  // the view's font has Latin-1 only
      d.labels[size_t(u)] = label;
      const std::string s = token_text(*a, t);
      const Token& tk = a->tokens[size_t(t)];
      const std::string& text = a->session.input.text;
      d.word_start[size_t(u)] =
          (!s.empty() && is_space(s.front())) || (tk.begin > 0 && is_space(text[tk.begin - 1]));
      newline[size_t(u)] = s.find('\n') != std::string::npos;
    } else {
      const std::string& piece = at.unit_labels[size_t(u)];
      d.labels[size_t(u)] = display_piece(piece);
      d.word_start[size_t(u)] = piece.rfind("\u0120", 0) == 0 || piece.rfind("\u2581", 0) == 0;
      newline[size_t(u)] = piece.find("\u010a") != std::string::npos;
    }
  }
  // A run of newlines ends one line, after its last token.
  for (int u = 0; u < U; ++u)
    d.line_break[size_t(u)] = newline[size_t(u)] && (u + 1 == U || !newline[size_t(u) + 1]);
}

void fill_image(const Attribution& at, const Analysis* a, render::AttributionDoc& d) {
  d.image = true;
  d.grid_h = at.grid_h;
  d.grid_w = at.grid_w;
  d.labels = at.unit_labels;
  d.word_start.assign(d.labels.size(), 0);
  d.line_break.assign(d.labels.size(), 0);
  if (!a || a->image.data.empty() || a->input.image.empty()) return;
  // The input as the model sees it (its preprocessing size), for the overlays.
  const models::Image8 shown = models::resize_image(
      a->image, a->input.image.height, a->input.image.width, models::Resample::Bilinear);
  d.height = shown.height;
  d.width = shown.width;
  d.channels = shown.channels;
  d.pixels = shown.data;
}

// "Target ' the' at position 185 (the last) · p 0.212 · z 10.83 · ..." for the view's header.
std::string title_of(const Attribution& at, const Analysis* a) {
  auto named = [&](int id, const std::string& fallback) {
    const std::string n = a ? attribution_target_name(*a, id) : "";
    return n.empty() ? fallback : n;
  };
  std::string t = "Target " + named(at.id, at.target_label);
  if (!at.image) {
    const bool causal = !a || !a->info || a->info->causal;  // the logits predict the next token
    t += (causal ? " next after position " : " at position ") + std::to_string(at.position) +
         (at.position + 1 == at.n_tokens ? " (the last)" : "");
  }
  t += " \u00b7 p " + num("%.3g", at.probability);
  if (at.foil >= 0)
    t += " \u00b7 z = logit(target) - logit(" + named(at.foil, at.foil_label) +
         ") = " + num("%.4g", at.z);
  else
    t += " \u00b7 z (logit) " + num("%.4g", at.z);
  t += " \u00b7 baseline " + baseline_name(at.baseline);
  t += " \u00b7 " + (at.variant == "dense" ? std::string("dense model") : "variant " + at.variant);
  if (at.matmul != "f32") t += " \u00b7 " + at.matmul + " matmuls";
  return t;
}

std::string details_of(const MethodScores& m, float scale, const Attribution& at) {
  const std::string time =
      m.seconds < 0.1 ? num("%.1f ms", m.seconds * 1e3) : num("%.2f s", m.seconds);
  std::string s = "max |s| " + num("%.3g", scale) + " \u00b7 " + time;
  if (std::isfinite(m.z_difference)) {  // completeness: the scores sum to z(x) - z(baseline)
    double sum = 0;
    for (int u : at.ranked) sum += m.scores[size_t(u)];
    s += " \u00b7 sum " + num("%.4g", sum) + " \u00b7 dz " + num("%.4g", m.z_difference);
  }
  if (std::isfinite(m.relevance_sum))  // the relevance that reached the input, against z
    s += " \u00b7 input " + num("%.3g", m.relevance_sum) + " of z " + num("%.3g", at.z);
  if (!m.note.empty()) s += " \u00b7 " + m.note;  // e.g. incomplete integrated gradients
  return s;
}

}  // namespace

AttributionRun run_attribution(const Analysis& a, const SessionAttribution& setup,
                               const std::atomic<bool>* cancel, int top_k) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  require(a.model && a.info, ErrorCode::InvalidArgument,
          "attribution needs a model: raw tensors and synthetic problems have no target to "
          "attribute");
  const ModelInfo& info = *a.info;
  const bool vision = info.vision;
  require(vision ? info.n_classes > 0 : info.vocab > 0, ErrorCode::InvalidArgument,
          std::string("the model has no ") + (vision ? "classifier" : "language-model") +
              " head: there is no logit to attribute");
  require(!setup.methods.empty(), ErrorCode::InvalidArgument, "choose at least one method");
  AttributionRequest q;
  q.methods = setup.methods;
  for (const std::string& m : q.methods) attribution_method_index(m);  // names the known ids
  q.baseline = parse_baseline(setup.baseline);
  require(vision || q.baseline.kind != Baseline::Kind::Mean, ErrorCode::InvalidArgument,
          "the mean baseline is for images; a text takes zero or token");
  require(!vision || q.baseline.kind != Baseline::Kind::Token, ErrorCode::InvalidArgument,
          "the token baseline is for text; an image takes zero or mean");
  require(setup.ig_steps >= 1 && setup.ig_steps <= 4096, ErrorCode::InvalidArgument,
          "integrated gradients take 1 to 4096 steps, not " + std::to_string(setup.ig_steps));
  q.ig_steps = setup.ig_steps;
  q.matmul = parse_matmul(setup.matmul);
  q.cancel = cancel;
  const int n = attribution_target_count(a);
  const std::string what = vision ? "class" : "token id";
  if (!vision) {
    const int N = int(a.input.ids.size());
    require(setup.position >= -1 && setup.position < N, ErrorCode::InvalidArgument,
            "the target position " + std::to_string(setup.position) + " is outside the input's " +
                std::to_string(N) + " tokens (-1: the last)");
    q.target.position = setup.position;
  }
  require(setup.target >= -1 && setup.target < n, ErrorCode::InvalidArgument,
          "the target " + what + " " + std::to_string(setup.target) + " is outside [0, " +
              std::to_string(n) + ") (-1: the top prediction)");
  require(setup.foil >= -1 && setup.foil < n, ErrorCode::InvalidArgument,
          "the foil " + what + " " + std::to_string(setup.foil) + " is outside [0, " +
              std::to_string(n) + ") (-1: none)");
  require(setup.foil < 0 || setup.foil != setup.target, ErrorCode::InvalidArgument,
          "the foil is the target itself");
  q.target.id = setup.target;
  q.target.foil = setup.foil;

  std::unique_ptr<Backend> backend;
  Substitution sub;
  if (setup.with_variant) {
    require(a.panels.size() > 1 && a.panels[1].variant, ErrorCode::InvalidArgument,
            "\"with the first variant\": the session has no variant");
    const Variant& v = *a.panels[1].variant;
    for (const std::string& m : q.methods) {
      if (!method_info(m).gradient) continue;
      const std::string why = gradient_refusal(v);
      require(why.empty(), ErrorCode::InvalidArgument,
              method_info(m).title + ": " + why +
                  "; attention, rollout, flow and occlusion run with it");
    }
    // On the CPU: the view's Vulkan device may go away while this runs.
    backend = make_backend_with_fallback("cpu");
    sub.variant = &v;
    sub.backend = backend.get();
    sub.layers = a.session.substitute_layers;
    sub.heads = a.session.substitute_heads;
    sub.run.cancel = cancel;
    sub.check(info);
    q.substitution = &sub;
  }

  AttributionRun r;
  r.attribution = attribute(*a.model, a.input, q);
  r.agreement = rank_agreement(r.attribution, top_k);
  if (setup.faithfulness) {
    require(setup.steps >= 1 && setup.steps <= 1000, ErrorCode::InvalidArgument,
            "the curves take 1 to 1000 steps, not " + std::to_string(setup.steps));
    FaithfulnessOptions fo;
    fo.steps = setup.steps;
    r.faithfulness = faithfulness(*a.model, a.input, r.attribution, q, fo);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

render::AttributionDoc attribution_doc(const Attribution& at,
                                       const std::vector<RankAgreement>& agreement,
                                       const Faithfulness* f, const Analysis* a) {
  render::AttributionDoc d;
  d.present = true;
  const int U = at.units();
  d.first_token = at.first_unit;
  if (at.image)
    fill_image(at, a, d);
  else
    fill_text_units(at, a, d);
  d.ranked.assign(size_t(U), 0);
  for (int u : at.ranked)
    if (u >= 0 && u < U) d.ranked[size_t(u)] = 1;
  d.n_ranked = int(at.ranked.size());
  d.target_unit = at.image ? -1 : at.position - at.first_unit;
  d.target_label = a ? attribution_target_name(*a, at.id) : "";
  if (d.target_label.empty()) d.target_label = at.target_label;
  d.title = title_of(at, a);

  const size_t M = at.methods.size();
  for (const MethodScores& m : at.methods) {
    const AttributionMethod& info = method_info(m.method);
    d.methods.push_back(m.method);
    d.titles.push_back(info.title);
    d.short_titles.push_back(short_title(info.title));
    float scale = 0;
    for (int u : at.ranked) scale = std::max(scale, std::fabs(m.scores[size_t(u)]));
    d.scale.push_back(scale);
    d.scores.push_back(m.scores);
    std::vector<int> rank(size_t(U), 0);
    const std::vector<int> order = order_by_score(m.scores, at.ranked);
    for (size_t i = 0; i < order.size(); ++i) rank[size_t(order[i])] = int(i) + 1;
    d.ranks.push_back(std::move(rank));
    d.details.push_back(details_of(m, scale, at));
  }

  d.spearman.assign(M * M, 0.f);
  d.kendall.assign(M * M, 0.f);
  d.top_k.assign(M * M, 0.f);
  for (size_t i = 0; i < M; ++i) {
    d.spearman[i * M + i] = d.kendall[i * M + i] = d.top_k[i * M + i] = 1;
  }
  auto index = [&](const std::string& id) {
    for (size_t i = 0; i < M; ++i)
      if (d.methods[i] == id) return int(i);
    return -1;
  };
  for (const RankAgreement& r : agreement) {
    const int i = index(r.a), j = index(r.b);
    if (i < 0 || j < 0) continue;
    for (const auto& [x, y] : {std::pair{i, j}, std::pair{j, i}}) {
      d.spearman[size_t(x) * M + size_t(y)] = float(r.spearman);
      d.kendall[size_t(x) * M + size_t(y)] = float(r.kendall_tau);
      d.top_k[size_t(x) * M + size_t(y)] = float(r.top_k_overlap);
    }
    d.k = r.k;
  }

  if (f && !f->curves.empty()) {
    d.fractions = f->fractions;
    for (const Curve& c : f->curves) {
      render::AttributionCurve rc;
      rc.random = c.order == "random";
      const int i = index(c.order);
      rc.label = rc.random ? "random" : i >= 0 ? d.short_titles[size_t(i)] : c.order;
      rc.deletion = c.p_deletion;
      rc.insertion = c.p_insertion;
      rc.aopc = c.aopc_p;
      rc.insertion_area = c.insertion_p;
      d.curves.push_back(std::move(rc));
    }
  }
  return d;
}

render::AttributionDoc attribution_doc(const AttributionRun& r, const Analysis* a) {
  render::AttributionDoc d =
      attribution_doc(r.attribution, r.agreement, r.faithfulness ? &*r.faithfulness : nullptr, a);
  if (a && !a->session.ablation.empty())
    d.note = "The plain model ran: the ablation of the Interventions dock does not apply here.";
  return d;
}

std::string attribution_target_name(const Analysis& a, int id) {
  if (!a.model || !a.info || id < 0 || id >= attribution_target_count(a)) return {};
  if (a.info->vision)
    return size_t(id) < a.info->class_names.size() ? a.info->class_names[size_t(id)]
                                                   : "class " + std::to_string(id);
  const Tokenizer* tok = a.model->tokenizer();
  if (!tok) return "#" + std::to_string(id);
  try {
    const int32_t ids[] = {int32_t(id)};
    std::string s = tok->decode(ids, false);
    for (char& c : s)
      if (c == '\n') c = ' ';
    return "'" + s + "'";
  } catch (const Error&) {
    return "#" + std::to_string(id);
  }
}

int attribution_target_id(const Analysis& a, const std::string& text) {
  require(a.model && a.info, ErrorCode::InvalidArgument, "no model to name a target with");
  if (!a.info->vision) return single_token(*a.model, text, "the token");
  const std::vector<std::string>& names = a.info->class_names;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return int(i);
  const bool index = !text.empty() && text.size() < 10 &&
                     text.find_first_not_of("0123456789") == std::string::npos;
  require(index && std::stoi(text) < a.info->n_classes, ErrorCode::InvalidArgument,
          "'" + text + "' is not a class name or index of this model (" +
              std::to_string(a.info->n_classes) + " classes)");
  return std::stoi(text);
}

int attribution_target_count(const Analysis& a) {
  if (!a.model || !a.info) return 0;
  return a.info->vision ? a.info->n_classes : a.info->vocab;
}

std::string attribution_stale(const Analysis& ran_on, const Analysis& now, bool with_variant) {
  if (ran_on.model != now.model) return "it was computed with another model";
  if (ran_on.input.ids != now.input.ids || ran_on.input.image.data != now.input.image.data)
    return "it was computed for an earlier input";
  const std::string v0 = ran_on.panels.size() > 1 ? ran_on.panels[1].spec : "";
  const std::string v1 = now.panels.size() > 1 ? now.panels[1].spec : "";
  if (with_variant && v0 != v1) return "it was computed with another first variant";
  if (with_variant && (ran_on.session.substitute_layers != now.session.substitute_layers ||
                       ran_on.session.substitute_heads != now.session.substitute_heads))
    return "it was computed with the variant in other layers or heads";
  return {};
}

std::vector<std::string> attribution_baselines(const Analysis& a) {
  if (!a.model || !a.info) return {};
  if (a.info->vision) return {"zero", "mean"};
  return {"zero", "token"};
}

}  // namespace attn::core
