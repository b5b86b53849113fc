// Shared by the Vulkan tests: the shared context with the Khronos validation layer on, and a
// fixture that fails a test when the layer reported an error during it.
#pragma once
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "compute/fallback.h"
#include "compute/vulkan/context.h"

namespace attn {

// Runs `v` on `p` the way the app does for a "vulkan" choice: through a FallbackBackend of
// `preferred` and the cpu backend. `note` receives why the cpu ran ("" when it did not).
inline Result run_falling_back(std::unique_ptr<Backend> preferred, const Variant& v,
                               const Problem& p, std::string* note) {
  FallbackBackend fb(std::move(preferred), make_backend("cpu"));
  Result r = run(v, p, fb);
  *note = fb.notes().empty() ? "" : fb.notes().front();
  return r;
}

}  // namespace attn

namespace attn::test {

// The process-wide Vulkan context (lavapipe in CI), created with validation on.
inline std::shared_ptr<vk::Context> vulkan_context(std::string* why) {
  setenv("ATTNSCOPE_VK_VALIDATION", "1", 0);
  return vk::shared_context(why);
}

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ctx_ = vulkan_context(&why);
    ASSERT_TRUE(ctx_) << "no Vulkan device (install mesa-vulkan-drivers for lavapipe): " << why;
    ctx_->clear_validation_log();
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_EQ(ctx_->validation_errors(), 0) << "Vulkan validation errors:\n"
                                              << ctx_->validation_log();
    }
  }
  std::shared_ptr<vk::Context> ctx_;
};

}  // namespace attn::test
#endif
