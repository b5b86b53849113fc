// The verb table: every verb of attnscope, one line each, in the order `attnscope --help` lists
// them. A line X(name, "description") names the verb and the factory make_<name>_command() that
// its file app/cli/cmd_<name>.cpp defines; the factories are declared from the same lines.
#include "app/cli/commands.h"

// clang-format off
#define ATTN_CLI_VERBS(X)                                                                          \
  X(variants, "List every variant piece with parameters and source")                               \
  X(run, "Run variants on random Q/K/V and compare with dense")                                    \
  X(demo, "Compare a spread of variants on a sample problem")                                      \
  X(analyze, "Run a model on text, token ids or an image; compare variants layer by layer and "    \
             "end to end")                                                                         \
  X(render, "Draw a view of a session as a figure (PNG, SVG, PDF) without a display")             \
  X(sweep, "Sweep variant parameters on one input: cost vs accuracy table (CSV) and plot")         \
  X(stream, "Stream a long text token by token under KV-cache policies: perplexity, cache size")   \
  X(generate, "Sample a continuation with a KV-cache policy")                                      \
  X(precision, "Attention arithmetic in bf16/fp16/f32, materialised vs tiled, against fp64")       \
  X(heads, "Head-role atlas: previous-token, induction, sink, no-op, ... per layer and head")      \
  X(patch, "Activation patching: which heads or positions carry the clean run's answer")       \
  X(attribute, "Attention beside attribution: rollout, flow, gradients, AttnLRP, occlusion, "    \
               "faithfulness curves")                                                              \
  X(qk, "One head's queries and keys in one 2-D map (PCA or t-SNE), AttentionViz-style")         \
  X(explain_head, "One head's arithmetic step by step on a short text: X, Q, K, V, scores, "     \
                  "mask, softmax, output, as tables and a figure")
// clang-format on

namespace attn::cli {

#define ATTN_DECLARE_VERB(name, description) std::unique_ptr<Command> make_##name##_command();
ATTN_CLI_VERBS(ATTN_DECLARE_VERB)
#undef ATTN_DECLARE_VERB

// A verb's name as typed: its identifier in the table with '_' spelt '-' (explain_head is
// `attnscope explain-head`), held in a template parameter object (static storage).
template <size_t N>
struct VerbName {
  char s[N];
  constexpr VerbName(const char (&in)[N]) {
    for (size_t i = 0; i < N; ++i) s[i] = in[i] == '_' ? '-' : in[i];
  }
};
template <VerbName V>
constexpr const char* spelt() {
  return V.s;
}

#define ATTN_VERB_ROW(name, description) \
  Verb{spelt<VerbName(#name)>(), description, &make_##name##_command},
constexpr Verb kVerbs[] = {ATTN_CLI_VERBS(ATTN_VERB_ROW)};
#undef ATTN_VERB_ROW

std::span<const Verb> verbs() {
  return kVerbs;
}

std::vector<std::unique_ptr<Command>> add_verbs(CLI::App& app, Action& action) {
  std::vector<std::unique_ptr<Command>> commands;
  for (const Verb& verb : verbs()) {
    CLI::App* sub = app.add_subcommand(verb.name, verb.description);
    Command* command = commands.emplace_back(verb.make()).get();
    command->add_options(*sub);
    sub->callback([&action, command] { action = [command] { return command->run(); }; });
  }
  return commands;
}

}  // namespace attn::cli
