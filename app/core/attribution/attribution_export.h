// Attribution results as files and inputs as the model takes them: what `attnscope attribute`,
// the app's Attribution view and the figure share.
//
//   JSON   {model, variant, target: {position, id, label, foil, foil_label, z, probability},
//           units: {kind, labels, ranked, grid}, baseline, methods: [{id, title, scores, ...}],
//           agreement: [{a, b, kendall_tau, spearman, top_k_overlap, k}],
//           faithfulness: {fractions, curves: [{order, z_deletion, ..., aopc_p}]}}
//   dump   DIR/<method>/attribution.npy f32 [units] (images: [grid_h, grid_w]);
//          DIR/<method>/maps.npy f32 [L, N, N] where the method has maps; heads.npy f32 [L, H, N]
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "app/core/attribution/attribution.h"
#include "app/core/attribution/faithfulness.h"
#include "app/core/export/figure_data.h"

namespace attn::core {

// A text encoded for the model (cut to its context, the notice in `notice`), token ids checked
// against its vocabulary, or an image file loaded and preprocessed. Throws Error(InvalidArgument)
// for a text model given an image or the reverse, and as the encoders and loaders throw.
// `bos`: the model's beginning-of-text token (config bos_token_id) first, as models trained on
// documents that start with it expect (Error(InvalidArgument) when the config names none).
models::ModelInput attribution_text_input(const models::Model& model, const std::string& text,
                                          const std::string& source, std::string* notice,
                                          bool bos = false);
models::ModelInput attribution_ids_input(const models::Model& model,
                                         const std::vector<int32_t>& ids, bool bos = false);
models::ModelInput attribution_image_input(const models::Model& model, const std::string& path);
models::ModelInput attribution_image8_input(const models::Model& model,
                                            const models::Image8& image);

nlohmann::json to_json(const Attribution& a);
nlohmann::json to_json(const std::vector<RankAgreement>& r);
nlohmann::json to_json(const Faithfulness& f);

// The "attribution" figure's data: every method's scores (text: over the ranked tokens), the
// rank agreement, the deletion curves when `f` is given (may be null); `in` supplies an image's
// pixels. Title and subtitle name the target and the model.
FigureData attribution_figure(const Attribution& a, const std::vector<RankAgreement>& agree,
                              const Faithfulness* f, const models::ModelInput& in,
                              const std::string& model_name);

// Writes the dump described above; returns the files written. Throws Error(Io).
std::vector<std::string> dump_attribution(const Attribution& a, const std::string& dir);

}  // namespace attn::core
