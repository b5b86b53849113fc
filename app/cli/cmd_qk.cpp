// `attnscope qk`: one head's queries and keys over one or many inputs in one 2-D map
// (AttentionViz's joint embedding; app/core/attribution/qk_embedding.h), as JSON and a figure.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/attribution/attribution_export.h"
#include "app/core/attribution/qk_embedding.h"
#include "app/core/export/data_export.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/fallback.h"
#include "compute/registry.h"

namespace attn::cli {

namespace {

class QkCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  std::vector<core::ModelInput> inputs(const core::Model& model) const;

  struct Options {
    std::string model, method = "pca", variant, backend = "cpu", json_out, figure;
    FigureSizeOptions size;
    std::vector<std::string> texts, text_files, images;
    int layer = 0, head = 0, iterations = 750, max_points = 4000, threads = 0;
    double perplexity = 30;
    uint64_t seed = 1;
    bool bos = false;
  } o;
};

void QkCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model);
  cmd.add_option("--text", o.texts, "Input text (repeat for more inputs)");
  cmd.add_option("--text-file", o.text_files, "File holding an input text (repeatable)");
  cmd.add_option("--image", o.images, "Input image (vision models; repeatable)");
  cmd.add_flag("--bos", o.bos, "Text: the model's beginning-of-text token first");
  cmd.add_option("--layer", o.layer, "Layer of the head")->capture_default_str();
  cmd.add_option("--head", o.head, "Query head")->capture_default_str();
  cmd.add_option("--method", o.method, "Projection: pca or tsne")
      ->capture_default_str()
      ->check(CLI::IsMember({"pca", "tsne"}));
  cmd.add_option("--perplexity", o.perplexity, "t-SNE perplexity")->capture_default_str();
  cmd.add_option("--iterations", o.iterations, "t-SNE iterations")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--seed", o.seed, "t-SNE seed")->capture_default_str();
  cmd.add_option("--max-points", o.max_points, "Refuse more queries + keys than this")
      ->capture_default_str()
      ->check(CLI::Range(4, 20000));
  cmd.add_option("-v,--variant", o.variant, "Variant substituted (the patterns it attends with)")
      ->type_name("SPEC");
  cmd.add_option("--backend", o.backend, "Backend of the variant")->capture_default_str();
  add_json_option(cmd, o.json_out, "Write every point (x, y, kind, input, position, token)");
  cmd.add_option("--figure", o.figure, "The map (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
}

std::vector<core::ModelInput> QkCommand::inputs(const core::Model& model) const {
  const bool vision = model.info().vision;
  usage(!o.texts.empty() || !o.text_files.empty() || !o.images.empty(),
        "give one or more inputs: --text, --text-file or --image");
  usage(vision ? o.texts.empty() && o.text_files.empty() : o.images.empty(),
        vision ? o.model + " is a vision model: give --image"
               : o.model + " is a text model: give --text or --text-file, not --image");
  std::vector<core::ModelInput> out;
  for (const std::string& path : o.images)
    out.push_back(core::attribution_image_input(model, path));
  for (const std::string& t : o.texts)
    out.push_back(core::attribution_text_input(model, t, "--text", nullptr, o.bos));
  for (const std::string& path : o.text_files) {
    out.push_back(core::attribution_text_input(model, read_text_file(path), "--text-file " + path,
                                               nullptr, o.bos));
  }
  return out;
}

int QkCommand::run() {
  if (!o.json_out.empty()) core::check_output_path(o.json_out);
  check_figure_option(o.figure);
  o.model = model_or_default(o.model, !o.images.empty());
  check_model_path(o.model, o.model);
  const std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  const core::ModelInfo& info = model->info();
  usage(o.layer >= 0 && o.layer < info.n_layers,
        "--layer " + std::to_string(o.layer) + " is outside the model's " +
            std::to_string(info.n_layers) + " layers (0.." + std::to_string(info.n_layers - 1) +
            ")");
  usage(o.head >= 0 && o.head < info.n_heads,
        "--head " + std::to_string(o.head) + " is outside the model's " +
            std::to_string(info.n_heads) + " query heads (0.." + std::to_string(info.n_heads - 1) +
            ")");
  usage(o.perplexity > 0, "--perplexity must be positive");
  std::unique_ptr<Variant> variant;
  std::unique_ptr<Backend> backend;
  core::Substitution sub;
  core::QkOptions q;
  if (!o.variant.empty()) {
    check_variant_specs({o.variant}, "--variant");
    check_backend(o.backend);
    variant = std::make_unique<Variant>(make_variant(o.variant));
    backend = make_backend_with_fallback(o.backend);
    sub.variant = variant.get();
    sub.backend = backend.get();
    q.substitution = &sub;
  }
  const std::vector<core::ModelInput> ins = inputs(*model);
  q.layer = o.layer;
  q.head = o.head;
  q.method = o.method;
  q.perplexity = o.perplexity;
  q.iterations = o.iterations;
  q.seed = o.seed;
  q.max_points = o.max_points;
  q.threads = o.threads;
  const core::QkEmbedding e = core::qk_embedding(*model, ins, q);
  std::printf(
      "L%dH%d (kv head %d): %zu points from %zu input%s, %s; queries x %.3f, keys / %.3f; "
      "rank fidelity %.3f (Spearman of -distance against q.k per query, mean)\n",
      e.layer, e.head, e.kv_head, e.points.size(), ins.size(), ins.size() == 1 ? "" : "s",
      e.method.c_str(), e.scale, e.scale, e.rank_fidelity);
  if (!o.json_out.empty()) {
    nlohmann::json j = core::to_json(e);
    j["model"] = o.model;
    j["variant"] = o.variant.empty() ? "dense" : o.variant;
    write_json_file(o.json_out, j);
  }
  if (!o.figure.empty()) {
    const core::FigureData fd = core::qk_figure(e, o.model);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {1500, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> make_qk_command() {
  return std::make_unique<QkCommand>();
}

}  // namespace attn::cli
