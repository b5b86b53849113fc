#include "app/core/session/session.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <type_traits>

#include "app/core/attribution/attribution.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/interventions.h"
#include "compute/error.h"
#include "models/arch/default_models.h"
#include "models/formats/limits.h"

namespace attn::core {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// True when `v` is a number with an integral value that I holds (2.0 counts; 2.5, 1e300 and
// 2^40 for an int do not: nlohmann's get<int> would wrap them or, from a float, be undefined).
template <typename I>
bool integer_fits(const json& v) {
  using L = std::numeric_limits<I>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(L::max());
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    return x >= int64_t(L::min()) && x <= int64_t(L::max());
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    return std::isfinite(x) && x == std::floor(x) && x >= double(L::min()) && x <= double(L::max());
  }
  return false;
}

template <typename T>
constexpr bool is_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
struct integer_vector : std::false_type {};
template <typename I>
struct integer_vector<std::vector<I>> : std::bool_constant<is_integer_v<I>> {};

// Reads field `key` of object `o` into `out` when present; a wrong type, or an integer out of
// the field's range, is a Format error naming the field path ("view.log_scale").
template <typename T>
void read_field(const json& o, const char* key, T& out, const std::string& where,
                const std::string& source) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return;
  bool ok = true;
  if constexpr (is_integer_v<T>) {
    ok = integer_fits<T>(*it);
  } else if constexpr (integer_vector<T>::value) {
    ok = !it->is_array() || std::all_of(it->begin(), it->end(), [](const json& e) {
      return integer_fits<typename T::value_type>(e);
    });
  }
  if (ok) {
    try {
      out = it->get<T>();
      return;
    } catch (const json::exception&) {
    }
  }
  throw Error(ErrorCode::Format, source + ": field '" + where + key + "' has the wrong type (" +
                                     it->type_name() + ") or is out of range");
}

const json& object_field(const json& o, const char* key, const std::string& source, bool required) {
  static const json empty = json::object();
  auto it = o.find(key);
  if (it == o.end()) {
    require(!required, ErrorCode::Format, source + ": missing field '" + key + "'");
    return empty;
  }
  require(it->is_object(), ErrorCode::Format,
          source + ": field '" + key + "' must be an object, not " + it->type_name());
  return *it;
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

json session_to_json(const Session& s) {
  json input = {{"kind", s.input.kind}};
  if (s.input.kind == "image") {
    input["image"] = s.input.image;
    input["sha256"] = s.input.image_sha256;
    if (s.input.image_size) input["image_size"] = s.input.image_size;
  } else if (s.input.kind == "ids") {
    input["ids"] = s.input.ids;
  } else if (s.input.kind == "tensors") {
    input["tensors"] = s.input.tensors;
    input["layer"] = s.input.tensors_layer;
    input["causal"] = s.input.causal;
  } else if (s.input.kind == "synthetic") {
    input["tokens"] = s.input.synthetic_tokens;
  } else {
    input["text"] = s.input.text;
  }
  const ViewSettings& v = s.view;
  return {
      {"format", kSessionFormat},
      {"version", kSessionVersion},
      {"input", input},
      {"model", {{"id", s.model.id}, {"sha256", s.model.sha256}}},
      {"variants", s.variants},
      {"selection", {{"layer", s.layer}, {"head", s.head}}},
      {"backend", s.backend},
      {"variant_backends", s.variant_backends},
      {"substitution", {{"layers", s.substitute_layers}, {"heads", s.substitute_heads}}},
      {"ablation", {{"heads", s.ablation.heads}, {"mode", s.ablation.mode}}},
      {"patch",
       {{"corrupt", s.patch.corrupt},
        {"target", s.patch.target},
        {"foil", s.patch.foil},
        {"over", s.patch.over}}},
      {"attribution",
       {{"methods", s.attribution.methods},
        {"position", s.attribution.position},
        {"target", s.attribution.target},
        {"foil", s.attribution.foil},
        {"baseline", s.attribution.baseline},
        {"ig_steps", s.attribution.ig_steps},
        {"matmul", s.attribution.matmul},
        {"with_variant", s.attribution.with_variant},
        {"faithfulness", s.attribution.faithfulness},
        {"steps", s.attribution.steps}}},
      {"view",
       {{"view", v.view},
        {"colormap", v.colormap},
        {"log_scale", v.log_scale},
        {"vmax", v.vmax},
        {"query", v.query},
        {"grid_metric", v.grid_metric},
        {"grid_variant", v.grid_variant},
        {"grid_scale", v.grid_scale},
        {"tradeoff_x", v.tradeoff_x},
        {"tradeoff_y", v.tradeoff_y},
        {"qk_method", v.qk_method},
        {"title", v.title},
        {"show_dense", v.show_dense}}},
      {"figure", {{"width", s.figure.width}, {"height", s.figure.height}, {"dpi", s.figure.dpi}}},
      {"extra", s.extra}};
}

namespace {

// The format tag and a version this build reads.
int read_format_version(const json& j, const std::string& source) {
  require(j.is_object(), ErrorCode::Format,
          source + ": a session must be a JSON object, not " + std::string(j.type_name()));
  std::string format;
  read_field(j, "format", format, "", source);
  require(format == kSessionFormat, ErrorCode::Format,
          source + ": not an attnscope session (field 'format' is '" + format + "', expected '" +
              kSessionFormat + "')");
  require(
      j.contains("version") && j["version"].is_number_integer() && integer_fits<int>(j["version"]),
      ErrorCode::Format, source + ": missing integer field 'version'");
  const int version = j["version"].get<int>();
  require(version >= 1 && version <= kSessionVersion, ErrorCode::Format,
          source + ": session version " + std::to_string(version) +
              " is not supported by this attnscope (it reads versions 1.." +
              std::to_string(kSessionVersion) + "); upgrade attnscope to open it");
  return version;
}

void read_input(const json& j, Session& s, const std::string& source) {
  const json& in = object_field(j, "input", source, true);
  read_field(in, "kind", s.input.kind, "input.", source);
  require(s.input.kind == "text" || s.input.kind == "ids" || s.input.kind == "image" ||
              s.input.kind == "tensors" || s.input.kind == "synthetic",
          ErrorCode::Format,
          source +
              ": input.kind must be \"text\", \"ids\", \"image\", \"tensors\" or \"synthetic\", "
              "not \"" +
              s.input.kind + "\"");
  read_field(in, "text", s.input.text, "input.", source);
  read_field(in, "tensors", s.input.tensors, "input.", source);
  read_field(in, "ids", s.input.ids, "input.", source);
  read_field(in, "image_size", s.input.image_size, "input.", source);
  require(s.input.image_size >= 0 && s.input.image_size <= models::kMaxImageSide, ErrorCode::Format,
          source + ": input.image_size " + std::to_string(s.input.image_size) + " is outside [0, " +
              std::to_string(models::kMaxImageSide) + "] (kMaxImageSide)");
  read_field(in, "layer", s.input.tensors_layer, "input.", source);
  read_field(in, "causal", s.input.causal, "input.", source);
  require(s.input.kind != "ids" || !s.input.ids.empty(), ErrorCode::Format,
          source + ": input.ids is empty");
  read_field(in, "tokens", s.input.synthetic_tokens, "input.", source);
  require(s.input.kind != "tensors" || !s.input.tensors.empty(), ErrorCode::Format,
          source + ": input.tensors (the q/k/v folder) is empty");
  require(s.input.kind != "synthetic" ||
              (s.input.synthetic_tokens >= 2 && s.input.synthetic_tokens <= 65536),
          ErrorCode::Format, source + ": input.tokens must be in [2, 65536]");
  read_field(in, "image", s.input.image, "input.", source);
  read_field(in, "sha256", s.input.image_sha256, "input.", source);
  require(s.input.kind != "text" || !s.input.text.empty(), ErrorCode::Format,
          source + ": input.text is empty");
  require(s.input.kind != "image" || !s.input.image.empty(), ErrorCode::Format,
          source + ": input.image (the image path) is empty");
  require(s.input.image_sha256.empty() || is_hex64(s.input.image_sha256), ErrorCode::Format,
          source + ": input.sha256 must be 64 lowercase hex digits");
}

// The model, the variants, the selection, the backends and the substitution.
void read_model_and_variants(const json& j, Session& s, const std::string& source) {
  const json& m = object_field(j, "model", source, true);
  read_field(m, "id", s.model.id, "model.", source);
  require(!s.model.id.empty(), ErrorCode::Format, source + ": model.id is empty");
  read_field(m, "sha256", s.model.sha256, "model.", source);

  read_field(j, "variants", s.variants, "", source);
  const json& sel = object_field(j, "selection", source, false);
  read_field(sel, "layer", s.layer, "selection.", source);
  read_field(sel, "head", s.head, "selection.", source);
  require(s.layer >= 0 && s.head >= 0, ErrorCode::Format,
          source + ": selection.layer and selection.head must be >= 0");
  read_field(j, "backend", s.backend, "", source);
  read_field(j, "variant_backends", s.variant_backends, "", source);
  const json& sub = object_field(j, "substitution", source, false);
  read_field(sub, "layers", s.substitute_layers, "substitution.", source);
  read_field(sub, "heads", s.substitute_heads, "substitution.", source);
}

// The head ablation and the patching setup.
void read_interventions(const json& j, Session& s, const std::string& source) {
  const json& abl = object_field(j, "ablation", source, false);
  read_field(abl, "heads", s.ablation.heads, "ablation.", source);
  read_field(abl, "mode", s.ablation.mode, "ablation.", source);
  require(s.ablation.mode == "zero" || s.ablation.mode == "mean", ErrorCode::Format,
          source + ": ablation.mode must be zero or mean, not '" + s.ablation.mode + "'");
  for (const std::string& h : s.ablation.heads) {
    require(h.find(',') == std::string::npos, ErrorCode::Format,
            source + ": ablation.heads takes one head per entry, not '" + h + "'");
    try {
      parse_heads(h);
    } catch (const Error& e) {
      throw Error(ErrorCode::Format, source + ": ablation.heads: " + e.what());
    }
  }
  const json& pat = object_field(j, "patch", source, false);
  read_field(pat, "corrupt", s.patch.corrupt, "patch.", source);
  read_field(pat, "target", s.patch.target, "patch.", source);
  read_field(pat, "foil", s.patch.foil, "patch.", source);
  read_field(pat, "over", s.patch.over, "patch.", source);
  require(s.patch.over == "heads" || s.patch.over == "positions" || s.patch.over == "patterns",
          ErrorCode::Format,
          source + ": patch.over must be heads, positions or patterns, not '" + s.patch.over + "'");
  SessionAttribution& at = s.attribution;
  const json& att = object_field(j, "attribution", source, false);
  read_field(att, "methods", at.methods, "attribution.", source);
  read_field(att, "position", at.position, "attribution.", source);
  read_field(att, "target", at.target, "attribution.", source);
  read_field(att, "foil", at.foil, "attribution.", source);
  read_field(att, "baseline", at.baseline, "attribution.", source);
  read_field(att, "ig_steps", at.ig_steps, "attribution.", source);
  read_field(att, "matmul", at.matmul, "attribution.", source);
  read_field(att, "with_variant", at.with_variant, "attribution.", source);
  read_field(att, "faithfulness", at.faithfulness, "attribution.", source);
  read_field(att, "steps", at.steps, "attribution.", source);
  try {
    for (const std::string& m : at.methods) attribution_method_index(m);
    parse_baseline(at.baseline);
  } catch (const Error& e) {
    throw Error(ErrorCode::Format, source + ": attribution: " + e.what());
  }
  require(at.position >= -1 && at.target >= -1 && at.foil >= -1, ErrorCode::Format,
          source + ": attribution.position, target and foil are -1 or a valid index");
  require(at.ig_steps >= 1 && at.ig_steps <= 4096 && at.steps >= 1 && at.steps <= 1000,
          ErrorCode::Format,
          source + ": attribution.ig_steps takes 1..4096 and attribution.steps 1..1000");
  require(at.matmul == "f32" || at.matmul == "bf16", ErrorCode::Format,
          source + ": attribution.matmul is f32 or bf16, not '" + at.matmul + "'");
}

void read_view(const json& j, ViewSettings& vs, const std::string& source) {
  const json& v = object_field(j, "view", source, false);
  read_field(v, "view", vs.view, "view.", source);
  read_field(v, "colormap", vs.colormap, "view.", source);
  read_field(v, "log_scale", vs.log_scale, "view.", source);
  read_field(v, "vmax", vs.vmax, "view.", source);
  read_field(v, "query", vs.query, "view.", source);
  read_field(v, "grid_metric", vs.grid_metric, "view.", source);
  vs.grid_metric = canonical_head_metric(vs.grid_metric);  // "sink_mass" is "max_token_mass"
  read_field(v, "grid_variant", vs.grid_variant, "view.", source);
  read_field(v, "grid_scale", vs.grid_scale, "view.", source);
  require(vs.grid_scale == "data" || vs.grid_scale == "unit", ErrorCode::Format,
          source + ": view.grid_scale must be \"data\" or \"unit\", not \"" + vs.grid_scale + "\"");
  read_field(v, "tradeoff_x", vs.tradeoff_x, "view.", source);
  read_field(v, "tradeoff_y", vs.tradeoff_y, "view.", source);
  read_field(v, "qk_method", vs.qk_method, "view.", source);
  require(vs.qk_method == "pca" || vs.qk_method == "tsne", ErrorCode::Format,
          source + ": view.qk_method must be pca or tsne, not '" + vs.qk_method + "'");
  read_field(v, "title", vs.title, "view.", source);
  read_field(v, "show_dense", vs.show_dense, "view.", source);
}

void read_figure(const json& j, Session& s, const std::string& source) {
  const json& f = object_field(j, "figure", source, false);
  read_field(f, "width", s.figure.width, "figure.", source);
  read_field(f, "height", s.figure.height, "figure.", source);
  read_field(f, "dpi", s.figure.dpi, "figure.", source);
  require(s.figure.width > 0 && s.figure.height >= 0 && s.figure.width <= 20000 &&
              s.figure.height <= 20000 && s.figure.dpi >= 10 && s.figure.dpi <= 2400,
          ErrorCode::Format,
          source +
              ": figure size must be 1..20000 pixels per side (height 0: fit) at "
              "10..2400 dpi");
}

}  // namespace

Session session_from_json(const json& j, const std::string& source) {
  Session s;
  s.version = read_format_version(j, source);
  read_input(j, s, source);
  read_model_and_variants(j, s, source);
  read_interventions(j, s, source);
  read_view(j, s.view, source);
  read_figure(j, s, source);
  if (j.contains("extra")) s.extra = j["extra"];
  return s;
}

json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open " + what + " file");
  const std::string text(std::istreambuf_iterator<char>(f), {});
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double ("1e999").
    throw Error(ErrorCode::Format, path + ": invalid JSON: " + e.what());
  }
}

Session load_session(const std::string& path) {
  return session_from_json(read_json_file(path, "session"), path);
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    require(bool(f), ErrorCode::Io, tmp + ": cannot write (for " + path + ")");
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(ErrorCode::Io, tmp + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorCode::Io, path + ": cannot replace: " + ec.message());
  }
}

void save_session(const Session& s, const std::string& path) {
  write_file_atomic(path, session_to_json(s).dump(2) + "\n");
}

std::string autosave_path(const std::string& session_path) {
  return session_path + ".autosave";
}

bool has_newer_autosave(const std::string& session_path) {
  std::error_code ec;
  const std::string a = autosave_path(session_path);
  if (!fs::exists(a, ec)) return false;
  if (!fs::exists(session_path, ec)) return true;
  return fs::last_write_time(a, ec) > fs::last_write_time(session_path, ec);
}

std::string resolve_session_path(const std::string& session_path, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute() || session_path.empty()) return p;
  const fs::path base = fs::path(session_path).parent_path();
  return base.empty() ? p : (base / p).lexically_normal().string();
}

std::vector<std::string> model_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (ext == ".json" || ext == ".safetensors" || ext == ".txt" || ext == ".model")
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
std::string model_dir_of(const Session& s, const std::string& session_path) {
  if (models::is_default_model_name(s.model.id)) return models::resolve_model_dir(s.model.id);
  const std::string dir = resolve_session_path(session_path, s.model.id);
  require(fs::is_directory(dir), ErrorCode::Io,
          "model folder '" + dir + "' named by the session does not exist");
  return dir;
}
}  // namespace

// Inputs that need no model folder: raw tensors and synthetic problems.
static bool model_free(const Session& s) {
  return s.input.kind == "tensors" || s.input.kind == "synthetic";
}

void fill_hashes(Session& s, const std::string& session_path) {
  if (model_free(s)) return;
  const std::string dir = model_dir_of(s, session_path);
  s.model.sha256.clear();
  for (const std::string& f : model_files(dir)) s.model.sha256[f] = sha256_file(dir + "/" + f);
  if (s.input.kind == "image")
    s.input.image_sha256 = sha256_file(resolve_session_path(session_path, s.input.image));
}

void check_session_files(const Session& s, const std::string& session_path) {
  if (s.input.kind == "tensors") {
    const std::string d = resolve_session_path(session_path, s.input.tensors);
    require(fs::is_directory(d), ErrorCode::Io,
            "tensor folder '" + d + "' named by the session does not exist");
  }
  if (model_free(s)) return;
  const std::string dir = model_dir_of(s, session_path);
  for (const auto& [file, digest] : s.model.sha256) {
    const std::string p = dir + "/" + file;
    require(fs::exists(p), ErrorCode::Io,
            "model file " + p + " recorded in the session is missing");
    require(sha256_file(p) == digest, ErrorCode::Format,
            "model file " + p + " differs from the one the session was saved with (sha256 " +
                digest.substr(0, 12) + "...); results would not match");
  }
  if (s.input.kind == "image") {
    const std::string p = resolve_session_path(session_path, s.input.image);
    require(fs::exists(p), ErrorCode::Io, "input image " + p + " named by the session is missing");
    if (!s.input.image_sha256.empty())
      require(sha256_file(p) == s.input.image_sha256, ErrorCode::Format,
              "input image " + p + " differs from the one the session was saved with");
  }
}

}  // namespace attn::core
