// Writes what a forward pass captured as NumPy files, one per hook, named by the hook:
//   blocks.{l}.attn.pattern.npy  f32 [heads, N, N]     (every hook in hooks.h, same shapes)
//   logits.npy                   f32 [N, vocab] or [classes]
//   hidden.npy                   f32 [N, hidden]       last hidden state
//   ids.npy                      i32 [N]               (text input)
//   pixels.npy                   f32 [C, H, W]         (image input)
//   labels.json                  ["tok", ...]          token labels [N]
// so that load_problem_dir(dir, layer) and NumPy read them back.
#pragma once
#include <string>
#include <vector>

#include "models/arch/model.h"

namespace attn::models {

// Creates `dir` when needed; returns the files written. `only`, when given, limits the hooks
// written to those it matches. Throws Error(Io) naming the file.
std::vector<std::string> dump_forward(const std::string& dir, const Capture& capture,
                                      const ModelInput& in, const ModelOutput& out,
                                      const std::vector<std::string>& labels,
                                      const HookSelection* only = nullptr);

}  // namespace attn::models
