// Where the embedded default models live: "default-text", "teaching-text" and "default-vision"
// name assets/models/<name> of the source tree this binary was built from, or
// <prefix>/share/attnscope/models/... of an installed copy. ATTNSCOPE_MODELS (a folder holding
// them) is looked at first.
#pragma once
#include <string>
#include <vector>

namespace attn::models {

// "default-text", "teaching-text" (a second GPT-2 on the same tokenizer, trained so that
// induction, previous-token and sink heads are strong) and "default-vision".
const std::vector<std::string>& default_model_names();

// True for the names above.
bool is_default_model_name(const std::string& name);

// The message for a model `name` that is neither an embedded model's name nor an existing
// folder: it says so, suggests the closest embedded name ("did you mean default-text?") and
// lists them all, on one line.
std::string missing_model_message(const std::string& name);

// `name` itself when it is not a default model name; otherwise the first existing folder of
// the candidates above. Throws Error(Io) listing every place looked at when none exists.
std::string resolve_model_dir(const std::string& name);

}  // namespace attn::models
