// The numbers behind the figures, in formats notebooks read: .npy (NumPy), CSV and JSON.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/core/analysis/views.h"

namespace attn::core {

// Checks, before any work, that a file can be created at `path`: its folder exists, is a folder
// and is writable. Throws Error(Io) naming the path and the folder.
void check_output_path(const std::string& path);

// (.npy files are written with models/formats/npy.h.)
// Matrix as CSV: optional header row of column labels and a first column of row labels.
std::string matrix_csv(int rows, int cols, const std::vector<float>& data,
                       const std::vector<std::string>& row_labels = {},
                       const std::vector<std::string>& col_labels = {});

// A number, or each of a vector's, as JSON with NaN/Inf as null.
nlohmann::json json_number(double x);
nlohmann::json json_numbers(const std::vector<float>& v);

// Views as JSON (NaN/Inf as null).
nlohmann::json to_json(const HeatmapData& h);
nlohmann::json to_json(const SinkData& s);
nlohmann::json to_json(const HeadGrid& g);
nlohmann::json to_json(const TradeoffPoint& p);
nlohmann::json to_json(const ImageAttention& a);
nlohmann::json to_json(const TokensData& t);

// Writes the data of a view next to `stem`: stem.csv (+ stem.npy for matrices) or stem.json,
// chosen by `format` ("csv" | "npy" | "json"). Returns the files written.
std::vector<std::string> export_heatmap(const HeatmapData& h, const std::string& stem,
                                        const std::string& format);
std::vector<std::string> export_head_grid(const HeadGrid& g, const std::string& stem,
                                          const std::string& format);
std::vector<std::string> export_sinks(const SinkData& s, const std::string& stem,
                                      const std::string& format);

}  // namespace attn::core
