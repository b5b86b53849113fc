// `attnscope precision`: attention arithmetic in bf16 / fp16 / f32, materialised and tiled,
// with and without f32 accumulation, against fp64 on the same random inputs
// (compute/arith_precision.h).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "compute/arith_precision.h"
#include "compute/error.h"

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
    bool bidirectional = false;
    std::string json;
  } o;  // bound by add_options
};

void PrecisionCommand::add_options(CLI::App& cmd) {
  cmd.add_option("-n,--n", o.n, "Tokens (queries and keys)")->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--heads", o.heads, "Heads")->check(CLI::Range(1, 64));
  cmd.add_option("-d,--dim", o.d, "Head dimension")->check(CLI::Range(1, 1024));
  cmd.add_option("--tile", o.tile, "Keys per tile of the tiled form")
      ->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--seed", o.seed, "Random seed");
  cmd.add_flag("--bidirectional", o.bidirectional, "Bidirectional instead of causal");
  cmd.add_option("--json", o.json, "Also write the table as JSON");
}

int PrecisionCommand::run() {
  const Problem p = random_problem(o.heads, o.heads, o.n, o.n, o.d, !o.bidirectional, o.seed);
  const std::vector<double> ref = attention_fp64(p);
  Table t({"format", "accumulate", "materialised max", "materialised mean", "tiled max",
           "tiled mean", "tiled / materialised (mean)"});
  nlohmann::json rows = nlohmann::json::array();
  for (ArithFormat f : {ArithFormat::F32, ArithFormat::Bf16, ArithFormat::Fp16})
    for (bool acc : {true, false}) {
      if (f == ArithFormat::F32 && !acc) continue;  // f32 accumulation is f32 already
      ArithOptions a{f, acc, false, o.tile};
      const ArithError m = arith_error(attention_in_precision(p, a), ref);
      a.tiled = true;
      const ArithError ti = arith_error(attention_in_precision(p, a), ref);
      const double ratio = m.mean_abs > 0 ? ti.mean_abs / m.mean_abs : 0;
      t.add({arith_format_name(f), acc ? "f32" : arith_format_name(f), sci(m.max_abs),
             sci(m.mean_abs), sci(ti.max_abs), sci(ti.mean_abs), fixed(ratio, 2)});
      rows.push_back({{"format", arith_format_name(f)},
                      {"accumulate", acc ? "f32" : arith_format_name(f)},
                      {"materialised_max_abs", m.max_abs},
                      {"materialised_mean_abs", m.mean_abs},
                      {"tiled_max_abs", ti.max_abs},
                      {"tiled_mean_abs", ti.mean_abs},
                      {"tiled_over_materialised", ratio}});
    }
  std::printf(
      "attention output error against fp64: %d tokens, %d heads, d %d, %s, tile %d, "
      "seed %llu\n",
      o.n, o.heads, o.d, o.bidirectional ? "bidirectional" : "causal", o.tile,
      (unsigned long long)o.seed);
  t.print();
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    require(bool(f), ErrorCode::Io, o.json + ": cannot write");
    f << nlohmann::json{{"n", o.n},       {"heads", o.heads},           {"d", o.d},
                        {"tile", o.tile}, {"causal", !o.bidirectional}, {"seed", o.seed},
                        {"rows", rows}}
             .dump(2)
      << "\n";
  }
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> make_precision_command() {
  return std::make_unique<PrecisionCommand>();
}

}  // namespace attn::cli
