// GUI bench: the real app on a long synthetic problem (dense + window + block top-k by default),
// under Xvfb on lavapipe. Measures the time to the first heatmaps, frame times while scripted
// events pan and zoom the heatmaps, the empty-view floor of the same window, and the memory
// high-water mark; prints one JSON object (tests/bench/gui_bench.sh judges the targets).
//
//   attn_gui_bench --tokens 32768 --frames 200 --backend cpu
#include <sys/resource.h>

#include <QApplication>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QVersionNumber>
#include <QVulkanInstance>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/gui/main_window.h"
#include "app/gui/model_dock.h"
#include "app/gui/vulkan_view.h"
#include "compute/cpu/huge_pages.h"
#include "gui_driver.h"

namespace {

using attn::gui::MainWindow;
using attn::gui::test::peak_rss_mib;
using attn::gui::test::spread;
using attn::gui::test::Spread;
using attn::gui::test::wait_settled;
using attn::gui::test::wait_until;

nlohmann::json to_json(const attn::gui::test::Spread& s) {
  return {{"median_ms", s.median}, {"p90_ms", s.p90}, {"max_ms", s.max}, {"frames", s.n}};
}

}  // namespace

int main(int argc, char** argv) {
  attn::cpu::reuse_freed_memory();  // the allocator policy attnscope's main sets
  int tokens = 32768, frames = 200;
  std::string backend = "cpu", out;
  bool docks = true;  // the app's own layout, as `make run` opens it
  std::vector<std::string> variants = {"window(size=256)", "block_topk(block=64,k=8)"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--tokens")
      tokens = std::stoi(next());
    else if (a == "--frames")
      frames = std::stoi(next());
    else if (a == "--backend")
      backend = next();
    else if (a == "--json")
      out = next();
    else if (a == "--no-docks")
      docks = false;
    else if (a == "--variants") {
      variants.clear();
      std::string s = next();
      for (size_t p = 0; p <= s.size();) {
        const size_t e = std::min(s.find(';', p), s.size());
        if (e > p) variants.push_back(s.substr(p, e - p));
        p = e + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: attn_gui_bench [--tokens N] [--frames F] [--backend B] "
                   "[--variants 'a;b'] [--no-docks] [--json OUT]\n");
      return 2;
    }
  }
  QApplication::setApplicationName("attnscope-bench");
  QApplication app(argc, argv);
  QVulkanInstance inst;
  inst.setApiVersion(QVersionNumber(1, 1));
  if (!inst.create()) {
    std::fprintf(stderr, "attn_gui_bench: no Vulkan instance\n");
    return 1;
  }
  const double rss_start = peak_rss_mib();
  // From the window's creation, as a user launching the app sees it.
  QElapsedTimer t;
  t.start();
  attn::gui::GuiOptions o;
  o.use_settings = false;
  o.model = "synthetic";
  o.synthetic_tokens = tokens;
  o.variants = variants;
  o.width = 1600;
  o.height = 1000;
  MainWindow w(o);
  if (backend != "cpu") {  // the window starts on cpu: switch before anything is shown
    w.model_dock()->set_backend(QString::fromStdString(backend));
    w.submit_now();
  }
  if (!docks)  // the view gets the whole window
    for (QDockWidget* d : w.findChildren<QDockWidget*>()) d->hide();
  w.view()->setVulkanInstance(&inst);
  w.show();
  // First heatmaps: the first frame drawn after the first tiles arrived.
  const double first_ms = attn::gui::test::ms_to_first_heatmaps(w, t, 300000);
  const double first_heatmaps = first_ms < 0 ? -1 : first_ms / 1e3;
  if (!w.last_error().isEmpty() || first_heatmaps < 0) {
    std::fprintf(stderr, "attn_gui_bench: %s\n",
                 w.last_error().isEmpty() ? "no heatmaps within 300 s"
                                          : w.last_error().toStdString().c_str());
    return 1;
  }
  const auto a = w.analysis();
  std::fprintf(stderr, "[bench] first heatmaps after %.2f s (forward %.2f s, variants %.2f s)\n",
               first_heatmaps, a->forward_seconds, a->variants_seconds);
  // Panning and zooming at once, while the core finishes its background stages.
  const Spread busy = spread(attn::gui::test::scripted_pan_zoom(w, frames));
  std::fprintf(stderr, "[bench] panning while the core works: median %.1f ms, p90 %.1f, max %.1f\n",
               busy.median, busy.p90, busy.max);
  wait_until([&] { return w.worker_idle(); }, 600000);
  wait_settled(w, 120000, 2);
  const Spread idle = spread(attn::gui::test::scripted_pan_zoom(w, frames));
  const Spread idle_cpu = spread(w.view()->frame_cpu_times());
  const Spread idle_present = spread(w.view()->frame_present_times());
  std::fprintf(stderr,
               "[bench] of which building and recording: median %.1f ms; submit and "
               "present: median %.1f ms\n",
               idle_cpu.median, idle_present.median);
  std::fprintf(stderr, "[bench] panning, core idle: median %.1f ms, p90 %.1f, max %.1f\n",
               idle.median, idle.p90, idle.max);
  // Floor: the same window drawing an empty view.
  w.set_view(attn::render::ViewKind::Image);
  wait_until([] { return false; }, 300);
  w.view()->clear_frame_times();
  w.view()->set_continuous(true);
  wait_until([&] { return w.view()->frame_intervals().size() >= 100; }, 60000);
  w.view()->set_continuous(false);
  const Spread empty = spread(w.view()->frame_intervals());
  std::fprintf(stderr, "[bench] empty view: median %.1f ms\n", empty.median);
  const QSize sz = w.view()->swapChainImageSize();
  nlohmann::json j = {{"tokens", tokens},
                      {"backend", backend},
                      {"panels", int(a->panels.size())},
                      {"variants", variants},
                      {"view", {sz.width(), sz.height()}},
                      {"first_heatmaps_s", first_heatmaps},
                      {"forward_s", a->forward_seconds},
                      {"variants_s", a->variants_seconds},
                      {"frames_busy", to_json(busy)},
                      {"frames_idle", to_json(idle)},
                      {"frames_empty", to_json(empty)},
                      {"frame_build_ms", idle_cpu.median},
                      {"frame_present_ms", idle_present.median},
                      {"peak_rss_mib", peak_rss_mib()},
                      {"rss_at_start_mib", rss_start},
                      {"nxn_f32_mib", double(tokens) * tokens * 4 / 1048576.0},
                      {"qkv_f32_mib", 3.0 * 4 * tokens * 64 * 4 / 1048576.0}};
  const std::string text = j.dump(2);
  std::printf("%s\n", text.c_str());
  if (!out.empty()) std::ofstream(out) << text << "\n";
  return 0;
}
