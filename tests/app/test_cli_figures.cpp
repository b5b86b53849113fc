// The render, sweep and analyze --session verbs end to end: files, sidecars that regenerate the
// same figure, shard merging, exit codes (0 ok, 1 runtime error, 2 usage) and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/sweep.h"
#include "app/core/session/session.h"
#include "app/figures/figure.h"
#include "compute/error.h"
#include "models/arch/default_models.h"
#include "models/formats/npy.h"
#include "tests/app/image_compare.h"
#include "tests/app/model_available.h"

namespace attn {
namespace {
using core::FigureSize;
using core::load_session;
using core::save_session;
using core::Session;
using core::sha256_file;
using core::View;
namespace fs = std::filesystem;
using test::read_all;
using test::run_command;

const std::string kCli = ATTN_CLI;

int cli(const std::string& args, std::string* out = nullptr) {
  return run_command(kCli + " " + args, out);
}

// The CLI with its stderr apart from its stdout.
int cli_split(const std::string& args, std::string* out, std::string* err) {
  const std::string err_file = test::fresh_dir("cli_stderr") + "/stderr.txt";
  const int rc = run_command("{ " + kCli + " " + args + " 2>'" + err_file + "'; }", out);
  *err = read_all(err_file);
  return rc;
}

// A small text session in `dir`.
std::string write_session(const std::string& dir) {
  Session s;
  s.input.text = "The cat sat on the mat. The dog sat on the log. The cat saw the dog.";
  s.model.id = "default-text";
  s.variants = {"window(size=4)", "block_topk(block=4,k=2)"};
  s.layer = 1;
  s.head = 1;
  s.figure = {600, 400, 100};
  const std::string path = dir + "/s.attnscope.json";
  save_session(s, path);
  return path;
}

TEST(CliRender, EveryTextViewWritesFigureAndSidecar) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_views");
  const std::string s = write_session(dir);
  for (const char* view : {"heatmap", "variants", "grid", "sinks", "tradeoff", "tokens"}) {
    const std::string out = dir + "/" + view + ".png";
    std::string log, err;
    ASSERT_EQ(cli_split("render --session " + s + " --view " + view + " --out " + out + " --out " +
                            dir + "/" + view + ".pdf --out " + dir + "/" + view + ".svg",
                        &log, &err),
              0)
        << log << err;
    // A successful render prints what it wrote and nothing else: no Qt warning on stderr.
    EXPECT_EQ(err, "") << view;
    const QImage img(QString::fromStdString(out));
    EXPECT_EQ(img.width(), 600) << view;
    EXPECT_EQ(img.height(), 400) << view;
    const Session side = load_session(out + ".attnscope.json");
    EXPECT_EQ(side.view.view, view);
    EXPECT_FALSE(side.model.sha256.empty()) << "the sidecar records the model's file hashes";
    EXPECT_EQ(side.model.sha256.count("model.safetensors"), 1u);
  }
}

// A session saved by the app may name any colour map the renderer offers (it once refused
// 'cividis'); an unknown name is refused with the list of names.
TEST(CliRender, EveryColormapOfTheAppRenders) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_colormaps");
  Session s = load_session(write_session(dir));
  std::string log;
  for (const std::string& name : {std::string("cividis"), std::string("inferno")}) {
    s.view.colormap = name;
    save_session(s, dir + "/" + name + ".attnscope.json");
    const std::string out = dir + "/" + name + ".png";
    ASSERT_EQ(
        cli("render --session " + dir + "/" + name + ".attnscope.json --view heatmap --out " + out,
            &log),
        0)
        << log;
    EXPECT_EQ(QImage(QString::fromStdString(out)).width(), 600) << name;
    EXPECT_EQ(load_session(out + ".attnscope.json").view.colormap, name);
  }
  s.view.colormap = "jet";
  save_session(s, dir + "/jet.attnscope.json");
  EXPECT_EQ(cli("render --session " + dir + "/jet.attnscope.json --view heatmap --out " + dir +
                    "/jet.png",
                &log),
            1);
  EXPECT_NE(log.find("unknown colour map 'jet'"), std::string::npos) << log;
  EXPECT_NE(log.find("cividis"), std::string::npos) << log;
}

TEST(CliRender, SidecarAndSavedSessionRegenerateIdenticalOutput) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_roundtrip");
  const std::string s = write_session(dir);
  std::string log;
  ASSERT_EQ(cli("render --session " + s + " --view variants --out " + dir + "/a.png --out " + dir +
                    "/a.svg",
                &log),
            0)
      << log;
  // From the sidecar (it records view and size).
  ASSERT_EQ(cli("render --session " + dir + "/a.png.attnscope.json --out " + dir + "/b.png", &log),
            0)
      << log;
  EXPECT_EQ(read_all(dir + "/a.png"), read_all(dir + "/b.png"));
  // Open, save elsewhere, render again.
  fs::create_directories(dir + "/copy");
  save_session(load_session(s), dir + "/copy/c.attnscope.json");
  ASSERT_EQ(cli("render --session " + dir + "/copy/c.attnscope.json --view variants --out " + dir +
                    "/c.svg --no-sidecar",
                &log),
            0)
      << log;
  EXPECT_EQ(read_all(dir + "/a.svg"), read_all(dir + "/c.svg"));
  EXPECT_FALSE(fs::exists(dir + "/c.svg.attnscope.json"));
}

TEST(ExportView, ExportAndSidecarReopenToTheSameImage) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("export_view");
  const std::string s = write_session(dir);
  core::Session sel = load_session(s);
  sel.layer = 1;
  sel.head = 3;
  const auto a = core::analyze(sel, s);
  const FigureSize size = fig::export_view(*a, View::Variants, dir + "/v.png", {700, 0, 100});
  EXPECT_EQ(size.width, 700);
  EXPECT_GT(size.height, 100);
  const Session side = load_session(dir + "/v.png.attnscope.json");
  EXPECT_EQ(side.layer, 1);
  EXPECT_EQ(side.head, 3);
  EXPECT_EQ(side.figure.height, size.height);
  const auto again = core::analyze(side, dir + "/v.png.attnscope.json");
  const QImage ia(QString::fromStdString(dir + "/v.png"));
  const QImage ib =
      fig::render_figure_image(core::collect_figure(*again, View::Variants), side.figure);
  EXPECT_EQ(ia.convertToFormat(QImage::Format_RGB32), ib);
}

TEST(CliRender, DataExportWritesTheMatrices) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_data");
  const std::string s = write_session(dir);
  std::string log;
  ASSERT_EQ(
      cli("render --session " + s + " --view heatmap --out " + dir + "/h.png --data csv --json",
          &log),
      0)
      << log;
  const nlohmann::json j = nlohmann::json::parse(log.substr(log.find('{')));
  EXPECT_EQ(j["view"], "heatmap");
  const std::string csv = read_all(dir + "/h_0.csv");
  std::stringstream ss(csv);
  std::string line;
  int rows = 0;
  while (std::getline(ss, line)) ++rows;
  EXPECT_GT(rows, 10);  // header + one row per query token
  ASSERT_EQ(cli("render --session " + s + " --view grid --out " + dir + "/g.png --data npy", &log),
            0)
      << log;
  const models::NpyArray a = models::read_npy(dir + "/g_0_entropy.npy");
  std::ifstream cfg_file(models::resolve_model_dir("default-text") + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cfg_file);
  const int64_t layers = cfg["n_layer"], heads = cfg["n_head"];
  ASSERT_EQ(a.shape, (std::vector<int64_t>{layers, heads}));  // layers x heads of default-text
  ASSERT_EQ(cli("render --session " + s + " --view grid --out " + dir + "/g.png --data csv", &log),
            0)
      << log;
  // The CSV holds the same numbers (to its 7 significant digits).
  std::stringstream gs(read_all(dir + "/g_0_entropy.csv"));
  const std::vector<float> v = a.to_f32();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string cell;
    std::getline(gs, cell, int64_t(i) % heads == heads - 1 ? '\n' : ',');
    EXPECT_NEAR(std::stof(cell), v[i], 1e-5f * std::max(1.0f, std::abs(v[i]))) << i;
  }
}

// Every variant of the session is a panel of the grid figure and a table of its data export
// (the grid once stopped at dense + 3 and the export dropped the fourth variant).
TEST(CliRender, GridShowsAndExportsEveryVariant) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_grid_all");
  Session s = load_session(write_session(dir));
  s.variants = {"window(size=4)", "sinks_window(sinks=1,window=4)", "block_topk(block=4,k=2)",
                "top_p(block=4,p=0.9)"};
  save_session(s, dir + "/four.attnscope.json");
  for (const char* metric : {"entropy", "output_error"}) {
    Session m = s;
    m.view.grid_metric = metric;
    save_session(m, dir + "/" + metric + ".attnscope.json");
    const std::string stem = dir + "/" + metric;
    std::string log;
    ASSERT_EQ(cli("render --session " + dir + "/" + metric + ".attnscope.json --view grid --out " +
                      stem + ".svg --data json",
                  &log),
              0)
        << log;
    // Dense and the four variants; a metric against dense shows the four variants.
    std::vector<std::string> want = {"dense"};
    if (std::string(metric) == "output_error") want.clear();
    for (const std::string& v : s.variants) want.push_back(v);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(fs::exists(stem + "_" + std::to_string(i) + ".json")) << metric << " " << i;
      const nlohmann::json j =
          nlohmann::json::parse(read_all(stem + "_" + std::to_string(i) + ".json"));
      EXPECT_EQ(j["spec"], want[i]) << metric;
    }
    EXPECT_FALSE(fs::exists(stem + "_" + std::to_string(want.size()) + ".json")) << metric;
    // One panel per table: each draws its "Head" axis title once.
    const std::string svg = read_all(stem + ".svg");
    size_t panels = 0;
    for (size_t at = svg.find(">Head<"); at != std::string::npos; at = svg.find(">Head<", at + 1))
      ++panels;
    EXPECT_EQ(panels, want.size()) << metric;
  }
}

// An output folder that does not exist is named before any work, with exit code 1 and no Qt
// warning ("QPainter::begin(): Returned false" once came first).
TEST(CliRender, MissingOutputFolderIsAClearError) {
  const std::string dir = test::fresh_dir("cli_no_folder");
  std::string out, err;
  for (const char* ext : {"pdf", "png", "svg"}) {
    const std::string target = dir + "/nonexistent_dir/x." + ext;
    EXPECT_EQ(
        cli_split("render --session " + dir + "/s.attnscope.json --out " + target, &out, &err), 1)
        << out << err;
    EXPECT_NE(err.find(target), std::string::npos) << err;
    EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
    EXPECT_EQ(err.find("QPainter"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line: " << err;
  }
  EXPECT_EQ(cli_split("sweep --text hi --variant \"window(size=2)\" --out " + dir +
                          "/nonexistent_dir/t.csv --quiet",
                      &out, &err),
            1);
  EXPECT_NE(err.find("nonexistent_dir/t.csv"), std::string::npos) << err;
  EXPECT_EQ(cli_split("sweep --text hi --variant \"window(size=2)\" --out " + dir +
                          "/t.csv --figure " + dir + "/nonexistent_dir/t.pdf --quiet",
                      &out, &err),
            1);
  EXPECT_NE(err.find("nonexistent_dir/t.pdf"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir + "/t.csv")) << "the sweep ran before the figure path was checked";
  // The library call says the same.
  try {
    fig::check_figure_path(dir + "/nonexistent_dir/x.pdf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
  }
}

TEST(CliRender, ImageViewOnTheVisionModel) {
  REQUIRE_MODEL("default-vision");
  const std::string src = std::string(ATTN_TEST_SOURCE_DIR) + "/assets/images/bag_1.png";
  const std::string snap = models::resolve_model_dir("default-vision") + "/../images/bag_1.png";
  const std::string img = fs::exists(src) ? src : snap;
  if (!fs::exists(img)) GTEST_SKIP() << "no sample image";
  const std::string dir = test::fresh_dir("cli_image");
  fs::copy_file(img, dir + "/bag.png");
  Session s;
  s.model.id = "default-vision";
  s.input.kind = "image";
  s.input.image = "bag.png";  // relative to the session file
  s.variants = {"window(size=8)"};
  s.figure = {600, 300, 100};
  save_session(s, dir + "/img.attnscope.json");
  fs::create_directories(dir + "/out");
  std::string log;
  ASSERT_EQ(cli("render --session " + dir + "/img.attnscope.json --view image --out " + dir +
                    "/out/i.pdf",
                &log),
            0)
      << log;
  // The sidecar lives elsewhere: its image path is rewritten relative to it, with its hash.
  const Session side = load_session(dir + "/out/i.pdf.attnscope.json");
  EXPECT_EQ(side.input.image, "../bag.png");
  EXPECT_EQ(side.input.image_sha256, sha256_file(dir + "/bag.png"));
  ASSERT_EQ(cli("render --session " + dir + "/out/i.pdf.attnscope.json --out " + dir + "/out/j.png",
                &log),
            0)
      << log;
  // A changed image is caught by its hash.
  std::ofstream(dir + "/bag.png", std::ios::app) << "x";
  EXPECT_EQ(cli("render --session " + dir + "/out/i.pdf.attnscope.json --out " + dir + "/out/k.png",
                &log),
            1);
  EXPECT_NE(log.find("differs"), std::string::npos) << log;
  // The image view of a text session is refused clearly.
  const std::string text = write_session(dir);
  EXPECT_EQ(cli("render --session " + text + " --view image --out " + dir + "/out/t.png", &log), 1);
  EXPECT_NE(log.find("needs a vision model"), std::string::npos) << log;
}

TEST(CliRender, ExitCodesAndMessages) {
  const std::string dir = test::fresh_dir("cli_errors");
  std::string log;
  EXPECT_EQ(cli("", &log), 2);
  EXPECT_EQ(cli("render --help", &log), 0);
  EXPECT_NE(log.find("--session"), std::string::npos);
  EXPECT_EQ(cli("render --session x.attnscope.json", &log), 2) << log;  // no --out
  EXPECT_EQ(cli("render --session x.attnscope.json --out a.png --view pie", &log), 2) << log;
  EXPECT_EQ(cli("render --session " + dir + "/none.attnscope.json --out " + dir + "/a.png", &log),
            1);
  EXPECT_NE(log.find("cannot open session file"), std::string::npos) << log;
  std::ofstream(dir + "/bad.json") << "{ not json";
  EXPECT_EQ(cli("render --session " + dir + "/bad.json --out " + dir + "/a.png", &log), 1);
  EXPECT_NE(log.find("invalid JSON"), std::string::npos) << log;
  Session s;
  s.input.text = "hello";
  nlohmann::json j = session_to_json(s);
  j["version"] = 7;
  std::ofstream(dir + "/v7.json") << j.dump();
  EXPECT_EQ(cli("render --session " + dir + "/v7.json --out " + dir + "/a.png", &log), 1);
  EXPECT_NE(log.find("version 7 is not supported"), std::string::npos) << log;
  s.model.id = "no_such_model_folder";
  save_session(s, dir + "/nomodel.attnscope.json");
  EXPECT_EQ(
      cli("render --session " + dir + "/nomodel.attnscope.json --out " + dir + "/a.png", &log), 1);
  EXPECT_NE(log.find("no_such_model_folder"), std::string::npos) << log;
  // A format no figure is written in is a command-line mistake.
  EXPECT_EQ(
      cli("render --session " + dir + "/nomodel.attnscope.json --out " + dir + "/a.jpg", &log), 2);
  EXPECT_NE(log.find(".png, .svg or .pdf"), std::string::npos) << log;
  // Mistakes in the sweep's command line are usage errors (exit 2), named on one line.
  EXPECT_EQ(cli("sweep --out x.csv --variant \"window(size=8..2:x2)\" --text hi", &log), 2);
  EXPECT_NE(log.find("backwards"), std::string::npos) << log;
  EXPECT_EQ(cli("sweep --out x.csv --variant dense --text hi --shard 3/2", &log), 2);
  EXPECT_EQ(cli("sweep --variant dense --text hi", &log), 2);    // no --out
  EXPECT_EQ(cli("sweep --out x.csv --text hi", &log), 2);        // no --variant
  EXPECT_EQ(cli("sweep --out x.csv --variant dense", &log), 2);  // no input
  EXPECT_EQ(cli("sweep --out x.csv --variant \"windw(size=8)\" --text hi", &log), 2);
  EXPECT_NE(log.find("did you mean window"), std::string::npos) << log;
  EXPECT_EQ(cli("sweep --out x.csv --variant dense --text hi --model default-txt", &log), 1);
  EXPECT_NE(log.find("did you mean default-text"), std::string::npos) << log;
}

// Drops the select_seconds and kernel_seconds columns (timings differ from run to run;
// everything else must not).
std::string without_times(const std::string& csv) {
  std::stringstream in(csv), out;
  std::string line;
  while (std::getline(in, line)) {
    // Fields: index,"spec",pattern,density,flops,select_seconds,kernel_seconds,...; the spec
    // is quoted.
    const size_t spec_end = line.find('"', line.find('"') + 1);
    size_t at = spec_end == std::string::npos ? 0 : spec_end;
    for (int k = 0; k < 4; ++k) at = line.find(',', at + 1);
    const size_t end = line.find(',', line.find(',', at + 1) + 1);
    out << line.substr(0, at) << line.substr(end) << "\n";
  }
  return out.str();
}

TEST(CliSweep, ShardsMergeToTheSingleRunTable) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_sweep");
  std::ofstream(dir + "/text.txt") << "The cat sat on the mat. The dog sat on the log.";
  const std::string common = "sweep --model default-text --text-file " + dir +
                             "/text.txt --variant \"window(size=2..16:x2)\" --variant "
                             "\"block_topk(block=4,k=1..2:+1)\" --threads 1 --quiet";
  std::string log;
  ASSERT_EQ(cli(common + " --out " + dir + "/all.csv --figure " + dir + "/all.pdf", &log), 0)
      << log;
  ASSERT_EQ(cli(common + " --shard 0/2 --out " + dir + "/s0.csv", &log), 0) << log;
  ASSERT_EQ(cli(common + " --shard 1/2 --out " + dir + "/s1.csv", &log), 0) << log;
  ASSERT_EQ(cli("sweep --merge " + dir + "/s1.csv " + dir + "/s0.csv --out " + dir +
                    "/merged.csv --quiet",
                &log),
            0)
      << log;
  const std::string all = read_all(dir + "/all.csv"), merged = read_all(dir + "/merged.csv");
  // Header, the dense baseline, 4 windows and 2 top-k.
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 8);
  EXPECT_EQ(without_times(all), without_times(merged));
  // The baseline row, measured in the same run: a plot of the table alone is complete.
  const std::vector<core::SweepRow> rows = core::parse_tradeoff_csv(all, "all.csv");
  ASSERT_EQ(rows.size(), 7u);
  const core::TradeoffPoint& dense = rows[0].point;
  EXPECT_EQ(rows[0].index, 0);
  EXPECT_EQ(dense.spec, "dense");
  EXPECT_EQ(dense.pattern, "dense");
  EXPECT_NEAR(dense.density, 1.0, 1e-9);
  EXPECT_EQ(dense.rel_error, 0.0);
  EXPECT_NEAR(dense.mass_recall, 1.0, 1e-6);  // float sums over rows
  EXPECT_NEAR(dense.next_token_kl, 0.0, 1e-12);
  EXPECT_NEAR(dense.top1_agreement, 1.0, 1e-12);
  EXPECT_GT(dense.kernel_seconds, 0.0);
  EXPECT_GT(dense.flops, 0.0);
  EXPECT_TRUE(std::isfinite(dense.perplexity));
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_NE(rows[i].point.spec, "dense");
  // A sweep that names dense itself gets it once, as the baseline.
  ASSERT_EQ(cli(common + " --variant dense --out " + dir + "/with_dense.csv", &log), 0) << log;
  EXPECT_EQ(without_times(read_all(dir + "/with_dense.csv")), without_times(all));
  EXPECT_NE(all.find("\"window(size=16)\""), std::string::npos);
  EXPECT_NE(all.find("\"block_topk(block=4,k=2)\""), std::string::npos);
  // A missing shard is an error, not a short table.
  EXPECT_EQ(cli("sweep --merge " + dir + "/s0.csv --out " + dir + "/bad.csv --quiet", &log), 1);
  EXPECT_NE(log.find("missing"), std::string::npos) << log;
  if (test::have_tool("pdfinfo")) {
    ASSERT_EQ(run_command("pdfinfo " + dir + "/all.pdf", &log), 0) << log;
    EXPECT_TRUE(std::regex_search(log, std::regex("Pages:\\s+1\\b"))) << log;
  }
  EXPECT_TRUE(fs::exists(dir + "/all.pdf.attnscope.json"));
}

TEST(CliSweep, PrecisionIsAnAxis) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_sweep_precision");
  std::ofstream(dir + "/text.txt") << "The cat sat on the mat. The dog sat on the log.";
  const std::string common = "sweep --model default-text --text-file " + dir +
                             "/text.txt --variant \"window(size=4)\" --threads 1 --quiet";
  std::string log;
  ASSERT_EQ(cli(common + " --precision f32,bf16 --out " + dir + "/p.csv", &log), 0) << log;
  const auto rows = core::parse_tradeoff_csv(read_all(dir + "/p.csv"), "p.csv");
  // The f32 dense baseline, dense in bf16, then the window in each precision.
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].point.spec, "dense");
  EXPECT_EQ(rows[0].point.precision, "f32");
  EXPECT_EQ(rows[1].point.spec, "dense");
  EXPECT_EQ(rows[1].point.precision, "bf16");
  EXPECT_EQ(rows[2].point.precision, "f32");
  EXPECT_EQ(rows[3].point.precision, "bf16");
  // Dense in bf16 against the f32 reference: about bf16's unit roundoff, not zero.
  EXPECT_GT(rows[1].point.rel_error, 1e-5);
  EXPECT_LT(rows[1].point.rel_error, 1.0 / 64);
  EXPECT_NEAR(rows[3].point.rel_error, rows[2].point.rel_error, 1.0 / 64);
  EXPECT_EQ(cli(common + " --precision f8 --out " + dir + "/bad.csv", &log), 2);
  EXPECT_NE(log.find("not one of f32, bf16, f16"), std::string::npos) << log;
}

// `analyze --precision`: dense runs with Q, K, V stored in bf16 (or f16) in every layer of a golden
// model, against the f32 dense reference. The logits move by about the format's unit roundoff u
// (measured 0.5-0.6 u in relative Frobenius norm on this model): not zero (the storage really
// happened), and within 2 u (the rounding is the format's, nothing worse); f32 changes nothing.
TEST(CliAnalyze, PrecisionRunsTheModelEndToEnd) {
  const std::string golden = std::string(ATTN_TEST_SOURCE_DIR) + "/tests/ref/goldens/gpt2";
  const std::string dir = test::fresh_dir("cli_analyze_precision");
  const std::string common = "analyze --model " + golden +
                             " --ids 5,77,200,3,3,150,280,290,42,99,7 --threads 1 --json " + dir;
  const auto logits_rel = [&](const std::string& precision, std::string* spec_precision) {
    std::string log;
    EXPECT_EQ(cli(common + "/" + precision + ".json --precision " + precision, &log), 0) << log;
    const auto j = nlohmann::json::parse(read_all(dir + "/" + precision + ".json"));
    EXPECT_EQ(j.at("precision"), precision);
    const auto& v = j.at("variants").at(0);
    *spec_precision = v.at("precision").get<std::string>();
    EXPECT_EQ(v.at("spec"), "dense");
    EXPECT_TRUE(v.at("end_to_end").at("logits_max_abs_diff").is_number()) << v.at("end_to_end");
    return v.at("end_to_end").at("logits_rel_diff").get<double>();
  };
  std::string ran;
  EXPECT_EQ(logits_rel("f32", &ran), 0.0);
  EXPECT_EQ(ran, "f32");
  for (const auto& [name, u] : {std::pair<std::string, double>{"bf16", 0x1p-8}, {"f16", 0x1p-11}}) {
    const double rel = logits_rel(name, &ran);
    EXPECT_EQ(ran, name);
    EXPECT_GT(rel, u / 50) << name;
    EXPECT_LT(rel, 2 * u) << name;
  }
  std::string log;
  EXPECT_EQ(cli(common + "/bad.json --precision fp8", &log), 2) << log;
  EXPECT_NE(log.find("--precision: precision 'fp8' is not one of f32, bf16, f16"),
            std::string::npos)
      << log;
}

TEST(CliAnalyze, TakesItsInputFromASession) {
  REQUIRE_MODEL("default-text");
  const std::string dir = test::fresh_dir("cli_analyze");
  const std::string s = write_session(dir);
  std::string log;
  ASSERT_EQ(cli("analyze --session " + s + " --json " + dir + "/a.json", &log), 0) << log;
  const nlohmann::json j = nlohmann::json::parse(read_all(dir + "/a.json"));
  ASSERT_EQ(j["variants"].size(), 2u);
  EXPECT_EQ(j["variants"][0]["spec"], "window(size=4)");
  EXPECT_GT(j["input"]["n_tokens"].get<int>(), 10);
}

}  // namespace
}  // namespace attn
