// `heads --shard i/n`: a shard's atlas samples (and its ablation scan's windows) as JSON, read
// back, and merged into the samples of the whole input, so that `heads --merge` reports what one
// run over every window and sequence reports, to the last digit.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/core/heads/head_atlas.h"
#include "app/core/heads/interventions.h"

namespace attn::core {

struct AtlasShard {
  AtlasSamples atlas;
  std::optional<AblationSamples> ablation;  // with --ablate-each
};

// JSON (kind attnscope-atlas-shard, version 1); NaN scores as null.
nlohmann::json atlas_shard_json(const AtlasShard& s);
// Throws Error(Format) naming `source` for another kind, version or shape.
AtlasShard atlas_shard_from_json(const nlohmann::json& j, const std::string& source);
// Throws Error(Format) when the shards measured another model or protocol, hold a sample twice,
// or leave one out (a shard is missing), or only some of them ran the ablation scan.
AtlasShard merge_atlas_shards(const std::vector<AtlasShard>& shards);

}  // namespace attn::core
