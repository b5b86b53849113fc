// A session: everything needed to reproduce what the workbench shows and what a figure draws —
// the input, the model (with file hashes), the variants, the selection and the view settings.
// Stored as versioned JSON (`.attnscope.json`), written atomically (temp file + rename).
//
//   Session s = load_session("paper.attnscope.json");   // throws attn::Error on a bad file
//   s.layer = 2;  save_session(s, "paper.attnscope.json");
//
// Relative paths inside a session (image, model folder) are relative to the session file's folder.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attn::core {

constexpr int kSessionVersion = 1;  // bump on an incompatible schema change
constexpr const char* kSessionFormat = "attnscope-session";
constexpr const char* kSessionSuffix = ".attnscope.json";

struct SessionInput {
  std::string kind = "text";    // "text" | "ids" | "image" | "tensors" | "synthetic"
  std::string text;             // kind "text": the input text (UTF-8)
  std::vector<int32_t> ids;     // kind "ids": token ids
  int image_size = 0;           // kind "image": resize to this square size (0 = preprocessor's)
  int tensors_layer = -1;       // kind "tensors": read blocks.L.attn.{q,k,v}.npy of a dump
  bool causal = true;           // kind "tensors": causal (else bidirectional)
  std::string image;            // kind "image": path of the image file
  std::string image_sha256;     // hex digest of the image file; checked on open when not empty
  std::string tensors;          // kind "tensors": folder of q.npy, k.npy, v.npy [H, N, d]
  int synthetic_tokens = 4096;  // kind "synthetic": random Q/K/V of this many tokens (2..65536)
};

struct SessionModel {
  std::string id = "default-text";  // "default-text", "default-vision" or a folder (unused for
                                    // tensors and synthetic inputs)
  std::map<std::string, std::string> sha256;  // file name in the folder -> hex digest
};

// Heads ablated in every forward pass of an analysis (interventions.h): the dense capture, the
// variants' inputs and their end-to-end substitutions all come from the ablated model, and the
// analysis reports the ablated model against the plain one.
struct SessionAblation {
  std::vector<std::string> heads;  // "L0H3": 0-based layer and query head
  std::string mode = "zero";       // zero | mean (the head's mean over this input's positions)
  bool empty() const { return heads.empty(); }
};

// Activation patching set up on the session's text (the app's Interventions dock; interventions.h):
// the session's input is the clean run. The grid is computed on request, not on every analysis.
struct SessionPatch {
  std::string corrupt;             // the corrupt text (as many tokens as the clean one)
  std::string target, foil;        // single tokens: LD = logit(target) - logit(foil) at the end
  std::string over = "positions";  // heads | positions | patterns
  bool empty() const { return corrupt.empty(); }
};

// Settings of the views (the GUI's panels and the figure presets share them).
// The attribution setup (app/core/attribution): methods, target and baseline; the variant is
// the session's first variant when `with_variant` is set.
struct SessionAttribution {
  std::vector<std::string> methods;  // attribution_methods() ids; empty = not set up
  int position = -1;                 // text: the row whose logits hold the target (-1: last)
  int target = -1;                   // token id or class (-1: the top prediction)
  int foil = -1;                     // z = logit(target) - logit(foil) when >= 0
  std::string baseline = "zero";     // zero | token | token:ID | mean
  int ig_steps = 32;
  std::string matmul = "f32";  // f32 | bf16: precision of the passes' matrix products
  bool with_variant = false;   // run with the session's first variant substituted
  bool faithfulness = false;   // deletion and insertion curves too
  int steps = 10;              // faithfulness: steps of the curves
  bool empty() const { return methods.empty(); }
};

struct ViewSettings {
  std::string view = "heatmap";  // heatmap | grid | sinks | image | tradeoff | tokens | attribution
                                 // | qk
  std::string colormap = "viridis";      // a render/colormap.h name: viridis | magma | inferno |
                                         // plasma | cividis | gray | blues | diverging
  bool log_scale = false;                // log10 colour scale for probabilities
  double vmax = 0;                       // colour scale maximum; 0 = automatic
  int query = -1;                        // tokens view: query row (-1 = last token)
  std::string grid_metric = "entropy";   // grid: a head_metrics() name (heads/head_metrics.h)
  std::string grid_variant;              // grid: the variant compared with dense ("" = first)
  std::string grid_scale = "data";       // grid: data (the values' range) | unit ([0, 1])
  std::string tradeoff_x = "density";    // tradeoff: density | seconds
  std::string tradeoff_y = "rel_error";  // tradeoff: rel_error | mass_recall | next_token_kl
  std::string qk_method = "pca";         // qk: the Q/K map's projection, pca | tsne
  std::string title;                     // figure title; empty = generated
  bool show_dense = true;                // the dense reference has a heatmap panel of its own
};

// Size of an exported figure: width x height pixels at `dpi` (PDF/SVG: width/dpi inches wide).
struct FigureSize {
  int width = 2100;   // pixels
  int height = 1350;  // pixels; 0 = as tall as the content needs at this width
  double dpi = 300;
};

struct Session {
  int version = kSessionVersion;
  SessionInput input;
  SessionModel model;
  std::vector<std::string> variants;          // variant specs shown beside dense softmax
  int layer = 0;                              // selected layer
  int head = 0;                               // selected query head
  std::string backend = "cpu";                // compute backend: reference | cpu | vulkan
  std::vector<std::string> variant_backends;  // per variant; "" or missing = `backend`
  std::vector<int> substitute_layers;         // end-to-end substitution: layers (empty = all)
  std::vector<int> substitute_heads;          // end-to-end substitution: heads (empty = all)
  SessionAblation ablation;                   // heads ablated in every pass (models only)
  SessionPatch patch;                         // activation patching setup (text models)
  SessionAttribution attribution;             // attribution setup
  ViewSettings view;
  FigureSize figure;
  nlohmann::json extra = nlohmann::json::object();  // client-owned state kept verbatim (GUI)
};

// ---- JSON ----------------------------------------------------------------------------------
// The session as JSON (always the current version).
nlohmann::json session_to_json(const Session& s);
// Parses a session; `source` names it in messages. Throws Error(Format) naming the key for a
// missing/mistyped field, and for a version this build cannot read.
Session session_from_json(const nlohmann::json& j, const std::string& source = "session");

// ---- files ---------------------------------------------------------------------------------
// Reads and parses a session file. Throws Error(Io) when unreadable, Error(Format) for invalid
// JSON (with line/column), a wrong format tag or version, or bad fields. Relative paths stay
// as written; use resolve_session_path() to locate them.
Session load_session(const std::string& path);
// A JSON file, parsed: Error(Io) "<path>: cannot open <what> file", Error(Format) "<path>:
// invalid JSON: ..." (with line and column). Sessions and lessons read through it.
nlohmann::json read_json_file(const std::string& path, const std::string& what);
// Writes `s` atomically: `path`.tmp-<pid> then rename over `path`. Throws Error(Io).
void save_session(const Session& s, const std::string& path);
// Writes text to `path` atomically (temp file + rename). Throws Error(Io).
void write_file_atomic(const std::string& path, const std::string& text);

// Autosave next to a session (`x.attnscope.json` -> `x.attnscope.json.autosave`).
std::string autosave_path(const std::string& session_path);
// True when an autosave newer than the session file exists (offer recovery).
bool has_newer_autosave(const std::string& session_path);

// `p` when absolute or empty; else `p` relative to the folder of `session_path`.
std::string resolve_session_path(const std::string& session_path, const std::string& p);

// ---- reproducibility -----------------------------------------------------------------------
// Files of a model folder that define its behaviour (config, weights, tokenizer, preprocessor).
std::vector<std::string> model_files(const std::string& dir);
// Fills s.model.sha256 from the resolved model folder and s.input.image_sha256 from the image.
void fill_hashes(Session& s, const std::string& session_path = "");
// Checks that the model folder and image exist and match the recorded hashes. Throws Error(Io)
// naming the missing model/image (and where it was looked for) or Error(Format) naming the file
// whose hash differs. `session_path` locates relative paths.
void check_session_files(const Session& s, const std::string& session_path = "");

// SHA-256 of a file's bytes as 64 hex digits. Throws Error(Io) when unreadable.
std::string sha256_file(const std::string& path);
// SHA-256 of bytes as 64 hex digits.
std::string sha256_hex(const std::string& bytes);

}  // namespace attn::core
