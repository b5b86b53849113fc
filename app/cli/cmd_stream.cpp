// `attnscope stream`: teacher-forced streaming perplexity under KV-cache policies, a thin shell
// over app/core/decode/stream.h. "K/V bytes" is what the cache's rows allocated in the policy's
// storage format at the end (measured from its buffers, KvCache::bytes()).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/decode/stream.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open text file");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class StreamCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  // The command line's own mistakes, before the model loads.
  void check_options() const;
  // The tokens to stream: --ids, or the text tokenised whole; --bos puts the model's first.
  std::vector<int32_t> stream_tokens(const core::Model& model) const;
  core::StreamOptions stream_options(int tokens) const;
  static void print_result(const core::StreamResult& r, const std::string& model);
  void write_outputs(const core::StreamResult& r) const;

  struct Options {
    std::string model, text, text_file, json_out, csv_out, dump, figure, timeline;
    FigureSizeOptions size;
    int timeline_layer = 0, timeline_head = 0;
    std::vector<int32_t> ids;
    std::vector<std::string> policies;
    int prefill = 1, max_tokens = 0, threads = 0;
    bool bos = false;
  } o;  // bound by add_options
};

void StreamCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model);
  auto* text = cmd.add_option("--text", o.text, "Text to stream (tokenised whole)");
  auto* file = cmd.add_option("--text-file", o.text_file, "File whose text to stream");
  auto* ids = cmd.add_option("--ids", o.ids,
                             "Token ids, used exactly as given (spaces or commas between them)")
                  ->delimiter(',');
  text->excludes(file)->excludes(ids);
  file->excludes(ids);
  cmd.add_option("-p,--policy", o.policies,
                 "KV-cache policy, e.g. 'kv_streaming(sinks=4,window=252)' (repeatable; "
                 "default kv_full; `attnscope variants --kv` lists them)");
  cmd.add_flag("--bos", o.bos,
               "Start the stream with the model's beginning-of-text token (config bos_token_id)");
  cmd.add_option("--prefill", o.prefill, "Tokens read in the first pass")
      ->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--max-tokens", o.max_tokens, "Stream at most this many tokens (0 = all)")
      ->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  add_json_option(cmd, o.json_out, "Write curves and summaries");
  cmd.add_option("--csv", o.csv_out, "Write one row per policy and token as CSV");
  cmd.add_option("--dump", o.dump, "Write DIR/<i>/{spec.txt,logits.npy,nll.npy} per policy");
  cmd.add_option("--figure", o.figure, "Perplexity against tokens streamed (.png/.svg/.pdf)");
  cmd.add_option("--timeline", o.timeline,
                 "What the cache holds at every step, one panel per policy (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
  cmd.add_option("--timeline-layer", o.timeline_layer, "Layer the timeline shows")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--timeline-head", o.timeline_head, "KV head the timeline shows")
      ->check(CLI::NonNegativeNumber);
}

int StreamCommand::run() {
  check_options();
  o.model = model_or_default(o.model);
  check_model_path(o.model, o.model);
  std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  usage(o.timeline_layer < model->info().n_layers,
        "--timeline-layer " + std::to_string(o.timeline_layer) + ": the model has " +
            std::to_string(model->info().n_layers) + " layers");
  usage(o.timeline_head < model->info().n_kv_heads,
        "--timeline-head " + std::to_string(o.timeline_head) + ": the model has " +
            std::to_string(model->info().n_kv_heads) + " KV heads");
  const std::vector<int32_t> stream = stream_tokens(*model);
  const int total =
      o.max_tokens > 0 ? std::min<int>(o.max_tokens, int(stream.size())) : int(stream.size());
  const core::StreamResult r = core::run_stream(*model, o.model, stream, stream_options(total));
  print_result(r, o.model);
  write_outputs(r);
  return kExitOk;
}

void StreamCommand::check_options() const {
  usage(!o.text.empty() || !o.text_file.empty() || !o.ids.empty(),
        "give the stream: --text, --text-file or --ids");
  check_kv_policies(o.policies, "--policy");
  for (const auto& [opt, path] : {std::pair{"--figure", o.figure}, {"--timeline", o.timeline}}) {
    check_figure_option(path, opt);
  }
}

std::vector<int32_t> StreamCommand::stream_tokens(const core::Model& model) const {
  std::vector<int32_t> stream =
      !o.ids.empty()
          ? o.ids
          : core::tokenize_stream(model, o.text_file.empty() ? o.text : read_file(o.text_file));
  if (o.bos) {
    const auto& bos = model.config().bos_token_id;
    if (!bos) throw Error(ErrorCode::InvalidArgument, o.model + " has no bos_token_id");
    stream.insert(stream.begin(), int32_t(*bos));
  }
  return stream;
}

// `tokens`: how many the progress line counts to.
core::StreamOptions StreamCommand::stream_options(int tokens) const {
  core::StreamOptions so;
  so.policies = o.policies;
  so.prefill = o.prefill;
  so.max_tokens = o.max_tokens;
  so.threads = o.threads;
  so.keep_logits = !o.dump.empty();
  so.record_cache = !o.timeline.empty();
  if (isatty(fileno(stderr)))  // a progress line for people, not for logs
    so.progress = [tokens](int policy, int done) {
      std::fprintf(stderr, "\rpolicy %d: %d / %d tokens", policy + 1, done, tokens);
      if (done >= tokens) std::fprintf(stderr, "\n");
      return true;
    };
  return so;
}

void StreamCommand::print_result(const core::StreamResult& r, const std::string& model) {
  std::printf("%s (%s, context %d): %zu tokens, prefill %d\n", model.c_str(), r.model_type.c_str(),
              r.context, r.ids.size(), r.prefill);
  Table t({"policy", "tokens", "ppl", "ppl (last 1000)", "entries", "K/V bytes", "ms/step",
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
}

void StreamCommand::write_outputs(const core::StreamResult& r) const {
  if (!o.json_out.empty()) {
    write_json_file(o.json_out, core::stream_json(r));
  }
  if (!o.csv_out.empty()) core::write_stream_csv(r, o.csv_out);
  if (!o.dump.empty()) core::write_stream_dump(r, o.dump);
  if (!o.figure.empty()) {
    const core::FigureData fd = core::stream_figure(r);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
  if (!o.timeline.empty()) {
    const core::FigureData fd = core::cache_figure(r, o.timeline_layer, o.timeline_head);
    fig::export_figure(fd, o.timeline, figure_size(o.size, fd, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.timeline.c_str());
  }
}

}  // namespace

std::unique_ptr<Command> make_stream_command() {
  return std::make_unique<StreamCommand>();
}

}  // namespace attn::cli
