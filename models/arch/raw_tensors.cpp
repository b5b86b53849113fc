#include "models/arch/raw_tensors.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/error.h"
#include "models/formats/dtype.h"
#include "models/formats/limits.h"
#include "models/formats/npy.h"

namespace attn::models {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Reads a float array as [heads, n, d].
AlignedFloats read_heads(const std::string& path, int64_t* h, int64_t* n, int64_t* d) {
  const NpyArray a = read_npy(path);
  if (!dtype_is_float(a.dtype)) {
    throw Error(ErrorCode::Format,
                path + ": dtype " + dtype_name(a.dtype) + " is not a floating-point type");
  }
  if (a.shape.size() == 2) {
    *h = 1, *n = a.shape[0], *d = a.shape[1];
  } else if (a.shape.size() == 3) {
    *h = a.shape[0], *n = a.shape[1], *d = a.shape[2];
  } else {
    throw Error(ErrorCode::InvalidArgument,
                path + ": shape " + shape_str(a.shape) + " is not [heads, tokens, head_dim]");
  }
  if (*h <= 0 || *n <= 0 || *d <= 0 || *h > (1 << 16) || *d > (1 << 16)) {
    throw Error(ErrorCode::InvalidArgument, path + ": shape " + shape_str(a.shape) +
                                                " has an empty or implausibly large dimension");
  }
  if (*n > kMaxInputTokens) {
    throw Error(ErrorCode::InvalidArgument, path + ": shape " + shape_str(a.shape) + " has " +
                                                std::to_string(*n) + " tokens, over the limit of " +
                                                std::to_string(kMaxInputTokens) +
                                                " (kMaxInputTokens)");
  }
  AlignedFloats out(a.numel());  // converted in place: no std::vector copy first
  convert_to_f32(a.dtype, a.data.data(), out.size(), out.data());
  return out;
}

std::vector<std::string> read_labels(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorCode::Io, path + ": cannot open labels");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::Format, path + ": not valid JSON: " + e.what());
  }
  if (j.is_object() && j.contains("labels")) j = j["labels"];
  if (!j.is_array()) throw Error(ErrorCode::Format, path + ": expected a list of strings");
  std::vector<std::string> out;
  for (const auto& s : j) {
    if (!s.is_string()) throw Error(ErrorCode::Format, path + ": labels must be strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

Problem load_problem_npy(const std::string& q_path, const std::string& k_path,
                         const std::string& v_path, const std::string& labels_json,
                         const RawTensorOptions& options) {
  int64_t hq, nq, dq, hk, nk, dk, hv, nv, dv;
  Problem p;
  p.q = read_heads(q_path, &hq, &nq, &dq);
  p.k = read_heads(k_path, &hk, &nk, &dk);
  p.v = read_heads(v_path, &hv, &nv, &dv);
  const auto dims = [](int64_t h, int64_t n, int64_t d) { return shape_str({h, n, d}); };
  require(hk == hv && nk == nv && dk == dv, ErrorCode::InvalidArgument,
          k_path + " " + dims(hk, nk, dk) + " and " + v_path + " " + dims(hv, nv, dv) +
              " must have the same shape");
  require(dq == dk, ErrorCode::InvalidArgument,
          q_path + " " + dims(hq, nq, dq) + " and " + k_path + " " + dims(hk, nk, dk) +
              " differ in head dimension");
  require(hq % hk == 0, ErrorCode::InvalidArgument,
          q_path + " has " + std::to_string(hq) + " heads, not a multiple of the " +
              std::to_string(hk) + " key/value heads of " + k_path);
  require(!options.causal || nq <= nk, ErrorCode::InvalidArgument,
          q_path + " has " + std::to_string(nq) + " queries but " + k_path + " only " +
              std::to_string(nk) + " keys; causal attention needs n_q <= n_k");
  p.n_heads = int(hq);
  p.n_kv_heads = int(hk);
  p.n_q = int(nq);
  p.n_k = int(nk);
  p.d = int(dq);
  p.causal = options.causal;
  p.scale = options.scale;
  if (!labels_json.empty()) {
    p.labels = read_labels(labels_json);
    require(int64_t(p.labels.size()) == nk, ErrorCode::InvalidArgument,
            labels_json + " holds " + std::to_string(p.labels.size()) + " labels for " +
                std::to_string(nk) + " keys");
  }
  try {
    validate(p);
  } catch (const Error& e) {
    throw Error(e.code(), q_path + ", " + k_path + ", " + v_path + ": " + e.what());
  }
  return p;
}

Problem load_problem_dir(const std::string& dir, int layer, const RawTensorOptions& options) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  const std::string stem = layer >= 0 ? "blocks." + std::to_string(layer) + ".attn." : "";
  const fs::path q = d / (stem + "q.npy"), k = d / (stem + "k.npy"), v = d / (stem + "v.npy");
  for (const fs::path& f : {q, k, v}) {
    require(fs::exists(f), ErrorCode::Io,
            dir + ": no " + f.filename().string() +
                (layer >= 0 ? " (dump the q, k and v hooks of that layer)"
                            : " (a raw-tensor folder holds q.npy, k.npy, v.npy [heads, tokens, "
                              "head_dim] and optionally labels.json)"));
  }
  const fs::path labels = d / "labels.json";
  return load_problem_npy(q.string(), k.string(), v.string(),
                          fs::exists(labels) ? labels.string() : "", options);
}

}  // namespace attn::models
