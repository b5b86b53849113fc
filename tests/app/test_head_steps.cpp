// The step-through of one head (app/core/teaching/head_steps.h): every stage against the hooks
// as `--dump` writes them (read back from the .npy files), every cell against the arithmetic its
// provenance states, X against a norm recomputed from the weights, the weights against PyTorch's
// pattern, the variant's mask, the refusals; and `attnscope explain-head` against the hooks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/core/teaching/head_steps.h"
#include "compute/error.h"
#include "compute/layout.h"
#include "compute/registry.h"
#include "model_available.h"
#include "models/arch/dump.h"
#include "models/arch/text_input.h"
#include "models/arch/weights.h"
#include "models/formats/npy.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

// The message of the attn::Error that `f` throws with `code` ("" when it throws none).
template <class F>
std::string error_of(F f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an attn::Error";
  return "";
}

std::string golden_dir(const std::string& name) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/tests/ref/goldens/" + name;
}

models::ModelInput golden_input(const std::string& name) {
  models::ModelInput in;
  for (float v : models::read_npy(golden_dir(name) + "/golden_ids.npy").to_f32())
    in.ids.push_back(int32_t(v));
  if (name == "bert") {  // as tests/ref/make_goldens.py ran it
    for (float v : models::read_npy(golden_dir(name) + "/golden_token_types.npy").to_f32())
      in.token_types.push_back(int32_t(v));
  }
  return in;
}

// One thread for the dump and the steps alike: a pass over several threads splits its GEMMs
// by the threads it gets, which moves the last bits of later layers between passes.
constexpr int kThreads = 1;

// The hooks of `layer` as `--dump` writes them, read back.
struct Dumped {
  std::vector<int64_t> shape;
  std::vector<float> v;
};
std::map<std::string, Dumped> dump_layer(const models::Model& m, const models::ModelInput& in,
                                         int layer, const std::string& dir) {
  models::Capture cap(models::HookSelection::all());
  const models::ModelOutput out = m.forward(in, {.capture = &cap, .threads = kThreads});
  fs::remove_all(dir);
  models::dump_forward(dir, cap, in, out, {});
  std::map<std::string, Dumped> d;
  for (const char* what : {"q", "k", "v", "scores", "pattern", "out"}) {
    const models::NpyArray a =
        models::read_npy(dir + "/blocks." + std::to_string(layer) + ".attn." + what + ".npy");
    d[what] = {a.shape, a.to_f32()};
  }
  d["resid_prev"] = {};
  if (layer > 0) {
    const models::NpyArray a =
        models::read_npy(dir + "/blocks." + std::to_string(layer - 1) + ".resid.npy");
    d["resid_prev"] = {a.shape, a.to_f32()};
  }
  return d;
}

// Row block `head` of a dumped [heads, N, cols] tensor, cell (i, c).
float at(const Dumped& d, int head, int i, int c) {
  return d.v[(size_t(head) * size_t(d.shape[1]) + size_t(i)) * size_t(d.shape[2]) + size_t(c)];
}

// Every cell the provenance recomputes agrees with the value shown.
void expect_arithmetic(const core::HeadSteps& s) {
  for (const core::StepStage& st : s.stages) {
    ASSERT_EQ(st.values.size(), size_t(st.rows) * st.cols) << st.id;
    ASSERT_EQ(st.how.size(), st.values.size()) << st.id;
    for (int r = 0; r < st.rows; ++r)
      for (int c = 0; c < st.cols; ++c) {
        const double want = st.recomputed[st.index(r, c)];
        EXPECT_FALSE(st.how[st.index(r, c)].empty()) << st.id;
        if (std::isnan(want)) continue;
        EXPECT_NEAR(st.at(r, c), want, 2e-5 + 2e-4 * std::abs(want))
            << st.id << " (" << r << ", " << c << ") " << st.how[st.index(r, c)];
      }
  }
}

// a == b exactly, or within a few float ulps when `ulps` (passes that are not bit-reproducible).
void expect_same(float a, float b, bool ulps, const std::string& what) {
  if (ulps) {
    EXPECT_NEAR(a, b, 1e-7 + 1e-6 * std::abs(b)) << what;
  } else {
    EXPECT_EQ(a, b) << what;
  }
}

// Every stage that shows hook values equals the dumped hook, cell by cell: exactly, or within a
// few ulps for `ulps`.
void expect_hooks(const core::HeadSteps& s, const std::map<std::string, Dumped>& d,
                  bool ulps = false) {
  const int n = s.n, h = s.head, kv = s.kv_head;
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < s.d; ++c) {
      expect_same(s.stage("q").at(i, c), at(d.at("q"), h, i, c), ulps, "q");
      expect_same(s.stage("k").at(i, c), at(d.at("k"), kv, i, c), ulps, "k");
      expect_same(s.stage("v").at(i, c), at(d.at("v"), kv, i, c), ulps, "v");
      expect_same(s.stage("out").at(i, c), at(d.at("out"), h, i, c), ulps, "out");
    }
    for (int j = 0; j < n; ++j) {
      const float sc = at(d.at("scores"), h, i, j);
      if (std::isinf(sc)) {
        EXPECT_TRUE(s.stage("masked").is_dropped(i, j)) << i << "," << j;
      } else {
        expect_same(s.stage("scaled").at(i, j), sc, ulps, "scaled");
        expect_same(s.stage("masked").at(i, j), sc, ulps, "masked");
      }
      expect_same(s.stage("weights").at(i, j), at(d.at("pattern"), h, i, j), ulps, "weights");
    }
  }
  EXPECT_EQ(s.stage("q").hook, "blocks." + std::to_string(s.layer) + ".attn.q");
  EXPECT_EQ(s.stage("weights").hook, "blocks." + std::to_string(s.layer) + ".attn.pattern");
}

// `ulps`: the model's passes are not bit-reproducible (qwen2's differ between passes in the last
// bits of layer 1, in one process, with one thread), so a second pass is compared within ulps.
void check_model(const std::string& name, const std::string& norm_kind, bool ulps = false) {
  auto model = models::load_model(golden_dir(name));
  const models::ModelInfo& info = model->info();
  const models::ModelInput in = golden_input(name);
  const std::string work = std::string(ATTN_TEST_WORK_DIR) + "/head_steps_" + name;
  for (int l = 0; l < info.n_layers; ++l) {
    const auto dumped = dump_layer(*model, in, l, work);
    for (int h : {0, info.n_heads - 1}) {
      SCOPED_TRACE(name + " L" + std::to_string(l) + "H" + std::to_string(h));
      const core::HeadSteps s =
          core::head_steps(*model, in, {.layer = l, .head = h, .threads = kThreads});
      ASSERT_EQ(s.stages.size(), 10u);
      EXPECT_EQ(s.n, int(in.ids.size()));
      EXPECT_EQ(s.kv_head, h / (info.n_heads / info.n_kv_heads));
      expect_hooks(s, dumped, ulps);
      expect_arithmetic(s);
      // PyTorch's pattern (tests/ref/make_goldens.py) where the golden has it.
      const std::string torch = golden_dir(name) + "/golden_pattern_" + std::to_string(l) + ".npy";
      if (fs::exists(torch)) {
        const models::NpyArray a = models::read_npy(torch);
        const std::vector<float> p = a.to_f32();
        const int n = s.n;
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j)
            EXPECT_NEAR(s.stage("weights").at(i, j), p[(size_t(h) * n + i) * n + j], 2e-5);
      }
      // X from the previous block's resid hook and the norm's weights, recomputed here.
      if (l > 0) {
        models::WeightStore ws(golden_dir(name));
        const std::vector<float>& r = dumped.at("resid_prev").v;
        const int C = info.hidden;
        for (int t = 0; t < s.n; ++t) {
          const float* x = r.data() + size_t(t) * C;
          double mean = 0, sq = 0;
          for (int c = 0; c < C; ++c) mean += x[c] / double(C);
          for (int c = 0; c < C; ++c)
            sq += (norm_kind == "rms" ? x[c] * double(x[c]) : (x[c] - mean) * (x[c] - mean)) / C;
          for (int c = 0; c < C; ++c) {
            double want = x[c];
            if (norm_kind == "ln") {
              ws.set_prefixes({"transformer."});
              const float* g = ws.get("h." + std::to_string(l) + ".ln_1.weight", {C});
              const float* b = ws.get("h." + std::to_string(l) + ".ln_1.bias", {C});
              want = (x[c] - mean) / std::sqrt(sq + info.hidden * 0 + 1e-5) * g[c] + b[c];
            } else if (norm_kind == "rms") {
              ws.set_prefixes({"model."});
              const float* g =
                  ws.get("layers." + std::to_string(l) + ".input_layernorm.weight", {C});
              const double eps = model->config().norm_eps;
              want = x[c] / std::sqrt(sq + eps) * g[c];
            }
            EXPECT_NEAR(s.stage("x").at(t, c), want, 1e-4 + 1e-4 * std::abs(want))
                << "X[" << t << "," << c << "]";
          }
        }
      }
    }
  }
}

TEST(HeadSteps, Gpt2StagesEqualTheDumpedHooks) {
  check_model("gpt2", "ln");
}
TEST(HeadSteps, LlamaStagesEqualTheDumpedHooksAfterRope) {
  check_model("llama", "rms");
}
TEST(HeadSteps, Qwen2GqaStagesNameTheSharedKvHead) {
  check_model("qwen2", "rms", true);
  auto model = models::load_model(golden_dir("qwen2"));
  const core::HeadSteps s = core::head_steps(*model, golden_input("qwen2"), {.head = 1});
  if (s.n_kv_heads < s.n_heads) {
    EXPECT_NE(s.stage("k").note.find("shares KV head"), std::string::npos) << s.stage("k").note;
  }
  EXPECT_NE(s.stage("q").title.find("RoPE"), std::string::npos);
  EXPECT_NE(s.stage("q").how[0].find("RoPE"), std::string::npos);
}
TEST(HeadSteps, BertStagesEqualTheDumpedHooksUnmasked) {
  check_model("bert", "none");
  auto model = models::load_model(golden_dir("bert"));
  const core::HeadSteps s = core::head_steps(*model, golden_input("bert"), {.layer = 0});
  EXPECT_FALSE(s.causal);
  for (uint8_t dropped : s.stage("masked").dropped) EXPECT_EQ(dropped, 0);
}

models::ModelInput text_input(const models::Model& m, const std::string& text) {
  const models::TextInput t = models::encode_for_model(m, text);
  models::ModelInput in;
  in.ids = t.ids;
  in.labels = t.labels;
  return in;
}

TEST(HeadSteps, VariantMaskShowsWhatTheVariantKeeps) {
  REQUIRE_MODEL("default-text");
  auto model = models::load_model(models::resolve_model_dir("default-text"));
  const models::ModelInput in = text_input(*model, "the cat sat on the mat and the dog ran off");
  const std::string spec = "sinks_window(sinks=1,window=3)";
  const core::HeadSteps s = core::head_steps(*model, in, {.layer = 1, .head = 2, .variant = spec});
  const core::HeadSteps dense = core::head_steps(*model, in, {.layer = 1, .head = 2});
  EXPECT_EQ(s.variant, make_variant(spec).spec());
  const core::StepStage& m = s.stage("masked");
  const Variant v = make_variant(spec);
  models::Capture cap(models::HookSelection::parse("blocks.1.attn.q,blocks.1.attn.k"));
  model->forward(in, {.capture = &cap});
  const Problem& p = *cap.problem(1);
  const Layout lay = v.select(p);
  int dropped = 0, dense_dropped = 0;
  for (int i = 0; i < s.n; ++i) {
    double sum = 0;
    for (int j = 0; j < s.n; ++j) {
      EXPECT_EQ(m.is_dropped(i, j), !layout_keeps(lay, p, 2, i, j)) << i << "," << j;
      dropped += m.is_dropped(i, j);
      dense_dropped += dense.stage("masked").is_dropped(i, j);
      if (m.is_dropped(i, j)) {
        EXPECT_EQ(s.stage("weights").at(i, j), 0.0f);
      }
      sum += s.stage("weights").at(i, j);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  EXPECT_GT(dropped, dense_dropped);
  EXPECT_NE(m.note.find("sinks_window"), std::string::npos) << m.note;
  // Q, K, V and the scores before the mask do not depend on the variant.
  EXPECT_EQ(s.stage("scaled").values, dense.stage("scaled").values);
  expect_arithmetic(s);
  // The hooks of the substituted pass are what the stages show.
  models::Capture sub_cap(models::HookSelection::parse("blocks.1.attn.*"));
  auto backend = make_backend("reference");
  models::Substitution sub{&v, backend.get(), {1}, {2}, {}};
  model->forward(in, {.capture = &sub_cap, .substitution = &sub});
  const auto& lc = sub_cap.layers[1];
  for (int i = 0; i < s.n; ++i)
    for (int j = 0; j < s.n; ++j)
      EXPECT_EQ(s.stage("weights").at(i, j), lc.pattern[(size_t(2) * s.n + i) * s.n + j]);
}

TEST(HeadSteps, RefusesLongInputsAndBadHeads) {
  auto model = models::load_model(golden_dir("gpt2"));
  models::ModelInput in;
  in.ids.assign(33, 1);
  const std::string too_long =
      error_of([&] { core::head_steps(*model, in, {}); }, ErrorCode::InvalidArgument);
  EXPECT_NE(too_long.find("at most 32"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("has 33"), std::string::npos) << too_long;
  in.ids.assign(4, 1);
  EXPECT_NE(
      error_of([&] { core::head_steps(*model, in, {.layer = 9}); }, ErrorCode::InvalidArgument)
          .find("layer 9"),
      std::string::npos);
  EXPECT_NE(
      error_of([&] { core::head_steps(*model, in, {.head = 99}); }, ErrorCode::InvalidArgument)
          .find("head 99"),
      std::string::npos);
  EXPECT_TRUE(core::head_steps_refusal(24).empty());
}

// The command's exit status and its stdout and stderr together.
int run(const std::string& args, std::string* out) {
  const std::string cmd = std::string(ATTN_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, got);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `explain-head --json`: every number of the stages equals the hooks of the same input, the
// figure is written, and bad heads and long inputs are usage errors (exit 2).
TEST(ExplainHeadCli, JsonNumbersAreTheHooksAndBadInputExits2) {
  REQUIRE_MODEL("default-text");
  ASSERT_TRUE(fs::exists(ATTN_CLI)) << ATTN_CLI << " not built";
  const std::string work = std::string(ATTN_TEST_WORK_DIR) + "/explain_head";
  fs::create_directories(work);
  const std::string text = "the cat sat on the mat and the dog ran off";
  std::string out;
  ASSERT_EQ(run("explain-head --model default-text --text '" + text +
                    "' --layer 1 --head 2 --query 4 --json " + work + "/steps.json --figure " +
                    work + "/steps.png",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("scaled = Q K"), std::string::npos) << out;
  EXPECT_NE(out.find("= hook blocks.1.attn.pattern"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(work + "/steps.png"));
  EXPECT_GT(fs::file_size(work + "/steps.png"), 20000u);
  nlohmann::json j;
  std::ifstream(work + "/steps.json") >> j;

  auto model = models::load_model(models::resolve_model_dir("default-text"));
  const models::ModelInput in = text_input(*model, text);
  ASSERT_EQ(j["ids"].get<std::vector<int32_t>>(), in.ids);
  models::Capture cap(models::HookSelection::parse("blocks.1.attn.*"));
  model->forward(in, {.capture = &cap});
  const models::LayerCapture& c = cap.layers[1];
  const Problem& p = c.problem;
  const int n = int(in.ids.size()), d = p.d, h = 2;
  ASSERT_EQ(j["stages"].size(), 10u);
  int compared = 0;
  for (const auto& st : j["stages"]) {
    const std::string id = st["id"];
    const auto& v = st["values"];
    for (int i = 0; i < n; ++i) {
      if (id == "q" || id == "k" || id == "v" || id == "out") {
        for (int e = 0; e < d; ++e) {
          const float* src = id == "q"   ? p.q_row(h, i)
                             : id == "k" ? p.k_row(h, i)
                             : id == "v" ? p.v_row(h, i)
                                         : c.out.data() + (size_t(h) * n + i) * d;
          EXPECT_EQ(v[i][e].get<float>(), src[e]) << id << " " << i << "," << e;
          ++compared;
        }
      } else if (id == "scaled" || id == "masked" || id == "weights") {
        for (int k = 0; k < n; ++k) {
          const size_t at = (size_t(h) * n + i) * n + k;
          const float hook = id == "weights" ? c.pattern[at] : c.scores[at];
          if (v[i][k].is_null()) {
            EXPECT_EQ(id, "masked");
            EXPECT_TRUE(std::isinf(hook)) << "a dropped entry the hook kept: " << i << "," << k;
          } else if (!std::isinf(hook)) {
            EXPECT_EQ(v[i][k].get<float>(), hook) << id << " " << i << "," << k;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 4 * n * d);

  // The same figure as SVG (text stays text) and PDF.
  out.clear();
  ASSERT_EQ(run("explain-head --model default-text --text '" + text +
                    "' --layer 1 --head 2 --quiet --figure " + work + "/steps.svg",
                &out),
            0)
      << out;
  std::stringstream svg;
  svg << std::ifstream(work + "/steps.svg").rdbuf();
  for (const char* part : {"<svg", "softmax(masked)", "blocks.1.attn.pattern", "W_o"})
    EXPECT_NE(svg.str().find(part), std::string::npos) << part;
  out.clear();
  ASSERT_EQ(run("explain-head --model default-text --text '" + text +
                    "' --layer 1 --head 2 --quiet --figure " + work + "/steps.pdf",
                &out),
            0)
      << out;
  std::string pdf(4, '\0');
  std::ifstream(work + "/steps.pdf").read(pdf.data(), 4);
  EXPECT_EQ(pdf, "%PDF");

  out.clear();
  EXPECT_EQ(run("explain-head --model default-text --text 'a b' --layer 7", &out), 2) << out;
  EXPECT_NE(out.find("--layer 7"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run("explain-head --model default-text --text 'a b' --head 9", &out), 2) << out;
  EXPECT_NE(out.find("--head 9"), std::string::npos) << out;
  std::string longer;
  for (int i = 0; i < 10; ++i) longer += "the cat sat on the mat. ";
  out.clear();
  EXPECT_EQ(run("explain-head --model default-text --text '" + longer + "'", &out), 2) << out;
  EXPECT_NE(out.find("at most 32 tokens"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run("explain-head --help", &out), 0) << out;
  for (const char* opt : {"--model", "--text", "--text-file", "--layer", "--head", "--variant",
                          "--query", "--figure", "--json"})
    EXPECT_NE(out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace attn
