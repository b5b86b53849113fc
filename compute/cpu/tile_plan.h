// Work planning for the tiled kernels over Dense and Blocks layouts: query tiles (never
// straddling a query block) and, per tile, the runs of kept keys cut into chunks.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/score_tile.h"

namespace attn::cpu::ATTN_CPU_NS {

// One work item: queries [q0, q0 + rows) of head h.
struct TileItem {
  int h = 0, q0 = 0, rows = 0;
  int qb = -1;       // query block (Blocks layouts)
  int64_t cost = 0;  // estimated entries, for largest-first scheduling within a head
};

// Query tiles of every head, by head; `by_cost` orders each head's tiles largest first (for
// dynamic scheduling), else by query.
std::vector<TileItem> make_items(const KernelContext& c, bool by_cost);

// Key chunks of one query tile: runs of consecutive kept keys (clipped to the tile's causal
// limit) cut into pieces of at most `width` keys.
void build_chunks(const KernelContext& c, const TileItem& it, const QueryTile& t,
                  std::vector<Chunk>& out, int width = kBK);

}  // namespace attn::cpu::ATTN_CPU_NS
