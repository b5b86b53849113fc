// Shared by the Vulkan tests: the shared context with the Khronos validation layer on, and a
// fixture that fails a test when the layer reported an error during it.
#pragma once
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "compute/vulkan/context.h"

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
