// `attnscope run`: variants side by side on a random problem of a chosen shape.
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "compute/error.h"
#include "compute/fallback.h"

namespace attn::cli {

namespace {

class RunCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  struct Options {
    std::vector<std::string> variants;
    int n = 1024, n_q = 0, heads = 4, kv_heads = 0, d = 64, threads = 0;
    bool bidirectional = false, no_metrics = false;
    uint64_t seed = 1;
    std::string backend = "cpu", json, precision = "f32";
  } o;  // bound by add_options
};

void RunCommand::add_options(CLI::App& cmd) {
  add_variant_option(cmd, o.variants, "Variant spec, e.g. 'window(size=256)'")->required();
  cmd.add_option("-n,--tokens", o.n, "Keys (and queries unless --queries)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--queries", o.n_q, "Queries (the last ones of the sequence)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--n-heads", o.heads, "Query heads")->check(CLI::Range(1, 256));
  cmd.add_option("--n-kv-heads", o.kv_heads, "Key/value heads (GQA); default = --n-heads")
      ->check(CLI::Range(1, 256));
  // Old spellings: --heads is a list of heads in every other verb.
  mark_deprecated(cmd.add_option("--n", o.n)->check(CLI::Range(1, 1 << 20)), "-n/--tokens");
  mark_deprecated(cmd.add_option("--nq", o.n_q)->check(CLI::Range(1, 1 << 20)), "--queries");
  mark_deprecated(cmd.add_option("--heads", o.heads)->check(CLI::Range(1, 256)), "--n-heads");
  mark_deprecated(cmd.add_option("--kv-heads", o.kv_heads)->check(CLI::Range(1, 256)),
                  "--n-kv-heads");
  cmd.add_option("-d,--dim", o.d, "Head dimension")->check(CLI::Range(1, 1024));
  cmd.add_flag("--bidirectional", o.bidirectional, "Bidirectional instead of causal");
  cmd.add_option("--backend", o.backend,
                 "reference | cpu | vulkan (falls back to cpu per variant)");
  cmd.add_option("--seed", o.seed, "Random seed");
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  cmd.add_option("--precision", o.precision,
                 "Storage of Q, K, V in the kernels: f32 | bf16 | f16 (scores, softmax and sums "
                 "in f32); rows then show dense in that precision against f32 dense");
  cmd.add_flag("--no-metrics", o.no_metrics, "Skip metrics against dense (faster)");
  add_json_option(cmd, o.json, "Write the results");
}

int RunCommand::run() {
  // The command line first: conflicting shapes, bad specs, an unknown backend.
  const int kv = o.kv_heads ? o.kv_heads : o.heads;
  usage(o.heads % kv == 0, "--n-heads " + std::to_string(o.heads) +
                               " is not a multiple of --n-kv-heads " + std::to_string(kv));
  usage(o.n_q <= o.n, "--queries " + std::to_string(o.n_q) + " exceeds -n " + std::to_string(o.n) +
                          " (the queries are the last of the keys)");
  check_variant_specs(o.variants, "-v/--variant");
  check_backend(o.backend);
  Precision precision = Precision::F32;
  try {
    precision = parse_precision(o.precision);
  } catch (const Error& e) {
    usage(false, std::string("--precision: ") + e.what());
  }
  Problem p = random_problem(o.heads, o.kv_heads ? o.kv_heads : o.heads, o.n_q ? o.n_q : o.n, o.n,
                             o.d, !o.bidirectional, o.seed);
  auto backend = make_backend_with_fallback(o.backend);
  RunOptions opt;
  opt.threads = o.threads;
  opt.precision = precision;
  Comparison c = compare_variants(p, o.variants, *backend, !o.no_metrics, opt);
  print_comparison(p, c);
  if (auto* fb = dynamic_cast<FallbackBackend*>(backend.get())) {
    for (const auto& n : fb->notes()) std::fprintf(stderr, "note: %s\n", n.c_str());
  }
  if (!o.json.empty()) write_json_output(o.json, comparison_json(p, c).dump(2));
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_run_command() {
  return std::make_unique<RunCommand>();
}

}  // namespace attn::cli
