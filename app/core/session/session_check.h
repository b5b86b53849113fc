// Whether a load would succeed, decided before anything changes: a session (file or lesson step),
// a model, an image, a tensors folder. Each check reads what the load will read (the variant
// parser, the model loader, the image decoder, the .npy reader) and throws attn::Error whose
// message names the source and the field, so a client can refuse the load and keep its state.
//
//   const SessionCheck c = check_session_opens(s, "paper.attnscope.json", "paper.attnscope.json");
//   for (const std::string& w : c.warnings) show(w);  // opens anyway (a changed model file)
//   apply(s);                                         // only now
#pragma once
#include <string>
#include <vector>

#include "app/core/session/session.h"

namespace attn::core {

// What opens anyway but deserves a word: a model or image file that differs from the one the
// session was saved with (results may not match).
struct SessionCheck {
  std::vector<std::string> warnings;
};

// Checks everything the analysis of `s` will need: every variant spec and backend resolves
// (a misspelt piece gets "did you mean"), the ablation's heads and mode parse, the model loads
// and fits the input (an image needs a vision model, a text a text model), the image decodes,
// the tensors folder reads, and the selected layer, head and ablated heads exist. Throws
// attn::Error "<source>: <field>: <why>". `session_path` locates relative paths ("" = none).
SessionCheck check_session_opens(const Session& s, const std::string& source,
                                 const std::string& session_path = "");

// The model `id_or_dir` ("default-text", "default-vision" or a folder) loads; returns whether it
// is a vision model. Throws attn::Error naming the model.
bool check_model_opens(const std::string& id_or_dir);
// The image at `path` decodes. Throws attn::Error naming the file.
void check_image_opens(const std::string& path);
// The folder holds q.npy, k.npy, v.npy (or layer `layer` of a hook dump) that read as one
// problem. Throws attn::Error naming the folder and the file.
void check_tensors_open(const std::string& dir, int layer = -1);

}  // namespace attn::core
