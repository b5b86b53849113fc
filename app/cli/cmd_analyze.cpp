// `attnscope analyze`: runs a real model (or raw Q/K/V tensors) on the user's text, token ids or
// image, compares attention variants with dense softmax on every layer and head, substitutes
// each variant into the model to measure end-to-end effects, and writes JSON and hook dumps.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/table.h"
#include "app/session/session.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/layer_analysis.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/dump.h"
#include "models/arch/model.h"
#include "models/arch/raw_tensors.h"
#include "models/arch/substitution.h"
#include "models/arch/text_input.h"

namespace attn::cli {
namespace {

using nlohmann::json;

struct AnalyzeOptions {
  std::string model, text, text_file, image, tensors, variants = "dense", json_out, dump;
  std::string hooks = "all", backend = "cpu";
  std::string session;  // a session file supplies model, input, variants and substitution
  std::vector<int32_t> ids;
  std::vector<int> layers, heads;
  int threads = 0, image_size = 0, tensors_layer = -1;
  int given_inputs = 0;  // how many of --text, --text-file, --ids, --image were given
  bool bidirectional = false, no_end_to_end = false;
};

// NaN and Inf are not JSON numbers.
json num(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

std::vector<std::string> split_specs(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(';', start);
    if (end == std::string::npos) end = list.size();
    std::string s = list.substr(start, end - start);
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    if (!s.empty()) out.push_back(s);
    start = end + 1;
  }
  require(!out.empty(), ErrorCode::InvalidArgument, "--variants lists no variant");
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open text file");
  return std::string(std::istreambuf_iterator<char>(f), {});
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

json layers_json(const std::vector<LayerAnalysis>& layers) {
  json out = json::array();
  for (const LayerAnalysis& a : layers) {
    json l = metrics_json(a.all);
    l["layer"] = a.layer;
    l["flops"] = a.all.stats.counted.flops;
    l["predicted_flops"] = a.all.stats.predicted.flops;
    l["kernel_seconds"] = a.all.stats.kernel_seconds;
    l["heads"] = json::array();
    for (size_t h = 0; h < a.heads.size(); ++h) {
      json hj = metrics_json(a.heads[h]);
      hj["head"] = int(h);
      l["heads"].push_back(hj);
    }
    out.push_back(l);
  }
  return out;
}

json end_to_end_json(const EndToEnd& e) {
  json j;
  if (e.has_tokens) {
    j["mean_kl"] = num(e.mean_kl);
    j["max_kl"] = num(e.max_kl);
    j["kl"] = e.kl;
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
  return j;
}

json model_json(const ModelInfo& i) {
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
          {"causal", i.causal}};
}

void write_json(const std::string& path, const json& j) {
  std::ofstream f(path);
  require(bool(f), ErrorCode::Io, path + ": cannot write");
  f << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  require(bool(f), ErrorCode::Io, path + ": write failed");
}

void print_layer_summary(const std::string& spec, const std::vector<LayerAnalysis>& layers,
                         const EndToEnd* e, bool vision, Table& t) {
  double err = 0, recall = 0, density = 0;
  for (const auto& a : layers) {
    err += a.all.rel_error / double(layers.size());
    recall += a.all.mass_recall / double(layers.size());
    density += a.all.density / double(layers.size());
  }
  std::vector<std::string> row = {spec, fixed(density, 4), sci(err), fixed(recall, 4)};
  if (vision) {
    row.push_back(!e ? "-" : !e->has_class ? "n/a" : e->class_agree ? "yes" : "no");
    row.push_back(e ? fixed(e->cls_cosine, 5) : "-");
  } else {
    row.push_back(e && e->has_tokens ? sci(e->mean_kl) : "-");
    row.push_back(e && e->has_tokens ? fixed(e->top1_agreement, 4) : "-");
    row.push_back(e && std::isfinite(e->ppl_variant)
                      ? fixed(e->ppl_dense, 3) + " -> " + fixed(e->ppl_variant, 3)
                      : "-");
  }
  t.add(row);
}

// Raw tensors: attention-level comparison only.
int analyze_tensors(const AnalyzeOptions& o, const std::vector<std::string>& specs,
                    Backend& backend, const RunOptions& ro) {
  RawTensorOptions rto;
  rto.causal = !o.bidirectional;
  const Problem p = load_problem_dir(o.tensors, o.tensors_layer, rto);
  const std::vector<const Problem*> problems = {&p};
  const std::vector<Result> dense = dense_layers(problems, backend, ro);
  json j = {{"attnscope", "analyze"},
            {"version", 1},
            {"tensors",
             {{"dir", o.tensors},
              {"heads", p.n_heads},
              {"kv_heads", p.n_kv_heads},
              {"n_q", p.n_q},
              {"n_k", p.n_k},
              {"head_dim", p.d},
              {"causal", p.causal},
              {"labels", p.labels}}},
            {"variants", json::array()}};
  std::printf("tensors: %d heads (%d kv), %d queries x %d keys, d=%d\n", p.n_heads, p.n_kv_heads,
              p.n_q, p.n_k, p.d);
  Table t({"variant", "density", "rel_err", "recall", "e2e KL", "top-1 agree", "perplexity"});
  for (const std::string& spec : specs) {
    const Variant v = make_variant(spec);
    const auto layers = analyze_layers(v, problems, {0}, dense, backend, ro);
    print_layer_summary(v.spec(), layers, nullptr, false, t);
    j["variants"].push_back({{"spec", v.spec()}, {"layers", layers_json(layers)}});
  }
  t.print();
  if (!o.json_out.empty()) write_json(o.json_out, j);
  return 0;
}

int analyze(const AnalyzeOptions& o) {
  const std::vector<std::string> specs = split_specs(o.variants);
  for (const auto& s : specs) make_variant(s);  // fail early on a bad spec
  auto backend = make_backend_with_fallback(o.backend);
  RunOptions ro;
  ro.threads = o.threads;
  if (!o.tensors.empty()) return analyze_tensors(o, specs, *backend, ro);

  require(o.given_inputs == 1, ErrorCode::InvalidArgument,
          "give exactly one input: --text, --text-file, --ids or --image");
  require(!o.model.empty(), ErrorCode::InvalidArgument,
          "--model DIR (or default-text / default-vision) is required");
  auto model = load_model(resolve_model_dir(o.model));
  const ModelInfo& info = model->info();

  ModelInput in;
  json input;
  if (!o.image.empty()) {
    require(info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a text model; give it --text, --text-file or --ids");
    ImagePreprocessor pp = model->preprocessor();
    if (o.image_size > 0) {
      pp.do_resize = true;
      pp.height = pp.width = o.image_size;
      pp.shortest_edge = 0;
      pp.do_center_crop = false;
    }
    in.image = pp(load_image(o.image, pp.channels));
    input = {{"kind", "image"},
             {"file", o.image},
             {"height", in.image.height},
             {"width", in.image.width}};
  } else {
    require(!info.vision, ErrorCode::InvalidArgument,
            info.dir + " is a vision model; give it --image");
    TextInput ti = !o.ids.empty()        ? ids_for_model(*model, o.ids)
                   : o.text_file.empty() ? encode_for_model(*model, o.text, "--text")
                                         : encode_for_model(*model, read_text_file(o.text_file),
                                                            "--text-file " + o.text_file);
    if (ti.truncated) std::fprintf(stderr, "attnscope: notice: %s\n", ti.notice.c_str());
    in.ids = ti.ids;
    in.labels = ti.labels;
    input = {{"kind", !o.ids.empty() ? "ids" : "text"},
             {"ids", ti.ids},
             {"labels", ti.labels},
             {"truncated", ti.truncated},
             {"notice", ti.notice}};
  }

  // Dense pass: Q/K/V and residuals of every layer (plus whatever the dump asks for).
  std::string selection = "blocks.*.attn.q,blocks.*.attn.k,blocks.*.attn.v,blocks.*.resid";
  if (!o.dump.empty()) selection += "," + o.hooks;
  Capture cap(HookSelection::parse(selection));
  ForwardOptions fo;
  fo.capture = &cap;
  fo.threads = o.threads;
  const ModelOutput dense_out = model->forward(in, fo);
  input["n_tokens"] = dense_out.n_tokens;
  std::vector<std::string> labels = in.labels;
  if (const Problem* p0 = cap.problem(0)) labels = p0->labels;
  input["labels"] = labels;

  std::vector<const Problem*> problems;
  std::vector<int> layer_ids;
  for (int l = 0; l < info.n_layers; ++l) {
    problems.push_back(cap.problem(l));
    layer_ids.push_back(l);
  }
  const std::vector<Result> dense = dense_layers(problems, *backend, ro);
  const Variant dense_variant = make_variant("dense");
  json dense_layers_j = json::array();
  std::printf(
      "model: %s (%s, %d layers, %d heads, %d kv heads, d=%d) — %d tokens, dense forward "
      "%.3f s\n",
      info.dir.c_str(), info.model_type.c_str(), info.n_layers, info.n_heads, info.n_kv_heads,
      info.head_dim, dense_out.n_tokens, dense_out.seconds);
  std::printf("sinks (dense, mass > 0.3 averaged over heads):");
  for (int l = 0; l < info.n_layers; ++l) {
    const Metrics m =
        compare(dense_variant, *problems[size_t(l)], dense[size_t(l)], dense[size_t(l)]);
    const ResidualStats rs =
        residual_stats(cap.layers[size_t(l)].resid, dense_out.n_tokens, info.hidden);
    json massive = json::array();
    for (size_t i = 0; i < rs.massive.size() && i < 16; ++i) {
      const auto& a = rs.massive[i];
      massive.push_back({{"token", a.token},
                         {"dim", a.dim},
                         {"value", a.value},
                         {"ratio_to_median", num(a.ratio_to_median)}});
    }
    dense_layers_j.push_back({{"layer", l},
                              {"sinks", m.sinks},
                              {"sink_score", m.sink_score},
                              {"resid_token_norm", rs.token_norm},
                              {"resid_dim_absmax", rs.dim_absmax},
                              {"resid_median_abs", rs.median_abs},
                              {"massive_activations", massive}});
    std::string s;
    for (int j : m.sinks) s += (s.empty() ? "" : ",") + std::to_string(j);
    std::printf(" L%d[%s]", l, s.c_str());
  }
  std::printf("\n");

  json j = {{"attnscope", "analyze"},
            {"version", 1},
            {"model", model_json(info)},
            {"input", input},
            {"dense", {{"forward_seconds", dense_out.seconds}, {"layers", dense_layers_j}}},
            {"substitution", {{"layers", o.layers}, {"heads", o.heads}, {"backend", o.backend}}},
            {"variants", json::array()}};
  if (info.vision && !dense_out.logits.empty()) {
    const int c = int(std::max_element(dense_out.logits.begin(), dense_out.logits.end()) -
                      dense_out.logits.begin());
    j["dense"]["class"] = c;
    j["dense"]["class_name"] = info.class_names.empty() ? "" : info.class_names[size_t(c)];
    j["dense"]["logits"] = dense_out.logits;
  }

  Table t(info.vision ? std::vector<std::string>{"variant", "density", "rel_err", "recall",
                                                 "class agree", "CLS cosine"}
                      : std::vector<std::string>{"variant", "density", "rel_err", "recall",
                                                 "e2e KL", "top-1 agree", "perplexity"});
  for (const std::string& spec : specs) {
    const Variant v = make_variant(spec);
    const auto layers = analyze_layers(v, problems, layer_ids, dense, *backend, ro);
    json vj = {{"spec", v.spec()}, {"layers", layers_json(layers)}};
    std::optional<EndToEnd> e;
    if (!o.no_end_to_end) {
      Substitution sub{&v, backend.get(), o.layers, o.heads, ro};
      ForwardOptions so;
      so.substitution = &sub;
      so.threads = o.threads;
      const ModelOutput out = model->forward(in, so);
      e = end_to_end(info, in, dense_out, out);
      vj["end_to_end"] = end_to_end_json(*e);
      vj["end_to_end"]["forward_seconds"] = out.seconds;
    }
    print_layer_summary(v.spec(), layers, e ? &*e : nullptr, info.vision, t);
    j["variants"].push_back(vj);
  }
  t.print();
  if (!o.json_out.empty()) write_json(o.json_out, j);
  if (!o.dump.empty()) {
    const HookSelection asked = HookSelection::parse(o.hooks);
    const auto files = dump_forward(o.dump, cap, in, dense_out, labels, &asked);
    std::printf("dumped %zu files to %s\n", files.size(), o.dump.c_str());
  }
  return 0;
}

// Fills what the command line left out from a session file.
void apply_session(AnalyzeOptions& o) {
  const Session s = load_session(o.session);
  if (o.model.empty())
    o.model = is_default_model_name(s.model.id) ? s.model.id
                                                : resolve_session_path(o.session, s.model.id);
  if (o.given_inputs == 0 && o.tensors.empty()) {
    if (s.input.kind == "image")
      o.image = resolve_session_path(o.session, s.input.image);
    else
      o.text = s.input.text;
    o.given_inputs = 1;
  }
  if (o.variants == "dense" && !s.variants.empty()) {
    o.variants.clear();
    for (const std::string& v : s.variants) o.variants += (o.variants.empty() ? "" : ";") + v;
  }
  if (o.layers.empty()) o.layers = s.substitute_layers;
  if (o.heads.empty()) o.heads = s.substitute_heads;
  if (o.backend == "cpu") o.backend = s.backend;
}

}  // namespace

void add_analyze_command(CLI::App& app, Action& action) {
  static AnalyzeOptions o;
  auto* cmd = app.add_subcommand(
      "analyze",
      "Run a model on text, token ids or an image; compare variants layer by layer "
      "and end to end");
  cmd->add_option("--model", o.model, "Model folder, or default-text / default-vision");
  CLI::Option* inputs[] = {
      cmd->add_option("--text", o.text, "Input text"),
      cmd->add_option("--text-file", o.text_file, "File holding the input text (UTF-8)"),
      cmd->add_option("--ids", o.ids, "Token ids, comma separated")->delimiter(','),
      cmd->add_option("--image", o.image, "Input image (PNG, JPEG, BMP, ...)")};
  cmd->add_option("--image-size", o.image_size,
                  "Resize images to this size instead of the preprocessor's (position "
                  "embeddings are interpolated)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--tensors", o.tensors,
                  "Folder of raw q.npy, k.npy, v.npy [heads, tokens, head_dim] instead of a model");
  cmd->add_option("--tensors-layer", o.tensors_layer,
                  "Read blocks.L.attn.{q,k,v}.npy (a --dump folder) instead of q/k/v.npy");
  cmd->add_flag("--bidirectional", o.bidirectional, "Raw tensors: bidirectional, not causal");
  cmd->add_option("--variants", o.variants, "Variant specs separated by ';'")
      ->capture_default_str();
  cmd->add_option("--layers", o.layers, "Substitute only in these layers (default all)")
      ->delimiter(',');
  cmd->add_option("--heads", o.heads, "Substitute only these query heads (default all)")
      ->delimiter(',');
  cmd->add_flag("--no-end-to-end", o.no_end_to_end, "Skip the substituted forward passes");
  cmd->add_option("--backend", o.backend,
                  "reference | cpu | vulkan (falls back to cpu per variant)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Worker threads (0 = all)");
  cmd->add_option("--json", o.json_out, "Write per-layer/head and end-to-end metrics as JSON");
  cmd->add_option("--session", o.session,
                  "Session file (.attnscope.json): model, input, variants and substitution "
                  "(options given here take precedence)");
  cmd->add_option("--dump", o.dump, "Write every captured hook as .npy into this folder");
  cmd->add_option("--hooks", o.hooks, "Hooks to dump (names or globs, comma separated)")
      ->capture_default_str();
  cmd->callback([&action, inputs] {
    o.given_inputs = 0;
    for (CLI::Option* opt : inputs) o.given_inputs += opt->count() > 0;
    action = [] {
      if (!o.session.empty()) apply_session(o);
      return analyze(o);
    };
  });
}

}  // namespace attn::cli
