// Streaming evaluation and generation (app/core/decode/stream.h) and their CLI verbs: the per-token
// loss equals a full forward pass's where the cache is full, a policy that runs out of positions
// stops with its reason, the bytes are what the cache allocated, the dump has NumPy's layout, and
// sampling follows its rules.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "app/core/analysis/analysis.h"
#include "app/core/decode/stream.h"
#include "compute/error.h"
#include "compute/kv/kv_policy.h"
#include "models/arch/kv_cache.h"
#include "models/formats/npy.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::vector<int32_t> sample_ids(const models::Model& m, int n) {
  std::vector<int32_t> ids = core::tokenize_stream(
      m,
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters. And God said, Let there be light: and there was light.");
  while (int(ids.size()) < n) ids.insert(ids.end(), ids.begin(), ids.end());
  ids.resize(size_t(n));
  return ids;
}

double log_softmax_nll(const float* row, int V, int target) {
  double mx = row[0], s = 0;
  for (int j = 0; j < V; ++j) mx = std::max(mx, double(row[j]));
  for (int j = 0; j < V; ++j) s += std::exp(double(row[j]) - mx);
  return std::log(s) + mx - row[target];
}

TEST(Stream, FullCacheLossEqualsTheForwardPassAndRunsOutAtTheContext) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const int ctx = model->info().max_tokens, V = model->info().vocab;
  const std::vector<int32_t> ids = sample_ids(*model, ctx + 40);
  core::StreamOptions o;
  o.policies = {"kv_full", "kv_streaming(sinks=4,window=60)"};
  o.prefill = 17;
  const core::StreamResult r = core::run_stream(*model, "default-text", ids, o);
  ASSERT_EQ(r.runs.size(), 2u);
  const core::PolicyRun& full = r.runs[0];
  EXPECT_EQ(full.tokens, ctx);
  EXPECT_NE(full.error.find("context of " + std::to_string(ctx)), std::string::npos) << full.error;
  ASSERT_EQ(full.nll.size(), size_t(ctx));  // row ctx-1 scores token ctx, which exists
  models::ModelInput first;
  first.ids.assign(ids.begin(), ids.begin() + ctx);
  const models::ModelOutput fw = model->forward(first);
  double worst = 0, sum = 0;
  for (int t = 0; t < ctx; ++t) {
    const double want = log_softmax_nll(fw.logits.data() + size_t(t) * V, V, ids[size_t(t) + 1]);
    worst = std::max(worst, std::fabs(want - full.nll[size_t(t)]));
    sum += want;
    EXPECT_NEAR(full.ppl[size_t(t)], std::exp(sum / (t + 1)), 1e-3 * full.ppl[size_t(t)]);
  }
  EXPECT_LT(worst, 1e-4);
  const core::PolicyRun& sw = r.runs[1];
  EXPECT_TRUE(sw.error.empty()) << sw.error;
  EXPECT_EQ(sw.tokens, ctx + 40);
  EXPECT_EQ(sw.nll.size(), size_t(ctx + 39));
  // Identical to full while nothing was evicted: the first 64 tokens.
  for (int t = 0; t < 63; ++t) EXPECT_NEAR(sw.nll[size_t(t)], full.nll[size_t(t)], 1e-4) << t;
  const int64_t per_token = model->info().n_layers * model->info().n_kv_heads;
  EXPECT_EQ(sw.entries.back(), 63 * per_token) << "sinks + window - 1 after each step";
  EXPECT_EQ(sw.entries[size_t(o.prefill) - 1], int64_t(o.prefill) * per_token);
  // The bytes are what the cache's K and V rows allocated (KvCache::bytes(), measured from its
  // buffers, so by rows allocated rather than entries held): a cache streamed the same way
  // reports the same, and at least the f32 K and V of the entries it holds.
  models::KvCache same(make_kv_policy(o.policies[1]));
  model->decode(std::vector<int32_t>(ids.begin(), ids.begin() + o.prefill), same);
  for (int t = o.prefill; t < ctx + 40; ++t) model->decode({ids[size_t(t)]}, same);
  EXPECT_EQ(sw.bytes.back(), same.bytes());
  EXPECT_GE(sw.bytes.back(), double(sw.entries.back()) * 2 * 4 * model->info().head_dim);
  EXPECT_GT(sw.step_seconds(), 0);
}

TEST(Stream, BadInputsSayWhatIsWrong) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const std::vector<int32_t> ids = sample_ids(*model, 20);
  core::StreamOptions o;
  o.prefill = 21;
  EXPECT_THROW(core::run_stream(*model, "m", ids, o), Error);
  o.prefill = 1;
  EXPECT_THROW(core::run_stream(*model, "m", {5}, o), Error);
  EXPECT_THROW(core::run_stream(*model, "m", {5, 1 << 20}, o), Error);
  o.policies = {"kv_recent(window=0)"};
  EXPECT_THROW(core::run_stream(*model, "m", ids, o), Error);
  REQUIRE_MODEL("default-vision");
  auto vision = core::cached_model("default-vision");
  o.policies = {};
  try {
    core::run_stream(*vision, "v", ids, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
}

TEST(Stream, SamplingFollowsTemperatureTopKAndTopP) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, 2.5f};
  core::SamplingOptions s;
  s.temperature = 0;
  EXPECT_EQ(core::sample_token(logits.data(), 5, s, 0.99), 1);
  s.temperature = 1;
  // The draw follows softmax: frequencies over an even grid of u equal the probabilities.
  std::vector<double> p(5);
  double z = 0;
  for (int j = 0; j < 5; ++j) z += p[size_t(j)] = std::exp(double(logits[size_t(j)]));
  std::map<int, int> count;
  const int n = 100000;
  for (int i = 0; i < n; ++i) count[core::sample_token(logits.data(), 5, s, (i + 0.5) / n)]++;
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(count[j] / double(n), p[size_t(j)] / z, 1e-4) << j;
  s.top_k = 2;  // only 1 and 4 remain
  count.clear();
  for (int i = 0; i < 1000; ++i) count[core::sample_token(logits.data(), 5, s, (i + 0.5) / 1000)]++;
  EXPECT_EQ(count.size(), 2u);
  EXPECT_NEAR(count[1] / 1000.0, std::exp(3.0) / (std::exp(3.0) + std::exp(2.5)), 2e-3);
  s.top_k = 0;
  s.top_p = 0.5;  // the top token alone holds p(1) ~ 0.46 < 0.5: two tokens kept
  count.clear();
  for (int i = 0; i < 1000; ++i) count[core::sample_token(logits.data(), 5, s, (i + 0.5) / 1000)]++;
  EXPECT_EQ(count.size(), 2u);
  EXPECT_GT(count[1], 0);
  EXPECT_GT(count[4], 0);
}

TEST(Stream, GenerationIsReproducibleAndGreedyFollowsTheArgmax) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const std::vector<int32_t> prompt = sample_ids(*model, 12);
  core::SamplingOptions s;
  s.temperature = 0;
  s.max_new_tokens = 10;
  const core::Generation g = core::generate(*model, prompt, "kv_full", s);
  ASSERT_EQ(g.ids.size(), 10u);
  std::vector<int32_t> seq = prompt;
  for (int32_t id : g.ids) {
    models::ModelInput in;
    in.ids = seq;
    const models::ModelOutput o = model->forward(in);
    const float* last = o.logits.data() + size_t(o.n_tokens - 1) * o.n_logits;
    EXPECT_EQ(id, int32_t(std::max_element(last, last + o.n_logits) - last));
    seq.push_back(id);
  }
  s.temperature = 0.8;
  s.seed = 7;
  const core::Generation a = core::generate(*model, prompt, "kv_streaming(sinks=2,window=8)", s);
  const core::Generation b = core::generate(*model, prompt, "kv_streaming(sinks=2,window=8)", s);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.entries, 9 * model->info().n_layers * model->info().n_kv_heads);
}

struct CliRun {
  int status = -1;
  std::string out;
};
CliRun cli(const std::string& args) {
  CliRun r;
  r.status = test::run_command(std::string(ATTN_CLI) + " " + args, &r.out);
  return r;
}

TEST(StreamCli, WritesJsonCsvAndNumpyDumpsPerPolicy) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::temp_directory_path() / "attn_stream_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string ids;
  for (int i = 0; i < 90; ++i) ids += " " + std::to_string((i * 37 + 11) % 2000);
  const CliRun r =
      cli("stream --model default-text --ids" + ids +
          " --prefill 5 -p kv_full -p 'kv_tova(budget=16)+kv_quant(bits=4,group=16)' "
          "--json " +
          (dir / "s.json").string() + " --csv " + (dir / "s.csv").string() + " --dump " +
          (dir / "d").string() + " --figure " + (dir / "s.svg").string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("kv_tova(budget=16,reposition=true)+kv_quant"), std::string::npos) << r.out;
  std::ifstream jf(dir / "s.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["tokens"], 90);
  ASSERT_EQ(j["policies"].size(), 2u);
  EXPECT_EQ(j["policies"][1]["nll"].size(), 89u);
  for (int i = 0; i < 2; ++i) {
    const fs::path d = dir / "d" / std::to_string(i);
    const models::NpyArray lg = models::read_npy((d / "logits.npy").string());
    const models::NpyArray nll = models::read_npy((d / "nll.npy").string());
    EXPECT_EQ(lg.shape, (std::vector<int64_t>{90, 2048}));
    EXPECT_EQ(nll.shape, (std::vector<int64_t>{89}));
    const std::vector<float> l = lg.to_f32(), n = nll.to_f32();
    // Row t of nll is -log softmax(logits row t)[token t+1].
    for (int t : {0, 4, 5, 50, 88}) {
      const int next = ((t + 1) * 37 + 11) % 2000;
      EXPECT_NEAR(n[size_t(t)], log_softmax_nll(l.data() + size_t(t) * 2048, 2048, next), 1e-4);
      EXPECT_NEAR(n[size_t(t)], j["policies"][i]["nll"][size_t(t)].get<double>(), 1e-5);
    }
    std::ifstream sf(d / "spec.txt");
    std::string spec;
    std::getline(sf, spec);
    EXPECT_EQ(spec, j["policies"][i]["spec"].get<std::string>());
  }
  std::ifstream cf(dir / "s.csv");
  std::string header;
  std::getline(cf, header);
  EXPECT_EQ(header, "policy,token,nll,ppl,entries,bytes,seconds");
  EXPECT_GT(fs::file_size(dir / "s.svg"), 1000u);

  const CliRun bad =
      cli("stream --model default-text --ids 1 2 3 -p 'kv_h2o(budget=4,recent=9)' 2>&1");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("recent"), std::string::npos) << bad.out;
  const CliRun none = cli("stream --model default-text 2>&1");
  EXPECT_EQ(none.status, 2) << none.out;
  const CliRun gen =
      cli("generate --model default-text --prompt 'And God said' --temperature 0 "
          "--max-new-tokens 8 -p 'kv_recent(window=16)' 2>&1");
  EXPECT_EQ(gen.status, 0) << gen.out;
  EXPECT_NE(gen.out.find("And God said"), std::string::npos) << gen.out;
  EXPECT_NE(gen.out.find("8 tokens under kv_recent(window=16,reposition=true)"), std::string::npos)
      << gen.out;
}

}  // namespace
}  // namespace attn
