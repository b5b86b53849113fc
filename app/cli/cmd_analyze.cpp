// `attnscope analyze`: the analysis core (app/core) on a session built from the command line
// (or read from --session), printed as a table and written as JSON and hook dumps.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/cli/analyze_dataset.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/analysis/report.h"
#include "app/core/analysis/views.h"
#include "app/core/datasets/image_dataset.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "compute/error.h"

namespace attn::cli {
namespace {

using nlohmann::json;

struct AnalyzeOptions {
  std::string model, text, text_file, image, tensors, json_out, dump;
  std::vector<std::string> variants;  // -v/--variant, split at ';'
  std::string hooks = "all", backend;
  std::string precision = "f32";             // storage of Q, K, V in the variants' kernels
  std::string ablate, ablate_mode = "zero";  // heads to ablate instead of substituting variants
  std::string resample_text;                 // --ablate-mode resample: the other input
  std::string session;  // a session file supplies model, input, variants and substitution
  std::vector<int32_t> ids;
  std::vector<int> layers, heads;
  int threads = 0, image_size = 0, tensors_layer = -1, max_cells = 512;
  int given_inputs = 0;  // how many of --text, --text-file, --ids, --image were given
  bool bidirectional = false, no_end_to_end = false, no_verify = false;
  bool timings = false;
  AnalyzeDatasetArgs dataset;  // --dataset and the options that go with it
};

void write_json(const std::string& path, const json& j) {
  write_json_output(path, j.dump(2, ' ', false, json::error_handler_t::replace));
}

// The command line as a session (a --session file supplies what the options leave out).
core::Session session_of(const AnalyzeOptions& o, std::string& session_path) {
  // Options that conflict whatever the session holds.
  usage(o.tensors.empty() || o.given_inputs == 0,
        "give exactly one input: --tensors does not go with --text, --text-file, --ids or "
        "--image");
  usage(o.tensors.empty() || o.model.empty(),
        "--tensors runs raw q/k/v without a model: do not give --model with it");
  usage(!o.tensors.empty() || (o.tensors_layer < 0 && !o.bidirectional),
        "--tensors-layer and --bidirectional apply to --tensors only");
  usage(o.image_size == 0 || !o.image.empty(), "--image-size applies to --image only");
  core::Session s;
  if (!o.session.empty()) {
    s = core::load_session(o.session);
    session_path = o.session;
  }
  const bool new_input = !o.tensors.empty() || o.given_inputs > 0;
  if (new_input && !session_path.empty()) {
    // Inputs named here are relative to here; the session's model to its file.
    if (!core::is_default_model_name(s.model.id))
      s.model.id = core::resolve_session_path(session_path, s.model.id);
    session_path.clear();
    s.model.sha256.clear();
  }
  if (!o.tensors.empty()) {
    s.input = {};
    s.input.kind = "tensors";
    s.input.tensors = o.tensors;
    s.input.tensors_layer = o.tensors_layer;
    s.input.causal = !o.bidirectional;
  } else if (o.given_inputs > 0) {
    usage(o.given_inputs == 1, "give exactly one input: --text, --text-file, --ids or --image");
    s.input = {};
    if (!o.image.empty()) {
      s.input.kind = "image";
      s.input.image = o.image;
      s.input.image_size = o.image_size;
    } else if (!o.ids.empty()) {
      s.input.kind = "ids";
      s.input.ids = o.ids;
    } else {
      usage(!o.text_file.empty() || !o.text.empty(), "--text is empty: nothing to run");
      s.input.text = o.text_file.empty() ? o.text : read_text_file(o.text_file);
    }
  } else {
    usage(!o.session.empty(),
          "give exactly one input: --text, --text-file, --ids, --image, --tensors or --session");
  }
  if (!o.model.empty() || (o.session.empty() && s.input.kind != "tensors")) {
    s.model.id = model_or_default(o.model, s.input.kind == "image");
    s.model.sha256.clear();
  }
  if (!o.variants.empty() || o.session.empty())
    s.variants = o.variants.empty() ? std::vector<std::string>{"dense"} : o.variants;
  if (!o.layers.empty()) s.substitute_layers = o.layers;
  if (!o.heads.empty()) s.substitute_heads = o.heads;
  if (!o.variants.empty()) check_variant_specs(s.variants, "-v/--variant");
  usage(o.dump.empty() || (s.input.kind != "tensors" && s.input.kind != "synthetic"),
        "--dump needs a model (raw tensors have no hooks to dump)");
  if (!o.dump.empty()) {
    try {
      core::HookSelection::parse(o.hooks);
    } catch (const Error& e) {
      throw UsageError(std::string("--hooks: ") + e.what());
    }
  }
  if (!o.backend.empty()) {
    check_backend(o.backend);
    s.backend = o.backend;
    s.variant_backends.clear();  // one backend for the whole run, as --backend says
  }
  return s;
}

// What the command line asks of the model, checked against it before any work: a text model
// for text or ids (a vision model for an image), token ids in its vocabulary, layers and heads
// it has, hooks it can dump. Returns the model (kept loaded for the analysis), or null when
// nothing on the command line concerns the model.
std::shared_ptr<const core::Model> check_against_model(const AnalyzeOptions& o,
                                                       const core::Session& s,
                                                       const std::string& session_path) {
  if (s.input.kind == "tensors" || s.input.kind == "synthetic") return nullptr;
  const bool input_given = o.given_inputs > 0;
  if (o.model.empty() && !input_given && o.layers.empty() && o.heads.empty() && o.dump.empty())
    return nullptr;  // all from the session file: its own checks report what is wrong with it
  const std::string dir = core::is_default_model_name(s.model.id)
                              ? s.model.id
                              : core::resolve_session_path(session_path, s.model.id);
  if (!o.model.empty()) check_model_path(s.model.id, dir);
  std::shared_ptr<const core::Model> model = core::cached_model(dir);
  const core::ModelInfo& info = model->info();
  const std::string name = (o.model.empty() ? "the session's model " : "--model ") + s.model.id;
  if (!o.model.empty() || input_given) {
    if (s.input.kind == "image")
      usage(info.vision, name +
                             " is a text model, but the input is an image (--image): give "
                             "--text, --text-file or --ids, or a vision model");
    else
      usage(!info.vision, name +
                              " is a vision model, but the input is text: give --image, or "
                              "a text model");
  }
  if (!o.ids.empty() && !info.vision) {
    const int vocab = info.vocab > 0 ? info.vocab : int(model->config().vocab_size);
    for (size_t i = 0; i < o.ids.size(); ++i)
      usage(o.ids[i] >= 0 && o.ids[i] < vocab,
            "--ids: token id " + std::to_string(o.ids[i]) + " at position " + std::to_string(i) +
                " is outside the vocabulary [0, " + std::to_string(vocab) + ") of " + name);
  }
  for (int l : o.layers)
    usage(l >= 0 && l < info.n_layers, "--layers: layer " + std::to_string(l) +
                                           " is out of range: " + name + " has " +
                                           std::to_string(info.n_layers) + " layers (0.." +
                                           std::to_string(info.n_layers - 1) + ")");
  for (int h : o.heads)
    usage(h >= 0 && h < info.n_heads, "--heads: head " + std::to_string(h) +
                                          " is out of range: " + name + " has " +
                                          std::to_string(info.n_heads) + " query heads (0.." +
                                          std::to_string(info.n_heads - 1) + ")");
  if (!o.dump.empty()) {
    try {
      core::HookSelection::parse(o.hooks).check(info.n_layers);
    } catch (const Error& e) {
      throw UsageError(std::string("--hooks: ") + e.what());
    }
  }
  return model;
}

void print_summary(const core::Analysis& a) {
  const bool vision = a.vision();
  if (a.info) {
    const core::ModelInfo& info = *a.info;
    std::printf(
        "model: %s (%s, %d layers, %d heads, %d kv heads, d=%d, %s weights) \u2014 %d tokens, "
        "dense forward %.3f s\n",
        info.dir.c_str(), info.model_type.c_str(), info.n_layers, info.n_heads, info.n_kv_heads,
        info.head_dim, info.weight_dtype.c_str(), a.n_tokens(), a.dense_out().seconds);
  } else {
    const Problem& p = a.problem(0);
    std::printf("tensors: %d heads (%d kv), %d queries x %d keys, d=%d\n", p.n_heads, p.n_kv_heads,
                p.n_q, p.n_k, p.d);
  }
  if (!a.notice.empty()) std::fprintf(stderr, "attnscope: notice: %s\n", a.notice.c_str());
  if (a.ablation_effect) {  // the session's ablation: everything below is the ablated model's
    std::string list;
    for (const std::string& h : a.session.ablation.heads) list += (list.empty() ? "" : ",") + h;
    const core::EndToEnd& e = *a.ablation_effect;
    std::printf("ablated: %s (%s); the ablated model against the plain one:", list.c_str(),
                a.session.ablation.mode.c_str());
    if (e.has_tokens)
      std::printf(" next-token KL %s, top-1 agree %s, perplexity %s -> %s\n",
                  sci(e.mean_kl).c_str(), fixed(e.top1_agreement, 4).c_str(),
                  fixed(e.ppl_dense, 3).c_str(), fixed(e.ppl_variant, 3).c_str());
    else
      std::printf(" class %s, CLS cosine %s\n",
                  !e.has_class    ? "n/a"
                  : e.class_agree ? "kept"
                                  : "changed",
                  fixed(e.cls_cosine, 5).c_str());
  }
  std::printf(
      "sinks (dense, layer mean: keys receiving > 0.3 of the attention averaged over "
      "queries and heads):");
  for (int l = 0; l < a.n_layers(); ++l) {
    std::string s;
    for (int j : a.panels[0].layer[size_t(l)].sinks) {
      if (!s.empty()) s += ',';
      s += std::to_string(j);
    }
    std::printf(" L%d[%s]", l, s.c_str());
  }
  std::printf("\n");
  // Two different KLs: "row KL" compares each head's attention rows with dense (per layer, no
  // model involved); "next-token KL" compares the model's next-token distributions end to end.
  std::vector<std::string> header = {"variant", "kept", "rel.err", "recall", "row KL"};
  if (vision)
    header.insert(header.end(), {"class agree", "CLS cosine"});
  else
    header.insert(header.end(), {"next-token KL", "top-1 agree", "perplexity"});
  // Reduced precision: the variants' precision, and how far their logits moved from dense's.
  bool reduced = false;
  for (size_t v = 1; v < a.panels.size(); ++v) reduced |= a.panels[v].precision() != Precision::F32;
  if (reduced) header.insert(header.end(), {"precision", "logits max diff"});
  Table t(header);
  for (size_t v = 1; v < a.panels.size(); ++v) {
    const core::TradeoffPoint pt = core::tradeoff_point(a, int(v));
    const std::optional<core::EndToEnd>& e = a.panels[v].e2e;
    std::vector<std::string> row = {a.panels[v].spec, fixed(pt.density, 4), sci(pt.rel_error),
                                    fixed(pt.mass_recall, 4), sci(pt.row_kl)};
    if (vision) {
      row.push_back(!e ? "-" : !e->has_class ? "n/a" : e->class_agree ? "yes" : "no");
      row.push_back(e ? fixed(e->cls_cosine, 5) : "-");
    } else {
      row.push_back(e && e->has_tokens ? sci(e->mean_kl) : "-");
      row.push_back(e && e->has_tokens ? fixed(e->top1_agreement, 4) : "-");
      std::string ppl = "-";
      if (e && std::isfinite(e->ppl_variant)) {
        ppl = fixed(e->ppl_dense, 3);
        ppl.append(" -> ").append(fixed(e->ppl_variant, 3));
      }
      row.push_back(ppl);
    }
    if (reduced) {
      row.push_back(precision_name(a.panels[v].precision()));
      row.push_back(e ? sci(e->logits_max_abs) : "-");
    }
    t.add(row);
    for (const std::string& n : a.panels[v].notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  }
  t.print();
  const char* note =
      "kept: share of visible attention entries kept; row KL: each head's "
      "attention rows vs dense, mean over layers";
  std::printf(vision ? "%s\n"
                     : "%s; next-token KL: the model's next-token distributions vs "
                       "dense, end to end\n",
              note);
  if (reduced)
    std::printf(
        "precision: storage of Q, K, V in the variant's kernels (dense reference in f32); logits "
        "max diff: largest |logit - dense logit|, end to end\n");
}

// --ablate: the session's input run plainly and with the heads ablated; every dumped file comes
// from the ablated pass and no variant is substituted.
int ablate(const AnalyzeOptions& o, const core::Session& s,
           const std::shared_ptr<const core::Model>& model) {
  usage(o.variants.empty(), "--ablate runs no variant: do not give -v/--variant with it");
  usage(o.precision == "f32", "--ablate runs no variant: --precision does not go with it");
  usage(s.input.kind == "text" || s.input.kind == "ids",
        "--ablate runs a model on text or token ids (--text, --text-file, --ids)");
  usage(model != nullptr, "--ablate needs --model and an input");
  core::HeadAblationRequest r;
  try {
    r.heads = core::parse_heads(o.ablate);
    core::check_heads(r.heads, model->info());
    core::ablation_mode(o.ablate_mode);
  } catch (const Error& e) {
    throw UsageError(std::string("--ablate: ") + e.what());
  }
  const bool other_input = o.ablate_mode == "resample" || o.ablate_mode == "pattern";
  usage(other_input == !o.resample_text.empty(),
        "--ablate-mode resample and pattern take the other input from --resample-text (and only "
        "then)");
  r.mode = o.ablate_mode;
  r.use_ids = s.input.kind == "ids";
  r.ids = s.input.ids;
  r.text = s.input.text;
  r.text_name = !o.given_inputs       ? "the session's text"
                : o.text_file.empty() ? "--text"
                                      : "--text-file " + o.text_file;
  r.source_text = o.resample_text;
  r.source_name = "--resample-text";
  r.hooks = o.dump.empty() ? "" : o.hooks;
  r.threads = o.threads;
  r.notice = [](const std::string& notice) {
    std::fprintf(stderr, "attnscope: notice: %s\n", notice.c_str());
  };
  const core::HeadAblation a = core::ablate_heads(*model, r);
  usage(!a.length_mismatch, "--resample-text is " + std::to_string(a.source_tokens) +
                                " tokens but the input is " + std::to_string(a.input.ids.size()) +
                                ": " + o.ablate_mode + " needs the same length");
  const core::EndToEnd& e = a.run.effect;
  std::printf(
      "model: %s \u2014 %zu tokens; %s ablation of %s (before the output projection, "
      "its bias kept)\n",
      model->info().dir.c_str(), a.input.ids.size(), o.ablate_mode.c_str(), a.heads.c_str());
  Table t({"", "next-token KL", "top-1 agree", "perplexity"});
  t.add({"ablated vs plain", e.has_tokens ? sci(e.mean_kl) : "-",
         e.has_tokens ? fixed(e.top1_agreement, 4) : "-",
         std::isfinite(e.ppl_variant) ? fixed(e.ppl_dense, 3) + " -> " + fixed(e.ppl_variant, 3)
                                      : "-"});
  t.print();
  if (!o.json_out.empty()) {
    json j = {{"version", 1},
              {"model", s.model.id},
              {"tokens", a.input.ids.size()},
              {"ablate", a.heads},
              {"mode", o.ablate_mode},
              {"next_token_kl", e.mean_kl},
              {"max_kl", e.max_kl},
              {"top1_agreement", e.top1_agreement}};
    j["perplexity_plain"] = std::isfinite(e.ppl_dense) ? json(e.ppl_dense) : json();
    j["perplexity_ablated"] = std::isfinite(e.ppl_variant) ? json(e.ppl_variant) : json();
    write_json(o.json_out, j);
  }
  if (!o.dump.empty()) {
    const auto files = core::dump_head_ablation(o.dump, a, o.hooks);
    std::printf("dumped %zu files of the ablated pass to %s\n", files.size(), o.dump.c_str());
  }
  return 0;
}

// --dataset: the session over every record, aggregated with intervals
// (app/core/datasets/dataset_analysis.h).
int analyze_over_dataset(const AnalyzeOptions& o) {
  usage(o.given_inputs == 0 && o.tensors.empty(),
        "--dataset is the input: do not give --text, --text-file, --ids, --image or --tensors");
  usage(o.dump.empty(), "--dump writes the hooks of one input: it does not go with --dataset");
  usage(o.precision == "f32",
        "--precision runs one input's variants in bf16 / f16: it does not go with --dataset "
        "(sweep --precision compares precisions on one input)");
  usage(o.image_size == 0, "--image-size applies to --image only");
  core::Session s;
  std::string session_path;
  if (!o.session.empty()) {
    s = core::load_session(o.session);
    session_path = o.session;
  }
  if (!o.model.empty() || o.session.empty()) {
    const std::string model = model_or_default(o.model, core::is_image_dataset(o.dataset.dataset));
    check_model_path(model, model);
    s.model.id = model;
    s.model.sha256.clear();
  }
  if (!o.variants.empty()) {
    s.variants = o.variants;
    check_variant_specs(s.variants, "-v/--variant");
  } else if (o.session.empty()) {
    s.variants.clear();
  }
  if (!o.layers.empty()) s.substitute_layers = o.layers;
  if (!o.heads.empty()) s.substitute_heads = o.heads;
  if (!o.backend.empty()) {
    check_backend(o.backend);
    s.backend = o.backend;
    s.variant_backends.clear();
  }
  if (!o.ablate.empty()) {
    usage(o.ablate_mode == "zero" || o.ablate_mode == "mean",
          "--ablate-mode " + o.ablate_mode +
              " takes one other input: over a dataset ablate by zero or mean (the head's mean "
              "over every record)");
    s.ablation.heads.clear();
    try {
      for (const auto& [l, h] : core::parse_heads(o.ablate))
        s.ablation.heads.push_back(core::head_name(l, h));
      core::check_heads(
          core::parse_heads(o.ablate),
          core::cached_model(core::is_default_model_name(s.model.id)
                                 ? s.model.id
                                 : core::resolve_session_path(session_path, s.model.id))
              ->info());
    } catch (const Error& e) {
      throw UsageError(std::string("--ablate: ") + e.what());
    }
    s.ablation.mode = o.ablate_mode;
  }
  AnalyzeDatasetArgs a = o.dataset;
  a.json_out = o.json_out;
  a.threads = o.threads;
  a.end_to_end = !o.no_end_to_end;
  return analyze_dataset(s, session_path, a);
}

// Where analyze's time went, stage by stage (seconds; `--timings`). The dense reference's kernels
// run inside a model's forward pass (and are counted there too); opening's other work (tokens,
// the capture, residual statistics; a raw problem's dense run) is `open_rest`.
json stage_timings(const core::Analysis& a, double load, double total, double report) {
  const double forward = a.info ? a.dense_out().seconds : 0.0;
  double dense_kernels = 0;
  if (a.panels[0].ran())
    for (const Result& r : *a.panels[0].results)
      dense_kernels += r.stats.kernel_seconds + r.stats.select_seconds;
  return {{"load_seconds", load},
          {"forward_seconds", forward},
          {"dense_kernels_seconds", dense_kernels},
          {"open_rest_seconds", a.forward_seconds - forward},
          {"variants_seconds", a.variants_seconds},
          {"metrics_seconds", a.metrics_seconds},
          {"end_to_end_seconds", a.e2e_seconds},
          {"report_seconds", report},
          {"analysis_seconds", total - load},
          {"total_seconds", total}};
}

int analyze(const AnalyzeOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const auto t_start = Clock::now();
  if (!o.dataset.merge.empty()) {
    usage(o.dataset.dataset.empty() && o.given_inputs == 0 && o.tensors.empty() &&
              o.model.empty() && o.session.empty() && o.variants.empty() && o.ablate.empty(),
          "--merge joins the shard files of analyze --dataset --shard: give only the files and "
          "the output options (--json, --figure, --bootstrap)");
    AnalyzeDatasetArgs a = o.dataset;
    a.json_out = o.json_out;
    return merge_dataset_shards(a);
  }
  Precision precision = Precision::F32;
  try {
    precision = parse_precision(o.precision);
  } catch (const Error& e) {
    usage(false, std::string("--precision: ") + e.what());
  }
  if (!o.dataset.dataset.empty()) return analyze_over_dataset(o);
  usage(o.dataset.figure.empty() && o.dataset.figure_metric.empty() &&
            o.dataset.figure_variant.empty() && o.dataset.limit == 0 && o.dataset.shard.empty(),
        "--figure, --figure-metric, --figure-variant, --limit and --shard go with --dataset (one "
        "input's figures: attnscope render)");
  std::string session_path;
  const core::Session s = session_of(o, session_path);
  const auto model = check_against_model(o, s, session_path);  // held: analyze reuses it
  const double load = since(t_start);
  if (!o.ablate.empty()) return ablate(o, s, model);
  core::Options co;
  co.threads = o.threads;
  co.end_to_end = !o.no_end_to_end;
  co.verify_hashes = !o.no_verify;
  co.precision = precision;
  if (!o.dump.empty()) co.extra_hooks = o.hooks;
  if (o.given_inputs == 0)
    co.input_name = "the session's text";
  else
    co.input_name = o.text_file.empty() ? "--text" : "--text-file " + o.text_file;
  const auto a = core::analyze(s, session_path, co);
  print_summary(*a);
  const auto t_report = Clock::now();
  json j;
  if (!o.json_out.empty()) {
    j = core::analysis_json(*a, o.max_cells);
    j["precision"] = precision_name(precision);
  }
  if (o.timings) {
    const json t = stage_timings(*a, load, since(t_start), since(t_report));
    std::printf("timings:");
    for (const auto& [k, v] : t.items())
      std::printf(" %s %.3f s;", k.substr(0, k.size() - 8).c_str(), v.get<double>());
    std::printf("\n");
    if (!o.json_out.empty()) j["timings"] = t;
  }
  if (!o.json_out.empty()) write_json(o.json_out, j);
  if (!o.dump.empty()) {
    usage(a->capture != nullptr, "--dump needs a model (raw tensors have no hooks to dump)");
    const core::HookSelection asked = core::HookSelection::parse(o.hooks);
    auto files = core::dump_forward(o.dump, *a->capture, a->input, a->dense_out(),
                                    a->problem(0).labels, &asked);
    // Each substituted pass beside the dense one: variant-<i>/ for the i-th variant (1-based).
    for (size_t v = 1; v < a->panels.size(); ++v) {
      const core::Panel& pn = a->panels[v];
      if (!pn.capture || !pn.substituted) continue;
      const auto more = core::dump_forward(o.dump + "/variant-" + std::to_string(v), *pn.capture,
                                           a->input, *pn.substituted, a->problem(0).labels, &asked);
      files.insert(files.end(), more.begin(), more.end());
    }
    std::printf("dumped %zu files to %s\n", files.size(), o.dump.c_str());
  }
  return 0;
}

class AnalyzeCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override {
    o.given_inputs = 0;
    for (const CLI::Option* opt : inputs) o.given_inputs += opt->count() > 0;
    return analyze(o);
  }

 private:
  AnalyzeOptions o;             // bound by add_options
  CLI::Option* inputs[4] = {};  // --text, --text-file, --ids, --image
};

void AnalyzeCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model, "; a --session's model when not given");
  inputs[0] = cmd.add_option("--text", o.text, "Input text");
  inputs[1] = cmd.add_option("--text-file", o.text_file, "File holding the input text (UTF-8)");
  inputs[2] =
      cmd.add_option("--ids", o.ids, "Token ids (spaces or commas between them)")->delimiter(',');
  inputs[3] = cmd.add_option("--image", o.image, "Input image (PNG, JPEG, BMP, ...)");
  cmd.add_option("--image-size", o.image_size,
                 "Resize images to this size instead of the preprocessor's (position "
                 "embeddings are interpolated)")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--tensors", o.tensors,
                 "Folder of raw q.npy, k.npy, v.npy [heads, tokens, head_dim] instead of a model");
  cmd.add_option("--tensors-layer", o.tensors_layer,
                 "Read blocks.L.attn.{q,k,v}.npy (a --dump folder) instead of q/k/v.npy");
  cmd.add_flag("--bidirectional", o.bidirectional, "Raw tensors: bidirectional, not causal");
  add_variant_option(cmd, o.variants, "Variant spec (default: the session's, else dense)",
                     "--variants");
  add_index_list(cmd, "--layers", o.layers, "Substitute only in these layers (default all)");
  add_index_list(cmd, "--heads", o.heads, "Substitute only these query heads (default all)");
  cmd.add_flag("--no-end-to-end", o.no_end_to_end, "Skip the substituted forward passes");
  cmd.add_option("--precision", o.precision,
                 "Storage of Q, K, V in the variants' kernels, in every substituted layer: f32 | "
                 "bf16 | f16 (scores, softmax and sums in f32); the dense reference stays f32, "
                 "so the default variant dense shows what the precision alone changes")
      ->capture_default_str();
  cmd.add_option("--backend", o.backend,
                 "reference | cpu | vulkan (falls back to cpu per variant; default: the "
                 "session's, else cpu)");
  cmd.add_option("--max-cells", o.max_cells, "Heatmap cells per side in --json (max pooling)")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  cmd.add_flag("--no-verify", o.no_verify, "Do not check a session's recorded file hashes");
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  add_json_option(cmd, o.json_out, "Write per-layer/head and end-to-end metrics");
  cmd.add_flag("--timings", o.timings,
               "Print where the time went (model load, forward with the dense kernels in it, the "
               "rest of opening, variants, metrics, end to end, report), also under "
               "\"timings\" in --json");
  cmd.add_option("--session", o.session,
                 "Session file (.attnscope.json): model, input, variants and substitution "
                 "(options given here take precedence)");
  cmd.add_option("--dump", o.dump,
                 "Write every captured hook as .npy into this folder (the dense pass), and each "
                 "variant's substituted pass into variant-<i>/ under it");
  cmd.add_option("--hooks", o.hooks, "Hooks to dump (names or globs, comma separated)")
      ->capture_default_str();
  cmd.add_option("--ablate", o.ablate,
                 "Ablate these heads (LAYER.HEAD or LxHy, comma separated, "
                 "0-based) instead of running variants; --dump then holds the "
                 "ablated pass");
  cmd.add_option("--ablate-mode", o.ablate_mode,
                 "zero: the head's output set to 0; mean: to its mean over the input's "
                 "positions; resample: to its output on --resample-text (before the output "
                 "projection, whose bias is still added); pattern: the head attends with its "
                 "attention pattern on --resample-text (pattern patching)")
      ->capture_default_str()
      ->check(CLI::IsMember({"zero", "mean", "resample", "pattern"}));
  cmd.add_option("--resample-text", o.resample_text,
                 "--ablate-mode resample / pattern: the heads' outputs / patterns come from this "
                 "text (same number of tokens)");
  cmd.add_option("--dataset", o.dataset.dataset,
                 "Analyse every record of a dataset instead of one input: JSONL ({\"text\": "
                 "...}), a folder of .txt, a folder of images, or Fashion-MNIST's IDX folder; "
                 "per-head means and losses / accuracies with bootstrap 95% intervals");
  cmd.add_option("--limit", o.dataset.limit, "--dataset: only the first N records (0 = all)");
  cmd.add_option("--bootstrap", o.dataset.bootstrap, "--dataset: bootstrap resamples")
      ->capture_default_str();
  cmd.add_option("--figure", o.dataset.figure,
                 "--dataset: write a figure (.png/.svg/.pdf): loss or accuracy against density "
                 "with error bars, or with --figure-metric a per-head grid");
  cmd.add_option("--figure-metric", o.dataset.figure_metric,
                 "--dataset: the head metric of the grid figure. " + core::head_metric_help());
  cmd.add_option("--figure-variant", o.dataset.figure_variant,
                 "--dataset: the grid figure's variant (one of the variants; default dense)");
  add_figure_size_options(cmd, o.dataset.figure_size);
  add_quiet_option(cmd, o.dataset.quiet);
  cmd.add_option("--shard", o.dataset.shard,
                 "--dataset: analyse every n-th record from the i-th (i/n, 0-based) and write "
                 "their samples to --json, for --merge");
  cmd.add_option("--merge", o.dataset.merge,
                 "Join the --json files of --shard runs and report them as one run")
      ->expected(1, -1);
}

}  // namespace

std::unique_ptr<Command> make_analyze_command() {
  return std::make_unique<AnalyzeCommand>();
}

}  // namespace attn::cli
