#include "app/core/session/session_check.h"

#include <algorithm>
#include <filesystem>

#include "app/core/analysis/analysis.h"
#include "app/core/attribution/attribution.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "models/arch/default_models.h"
#include "models/arch/image.h"
#include "models/arch/raw_tensors.h"

namespace attn::core {
namespace {

namespace fs = std::filesystem;

// Runs `check`; an Error it throws comes out as "<where>: <its message>", with its code.
template <class F>
auto named(const std::string& where, F&& check) {
  try {
    return check();
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

void check_variants(const Session& s, const std::string& source) {
  for (size_t i = 0; i < s.variants.size(); ++i)
    named(source + ": variants[" + std::to_string(i) + "] " + quoted(s.variants[i]),
          [&] { return make_variant(s.variants[i]); });
  const std::vector<std::string> known = backend_names();
  auto check_backend = [&](const std::string& name, const std::string& field) {
    require(name.empty() || std::find(known.begin(), known.end(), name) != known.end(),
            ErrorCode::InvalidArgument,
            source + ": " + field + ": unknown backend " + quoted(name) +
                did_you_mean(name, known) + " (known: " + join_names(known) + ")");
  };
  check_backend(s.backend, "backend");
  for (size_t i = 0; i < s.variant_backends.size(); ++i)
    check_backend(s.variant_backends[i], "variant_backends[" + std::to_string(i) + "]");
}

std::vector<std::pair<int, int>> ablated_heads(const Session& s, const std::string& source) {
  std::vector<std::pair<int, int>> heads;
  for (size_t i = 0; i < s.ablation.heads.size(); ++i) {
    const auto one = named(source + ": ablation.heads[" + std::to_string(i) + "]",
                           [&] { return parse_heads(s.ablation.heads[i]); });
    heads.insert(heads.end(), one.begin(), one.end());
  }
  if (!s.ablation.empty())
    named(source + ": ablation.mode", [&] { return ablation_mode(s.ablation.mode); });
  return heads;
}

void check_view(const Session& s, const std::string& source) {
  if (!s.view.grid_metric.empty())
    named(source + ": view.grid_metric", [&] { return head_metric_index(s.view.grid_metric); });
  for (size_t i = 0; i < s.attribution.methods.size(); ++i)
    named(source + ": attribution.methods[" + std::to_string(i) + "]",
          [&] { return attribution_method_index(s.attribution.methods[i]); });
}

}  // namespace

bool check_model_opens(const std::string& id_or_dir) {
  if (!models::is_default_model_name(id_or_dir))
    require(fs::is_directory(id_or_dir), ErrorCode::Io,
            "model folder '" + id_or_dir + "' does not exist");
  // The loader the analysis uses (cached, so the analysis that follows finds it loaded).
  return named("model '" + id_or_dir + "'", [&] { return cached_model(id_or_dir)->info().vision; });
}

void check_image_opens(const std::string& path) {
  require(fs::is_regular_file(path), ErrorCode::Io, "image '" + path + "' does not exist");
  named("image '" + path + "'", [&] { return models::load_image(path); });
}

void check_tensors_open(const std::string& dir, int layer) {
  require(fs::is_directory(dir), ErrorCode::Io, "tensors folder '" + dir + "' does not exist");
  named("tensors folder '" + dir + "'", [&] { return models::load_problem_dir(dir, layer); });
}

SessionCheck check_session_opens(const Session& s, const std::string& source,
                                 const std::string& session_path) {
  SessionCheck out;
  check_variants(s, source);
  check_view(s, source);
  const auto heads = ablated_heads(s, source);
  const std::string& kind = s.input.kind;
  if (kind == "tensors") {
    named(source + ": input.tensors", [&] {
      check_tensors_open(resolve_session_path(session_path, s.input.tensors),
                         s.input.tensors_layer);
      return 0;
    });
    require(s.ablation.empty(), ErrorCode::InvalidArgument,
            source + ": ablation: raw tensors have no heads to ablate");
    return out;
  }
  if (kind == "synthetic") {
    require(s.input.synthetic_tokens >= 2 && s.input.synthetic_tokens <= 65536,
            ErrorCode::InvalidArgument,
            source + ": input.synthetic_tokens: must be in [2, 65536], not " +
                std::to_string(s.input.synthetic_tokens));
    require(s.ablation.empty(), ErrorCode::InvalidArgument,
            source + ": ablation: a synthetic problem has no heads to ablate");
    return out;
  }
  const std::string model = models::is_default_model_name(s.model.id)
                                ? s.model.id
                                : resolve_session_path(session_path, s.model.id);
  named(source + ": model.id", [&] { return check_model_opens(model); });
  const models::ModelInfo info = cached_model(model)->info();
  if (kind == "image") {
    require(info.vision, ErrorCode::InvalidArgument,
            source + ": input.kind: the input is an image, but model '" + s.model.id +
                "' is a text model");
    named(source + ": input.image", [&] {
      check_image_opens(resolve_session_path(session_path, s.input.image));
      return 0;
    });
  } else {
    require(kind == "text" || kind == "ids", ErrorCode::InvalidArgument,
            source + ": input.kind: unknown kind " + quoted(kind) +
                " (known: text, ids, image, tensors, synthetic)");
    require(!info.vision, ErrorCode::InvalidArgument,
            source + ": input.kind: the input is " + kind + ", but model '" + s.model.id +
                "' is a vision model: give an image");
  }
  require(s.layer >= 0 && s.layer < info.n_layers, ErrorCode::InvalidArgument,
          source + ": layer: " + std::to_string(s.layer) + ", but the model has " +
              std::to_string(info.n_layers) + " layers");
  require(s.head >= 0 && s.head < info.n_heads, ErrorCode::InvalidArgument,
          source + ": head: " + std::to_string(s.head) + ", but the model has " +
              std::to_string(info.n_heads) + " heads");
  named(source + ": ablation.heads", [&] {
    check_heads(heads, info);
    return 0;
  });
  // Recorded hashes that differ: the session opens, with a word that results may not match.
  try {
    check_session_files(s, session_path);
  } catch (const Error& e) {
    out.warnings.push_back(source + ": " + e.what());
  }
  return out;
}

}  // namespace attn::core
