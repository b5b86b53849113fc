// `attnscope stream` (teacher-forced streaming perplexity under KV-cache policies) and
// `attnscope generate` (sampling with a policy): thin shells over app/core/decode/stream.h.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/decode/decode_trace.h"
#include "app/core/decode/stream.h"
#include "app/figures/figure.h"
#include "compute/error.h"
#include "compute/kv/kv_policy.h"
#include "models/arch/default_models.h"

namespace attn::cli {
using core::FigureData;
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open text file");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void check_policies(const std::vector<std::string>& specs) {
  for (const std::string& s : specs) {
    try {
      make_kv_policy(s);
    } catch (const Error& e) {
      throw UsageError("--policy: " + std::string(e.what()));
    }
  }
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fixed(b, u == 0 ? 0 : 1) + " " + units[u];
}

}  // namespace

void add_stream_command(CLI::App& app, Action& action) {
  struct Opts {
    std::string model, text, text_file, json_out, csv_out, dump, figure, timeline;
    int timeline_layer = 0, timeline_head = 0;
    std::vector<int32_t> ids;
    std::vector<std::string> policies;
    int prefill = 1, max_tokens = 0, threads = 0;
    bool bos = false;
  };
  static Opts o;
  auto* cmd = app.add_subcommand(
      "stream",
      "Stream a long text token by token under KV-cache policies: perplexity, cache size");
  cmd->add_option("--model", o.model, "Model folder or embedded model name")->required();
  auto* text = cmd->add_option("--text", o.text, "Text to stream (tokenised whole)");
  auto* file = cmd->add_option("--text-file", o.text_file, "File whose text to stream");
  auto* ids = cmd->add_option("--ids", o.ids, "Token ids, used exactly as given");
  text->excludes(file)->excludes(ids);
  file->excludes(ids);
  cmd->add_option("-p,--policy", o.policies,
                  "KV-cache policy, e.g. 'kv_streaming(sinks=4,window=252)' (repeatable; "
                  "default kv_full; `attnscope variants --kv` lists them)");
  cmd->add_flag("--bos", o.bos,
                "Start the stream with the model's beginning-of-text token (config bos_token_id)");
  cmd->add_option("--prefill", o.prefill, "Tokens read in the first pass")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-tokens", o.max_tokens, "Stream at most this many tokens (0 = all)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--threads", o.threads, "Worker threads (0 = all)");
  cmd->add_option("--json", o.json_out, "Write curves and summaries as JSON");
  cmd->add_option("--csv", o.csv_out, "Write one row per policy and token as CSV");
  cmd->add_option("--dump", o.dump, "Write DIR/<i>/{spec.txt,logits.npy,nll.npy} per policy");
  cmd->add_option("--figure", o.figure, "Perplexity against tokens streamed (.png/.svg/.pdf)");
  cmd->add_option("--timeline", o.timeline,
                  "What the cache holds at every step, one panel per policy (.png/.svg/.pdf)");
  cmd->add_option("--timeline-layer", o.timeline_layer, "Layer the timeline shows")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeline-head", o.timeline_head, "KV head the timeline shows")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([&action] {
    action = [] {
      usage(!o.text.empty() || !o.text_file.empty() || !o.ids.empty(),
            "give the stream: --text, --text-file or --ids");
      check_policies(o.policies);
      for (const auto& [opt, path] :
           {std::pair{"--figure", o.figure}, {"--timeline", o.timeline}}) {
        if (path.empty()) continue;
        try {
          fig::check_figure_path(path);
        } catch (const Error& e) {
          throw UsageError(std::string(opt) + ": " + e.what(), e.code());
        }
      }
      check_model_path(o.model, o.model);
      std::shared_ptr<const Model> model = core::cached_model(o.model);
      usage(o.timeline_layer < model->info().n_layers,
            "--timeline-layer " + std::to_string(o.timeline_layer) + ": the model has " +
                std::to_string(model->info().n_layers) + " layers");
      usage(o.timeline_head < model->info().n_kv_heads,
            "--timeline-head " + std::to_string(o.timeline_head) + ": the model has " +
                std::to_string(model->info().n_kv_heads) + " KV heads");
      std::vector<int32_t> stream =
          !o.ids.empty() ? o.ids
                         : core::tokenize_stream(
                               *model, o.text_file.empty() ? o.text : read_file(o.text_file));
      if (o.bos) {
        const auto& bos = model->config().bos_token_id;
        if (!bos) throw Error(ErrorCode::InvalidArgument, o.model + " has no bos_token_id");
        stream.insert(stream.begin(), int32_t(*bos));
      }
      core::StreamOptions so;
      so.policies = o.policies;
      so.prefill = o.prefill;
      so.max_tokens = o.max_tokens;
      so.threads = o.threads;
      so.keep_logits = !o.dump.empty();
      so.record_cache = !o.timeline.empty();
      const int total =
          o.max_tokens > 0 ? std::min<int>(o.max_tokens, int(stream.size())) : int(stream.size());
      if (isatty(fileno(stderr)))  // a progress line for people, not for logs
        so.progress = [total](int policy, int tokens) {
          std::fprintf(stderr, "\rpolicy %d: %d / %d tokens", policy + 1, tokens, total);
          if (tokens >= total) std::fprintf(stderr, "\n");
          return true;
        };
      const core::StreamResult r = core::run_stream(*model, o.model, stream, so);
      std::printf("%s (%s, context %d): %zu tokens, prefill %d\n", o.model.c_str(),
                  r.model_type.c_str(), r.context, r.ids.size(), r.prefill);
      Table t({"policy", "tokens", "ppl", "ppl (last 1000)", "entries", "cache", "ms/step",
               "policy ms"});
      for (const core::PolicyRun& p : r.runs) {
        const int n = int(p.nll.size());
        t.add({p.spec, std::to_string(p.tokens), fixed(p.perplexity(), 3),
               fixed(p.perplexity(n - 1000, n), 3),
               std::to_string(p.entries.empty() ? 0 : p.entries.back()),
               human_bytes(p.bytes.empty() ? 0 : p.bytes.back()), fixed(p.step_seconds() * 1e3, 3),
               fixed(p.policy_seconds * 1e3 / std::max(1, p.tokens), 4)});
      }
      t.print();
      for (const core::PolicyRun& p : r.runs)
        if (!p.error.empty())
          std::printf("note: %s stopped after %d tokens: %s\n", p.spec.c_str(), p.tokens,
                      p.error.c_str());
      if (!o.json_out.empty()) {
        std::ofstream f(o.json_out);
        require(bool(f), ErrorCode::Io, o.json_out + ": cannot write");
        f << core::stream_json(r).dump(1) << "\n";
        require(bool(f), ErrorCode::Io, o.json_out + ": write failed");
      }
      if (!o.csv_out.empty()) core::write_stream_csv(r, o.csv_out);
      if (!o.dump.empty()) core::write_stream_dump(r, o.dump);
      if (!o.figure.empty()) {
        const FigureData fd = core::stream_figure(r);
        fig::export_figure(fd, o.figure, fig::fit_height(fd, {2100, 0, 300}));
        std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
      }
      if (!o.timeline.empty()) {
        const FigureData fd = core::cache_figure(r, o.timeline_layer, o.timeline_head);
        fig::export_figure(fd, o.timeline, fig::fit_height(fd, {2100, 0, 300}));
        std::fprintf(stderr, "wrote %s\n", o.timeline.c_str());
      }
      return kExitOk;
    };
  });
}

void add_generate_command(CLI::App& app, Action& action) {
  struct Opts {
    std::string model, prompt, policy = "kv_full";
    std::vector<int32_t> ids;
    core::SamplingOptions s;
    int threads = 0;
    std::string trace_out, figure;
    int layer = 0, head = 0, step = -1;
  };
  static Opts o;
  auto* cmd = app.add_subcommand("generate", "Sample a continuation with a KV-cache policy");
  cmd->add_option("--model", o.model, "Model folder or embedded model name")->required();
  auto* prompt = cmd->add_option("--prompt", o.prompt, "Prompt text");
  cmd->add_option("--ids", o.ids, "Prompt token ids")->excludes(prompt);
  cmd->add_option("-p,--policy", o.policy, "KV-cache policy (default kv_full)");
  cmd->add_option("--temperature", o.s.temperature, "0 = greedy")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o.s.top_k, "Keep the k likeliest tokens (0 = all)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", o.s.top_p, "Keep the smallest set with this mass (1 = all)")
      ->check(CLI::Range(1e-9, 1.0));
  cmd->add_option("--seed", o.s.seed, "Random seed");
  cmd->add_option("--max-new-tokens", o.s.max_new_tokens, "Tokens to sample")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--threads", o.threads, "Worker threads (0 = all)");
  cmd->add_option("--trace", o.trace_out,
                  "Write each step's attention over the cache and what it held (JSON; "
                  "--layer's attention, every layer's cache)");
  cmd->add_option("--figure", o.figure, "Decode figure of --layer/--head (PNG, SVG or PDF)");
  cmd->add_option("--layer", o.layer, "Layer of --trace and --figure (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--head", o.head, "Query head of --figure (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--step", o.step, "Step the figure shows in detail (default: the last)")
      ->check(CLI::Range(-1, core::kMaxTraceSteps - 1));
  cmd->callback([&action] {
    action = [] {
      usage(!o.prompt.empty() || !o.ids.empty(), "give the prompt: --prompt or --ids");
      const bool tracing = !o.trace_out.empty() || !o.figure.empty();
      usage(!tracing || (o.s.max_new_tokens >= 1 && o.s.max_new_tokens <= core::kMaxTraceSteps),
            "--trace and --figure trace at most " + std::to_string(core::kMaxTraceSteps) +
                " new tokens (and at least 1)");
      check_policies({o.policy});
      check_model_path(o.model, o.model);
      std::shared_ptr<const Model> model = core::cached_model(o.model);
      const Tokenizer* tok = model->tokenizer();
      const std::vector<int32_t> prompt_ids =
          o.ids.empty() ? core::tokenize_stream(*model, o.prompt) : o.ids;
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
      const core::Generation g =
          core::generate(*model, prompt_ids, o.policy, o.s, o.threads, print_token);
      std::printf("\n");
      double lp = 0;
      for (float x : g.logprob) lp += x;
      std::fprintf(stderr,
                   "%zu tokens under %s: %.2f ms/token, mean log p %.3f, cache %lld entries "
                   "(%s)\n",
                   g.ids.size(), make_kv_policy(o.policy).spec.c_str(), g.seconds_per_token * 1e3,
                   g.ids.empty() ? 0.0 : lp / double(g.ids.size()), (long long)g.entries,
                   human_bytes(g.bytes).c_str());
      if (tracing && !g.ids.empty()) {
        // The same tokens again, teacher-forced (decoding is deterministic): each step reads one
        // token, from the prompt's last, and chose the token after it.
        std::vector<int32_t> all = prompt_ids;
        all.insert(all.end(), g.ids.begin(), g.ids.end());
        core::TraceOptions to;
        to.policy = o.policy;
        to.prefill = int(prompt_ids.size()) - 1;
        to.steps = int(g.ids.size());
        to.threads = o.threads;
        to.layer = o.layer;
        usage(o.layer < model->info().n_layers && o.head < model->info().n_heads,
              "--layer/--head: the model has " + std::to_string(model->info().n_layers) +
                  " layers of " + std::to_string(model->info().n_heads) + " heads");
        const core::DecodeTrace t = core::trace_decode(*model, o.model, all, to);
        if (!o.trace_out.empty()) {
          std::ofstream f(o.trace_out);
          require(bool(f), ErrorCode::Io, o.trace_out + ": cannot write");
          f << core::trace_json(t, o.layer).dump() << "\n";
          require(bool(f), ErrorCode::Io, o.trace_out + ": write failed");
          std::fprintf(stderr, "wrote %s\n", o.trace_out.c_str());
        }
        if (!o.figure.empty()) {
          usage(o.step < int(t.steps.size()), "--step " + std::to_string(o.step) +
                                                  ": the trace has " +
                                                  std::to_string(t.steps.size()) + " steps");
          const FigureData fd = core::decode_figure(t, o.layer, o.head, o.step);
          fig::export_figure(fd, o.figure, fig::fit_height(fd, {2100, 0, 300}));
          std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
        }
      }
      return kExitOk;
    };
  });
}

}  // namespace attn::cli
