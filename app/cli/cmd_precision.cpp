// `attnscope precision`: attention arithmetic in bf16 / fp16 / f32, materialised and tiled,
// with and without f32 accumulation, and storage alone in the format (what the real kernels do),
// against fp64 on the same inputs (compute/arith_precision.h): random ones, or a model's Q/K/V
// (--tensors, e.g. a layer of `analyze --dump`); beside them the cpu backend's kernels in each
// storage precision (RunOptions::precision) on those inputs.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/session/model_catalog.h"
#include "compute/arith_precision.h"
#include "compute/backend.h"
#include "compute/cpu/kernel_set.h"
#include "compute/error.h"
#include "compute/registry.h"

namespace attn::cli {

namespace {

class PrecisionCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  struct Options {
    int n = 1024, heads = 2, d = 64, tile = 64, threads = 0;
    uint64_t seed = 1;
    int tensors_layer = -1;
    bool bidirectional = false;
    std::string json, tensors;
  } o;  // bound by add_options
};

void PrecisionCommand::add_options(CLI::App& cmd) {
  cmd.add_option("-n,--tokens", o.n, "Tokens (queries and keys)")->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--n-heads", o.heads, "Heads")->check(CLI::Range(1, 64));
  mark_deprecated(cmd.add_option("--n", o.n)->check(CLI::Range(1, 1 << 16)), "-n/--tokens");
  mark_deprecated(cmd.add_option("--heads", o.heads)->check(CLI::Range(1, 64)), "--n-heads");
  cmd.add_option("-d,--dim", o.d, "Head dimension")->check(CLI::Range(1, 1024));
  cmd.add_option("--tile", o.tile, "Keys per tile of the tiled form")
      ->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--seed", o.seed, "Random seed");
  cmd.add_option("--threads", o.threads, "Worker threads of the kernels (0 = all)");
  cmd.add_flag("--bidirectional", o.bidirectional, "Bidirectional instead of causal");
  cmd.add_option("--tensors", o.tensors,
                 "Folder of q.npy, k.npy, v.npy [heads, tokens, head_dim] (a model's) instead of "
                 "random inputs");
  cmd.add_option("--tensors-layer", o.tensors_layer,
                 "Read blocks.L.attn.{q,k,v}.npy (an analyze --dump folder) instead of q/k/v.npy");
  add_json_option(cmd, o.json, "Write the table");
}

int PrecisionCommand::run() {
  usage(!o.tensors.empty() || o.tensors_layer < 0, "--tensors-layer applies to --tensors only");
  Problem p;
  if (o.tensors.empty()) {
    p = random_problem(o.heads, o.heads, o.n, o.n, o.d, !o.bidirectional, o.seed);
  } else {
    core::RawTensorOptions rto;
    rto.causal = !o.bidirectional;
    p = core::load_problem_dir(o.tensors, o.tensors_layer, rto);
  }
  const std::vector<double> ref = attention_fp64(p);
  Table t({"format", "accumulate", "materialised max", "materialised mean", "tiled max",
           "tiled mean", "tiled / materialised (mean)"});
  nlohmann::json rows = nlohmann::json::array();
  // Storage alone (Q, K, V rounded, the rest in f32), per format: the real kernels' model.
  std::map<ArithFormat, std::pair<ArithError, ArithError>> storage;
  for (ArithFormat f : {ArithFormat::F32, ArithFormat::Bf16, ArithFormat::Fp16})
    for (int mode : {0, 1, 2}) {  // 0: f32 accumulation, 1: format accumulation, 2: storage
      const bool acc = mode != 1, store = mode == 2;
      if (f == ArithFormat::F32 && mode != 0) continue;  // f32 accumulation is f32 already
      ArithOptions a{f, acc, false, o.tile, store};
      const ArithError m = arith_error(attention_in_precision(p, a), ref);
      a.tiled = true;
      const ArithError ti = arith_error(attention_in_precision(p, a), ref);
      if (store) storage[f] = {m, ti};
      const double ratio = m.mean_abs > 0 ? ti.mean_abs / m.mean_abs : 0;
      const std::string accumulate = store ? "f32, Q/K/V stored"
                                     : acc ? "f32"
                                           : arith_format_name(f);
      t.add({arith_format_name(f), accumulate, sci(m.max_abs), sci(m.mean_abs), sci(ti.max_abs),
             sci(ti.mean_abs), fixed(ratio, 2)});
      rows.push_back({{"format", arith_format_name(f)},
                      {"accumulate", acc ? "f32" : arith_format_name(f)},
                      {"storage_only", store},
                      {"materialised_max_abs", m.max_abs},
                      {"materialised_mean_abs", m.mean_abs},
                      {"tiled_max_abs", ti.max_abs},
                      {"tiled_mean_abs", ti.mean_abs},
                      {"tiled_over_materialised", ratio}});
    }
  storage[ArithFormat::F32] = {
      arith_error(attention_in_precision(p, {ArithFormat::F32}), ref),
      arith_error(attention_in_precision(p, {ArithFormat::F32, true, true, o.tile}), ref)};
  const std::string source =
      o.tensors.empty()
          ? "random inputs, seed " + std::to_string(o.seed)
          : o.tensors + (o.tensors_layer >= 0 ? " layer " + std::to_string(o.tensors_layer)
                                              : std::string());
  std::printf("attention output error against fp64: %d tokens, %d heads, d %d, %s, tile %d, %s\n",
              p.n_q, p.n_heads, p.d, p.causal ? "causal" : "bidirectional", o.tile, source.c_str());
  t.print();
  // The cpu backend's dense kernels in each storage precision on the same inputs, beside the
  // storage-alone simulation that models them: tiled (P rounded for P V) where bf16 runs on tile
  // products (AMX or vdpbf16ps), materialised (P in f32) where the kernels widen 16-bit rows to
  // f32.
  const cpu::KernelSet& ks = cpu::best_kernels();
  auto backend = make_backend("cpu");
  const Variant dense = make_variant("dense");
  Table k({"precision", "kernel max", "kernel mean", "simulated", "simulated mean",
           "kernel / simulated (mean)"});
  nlohmann::json kernels = nlohmann::json::array();
  for (Precision prec : {Precision::F32, Precision::Bf16, Precision::F16}) {
    RunOptions ro;
    ro.threads = o.threads;
    ro.precision = prec;
    const Result r = attn::run(dense, p, *backend, ro);
    const ArithError ke = arith_error(r.o, ref);
    const ArithFormat f = prec == Precision::Bf16  ? ArithFormat::Bf16
                          : prec == Precision::F16 ? ArithFormat::Fp16
                                                   : ArithFormat::F32;
    const bool tiled = prec == Precision::Bf16 && ks.tiles != cpu::TileUnit::None;
    const ArithError se = tiled ? storage[f].second : storage[f].first;
    const double ratio = se.mean_abs > 0 ? ke.mean_abs / se.mean_abs : 0;
    const std::string model = tiled ? "tiled, P stored" : "materialised";
    k.add({precision_name(r.stats.precision), sci(ke.max_abs), sci(ke.mean_abs), model,
           sci(se.mean_abs), fixed(ratio, 2)});
    kernels.push_back({{"precision", precision_name(r.stats.precision)},
                       {"kernel_set", ks.isa},
                       {"kernel_max_abs", ke.max_abs},
                       {"kernel_mean_abs", ke.mean_abs},
                       {"simulated", model},
                       {"simulated_max_abs", se.max_abs},
                       {"simulated_mean_abs", se.mean_abs},
                       {"kernel_over_simulated", ratio}});
  }
  std::printf("the cpu kernels (kernel set %s) in each storage precision, same inputs:\n", ks.isa);
  k.print();
  if (!o.json.empty())
    write_json_output(o.json, nlohmann::json{{"n", p.n_q},
                                             {"heads", p.n_heads},
                                             {"d", p.d},
                                             {"tile", o.tile},
                                             {"causal", p.causal},
                                             {"seed", o.seed},
                                             {"source", source},
                                             {"rows", rows},
                                             {"kernels", kernels}}
                                  .dump(2));
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> make_precision_command() {
  return std::make_unique<PrecisionCommand>();
}

}  // namespace attn::cli
