// `attnscope demo`: the quick-start run. A structured sample problem (a sink on the first token,
// local attention from rotary-like position features, content noise) with a spread of variants.
#include <cmath>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "app/cli/options.h"

namespace attn::cli {

namespace {

// Q/K carry sinusoidal position features (so nearby tokens score high, like RoPE heads), a shared
// "sink" direction that only token 0 answers strongly, and Gaussian content.
Problem sample_problem(int n, int heads, int d, uint64_t seed) {
  Problem p = random_problem(heads, heads, n, n, d, true, seed, 0.6f);
  for (int h = 0; h < heads; ++h) {
    float sink = 3.0f + 1.0f * h;      // heads differ in how much they park on token 0
    float locality = 1.2f + 0.6f * h;  // and in how local they are
    for (int i = 0; i < n; ++i) {
      float* q = p.q.data() + (size_t(h) * n + i) * d;
      float* k = p.k.data() + (size_t(h) * n + i) * d;
      q[0] = sink;
      k[0] = i == 0 ? sink * 2.0f : 0.0f;
      for (int f = 0; f < 8 && 2 + 2 * f + 1 < d; ++f) {
        float w = std::pow(0.5f, float(f)) * 0.8f;
        q[2 + 2 * f] = locality * 2.2f * std::cos(w * i);
        q[3 + 2 * f] = locality * 2.2f * std::sin(w * i);
        k[2 + 2 * f] = 2.2f * std::cos(w * i);
        k[3 + 2 * f] = 2.2f * std::sin(w * i);
      }
    }
  }
  return p;
}

class DemoCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override {
    cmd.add_option("-n,--tokens", n, "Tokens")->check(CLI::Range(16, 1 << 17));
    mark_deprecated(cmd.add_option("--n", n)->check(CLI::Range(16, 1 << 17)), "-n/--tokens");
  }
  int run() override;

 private:
  int n = 2048;  // bound by add_options
};

int DemoCommand::run() {
  Problem p = sample_problem(n, 4, 64, 2024);
  std::vector<std::string> specs = {"window(size=256)",
                                    "sinks_window(sinks=4,window=256)",
                                    "strided(stride=64)",
                                    "bigbird",
                                    "block_topk(block=64,k=8)",
                                    "topk(k=64)",
                                    "top_p(block=64,p=0.9)",
                                    "vertical_slash",
                                    "h2o(heavy=128,recent=128)",
                                    "sketch_walk(block=64,density=0.15)",
                                    "dense+sigmoid",
                                    "dense+entmax15",
                                    "selective"};
  auto backend = make_backend("cpu");
  std::printf("attnscope demo: sample problem with a planted sink on token 0 and local heads\n");
  Comparison c = compare_variants(p, specs, *backend, true);
  print_comparison(p, c);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_demo_command() {
  return std::make_unique<DemoCommand>();
}

}  // namespace attn::cli
