// Decode traces (app/core/decode/decode_trace.h): each step's attention over the cache equals the
// full forward pass's row where the cache is full; under an evicting policy the query attends
// exactly what the rule keeps; reduced-precision entries are marked; the decode figure's cells
// follow the trace; `attnscope generate --trace/--figure` writes both.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "app/core/analysis/analysis.h"
#include "app/core/decode/decode_trace.h"
#include "compute/error.h"
#include "models/arch/hooks.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
namespace fs = std::filesystem;

std::vector<int32_t> trace_ids(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % 2000);
  return ids;
}

TEST(DecodeTrace, FullCacheRowsEqualTheForwardPassPattern) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const models::ModelInfo& info = model->info();
  const std::vector<int32_t> ids = trace_ids(61);
  core::TraceOptions o;
  o.prefill = 20;
  o.steps = 100;  // more than the given tokens: stops at the last one
  const core::DecodeTrace t = core::trace_decode(*model, "default-text", ids, o);
  ASSERT_EQ(t.steps.size(), 41u);
  ASSERT_EQ(t.pieces.size(), ids.size());
  models::Capture cap(models::HookSelection::parse("blocks.*.attn.pattern"));
  models::ModelInput in;
  in.ids = ids;
  models::ForwardOptions fo;
  fo.capture = &cap;
  const models::ModelOutput fw = model->forward(in, fo);
  const int N = int(ids.size()), V = info.vocab;
  double worst = 0;
  for (int s = 0; s < 41; ++s) {
    const core::TraceStep& st = t.steps[size_t(s)];
    const int p = 20 + s;
    ASSERT_EQ(st.position, p);
    EXPECT_EQ(st.token, ids[size_t(p)]);
    if (p + 1 < N) {
      EXPECT_EQ(st.next, ids[size_t(p) + 1]);
      const float* lg = fw.logits.data() + size_t(p) * V;
      double mx = lg[0], sum = 0;
      for (int j = 0; j < V; ++j) mx = std::max(mx, double(lg[j]));
      for (int j = 0; j < V; ++j) sum += std::exp(lg[j] - mx);
      EXPECT_NEAR(st.nll, std::log(sum) + mx - lg[ids[size_t(p) + 1]], 1e-4);
    } else {
      EXPECT_EQ(st.next, -1);
      EXPECT_TRUE(std::isnan(st.nll));
    }
    for (int l = 0; l < info.n_layers; ++l)
      for (int h = 0; h < info.n_heads; ++h) {
        const std::vector<float> r = t.row(s, l, h);
        ASSERT_EQ(int(r.size()), p + 1);
        const float* want = cap.layers[size_t(l)].pattern.data() + (size_t(h) * N + p) * N;
        for (int j = 0; j <= p; ++j)
          worst = std::max(worst, double(std::fabs(r[size_t(j)] - want[j])));
        std::vector<int32_t> all(size_t(p) + 1);
        std::iota(all.begin(), all.end(), 0);
        EXPECT_EQ(t.kept(s, l, h), all);
        EXPECT_EQ(t.quantised(s, l, h), 0);
      }
  }
  EXPECT_LT(worst, 2e-5);
}

TEST(DecodeTrace, StreamingPolicyAttendsSinksAndWindowAndMarksQuantisedEntries) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const models::ModelInfo& info = model->info();
  core::TraceOptions o;
  o.policy = "kv_streaming(sinks=4,window=16)+kv_quant(bits=4,group=8)";
  o.prefill = 10;
  o.steps = 50;
  const core::DecodeTrace t = core::trace_decode(*model, "default-text", trace_ids(80), o);
  ASSERT_EQ(t.steps.size(), 50u);
  for (int s = 0; s < 50; ++s) {
    const int p = 10 + s;
    // Step p sees tokens 0..3 and p-15..p (the window counts the current token).
    std::set<int32_t> want;
    for (int j = 0; j <= p; ++j)
      if (j < 4 || j > p - 16) want.insert(j);
    for (int l = 0; l < info.n_layers; ++l)
      for (int h = 0; h < info.n_heads; ++h) {
        const std::vector<float> r = t.row(s, l, h);
        std::set<int32_t> seen;
        double sum = 0;
        for (int j = 0; j <= p; ++j)
          if (!std::isnan(r[size_t(j)])) {
            seen.insert(j);
            sum += r[size_t(j)];
          }
        EXPECT_EQ(seen, want) << "step " << s << " layer " << l << " head " << h;
        EXPECT_NEAR(sum, 1.0, 1e-5);
        // After eviction the cache holds what the next step needs but its own token.
        std::set<int32_t> kept(t.kept(s, l, h).begin(), t.kept(s, l, h).end());
        std::set<int32_t> next;
        for (int j = 0; j <= p; ++j)
          if (j < 4 || j > p - 15) next.insert(j);
        EXPECT_EQ(kept, next);
        // Keys per channel: completed groups of 8 are quantised, the newest partial one not.
        const int q = t.quantised(s, l, h);
        EXPECT_GE(q, int(kept.size()) - 8);
        EXPECT_LE(q, int(kept.size()));
      }
  }
  const core::FigureData f = core::decode_figure(t, 1, 0, 30);
  const core::DecodeFigure& d = f.decode;
  EXPECT_EQ(f.view, core::View::Decode);
  EXPECT_EQ(d.query, 40);
  ASSERT_EQ(d.cells.size(), 41u);
  EXPECT_EQ(d.cells[2], core::DecodeCell::Quantised);  // a sink, in a completed group
  EXPECT_EQ(d.cells[10], core::DecodeCell::Evicted);
  EXPECT_EQ(d.cells[40], core::DecodeCell::Held);  // the query's own key: not quantised yet
  EXPECT_TRUE(std::isnan(d.weight[10]));
  EXPECT_EQ(d.rows, 50);
  EXPECT_EQ(d.cols, 60);
  // Overview row 30 is step 30: future after position 40, evicted in the middle.
  EXPECT_EQ(d.state[size_t(30) * 60 + 45], core::DecodeCell::Future);
  EXPECT_EQ(d.state[size_t(30) * 60 + 10], core::DecodeCell::Evicted);
  EXPECT_FLOAT_EQ(d.attention[size_t(30) * 60 + 0], t.row(30, 1, 0)[0]);
  // Binned: at most max_cells per side, each cell the largest probability.
  const core::FigureData small = core::decode_figure(t, 1, 0, -1, 7);
  EXPECT_EQ(small.decode.rows, 7);
  EXPECT_EQ(small.decode.cols, 7);
  EXPECT_EQ(small.decode.step, 49);
}

TEST(DecodeTrace, GeneratesPastTheGivenTokensAsGenerateDoes) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const std::vector<int32_t> prompt = trace_ids(9);
  core::SamplingOptions s;
  s.temperature = 0.9;
  s.seed = 3;
  s.max_new_tokens = 12;
  // A window longer than the prompt: the prefill of generate() and the trace's prefill-then-step
  // keep the same entries.
  const core::Generation g = core::generate(*model, prompt, "kv_recent(window=12)", s);
  core::TraceOptions o;
  o.policy = "kv_recent(window=12)";
  o.generate = true;
  o.sampling = s;
  o.steps = 12;
  o.layer = 0;
  const core::DecodeTrace t = core::trace_decode(*model, "default-text", prompt, o);
  ASSERT_EQ(t.steps.size(), 12u);
  EXPECT_EQ(t.given, 9);
  ASSERT_EQ(t.ids.size(), 9u + 11u);  // the last step's next token is not drawn
  EXPECT_EQ(std::vector<int32_t>(t.ids.begin() + 9, t.ids.end()),
            std::vector<int32_t>(g.ids.begin(), g.ids.begin() + 11));
  EXPECT_NO_THROW(t.row(5, 0, 0));
  EXPECT_THROW(t.row(5, 1, 0), Error);  // only layer 0 kept
}

TEST(DecodeTrace, BadInputsSayWhatIsWrong) {
  REQUIRE_MODEL("default-text");
  auto model = core::cached_model("default-text");
  const auto msg = [&](const std::vector<int32_t>& ids, core::TraceOptions o) {
    try {
      core::trace_decode(*model, "m", ids, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  core::TraceOptions o;
  EXPECT_NE(msg({}, o).find("no tokens"), std::string::npos);
  EXPECT_NE(msg({1, 5000}, o).find("outside the vocabulary"), std::string::npos);
  o.prefill = 3;
  EXPECT_NE(msg({1, 2, 3}, o).find("prefill 3 is outside [0, 2]"), std::string::npos);
  o.prefill = -1;
  o.steps = 0;
  EXPECT_NE(msg({1, 2, 3}, o).find("steps 0"), std::string::npos);
  o.steps = 4;
  o.policy = "kv_recent(window=-2)";
  EXPECT_NE(msg({1, 2, 3}, o), "no error");
  o.policy = "kv_full";
  o.layer = 99;
  EXPECT_NE(msg({1, 2, 3}, o).find("layer 99"), std::string::npos);
  o.layer = -1;
  const core::DecodeTrace t = core::trace_decode(*model, "m", {1, 2, 3}, o);
  EXPECT_EQ(t.steps.size(), 1u);
  EXPECT_THROW(core::decode_figure(t, 0, 0, 1), Error);
  EXPECT_THROW(core::decode_figure(t, 0, 99, 0), Error);
  EXPECT_THROW(core::trace_json(t, 7), Error);
  const auto vision = core::cached_model("default-vision");
  EXPECT_THROW(core::trace_decode(*vision, "v", {1, 2}, core::TraceOptions{}), Error);
}

TEST(DecodeTraceCli, GenerateWritesTheTraceAndTheFigure) {
  REQUIRE_MODEL("default-text");
  const fs::path dir = fs::temp_directory_path() / "attn_decode_trace_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string out;
  const int status = test::run_command(
      std::string(ATTN_CLI) +
          " generate --model default-text --prompt 'In the beginning God created' "
          "--policy 'kv_streaming(sinks=2,window=8)' --temperature 0 --max-new-tokens 20 "
          "--layer 1 --head 2 --step 5 --trace " +
          (dir / "t.json").string() + " --figure " + (dir / "d.png").string() + " 2>&1",
      &out);
  ASSERT_EQ(status, 0) << out;
  std::ifstream jf(dir / "t.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["policy"], "kv_streaming(sinks=2,window=8,reposition=true)");
  ASSERT_EQ(j["steps"].size(), 20u);
  const nlohmann::json& last = j["steps"][19];
  ASSERT_EQ(last["layers"].size(), 1u);
  EXPECT_EQ(last["layers"][0]["layer"], 1);
  // kv_streaming(sinks=2,window=8): 2 sinks and 8 recent entries attended per KV head.
  EXPECT_EQ(last["layers"][0]["attended"][0].size(), 10u);
  double sum = 0;
  for (double p : last["layers"][0]["probs"][2]) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_GT(fs::file_size(dir / "d.png"), 10000u);
  const int bad = test::run_command(
      std::string(ATTN_CLI) +
          " generate --model default-text --prompt 'In the' --max-new-tokens 4 --head 99 "
          "--figure " +
          (dir / "x.png").string() + " 2>&1",
      &out);
  EXPECT_NE(bad, 0);
  EXPECT_NE(out.find("--layer/--head"), std::string::npos) << out;
}

}  // namespace
}  // namespace attn
