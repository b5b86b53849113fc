// The app's step-through view of one head, from the core: the stages of
// app/core/teaching/head_steps.h run on the model and input of an analysis, and the renderer's
// StepsDoc filled from them (render/document.h). The GUI calls steps_for_analysis on its job
// runner; an input the step-through does not take gives a document with a message, not an error.
//
//   render::StepsDoc d = core::steps_for_analysis(*analysis, session.layer, session.head);
#pragma once
#include <memory>

#include "app/core/analysis/analysis.h"
#include "app/core/teaching/head_steps.h"
#include "render/document.h"

namespace attn::core {

// The view's document of computed steps; `model` names the model in the title.
render::StepsDoc steps_doc(const HeadSteps& s, const std::string& model);

// The steps of (layer, head) on the analysis's model and text, with the session's first variant
// substituted when it has one. A document with `message` set (and no stages) when the analysis
// has no text model, the input is empty or longer than kHeadStepsMaxTokens, or the head does
// not exist; Error(Unsupported) becomes a message too.
render::StepsDoc steps_for_analysis(const Analysis& a, int layer, int head);

// The same, with the steps the document was filled from (null when it carries a message
// instead): what the view's figure export (core::steps_figure) draws.
struct StepsRun {
  render::StepsDoc doc;
  std::shared_ptr<const HeadSteps> steps;
};
StepsRun steps_run_for_analysis(const Analysis& a, int layer, int head);

}  // namespace attn::core
