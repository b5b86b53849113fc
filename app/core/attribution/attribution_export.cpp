#include "app/core/attribution/attribution_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/core/export/data_export.h"
#include "compute/error.h"
#include "models/arch/image.h"
#include "models/arch/text_input.h"
#include "models/formats/npy.h"

namespace attn::core {
namespace {

using nlohmann::json;

void write(const std::string& path, std::vector<int64_t> shape, const std::vector<float>& v) {
  models::write_npy(path, models::NpyArray::from_f32(std::move(shape), v));
}

}  // namespace

namespace {

models::ModelInput with_bos(const models::Model& model, models::TextInput t, bool bos) {
  models::ModelInput in;
  if (bos) {
    const auto& id = model.config().bos_token_id;
    require(id.has_value(), ErrorCode::InvalidArgument,
            model.info().dir + " has no bos_token_id in its config");
    std::vector<int32_t> ids = {int32_t(*id)};
    ids.insert(ids.end(), t.ids.begin(), t.ids.end());
    if (model.info().max_tokens > 0 && int(ids.size()) > model.info().max_tokens)
      ids.resize(size_t(model.info().max_tokens));
    t = models::ids_for_model(model, ids);  // labels the new first token
  }
  in.ids = t.ids;
  in.labels = t.labels;
  return in;
}

}  // namespace

models::ModelInput attribution_text_input(const models::Model& model, const std::string& text,
                                          const std::string& source, std::string* notice,
                                          bool bos) {
  require(!model.info().vision, ErrorCode::InvalidArgument,
          model.info().dir + " is a vision model, but the input is text: give an image");
  const models::TextInput t = models::encode_for_model(model, text, source);
  if (notice) *notice = t.notice;
  return with_bos(model, t, bos);
}

models::ModelInput attribution_ids_input(const models::Model& model,
                                         const std::vector<int32_t>& ids, bool bos) {
  require(!model.info().vision, ErrorCode::InvalidArgument,
          model.info().dir + " is a vision model, but the input is token ids: give an image");
  return with_bos(model, models::ids_for_model(model, ids), bos);
}

models::ModelInput attribution_image_input(const models::Model& model, const std::string& path) {
  require(model.info().vision, ErrorCode::InvalidArgument,
          model.info().dir + " is a text model, but the input is an image: give text or ids");
  const models::ImagePreprocessor& pp = model.preprocessor();
  models::ModelInput in;
  in.image = pp(models::load_image(path, pp.channels));
  return in;
}

models::ModelInput attribution_image8_input(const models::Model& model,
                                            const models::Image8& image) {
  require(model.info().vision, ErrorCode::InvalidArgument,
          model.info().dir + " is a text model, but the input is an image: give text or ids");
  models::ModelInput in;
  in.image = model.preprocessor()(image);
  return in;
}

json to_json(const Attribution& a) {
  json j;
  j["variant"] = a.variant;
  j["matmul"] = a.matmul;
  j["target"] = {{"position", a.position},
                 {"id", a.id},
                 {"label", a.target_label},
                 {"foil", a.foil >= 0 ? json(a.foil) : json(nullptr)},
                 {"foil_label", a.foil_label},
                 {"z", json_number(a.z)},
                 {"probability", json_number(a.probability)}};
  j["units"] = {{"kind", a.image ? "patches" : "tokens"},
                {"labels", a.unit_labels},
                {"ranked", a.ranked},
                {"first_token", a.first_unit}};
  if (a.image) j["units"]["grid"] = {a.grid_h, a.grid_w};
  j["tokens"] = a.n_tokens;
  j["baseline"] = baseline_name(a.baseline);
  j["seconds_forward"] = a.seconds_forward;
  j["seconds_reverse"] = a.seconds_reverse;
  j["reverse_bytes"] = a.reverse_bytes;
  json ms = json::array();
  for (const MethodScores& m : a.methods) {
    const AttributionMethod& info =
        attribution_methods()[size_t(attribution_method_index(m.method))];
    json e = {{"id", m.method},
              {"title", info.title},
              {"source", info.source},
              {"definition", info.definition},
              {"scores", json_numbers(m.scores)},
              {"seconds", m.seconds}};
    if (std::isfinite(m.relevance_sum)) e["relevance_sum"] = m.relevance_sum;
    if (std::isfinite(m.z_difference)) e["z_difference"] = m.z_difference;
    if (!m.note.empty()) e["note"] = m.note;
    ms.push_back(e);
  }
  j["methods"] = ms;
  return j;
}

json to_json(const std::vector<RankAgreement>& r) {
  json a = json::array();
  for (const RankAgreement& x : r)
    a.push_back({{"a", x.a},
                 {"b", x.b},
                 {"kendall_tau", json_number(x.kendall_tau)},
                 {"spearman", json_number(x.spearman)},
                 {"top_k_overlap", json_number(x.top_k_overlap)},
                 {"k", x.k}});
  return a;
}

json to_json(const Faithfulness& f) {
  json curves = json::array();
  for (const Curve& c : f.curves)
    curves.push_back({{"order", c.order},
                      {"z_deletion", json_numbers(c.z_deletion)},
                      {"p_deletion", json_numbers(c.p_deletion)},
                      {"z_insertion", json_numbers(c.z_insertion)},
                      {"p_insertion", json_numbers(c.p_insertion)},
                      {"aopc_z", json_number(c.aopc_z)},
                      {"aopc_p", json_number(c.aopc_p)},
                      {"insertion_z", json_number(c.insertion_z)},
                      {"insertion_p", json_number(c.insertion_p)}});
  return {{"steps", f.steps},
          {"fractions", json_numbers(f.fractions)},
          {"random_orders", f.random_orders},
          {"curves", curves}};
}

FigureData attribution_figure(const Attribution& a, const std::vector<RankAgreement>& agree,
                              const Faithfulness* f, const models::ModelInput& in,
                              const std::string& model_name) {
  FigureData d;
  d.view = View::Attribution;
  AttributionFigure& g = d.attribution;
  g.image = a.image;
  char buf[160];
  std::snprintf(buf, sizeof buf, ", z = %.3g, p = %.3g", a.z, a.probability);
  const std::string what = "\u201c" + a.target_label + "\u201d" +
                           (a.foil >= 0 ? " \u2212 \u201c" + a.foil_label + "\u201d" : "");
  g.target = what + (a.image ? "" : " at position " + std::to_string(a.position)) + buf;
  for (const MethodScores& m : a.methods) {
    g.methods.push_back(m.method);
    g.titles.push_back(attribution_methods()[size_t(attribution_method_index(m.method))].title);
    std::vector<float> s;
    if (a.image) {
      s = m.scores;
    } else {
      for (int u : a.ranked) s.push_back(m.scores[size_t(u)]);
    }
    g.scores.push_back(std::move(s));
  }
  if (a.image) {
    g.labels = a.unit_labels;
    g.grid_h = a.grid_h;
    g.grid_w = a.grid_w;
    const models::Image& im = in.image;
    g.image_h = im.height;
    g.image_w = im.width;
    g.pixels.assign(size_t(im.height) * im.width, 0.0f);
    const size_t plane = g.pixels.size();
    for (int ch = 0; ch < im.channels; ++ch) {
      float lo = INFINITY, hi = -INFINITY;
      for (size_t i = 0; i < plane; ++i) {
        lo = std::min(lo, im.data[ch * plane + i]);
        hi = std::max(hi, im.data[ch * plane + i]);
      }
      for (size_t i = 0; i < plane; ++i)
        g.pixels[i] +=
            (hi > lo ? (im.data[ch * plane + i] - lo) / (hi - lo) : 0.5f) / float(im.channels);
    }
  } else {
    for (int u : a.ranked) g.labels.push_back(a.unit_labels[size_t(u)]);
  }
  const size_t M = g.methods.size();
  g.spearman.assign(M * M, 1.0f);
  for (const RankAgreement& r : agree) {
    const size_t i = size_t(std::find(g.methods.begin(), g.methods.end(), r.a) - g.methods.begin());
    const size_t j = size_t(std::find(g.methods.begin(), g.methods.end(), r.b) - g.methods.begin());
    if (i < M && j < M) g.spearman[i * M + j] = g.spearman[j * M + i] = float(r.spearman);
  }
  if (f) {
    g.fractions = f->fractions;
    for (const Curve& c : f->curves) {
      g.curve_names.push_back(c.order);
      g.p_deletion.push_back(c.p_deletion);
      g.aopc.push_back(c.aopc_p);
    }
  }
  d.title = "What the prediction depended on: " + std::to_string(M) + " attribution methods";
  d.subtitle = model_name + " \u00b7 " + std::to_string(a.n_tokens) + " tokens \u00b7 " +
               (a.variant == "dense" ? std::string("dense attention") : a.variant) +
               " \u00b7 baseline " + baseline_name(a.baseline) +
               (a.matmul == "f32" ? "" : " \u00b7 " + a.matmul + " matmuls");
  return d;
}

std::vector<std::string> dump_attribution(const Attribution& a, const std::string& dir) {
  std::vector<std::string> files;
  const int64_t N = a.n_tokens, L = a.n_layers, H = a.n_heads;
  for (const MethodScores& m : a.methods) {
    const std::string d = dir + "/" + m.method;
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    require(!ec, ErrorCode::Io, d + ": cannot create folder: " + ec.message());
    std::vector<int64_t> shape = {int64_t(m.scores.size())};
    if (a.image) shape = {a.grid_h, a.grid_w};
    write(d + "/attribution.npy", shape, m.scores);
    files.push_back(d + "/attribution.npy");
    if (!m.maps.empty()) {
      write(d + "/maps.npy", {int64_t(m.maps.size()) / (N * N), N, N}, m.maps);
      files.push_back(d + "/maps.npy");
    }
    if (!m.heads.empty()) {
      write(d + "/heads.npy", {L, H, N}, m.heads);
      files.push_back(d + "/heads.npy");
    }
  }
  return files;
}

}  // namespace attn::core
