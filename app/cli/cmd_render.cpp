// `attnscope render`: draws one view of a session as a publication figure (PNG, SVG or PDF) on
// the offscreen platform, with a sidecar session next to it that regenerates it.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/export/data_export.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
using namespace core;  // the verb is a thin client of the core
namespace {

struct RenderOptions {
  std::string session, view, data;
  std::vector<std::string> out;
  int width = 0, height = -1, threads = 0, max_cells = 512;
  double dpi = 0;
  std::string json;  // --json [FILE]: what was written, as JSON ("-": stdout)
  bool no_sidecar = false, no_verify = false;
};

std::vector<std::string> export_data(const FigureData& f, const std::string& stem,
                                     const std::string& format) {
  std::vector<std::string> files;
  auto add = [&](std::vector<std::string> more) {
    files.insert(files.end(), more.begin(), more.end());
  };
  for (size_t i = 0; i < f.heatmaps.size(); ++i)
    add(export_heatmap(f.heatmaps[i], stem + "_" + std::to_string(i), format));
  for (size_t i = 0; i < f.grids.size(); ++i)
    add(export_head_grid(f.grids[i], stem + "_" + std::to_string(i), format));
  if (f.view == View::Sinks) add(export_sinks(f.sinks, stem, format));
  nlohmann::json j = nlohmann::json::array();
  if (f.view == View::Tradeoff) {
    for (const auto& p : f.tradeoff) j.push_back(to_json(p));
  } else if (f.view == View::Image) {
    for (const auto& a : f.images) j.push_back(to_json(a));
  } else if (f.view == View::Tokens) {
    for (const auto& t : f.tokens) j.push_back(to_json(t));
  }
  if (!j.empty()) {
    write_file_atomic(stem + ".json", j.dump(1) + "\n");
    files.push_back(stem + ".json");
  }
  return files;
}

int render(const RenderOptions& o) {
  require(!o.out.empty(), ErrorCode::InvalidArgument,
          "--out FILE (.png, .svg or .pdf) is required");
  // Fail early, before any analysis: a bad extension or a folder that cannot take the file.
  // A format nobody writes is a command-line mistake (exit 2); a folder that cannot take the
  // file is a runtime error (exit 1).
  for (const std::string& out : o.out) {
    try {
      fig::figure_format(out);
    } catch (const Error& e) {
      throw UsageError(std::string("--out: ") + e.what(), e.code());
    }
    fig::check_figure_path(out);
  }
  Session s = load_session(o.session);
  const View view = view_from_name(o.view.empty() ? s.view.view : o.view);
  FigureSize size = s.figure;
  if (o.width > 0) size.width = o.width;
  if (o.height >= 0) size.height = o.height;
  if (o.dpi > 0) size.dpi = o.dpi;

  Options co;
  co.threads = o.threads;
  co.verify_hashes = !o.no_verify;
  co.end_to_end = view == View::Tradeoff;  // the only view that shows substituted passes
  const auto a = core::analyze(s, o.session, co);
  const FigureData data = collect_figure(*a, view, o.max_cells);
  size = fig::fit_height(data, size);
  Session record = a->session;
  if (!o.no_sidecar) fill_hashes(record, o.session);
  nlohmann::json report = {{"view", view_name(view)},
                           {"width", size.width},
                           {"height", size.height},
                           {"dpi", size.dpi},
                           {"files", nlohmann::json::array()}};
  for (const std::string& out : o.out) {
    fig::export_figure(data, out, size);
    report["files"].push_back(out);
    if (!o.no_sidecar) {
      fig::write_sidecar(record, o.session, out, view, size);
      report["files"].push_back(fig::sidecar_path(out));
    }
    if (o.json.empty())
      std::printf("wrote %s (%dx%d px at %g dpi)\n", out.c_str(), size.width, size.height,
                  size.dpi);
  }
  if (!o.data.empty()) {
    const std::filesystem::path first(o.out.front());
    const std::string stem = (first.parent_path() / first.stem()).string();
    for (const std::string& f : export_data(data, stem, o.data)) {
      report["files"].push_back(f);
      if (o.json.empty()) std::printf("wrote %s\n", f.c_str());
    }
  }
  if (!o.json.empty()) write_json_output(o.json, report.dump(2));
  return 0;
}

class RenderCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override { return render(o); }

 private:
  RenderOptions o;  // bound by add_options
};

void RenderCommand::add_options(CLI::App& cmd) {
  cmd.add_option("--session", o.session, "Session file (.attnscope.json)")->required();
  std::string views;
  for (const auto& v : view_names()) views += (views.empty() ? "" : "|") + v;
  cmd.add_option("--view", o.view, views + " (default: the session's view)")
      ->check(CLI::IsMember(view_names()));
  cmd.add_option("--out", o.out, "Output file(s): .png, .svg or .pdf (repeatable)")->required();
  cmd.add_option("--width", o.width, "Width in pixels at --dpi (default: the session's)")
      ->check(CLI::Range(1, 20000));
  cmd.add_option("--height", o.height,
                 "Height in pixels at --dpi, 0 = fit the content (default: the session's)")
      ->check(CLI::Range(0, 20000));
  cmd.add_option("--dpi", o.dpi, "Resolution; PDF/SVG pages are width/dpi inches wide")
      ->check(CLI::Range(10.0, 2400.0));
  cmd.add_option("--max-cells", o.max_cells, "Heatmap cells per side before pooling (max)")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  cmd.add_option("--data", o.data, "Also write the numbers behind the figure: csv | npy | json")
      ->check(CLI::IsMember({"csv", "npy", "json"}));
  cmd.add_flag("--no-sidecar", o.no_sidecar, "Do not write <out>.attnscope.json");
  cmd.add_flag("--no-verify", o.no_verify, "Do not check the recorded model/image hashes");
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  add_json_option(cmd, o.json, "Report what was written");
}

}  // namespace

std::unique_ptr<Command> make_render_command() {
  return std::make_unique<RenderCommand>();
}

}  // namespace attn::cli
