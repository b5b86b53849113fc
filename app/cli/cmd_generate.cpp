// `attnscope generate`: samples a continuation with a KV-cache policy, printing tokens as they
// arrive, and optionally traces the decode (app/core/decode/decode_trace.h) as JSON and a figure.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/decode/decode_trace.h"
#include "app/core/decode/stream.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"
#include "compute/kv/kv_policy.h"

namespace attn::cli {
namespace {

class GenerateCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  // Samples from the prompt, printing each token as it arrives and a summary on stderr.
  core::Generation sample(const core::Model& model, const std::vector<int32_t>& prompt) const;
  // The same tokens again, teacher-forced, written to --trace and --figure.
  void trace(const core::Model& model, const std::vector<int32_t>& prompt,
             const core::Generation& g) const;

  struct Options {
    std::string model, prompt, policy = "kv_full";
    std::vector<int32_t> ids;
    core::SamplingOptions s;
    int threads = 0;
    std::string trace_out, figure;
    FigureSizeOptions size;
    int layer = 0, head = 0, step = -1;
  } o;  // bound by add_options
};

void GenerateCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model);
  auto* prompt = cmd.add_option("--prompt", o.prompt, "Prompt text");
  cmd.add_option("--ids", o.ids, "Prompt token ids (spaces or commas between them)")
      ->delimiter(',')
      ->excludes(prompt);
  cmd.add_option("-p,--policy", o.policy, "KV-cache policy (default kv_full)");
  cmd.add_option("--temperature", o.s.temperature, "0 = greedy")->check(CLI::Range(0.0, 100.0));
  cmd.add_option("--top-k", o.s.top_k, "Keep the k likeliest tokens (0 = all)")
      ->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--top-p", o.s.top_p, "Keep the smallest set with this mass (1 = all)")
      ->check(CLI::Range(1e-9, 1.0));
  cmd.add_option("--seed", o.s.seed, "Random seed");
  cmd.add_option("--max-new-tokens", o.s.max_new_tokens, "Tokens to sample")
      ->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  cmd.add_option("--trace", o.trace_out,
                 "Write each step's attention over the cache and what it held (JSON; "
                 "--layer's attention, every layer's cache)");
  cmd.add_option("--figure", o.figure, "Decode figure of --layer/--head (PNG, SVG or PDF)");
  add_figure_size_options(cmd, o.size);
  cmd.add_option("--layer", o.layer, "Layer of --trace and --figure (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--head", o.head, "Query head of --figure (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--step", o.step, "Step the figure shows in detail (default: the last)")
      ->check(CLI::Range(-1, core::kMaxTraceSteps - 1));
}

int GenerateCommand::run() {
  usage(!o.prompt.empty() || !o.ids.empty(), "give the prompt: --prompt or --ids");
  o.model = model_or_default(o.model);
  const bool tracing = !o.trace_out.empty() || !o.figure.empty();
  usage(!tracing || (o.s.max_new_tokens >= 1 && o.s.max_new_tokens <= core::kMaxTraceSteps),
        "--trace and --figure trace at most " + std::to_string(core::kMaxTraceSteps) +
            " new tokens (and at least 1)");
  check_kv_policies({o.policy}, "--policy");
  check_model_path(o.model, o.model);
  std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  const std::vector<int32_t> prompt_ids =
      o.ids.empty() ? core::tokenize_stream(*model, o.prompt) : o.ids;
  const core::Generation g = sample(*model, prompt_ids);
  if (tracing && !g.ids.empty()) trace(*model, prompt_ids, g);
  return kExitOk;
}

core::Generation GenerateCommand::sample(const core::Model& model,
                                         const std::vector<int32_t>& prompt) const {
  const core::Tokenizer* tok = model.tokenizer();
  // Prints each new token as it arrives: the whole continuation is decoded and only what is
  // new is written (byte-level BPE pieces join into characters across tokens).
  std::vector<int32_t> so_far;
  size_t printed = 0;
  const auto print_token = [&](int32_t id) {
    if (!tok) {
      std::printf(" %d", id);
    } else {
      so_far.push_back(id);
      const std::string text = tok->decode(so_far);
      if (text.size() > printed)
        std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
      printed = std::max(printed, text.size());
    }
    std::fflush(stdout);
  };
  std::printf("%s", o.ids.empty() ? o.prompt.c_str() : "");
  std::fflush(stdout);
  const core::Generation g = core::generate(model, prompt, o.policy, o.s, o.threads, print_token);
  std::printf("\n");
  std::fflush(stdout);  // the text's line ends before the summary (stderr) starts
  double lp = 0;
  for (float x : g.logprob) lp += x;
  std::fprintf(stderr,
               "%zu tokens under %s: %.2f ms/token, mean log p %.3f, cache %lld entries "
               "(%s)\n",
               g.ids.size(), make_kv_policy(o.policy).spec.c_str(), g.seconds_per_token * 1e3,
               g.ids.empty() ? 0.0 : lp / double(g.ids.size()), (long long)g.entries,
               human_bytes(g.bytes).c_str());
  return g;
}

void GenerateCommand::trace(const core::Model& model, const std::vector<int32_t>& prompt,
                            const core::Generation& g) const {
  // The same tokens again, teacher-forced (decoding is deterministic): each step reads one
  // token, from the prompt's last, and chose the token after it.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), g.ids.begin(), g.ids.end());
  core::TraceOptions to;
  to.policy = o.policy;
  to.prefill = int(prompt.size()) - 1;
  to.steps = int(g.ids.size());
  to.threads = o.threads;
  to.layer = o.layer;
  usage(o.layer < model.info().n_layers && o.head < model.info().n_heads,
        "--layer/--head: the model has " + std::to_string(model.info().n_layers) + " layers of " +
            std::to_string(model.info().n_heads) + " heads");
  const core::DecodeTrace t = core::trace_decode(model, o.model, all, to);
  if (!o.trace_out.empty()) {
    std::ofstream f(o.trace_out);
    require(bool(f), ErrorCode::Io, o.trace_out + ": cannot write");
    f << core::trace_json(t, o.layer).dump() << "\n";
    require(bool(f), ErrorCode::Io, o.trace_out + ": write failed");
    std::fprintf(stderr, "wrote %s\n", o.trace_out.c_str());
  }
  if (!o.figure.empty()) {
    usage(o.step < int(t.steps.size()), "--step " + std::to_string(o.step) + ": the trace has " +
                                            std::to_string(t.steps.size()) + " steps");
    const core::FigureData fd = core::decode_figure(t, o.layer, o.head, o.step);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
}

}  // namespace

std::unique_ptr<Command> make_generate_command() {
  return std::make_unique<GenerateCommand>();
}

}  // namespace attn::cli
