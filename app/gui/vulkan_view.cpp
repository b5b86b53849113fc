#include "app/gui/vulkan_view.h"

#include <QGuiApplication>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QVulkanFunctions>
#include <QWheelEvent>
#include <cstdio>
#include <filesystem>

#include "app/gui/shared_device.h"
#include "compute/error.h"

namespace attn::gui {

namespace {

void append_time(std::vector<double>& v, double ms) {
  if (v.size() >= 2 * VulkanView::kFrameTimesKept)
    v.erase(v.begin(), v.begin() + std::ptrdiff_t(VulkanView::kFrameTimesKept));
  v.push_back(ms);
}

}  // namespace

class ViewRenderer : public QVulkanWindowRenderer {
 public:
  explicit ViewRenderer(VulkanView* w) : w_(w) {}

  void initResources() override {
    render::RenderTarget t;
    t.instance = w_->vulkanInstance()->vkInstance();
    t.physical = w_->physicalDevice();
    t.device = w_->device();
    t.queue = w_->graphicsQueue();
    t.queue_family = w_->graphicsQueueFamilyIndex();
    t.render_pass = w_->defaultRenderPass();
    t.samples = w_->sampleCountFlagBits();
    t.frames_in_flight = w_->concurrentFrameCount();
    render::FontSpec fonts;
    for (const char* f : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                          "/usr/share/fonts/TTF/DejaVuSans.ttf"}) {
      std::error_code ec;
      if (std::filesystem::exists(f, ec)) {
        fonts.path = f;
        break;
      }
    }
    w_->canvas_ = std::make_unique<render::Canvas>(t, fonts);
    // Compute shares the renderer's device: one VkDevice, and tiles built on the GPU land where
    // the renderer draws. The adopted context is the process-wide one the vulkan backend uses.
    try {
      w_->compute_ = share_with_compute(t, &w_->queue_mutex_);
    } catch (const Error& e) {
      std::fprintf(stderr,
                   "attnscope: compute cannot share the view's device (%s); it uses its own\n",
                   e.what());
    }
    w_->clock_.start();
    if (w_->on_canvas_ready) w_->on_canvas_ready();
  }
  void initSwapChainResources() override {}
  void releaseSwapChainResources() override {}
  void releaseResources() override {
    w_->canvas_.reset();
    // The device goes away after this (the window closed or the view destroyed; hiding keeps
    // it: PersistentResources): compute must let go of it first. MainWindow stops the worker's
    // Vulkan work in its closeEvent and its destructor (release_view_device).
    stop_sharing(w_->compute_);
    w_->compute_.reset();
  }

  void startNextFrame() override {
    VulkanView& w = *w_;
    const double now = w.clock_.nsecsElapsed() / 1e6;
    if (w.last_start_ms_ >= 0) append_time(w.intervals_, now - w.last_start_ms_);
    const double dt = w.last_start_ms_ >= 0 ? (now - w.last_start_ms_) / 1e3 : 1.0 / 60;
    w.last_start_ms_ = now;
    const QSize sz = w.swapChainImageSize();
    render::FrameInput in;
    in.dpr = float(w.devicePixelRatio());
    in.width = float(sz.width()) / in.dpr;
    in.height = float(sz.height()) / in.dpr;
    in.dt = float(std::min(dt, 0.5));
    in.mouse_x = w.mx_;
    in.mouse_y = w.my_;
    if (!w.buttons_.empty()) {
      w.held_ = w.buttons_.front();
      w.buttons_.pop_front();
    }
    for (int i = 0; i < 3; ++i) in.mouse_down[i] = w.held_[size_t(i)];
    in.wheel = w.wheel_;
    w.wheel_ = 0;
    in.chars.swap(w.chars_);
    in.ctrl = w.ctrl_;
    in.shift = w.shift_;

    VkCommandBuffer cb = w.currentCommandBuffer();
    try {
      w.canvas_->build_frame(in);
      w.canvas_->record_uploads(cb, w.currentFrame());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attnscope: frame: %s\n", e.what());
    }
    float cc[4];
    w.canvas_->clear_color(cc);
    VkClearValue clear[3]{};
    clear[0].color = {{cc[0], cc[1], cc[2], cc[3]}};
    clear[1].depthStencil = {1.f, 0};
    clear[2].color = clear[0].color;
    VkRenderPassBeginInfo rbi{};
    rbi.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO;
    rbi.renderPass = w.defaultRenderPass();
    rbi.framebuffer = w.currentFramebuffer();
    rbi.renderArea.extent = {uint32_t(sz.width()), uint32_t(sz.height())};
    rbi.clearValueCount = w.sampleCountFlagBits() > VK_SAMPLE_COUNT_1_BIT ? 3 : 2;
    rbi.pClearValues = clear;
    // Qt builds with VK_NO_PROTOTYPES: its resolved device functions record the pass.
    QVulkanDeviceFunctions* df = w.vulkanInstance()->deviceFunctions(w.device());
    df->vkCmdBeginRenderPass(cb, &rbi, VK_SUBPASS_CONTENTS_INLINE);
    w.canvas_->record_draw(cb, uint32_t(sz.width()), uint32_t(sz.height()));
    df->vkCmdEndRenderPass(cb);
    append_time(w.cpu_ms_, w.clock_.nsecsElapsed() / 1e6 - now);
    if (w.cpu_ms_.back() > 30 && qEnvironmentVariableIsSet("ATTNSCOPE_GUI_TRACE"))
      std::fprintf(stderr, "[trace] frame build+record %.1f ms\n", w.cpu_ms_.back());
    const double before_present = w.clock_.nsecsElapsed() / 1e6;
    w.frameReady();
    append_time(w.present_ms_, w.clock_.nsecsElapsed() / 1e6 - before_present);
    ++w.frames_;
    if (w.on_frame) w.on_frame();
    if (w.continuous_ || w.canvas_->wants_redraw() || !w.buttons_.empty()) w.requestUpdate();
  }

 private:
  VulkanView* w_;
};

VulkanView::VulkanView() {
  // UNORM, not SRGB: colormaps are already in display space.
  setPreferredColorFormats({VK_FORMAT_B8G8R8A8_UNORM, VK_FORMAT_R8G8B8A8_UNORM});
  // By default QVulkanWindow destroys its device whenever the window is unexposed (hidden,
  // minimised, closed), while the analysis worker may be submitting compute to that device.
  // The device lives as long as the view; the app stops its worker before destroying the view.
  setFlags(QVulkanWindow::PersistentResources);
}

QVulkanWindowRenderer* VulkanView::createRenderer() {
  return new ViewRenderer(this);
}

void VulkanView::set_continuous(bool on) {
  continuous_ = on;
  if (on) requestUpdate();
}

QImage VulkanView::grab_rgba() {
  QImage img = grab();
  // Qt 6.4 labels the swapchain's BGRA bytes as RGBA.
  const VkFormat cf = colorFormat();
  if (cf == VK_FORMAT_B8G8R8A8_UNORM || cf == VK_FORMAT_B8G8R8A8_SRGB) img = img.rgbSwapped();
  return img;
}

void VulkanView::push_buttons(QMouseEvent* e) {
  mx_ = float(e->position().x());
  my_ = float(e->position().y());
  const auto b = e->buttons();
  buttons_.push_back(
      {bool(b & Qt::LeftButton), bool(b & Qt::RightButton), bool(b & Qt::MiddleButton)});
  requestUpdate();
}

void VulkanView::mouseMoveEvent(QMouseEvent* e) {
  mx_ = float(e->position().x());
  my_ = float(e->position().y());
  requestUpdate();
}
void VulkanView::mousePressEvent(QMouseEvent* e) {
  push_buttons(e);
}
void VulkanView::mouseReleaseEvent(QMouseEvent* e) {
  push_buttons(e);
}
void VulkanView::mouseDoubleClickEvent(QMouseEvent* e) {
  // Qt folds the second press into a double-click event: replay it as press + release.
  push_buttons(e);
  buttons_.push_back({false, false, false});
}
void VulkanView::wheelEvent(QWheelEvent* e) {
  mx_ = float(e->position().x());
  my_ = float(e->position().y());
  wheel_ += float(e->angleDelta().y()) / 120.f;
  requestUpdate();
}
void VulkanView::keyPressEvent(QKeyEvent* e) {
  for (QChar c : e->text())
    if (c.isPrint()) chars_.push_back(c.unicode());
  ctrl_ = e->modifiers() & Qt::ControlModifier;
  shift_ = e->modifiers() & Qt::ShiftModifier;
  requestUpdate();
}

bool VulkanView::event(QEvent* e) {
  if (e->type() == QEvent::Leave) {
    mx_ = my_ = -1e30f;
    requestUpdate();
  }
  // Qt submits, presents and waits for the device inside its event handling (update requests,
  // exposure, resizes): compute on the shared queue waits for it.
  std::lock_guard<std::recursive_mutex> lock(queue_mutex_);
  return QVulkanWindow::event(e);
}

}  // namespace attn::gui
