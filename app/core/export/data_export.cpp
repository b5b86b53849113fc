#include "app/core/export/data_export.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/core/heads/head_metrics.h"
#include "app/core/session/session.h"
#include "compute/error.h"
#include "models/formats/npy.h"

namespace attn::core {
using nlohmann::json;

json json_number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json json_numbers(const std::vector<float>& v) {
  json a = json::array();
  for (float x : v) a.push_back(json_number(x));
  return a;
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string fmt(float x) {
  if (std::isnan(x)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", double(x));
  return buf;
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomic(path, text);
}

}  // namespace

void check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  require(!path.empty(), ErrorCode::InvalidArgument, "empty output path");
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  require(fs::exists(st), ErrorCode::Io,
          path + ": cannot write: the folder '" + dir + "' does not exist");
  require(fs::is_directory(st), ErrorCode::Io,
          path + ": cannot write: '" + dir + "' is not a folder");
  require(::access(dir.c_str(), W_OK | X_OK) == 0, ErrorCode::Io,
          path + ": cannot write in the folder '" + dir + "': " + std::strerror(errno));
  require(!fs::is_directory(path, ec), ErrorCode::Io, path + ": cannot write: it is a folder");
}

std::string matrix_csv(int rows, int cols, const std::vector<float>& data,
                       const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels) {
  require(size_t(rows) * size_t(cols) == data.size(), ErrorCode::InvalidArgument,
          "matrix_csv: rows x cols does not match the data size");
  std::string out;
  const bool rl = row_labels.size() == size_t(rows);
  if (col_labels.size() == size_t(cols)) {
    if (rl) out += "token";
    for (int c = 0; c < cols; ++c) out += (c || rl ? "," : "") + csv_field(col_labels[size_t(c)]);
    out += "\n";
  }
  for (int r = 0; r < rows; ++r) {
    if (rl) out += csv_field(row_labels[size_t(r)]);
    for (int c = 0; c < cols; ++c)
      out += (c || rl ? "," : "") + fmt(data[size_t(r) * size_t(cols) + size_t(c)]);
    out += "\n";
  }
  return out;
}

json to_json(const HeatmapData& h) {
  json j = {{"spec", h.spec},
            {"caption", h.caption},
            {"layer", h.layer},
            {"head", h.head},
            {"n_q", h.n_q},
            {"n_k", h.n_k},
            {"rows", h.rows},
            {"cols", h.cols},
            {"cells", json_numbers(h.cells)},
            {"q_labels", h.q_labels},
            {"k_labels", h.k_labels},
            {"causal", h.causal},
            {"density", json_number(h.density)},
            {"rel_error", json_number(h.rel_error)},
            {"mass_recall", json_number(h.mass_recall)},
            {"row_kl", json_number(h.row_kl)},
            {"sinks", h.sinks},
            {"header", heatmap_header(h)}};
  if (!h.dropped.empty()) j["dropped"] = h.dropped;  // [rows * cols]: 1 visible, none kept
  return j;
}

json to_json(const SinkData& s) {
  return {{"spec", s.spec},
          {"layers", s.n_layers},
          {"tokens", s.n},
          {"labels", s.labels},
          {"received", json_numbers(s.received)},
          {"sinks", s.sinks},
          {"threshold", s.threshold}};
}

json to_json(const HeadGrid& g) {
  json j = {{"spec", g.spec}, {"layers", g.n_layers}, {"heads", g.n_heads}};
  for (size_t m = 0; m < g.metrics.size() && m < g.values.size(); ++m)
    j[g.metrics[m]] = json_numbers(g.values[m]);
  // Deprecated keys, still written for readers of earlier files ("sink_mass").
  for (const auto& [old_name, now] : head_metric_aliases())
    if (j.contains(now)) j[old_name] = j[now];
  return j;
}

json to_json(const TradeoffPoint& p) {
  json j = {{"spec", p.spec},
            {"caption", p.caption},
            {"pattern", p.pattern},
            {"density", json_number(p.density)},
            {"flops", json_number(p.flops)},
            {"select_seconds", json_number(p.select_seconds)},
            {"kernel_seconds", json_number(p.kernel_seconds)},
            {"rel_error", json_number(p.rel_error)},
            {"mass_recall", json_number(p.mass_recall)},
            {"row_kl", json_number(p.row_kl)},
            {"next_token_kl", json_number(p.next_token_kl)},
            {"top1_agreement", json_number(p.top1_agreement)},
            {"perplexity", json_number(p.perplexity)},
            {"cls_cosine", json_number(p.cls_cosine)},
            {"precision", p.precision}};
  if (std::isfinite(p.accuracy))  // dataset points
    j["accuracy"] = {{"value", p.accuracy},
                     {"lo", json_number(p.accuracy_lo)},
                     {"hi", json_number(p.accuracy_hi)}};
  if (std::isfinite(p.loss))  // text dataset points
    j["loss"] = {{"value", p.loss}, {"lo", json_number(p.loss_lo)}, {"hi", json_number(p.loss_hi)}};
  return j;
}

json to_json(const ImageAttention& a) {
  return {{"spec", a.spec},          {"layer", a.layer},   {"head", a.head},
          {"grid_h", a.grid_h},      {"grid_w", a.grid_w}, {"cls", json_numbers(a.cls)},
          {"predicted", a.predicted}};
}

json to_json(const TokensData& t) {
  return {{"spec", t.spec},
          {"caption", t.caption},
          {"layer", t.layer},
          {"head", t.head},
          {"query", t.query},
          {"labels", t.labels},
          {"weight", json_numbers(t.weight)}};
}

namespace {
std::vector<std::string> export_matrix(const std::string& stem, const std::string& format, int rows,
                                       int cols, const std::vector<float>& data,
                                       const std::vector<std::string>& rl,
                                       const std::vector<std::string>& cl, const json& j) {
  if (format == "csv") {
    write_text(stem + ".csv", matrix_csv(rows, cols, data, rl, cl));
    return {stem + ".csv"};
  }
  if (format == "npy") {
    write_npy(stem + ".npy", models::NpyArray::from_f32({rows, cols}, data));
    return {stem + ".npy"};
  }
  require(format == "json", ErrorCode::InvalidArgument,
          "data format '" + format + "' is not one of csv, npy, json");
  write_text(stem + ".json", j.dump(1) + "\n");
  return {stem + ".json"};
}
}  // namespace

std::vector<std::string> export_heatmap(const HeatmapData& h, const std::string& stem,
                                        const std::string& format) {
  const bool full = h.rows == h.n_q && h.cols == h.n_k;
  return export_matrix(stem, format, h.rows, h.cols, h.cells,
                       full ? h.q_labels : std::vector<std::string>{},
                       full ? h.k_labels : std::vector<std::string>{}, to_json(h));
}

std::vector<std::string> export_head_grid(const HeadGrid& g, const std::string& stem,
                                          const std::string& format) {
  if (format == "json") return export_matrix(stem, format, 0, 0, {}, {}, {}, to_json(g));
  std::vector<std::string> files;
  for (const std::string& m : g.metrics) {
    auto f = export_matrix(stem + "_" + m, format, g.n_layers, g.n_heads, g.metric(m), {}, {}, {});
    files.insert(files.end(), f.begin(), f.end());
  }
  return files;
}

std::vector<std::string> export_sinks(const SinkData& s, const std::string& stem,
                                      const std::string& format) {
  std::vector<std::string> rows;
  for (int l = 0; l < s.n_layers; ++l) rows.push_back("layer " + std::to_string(l));
  return export_matrix(stem, format, s.n_layers, s.n, s.received, rows, s.labels, to_json(s));
}

}  // namespace attn::core
