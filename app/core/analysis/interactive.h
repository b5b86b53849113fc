// What a live client asks of an analysis while the user looks around: the renderer's document
// for the selected layer and head, pooled tiles of the visible region (never N x N), the exact
// values behind a hovered cell, and probability rows. Const on the Analysis: any thread.
#pragma once
#include <atomic>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"
#include "render/document.h"

namespace attn::core {

// The renderer's document for the session's layer and head. Parts that need later stages
// (metrics, end to end) are left empty until those ran. `sweep` adds trade-off points.
render::Document document(const Analysis& a, const std::vector<TradeoffPoint>& sweep = {});

// Pooled cells of every shown panel over queries [q0, q1) x keys [k0, k1) at w x h cells.
// Throws Error(Cancelled) when `cancel` is set between panels.
std::vector<render::PanelTile> tiles(const Analysis& a, int q0, int q1, int k0, int k1, int w,
                                     int h, const std::atomic<bool>* cancel = nullptr);

// Index into Analysis::panels of each panel the heatmap view shows (dense unless hidden).
std::vector<int> shown_panels(const Analysis& a);

// Exact values of one entry of a shown panel (index into shown_panels()).
render::HoverInfo hover(const Analysis& a, int shown_panel, int q, int k);
// Probabilities of query q over every key, for the token view; empty when out of range.
std::vector<float> probability_row(const Analysis& a, int shown_panel, int q);
// Mean attention each token receives in the selected layer (dense, all heads); empty before
// the metrics ran.
std::vector<float> received_mass(const Analysis& a);

}  // namespace attn::core
