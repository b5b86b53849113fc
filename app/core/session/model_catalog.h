// The models/ types and services that the clients (app/cli, app/gui) hold or call, named in the
// core: the clients include app/core/ headers only, never models/ ones, so that models/ can
// change behind the core. The names are the models/ ones (aliases and using-declarations), so a
// client writes core::Model, core::Token, core::encode_for_model and gets exactly models/'s.
#pragma once
#include "models/arch/default_models.h"
#include "models/arch/dump.h"
#include "models/arch/hooks.h"
#include "models/arch/intervention.h"
#include "models/arch/model.h"
#include "models/arch/raw_tensors.h"
#include "models/arch/substitution.h"
#include "models/arch/text_input.h"
#include "models/tokenizers/tokenizer.h"

namespace attn::core {

// A loaded model (load it with cached_model(), analysis.h) and what it says about itself.
using Model = models::Model;
using ModelInfo = models::ModelInfo;
using ModelInput = models::ModelInput;
using ModelOutput = models::ModelOutput;
// Tokens with their byte spans, and the model folder's tokenizer.
using Token = models::Token;
using Tokenizer = models::Tokenizer;
// Text or ids prepared for a model: ids, labels, tokens, the truncation notice.
using TextInput = models::TextInput;
// Which hooks to capture or dump, and what a forward pass captured.
using HookSelection = models::HookSelection;
using Capture = models::Capture;
// Head edits and the end-to-end effect of an edited (or substituted) pass against the plain one.
using HeadEdit = models::HeadEdit;
using Intervention = models::Intervention;
using EndToEnd = models::EndToEnd;
// A variant substituted for dense attention in chosen layers and heads.
using Substitution = models::Substitution;
// The precision of the layers' matrix products: f32, or bf16 (AMX where the CPU has it).
using Matmul = models::Matmul;
using models::matmul_name;
using models::parse_matmul;

// The embedded models: "default-text", "teaching-text" and "default-vision", the test for them,
// and the message for a name that is neither one of them nor an existing folder.
using models::default_model_names;
using models::is_default_model_name;
using models::missing_model_message;

// A text (tokenised, labelled, cut to the context with a notice) or token ids (checked against
// the vocabulary) prepared for a model.
using models::encode_for_model;
using models::ids_for_model;

// "L3H2": a head's name in lists and messages.
using models::head_name;

// A forward pass's captured hooks written as NumPy files, one per hook (models/arch/dump.h).
using models::dump_forward;

// A folder of raw q.npy, k.npy, v.npy (or one layer of a --dump folder) as a Problem.
using models::load_problem_dir;
using RawTensorOptions = models::RawTensorOptions;

}  // namespace attn::core
