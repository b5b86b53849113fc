// Where the embedded default models live: "default-text" and "default-vision" name
// assets/models/default-text|default-vision of the source tree this binary was built from, or
// <prefix>/share/attnscope/models/... of an installed copy. ATTNSCOPE_MODELS (a folder holding
// them) is looked at first.
#pragma once
#include <string>

namespace attn {

// True for "default-text" and "default-vision".
bool is_default_model_name(const std::string& name);

// `name` itself when it is not a default model name; otherwise the first existing folder of
// the candidates above. Throws Error(Io) listing every place looked at when none exists.
std::string resolve_model_dir(const std::string& name);

}  // namespace attn
