// The renderer's tile query on the GPU: probabilities of a tile pooled to w x h cells, the same
// cells as tile_probabilities() in compute/probabilities.h, written straight into an r32f image.
#pragma once
#include "compute/probabilities.h"
#include "compute/result.h"
#include "compute/vulkan/tile_image.h"

namespace attn::vk {

class Context;

// Why the GPU tile query cannot serve this variant ("" when it can; e.g. selective attention,
// whose rows depend on every earlier row, stays on the CPU).
std::string tile_query_unsupported(const Context& ctx, const Variant& v, const Problem& p);

// Computes the tile of `r` (a result of v on p, from any backend) into `image`, resized to the
// produced cell count (TileRequest w/h clamped to the tile's extent). Returns GPU seconds.
// Throws Error(InvalidArgument) for bad requests, Error(Unsupported) per tile_query_unsupported.
double tile_probabilities_to_image(Context& ctx, const Variant& v, const Problem& p,
                                   const Result& r, const TileRequest& t, TileImage& image);

// Convenience: the same into a temporary image, read back to the host.
Tile tile_probabilities_vulkan(std::shared_ptr<Context> ctx, const Variant& v, const Problem& p,
                               const Result& r, const TileRequest& t);

}  // namespace attn::vk
