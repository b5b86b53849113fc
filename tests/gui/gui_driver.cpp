#include "gui_driver.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QThread>
#include <set>

#include "app/gui/main_window.h"
#include "app/gui/vulkan_view.h"

namespace attn::gui::test {

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
