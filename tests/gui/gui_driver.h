// Test helpers that drive the real main window: wait for conditions while the Qt event loop runs,
// grab frames, and measure pixels of screen rectangles.
#pragma once
#include <QElapsedTimer>
#include <QImage>
#include <QString>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "app/gui/main_window.h"

namespace attn::gui::test {

// Whether an embedded model (or $ATTNSCOPE_MODELS) provides `name`.
bool have_model(const std::string& name);
// A bundled sample image (sneaker_1.png, else the first PNG), or "" when none is found.
std::string sample_image();
// The window every test starts from: no QSettings, 1600 x 1000, the bundled sample text.
GuiOptions base_options();

// Processes events until `done` holds or `timeout_ms` passes; returns whether it held.
bool wait_until(const std::function<bool()>& done, int timeout_ms);
// Milliseconds from `since` until the first frame drawn after the first heatmap tiles arrived,
// or -1 when none came within `timeout_ms` (or an error showed).
double ms_to_first_heatmaps(MainWindow& w, const QElapsedTimer& since, int timeout_ms);
// Waits until the window is settled (results and tiles shown) and `frames` more frames are drawn.
bool wait_settled(MainWindow& w, int timeout_ms, int frames = 3);
// The view once settled and drawn alike twice in a row (a few frames apart): on a loaded machine
// a grab right after settling could still catch the layout or a panel mid-update.
QImage grab_settled(MainWindow& w, int timeout_ms);
// Distinct colours inside a rectangle (x0, y0, x1, y1) of an image.
int distinct_colors(const QImage& img, const std::array<float, 4>& r);
// Fraction of pixels inside `r` that differ between two images of the same size.
double changed_fraction(const QImage& a, const QImage& b, const std::array<float, 4>& r);
// Frame intervals (ms) over `frames` frames while scripted input pans and zooms the first
// heatmap panel: one event before each frame (wheel in, a circular drag, wheel out), the frames
// paced by the app's own event loop.
std::vector<double> scripted_pan_zoom(MainWindow& w, int frames);
// Peak resident memory of this process, MiB (VmHWM), or -1.
double peak_rss_mib();
// Median, 90th percentile and maximum of a sample.
struct Spread {
  double median = 0, p90 = 0, max = 0;
  size_t n = 0;
};
Spread spread(std::vector<double> v);

// Where screenshots go: $ATTNSCOPE_SCREENSHOT_DIR, else the working directory.
QString screenshot_path(const QString& name);

}  // namespace attn::gui::test
