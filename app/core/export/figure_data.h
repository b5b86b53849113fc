// What a figure preset shows, gathered from an analysis (no drawing, no Qt): the GUI and the CLI
// collect it here, and app/figures/ paints it.
//
// Views (presets): heatmap (one head), variants (dense and each variant side by side), grid
// (a metric per layer x head), sinks (mass received per token, per layer), image (CLS attention
// over patches), tradeoff (cost vs error of each variant), tokens (one query's attention as
// coloured text), stream (perplexity against tokens streamed per KV-cache policy, and quality
// against cache memory), cache (what one layer and KV head of the cache holds at every step,
// per policy): the last two from a stream run, not an analysis; heads (the head-role atlas, one
// layer x head panel per role) from `attnscope heads`; patch (activation patching effects per
// layer x head or layer x position) from `attnscope patch`.
#pragma once
#include <string>
#include <vector>

#include "app/core/attribution/attribution_figure.h"
#include "app/core/analysis/views.h"
#include "app/core/decode/decode_figure.h"
#include "app/core/session/session.h"
#include "app/core/teaching/head_steps.h"

namespace attn::core {

struct Analysis;

enum class View {
  Heatmap,
  Variants,
  Grid,
  Sinks,
  Image,
  Tradeoff,
  Tokens,
  Stream,
  Cache,
  Heads,
  Patch,
  Decode,
  Attribution,
  Qk,
  Steps
};

// "heatmap", "variants", ...; view_from_name throws Error(InvalidArgument) listing the names.
const char* view_name(View v);
View view_from_name(const std::string& name);
const std::vector<std::string>& view_names();

struct StreamResult;

// One KV-cache policy of a stream run, as the stream figure draws it.
struct StreamCurve {
  std::string spec;
  std::vector<double> tokens;  // x: tokens streamed (the row's token index + 1)
  std::vector<double> ppl;     // y: perplexity over the `smooth` tokens up to x (all of
                               // them while fewer were read)
  double perplexity = 0;       // over the whole stream the policy read
  int read = 0;                // tokens that stream holds: its curve's length (the tokens scored
                               // are one fewer), shown beside its name when policies differ
  double mean_bytes = 0;       // cache bytes, averaged over the stream
  std::string stopped;         // why it stopped early ("" = read everything)
};
struct StreamFigure {
  std::vector<StreamCurve> curves;
  int smooth = 0;   // tokens each point of a curve averages
  int context = 0;  // the model's context (drawn as a marker; 0 = none)
};

// What one layer and KV head of a policy's cache held after every pass: rows are passes
// (binned), columns tokens (binned); each cell the fraction of its (pass, token) pairs whose
// token was held, NaN where every token of the cell was still to come.
struct CacheTimeline {
  std::string spec;
  int passes = 0, tokens = 0;  // before binning
  int rows = 0, cols = 0;
  std::vector<float> kept;  // f32 [rows, cols]
  // Tokens held after every pass from the one that read them to the last, for at least half the
  // passes (sinks): drawn as marks that stay visible however many tokens share a cell.
  std::vector<int> persistent;
};
struct CacheFigure {
  int layer = 0, head = 0;
  std::vector<CacheTimeline> panels;
};

// Panels of values on a rows x cols grid sharing one colour scale: the head-role atlas (a panel
// per role, layers x heads) and activation patching (layers x heads or layers x positions).
struct ValueGrid {
  std::string caption;
  int rows = 0, cols = 0;
  std::vector<float> values;  // f32 [rows, cols]; NaN cells are drawn empty
  std::vector<float> lo, hi;  // optional f32 [rows, cols]: a 95% interval, drawn as +-half-width
};
struct ValueGrids {
  std::string row_title = "Layer", col_title = "Head";
  std::vector<std::string> col_labels;  // optional labels of the columns (tokens); else indices
  double vmin = 0, vmax = 1;            // colour scale; vmin < 0: diverging around 0
  std::string scale_title;              // colour-bar title
  std::vector<ValueGrid> panels;
};

// One head's arithmetic step by step (app/core/teaching/head_steps.h), from `explain-head`.
struct StepsFigure {
  HeadSteps steps;
  int query = -1;  // the query row followed through the stages (-1: none)
  int key = -1;    // its key (-1: the one it weighs most)
};

struct FigureData {
  View view = View::Heatmap;
  std::string title;                    // main title (the session's view.title, or generated)
  std::string subtitle;                 // model, input, layer/head
  ViewSettings settings;                // colour map, scale, chosen metrics
  std::vector<HeatmapData> heatmaps;    // heatmap: 1; variants: dense then each variant
  std::vector<HeadGrid> grids;          // grid: dense (unless the metric is against dense)
                                        // and every variant
  SinkData sinks;                       // sinks
  std::vector<ImageAttention> images;   // image: dense then each variant
  std::vector<TradeoffPoint> tradeoff;  // tradeoff: dense then each variant
  std::vector<TokensData> tokens;       // tokens: dense then each variant
  StreamFigure stream;                  // stream
  CacheFigure cache;                    // cache
  DecodeFigure decode;                  // decode
  ValueGrids values;                    // heads, patch
  AttributionFigure attribution;        // attribution
  QkFigure qk;                          // qk
  StepsFigure steps;                    // steps
};

// Gathers the data of `view` for the analysis's session (its layer, head, variants and view
// settings); needs every stage (core::analyze). Throws Error(InvalidArgument) when the view does
// not fit the input (image view on text). `max_cells` bounds heatmap cells per side.
FigureData collect_figure(const Analysis& a, View view, int max_cells = 512);

// Trade-off figure data straight from sweep rows (no workbench), for `sweep --figure`.
FigureData tradeoff_figure(const std::vector<TradeoffPoint>& points, const std::string& title,
                           const std::string& subtitle);

// Stream figure data from a stream run: each policy's perplexity over a sliding window of
// `smooth` tokens (0: max(32, tokens / 20)), sampled at most 600 times per curve.
FigureData stream_figure(const StreamResult& r, int smooth = 0);
// Cache timeline figure data of layer `layer`, KV head `head` for every policy of a stream run
// recorded with StreamOptions::record_cache, binned to at most max_cells per side. Throws
// Error(InvalidArgument) for a run without records or a layer or head the model does not have.
FigureData cache_figure(const StreamResult& r, int layer, int head, int max_cells = 400);

struct HeadAtlas;
// The head-role atlas: one layer x head panel per role (all roles, or those named), on [0, 1].
// The steps figure of `s` on model `model`, following query `query` (-1: none).
FigureData steps_figure(const HeadSteps& s, const std::string& model, int query = -1);

FigureData atlas_figure(const HeadAtlas& a, const std::vector<std::string>& roles = {});

}  // namespace attn::core
