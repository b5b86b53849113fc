#include "gui_driver.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QMouseEvent>
#include <QThread>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "app/gui/main_window.h"
#include "app/gui/vulkan_view.h"
#include "compute/error.h"
#include "models/arch/default_models.h"

namespace attn::gui::test {

bool have_model(const std::string& name) {
  try {
    models::resolve_model_dir(name);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string sample_image() {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs = {fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "images"};
  if (const char* m = std::getenv("ATTNSCOPE_MODELS")) dirs.push_back(fs::path(m) / "images");
  for (const auto& d : dirs) {
    std::error_code ec;
    if (fs::exists(d / "sneaker_1.png", ec)) return (d / "sneaker_1.png").string();
    if (fs::is_directory(d, ec))
      for (const auto& e : fs::directory_iterator(d))
        if (e.path().extension() == ".png") return e.path().string();
  }
  return {};
}

GuiOptions base_options() {
  GuiOptions o;
  o.use_settings = false;
  o.width = 1600;
  o.height = 1000;
  o.text_file = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/samples/lighthouse.txt";
  return o;
}

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > timeout_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    QThread::msleep(2);
  }
  return true;
}

namespace {

class Script {
 public:
  Script(VulkanView* v, QPointF centre) : v_(v), c_(centre) {}
  void step(int i) {
    const int phase = i % 100;
    if (phase < 25) {
      wheel(120);
    } else if (phase == 25) {
      mouse(QEvent::MouseButtonPress, c_, Qt::LeftButton, Qt::LeftButton);
      at_ = c_;
    } else if (phase < 70) {
      const double a = (phase - 26) * 0.25;
      at_ = c_ + QPointF(60 * std::cos(a), 40 * std::sin(a));
      mouse(QEvent::MouseMove, at_, Qt::NoButton, Qt::LeftButton);
    } else if (phase == 70) {
      mouse(QEvent::MouseButtonRelease, at_, Qt::LeftButton, Qt::NoButton);
    } else {
      wheel(-120);
    }
  }

 private:
  void wheel(int delta) {
    QWheelEvent e(c_, v_->mapToGlobal(c_), QPoint(), QPoint(0, delta), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
    QCoreApplication::sendEvent(v_, &e);
  }
  void mouse(QEvent::Type t, QPointF p, Qt::MouseButton b, Qt::MouseButtons held) {
    QMouseEvent e(t, p, v_->mapToGlobal(p), b, held, Qt::NoModifier);
    QCoreApplication::sendEvent(v_, &e);
  }
  VulkanView* v_;
  QPointF c_, at_;
};

}  // namespace

std::vector<double> scripted_pan_zoom(MainWindow& w, int frames) {
  const auto rects = w.view()->canvas()->panel_rects();
  if (rects.empty()) return {};
  const QPointF centre((rects[0][0] + rects[0][2]) / 2, (rects[0][1] + rects[0][3]) / 2);
  Script script(w.view(), centre);
  w.view()->clear_frame_times();
  w.view()->set_continuous(true);
  QElapsedTimer guard;
  guard.start();
  for (int i = 0; i < frames && guard.elapsed() < 120000; ++i) {
    script.step(i);
    const int target = w.view()->frames_drawn() + 1;
    while (w.view()->frames_drawn() < target && guard.elapsed() < 120000)
      QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
  }
  w.view()->set_continuous(false);
  return w.view()->frame_intervals();
}

double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.median = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
  s.max = v.back();
  return s;
}

double ms_to_first_heatmaps(MainWindow& w, const QElapsedTimer& since, int timeout_ms) {
  int frames_at_tiles = -1;
  double ms = -1;
  wait_until(
      [&] {
        if (frames_at_tiles < 0 && w.tiles_received() > 0)
          frames_at_tiles = w.view()->frames_drawn();
        if (frames_at_tiles >= 0 && w.view()->frames_drawn() > frames_at_tiles) {
          ms = double(since.nsecsElapsed()) / 1e6;
          return true;
        }
        return !w.last_error().isEmpty();
      },
      timeout_ms);
  return ms;
}

bool wait_settled(MainWindow& w, int timeout_ms, int frames) {
  if (!wait_until([&] { return w.settled() || !w.last_error().isEmpty(); }, timeout_ms))
    return false;
  if (!w.last_error().isEmpty()) return false;
  const int target = w.view()->frames_drawn() + frames;
  return wait_until(
      [&] {
        w.view()->redraw();
        return w.view()->frames_drawn() >= target;
      },
      timeout_ms);
}

QImage grab_settled(MainWindow& w, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  QImage last = w.view()->grab_rgba();
  while (t.elapsed() < timeout_ms) {
    if (!wait_settled(w, timeout_ms)) break;
    QImage now = w.view()->grab_rgba();
    if (now == last) return now;
    last = std::move(now);
  }
  return last;
}

int distinct_colors(const QImage& img, const std::array<float, 4>& r) {
  std::set<QRgb> colors;
  for (int y = std::max(0, int(r[1])); y < std::min(img.height(), int(r[3])); ++y)
    for (int x = std::max(0, int(r[0])); x < std::min(img.width(), int(r[2])); ++x) {
      colors.insert(img.pixel(x, y));
      if (colors.size() > 1000) return int(colors.size());
    }
  return int(colors.size());
}

double changed_fraction(const QImage& a, const QImage& b, const std::array<float, 4>& r) {
  int64_t changed = 0, total = 0;
  for (int y = std::max(0, int(r[1])); y < std::min(a.height(), int(r[3])); ++y)
    for (int x = std::max(0, int(r[0])); x < std::min(a.width(), int(r[2])); ++x) {
      ++total;
      const QRgb p = a.pixel(x, y), q = b.pixel(x, y);
      if (std::abs(qRed(p) - qRed(q)) + std::abs(qGreen(p) - qGreen(q)) +
              std::abs(qBlue(p) - qBlue(q)) >
          6)
        ++changed;
    }
  return total ? double(changed) / double(total) : 0.0;
}

QString screenshot_path(const QString& name) {
  QString dir = qEnvironmentVariable("ATTNSCOPE_SCREENSHOT_DIR");
  if (dir.isEmpty()) dir = QDir::currentPath();
  QDir().mkpath(dir);
  return dir + "/" + name;
}

}  // namespace attn::gui::test
