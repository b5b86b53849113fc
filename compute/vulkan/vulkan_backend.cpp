#include "compute/vulkan/vulkan_backend.h"

#include <chrono>

#include "compute/error.h"
#include "compute/vulkan/attention_kernels.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/selectors.h"

namespace attn {

namespace {

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(std::shared_ptr<vk::Context> ctx) : ctx_(std::move(ctx)) {}

  std::string name() const override { return "vulkan"; }

  bool supports(const Variant& v, const Problem& p, std::string* why) const override {
    std::string reason;
    std::shared_ptr<vk::Context> ctx = context(&reason);
    if (ctx) {
      if (v.selective())
        reason = "selective attention is sequential along queries; it has no Vulkan kernel";
      else
        reason = vk::attention_unsupported(*ctx, p, v.mods(), v.normaliser());
    }
    if (why) *why = reason;
    return reason.empty();
  }

  // Exact top-k and block top-k select on the GPU (selectors.h); other patterns, and shapes
  // the selector kernels do not fit, select on the CPU.
  bool select(const Variant& v, const Problem& p, Layout* layout, SelectStats* stats) override {
    if (!v.pattern() || v.selective()) return false;
    const PatternDescription d = v.pattern()->describe();
    if (d.kind == PatternDescription::Kind::Other) return false;
    std::shared_ptr<vk::Context> ctx = context(nullptr);
    if (!ctx) return false;
    SelectStats local;
    if (d.kind == PatternDescription::Kind::Topk) {
      if (!vk::topk_select_unsupported(*ctx, p, d.k).empty()) return false;
      *layout = vk::select_topk(*ctx, p, d.k, &local);
    } else if (d.kind == PatternDescription::Kind::BlockTopk) {
      if (!vk::block_topk_select_unsupported(*ctx, p, d.block).empty()) return false;
      *layout = vk::select_block_topk(*ctx, p, d.block, d.k, &local);
    } else {
      return false;
    }
    if (stats) *stats = local;
    return true;
  }

  Result execute(const Variant& v, const Problem& p, const Layout& layout,
                 const RunOptions& opt) override {
    std::string reason;
    std::shared_ptr<vk::Context> ctx = context(&reason);
    if (!ctx) throw Error(ErrorCode::Device, reason);
    if (v.selective())
      throw Error(ErrorCode::Unsupported, "vulkan: selective attention has no Vulkan kernel");
    if (opt.cancel && opt.cancel->load()) throw Error(ErrorCode::Cancelled, "vulkan: cancelled");
    Result r = vk::attention_result(
        vk::run_attention(*ctx, p, layout, v.mods(), v.normaliser(), nullptr, opt.precision), p,
        layout);
    r.stats.backend = name();
    r.stats.precision = opt.precision;
    return r;
  }

 private:
  std::shared_ptr<vk::Context> context(std::string* why) const {
    std::shared_ptr<vk::Context> ctx = ctx_ ? ctx_ : vk::shared_context(why);
    if (ctx && ctx->lost()) {
      if (why) *why = "the Vulkan device " + ctx->device_name() + " was lost";
      return nullptr;
    }
    return ctx;
  }

  std::shared_ptr<vk::Context> ctx_;
};

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<vk::Context> ctx) {
  return std::make_unique<VulkanBackend>(std::move(ctx));
}

}  // namespace attn
