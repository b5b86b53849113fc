#include "compute/vulkan/vulkan_backend.h"

#include <chrono>

#include "compute/error.h"
#include "compute/vulkan/attention_kernels.h"
#include "compute/vulkan/context.h"

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

  Result execute(const Variant& v, const Problem& p, const Layout& layout,
                 const RunOptions& opt) override {
    std::string reason;
    std::shared_ptr<vk::Context> ctx = context(&reason);
    if (!ctx) throw Error(ErrorCode::Device, reason);
    if (v.selective())
      throw Error(ErrorCode::Unsupported, "vulkan: selective attention has no Vulkan kernel");
    if (opt.cancel && opt.cancel->load()) throw Error(ErrorCode::Cancelled, "vulkan: cancelled");
    vk::AttentionOutput out = vk::run_attention(*ctx, p, layout, v.mods(), v.normaliser());
    Result r;
    r.n_heads = p.n_heads;
    r.n_q = p.n_q;
    r.d = p.d;
    r.o = std::move(out.o);
    r.row_stat = std::move(out.row_stat);
    r.layout = layout;
    r.stats.backend = name();
    r.stats.counted.flops = out.flops;
    r.stats.counted.bytes = out.bytes;
    r.stats.kernel_seconds = out.seconds;
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
