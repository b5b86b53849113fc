#include "app/core/teaching/steps_doc.h"

#include "compute/error.h"

namespace attn::core {

render::StepsDoc steps_doc(const HeadSteps& s, const std::string& model) {
  render::StepsDoc d;
  d.present = true;
  d.layer = s.layer;
  d.head = s.head;
  d.tokens = s.tokens;
  d.title = model + " \u00b7 layer " + std::to_string(s.layer) + ", head " +
            std::to_string(s.head) +
            (s.n_kv_heads != s.n_heads ? " (KV head " + std::to_string(s.kv_head) + ")" : "") +
            " \u00b7 " + s.variant + " \u00b7 " + std::to_string(s.n) +
            " tokens \u00b7 d = " + std::to_string(s.d) + ", hidden " + std::to_string(s.hidden);
  for (const StepStage& st : s.stages) {
    render::StepsMatrix m;
    m.id = st.id;
    m.title = st.title;
    m.note = st.note;
    m.hook = st.hook;
    m.rows = st.rows;
    m.cols = st.cols;
    m.key_columns = st.key_columns;
    m.col_labels = st.col_labels;
    m.values = st.values;
    m.dropped = st.dropped;
    m.how = st.how;
    d.stages.push_back(std::move(m));
  }
  return d;
}

render::StepsDoc steps_for_analysis(const Analysis& a, int layer, int head) {
  return steps_run_for_analysis(a, layer, head).doc;
}

StepsRun steps_run_for_analysis(const Analysis& a, int layer, int head) {
  StepsRun run;
  render::StepsDoc& d = run.doc;
  d.present = true;
  d.layer = layer;
  d.head = head;
  if (!a.model || a.vision() || a.input.ids.empty()) {
    d.message =
        "The step-through shows one head of a text model: open a text model and type a "
        "short text.";
    return run;
  }
  const int n = int(a.input.ids.size());
  if (std::string why = head_steps_refusal(n); !why.empty()) {
    d.message = why;
    return run;
  }
  try {
    ModelInput in = a.input;
    if (a.labels.size() == in.ids.size()) in.labels = a.labels;  // the display labels
    HeadStepsRequest r;
    r.layer = layer;
    r.head = head;
    if (!a.session.variants.empty()) r.variant = a.session.variants.front();
    auto steps = std::make_shared<const HeadSteps>(head_steps(*a.model, in, r));
    d = steps_doc(*steps, a.session.model.id);
    run.steps = std::move(steps);
  } catch (const Error& e) {
    d.message = e.what();
  }
  return run;
}

}  // namespace attn::core
