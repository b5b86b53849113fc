// The central Vulkan view: a QVulkanWindow whose renderer hands Qt's device, render pass and
// command buffers to render::Canvas, and forwards Qt input to it. Frames are drawn on demand
// (input, new data, hover) or continuously when asked (frame-time measurement).
#pragma once
#include <QElapsedTimer>
#include <QVulkanWindow>
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "render/canvas.h"

namespace attn::vk {
class Context;
}

namespace attn::gui {

class VulkanView : public QVulkanWindow {
 public:
  VulkanView();
  QVulkanWindowRenderer* createRenderer() override;

  // Null until the device exists (first expose).
  render::Canvas* canvas() const { return canvas_.get(); }
  // Called on the GUI thread: when the canvas has been created, and after each frame.
  std::function<void()> on_canvas_ready;
  std::function<void()> on_frame;
  // Render every frame (for measurements) instead of on demand.
  void set_continuous(bool on);
  void redraw() { requestUpdate(); }
  // Frame timings keep the latest kFrameTimesKept frames at least (a view left open for days
  // must not grow without bound): past twice that, the older half is dropped.
  static constexpr size_t kFrameTimesKept = size_t(1) << 16;
  // Intervals between the starts of consecutive frames, ms (cleared by clear_frame_times()).
  const std::vector<double>& frame_intervals() const { return intervals_; }
  // CPU time spent building and recording each frame, ms.
  const std::vector<double>& frame_cpu_times() const { return cpu_ms_; }
  // Time spent handing each frame to Qt (submission and presentation), ms.
  const std::vector<double>& frame_present_times() const { return present_ms_; }
  void clear_frame_times() {
    intervals_.clear();
    cpu_ms_.clear();
    present_ms_.clear();
  }
  int frames_drawn() const { return frames_; }
  // The compute context that shares this view's device (null before the first expose).
  std::shared_ptr<vk::Context> compute_context() const { return compute_; }
  // The last frame as an RGBA image (the swapchain's BGRA order is fixed up).
  QImage grab_rgba();

 protected:
  void mouseMoveEvent(QMouseEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;

 private:
  friend class ViewRenderer;
  void push_buttons(QMouseEvent* e);

  std::unique_ptr<render::Canvas> canvas_;
  std::shared_ptr<vk::Context> compute_;  // the view's device, adopted by compute
  std::recursive_mutex queue_mutex_;      // held while Qt uses the queue; compute submits under it
  // ImGui 1.86 has no input queue: button states are applied one per frame so that a press and
  // release inside one frame are both seen.
  std::deque<std::array<bool, 3>> buttons_;
  std::array<bool, 3> held_{false, false, false};
  float mx_ = -1e30f, my_ = -1e30f, wheel_ = 0;
  std::vector<unsigned> chars_;
  bool ctrl_ = false, shift_ = false;
  bool continuous_ = false;
  int frames_ = 0;
  QElapsedTimer clock_;
  double last_start_ms_ = -1;
  std::vector<double> intervals_, cpu_ms_, present_ms_;
};

}  // namespace attn::gui
