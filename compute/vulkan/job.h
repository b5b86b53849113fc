// One submission of compute work: uploads, dispatches, read-backs and GPU timestamps recorded
// into a single command buffer, submitted and waited for by run(). Owns every buffer it made.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "compute/vulkan/buffer.h"
#include "compute/vulkan/vk_handle.h"

namespace attn::vk {

class Context;
class ComputePipeline;

class Job {
 public:
  explicit Job(Context& ctx);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // A device buffer holding a copy of `bytes` of host data; returns its index in this job.
  int input(const void* data, size_t bytes);
  template <typename T, typename A>
  int input(const std::vector<T, A>& v) {
    return input(v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  int input(std::span<const T> v) {
    return input(v.data(), v.size_bytes());
  }
  // A device buffer the kernels fill (zeroed first).
  int buffer(size_t bytes);
  VkBuffer handle(int index) const { return buffers_[index]->get(); }

  // Records a dispatch of `pipeline` with `buffers` bound to bindings 0.. in order.
  void dispatch(const ComputePipeline& pipeline, std::initializer_list<int> buffers,
                const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz = 1);
  // Makes the writes of earlier dispatches visible to later ones.
  void compute_barrier();
  // Records a copy of an f32 [h, w] buffer into a 2D image and leaves the image in
  // SHADER_READ_ONLY_OPTIMAL layout for sampling (the old contents are discarded).
  void copy_to_image(int buffer, VkImage image, uint32_t w, uint32_t h);
  // Records a copy of an f32 [h, w] image (in SHADER_READ_ONLY_OPTIMAL layout, kept) that
  // run() delivers to `host` (w * h floats).
  void read_image(VkImage image, uint32_t w, uint32_t h, float* host);
  // Schedules a copy of the first `bytes` of buffer `index` that run() delivers to `host`.
  void read_back(int index, void* host, size_t bytes);

  // Submits, waits, performs the read-backs. Returns the seconds between the first and the last
  // dispatch measured by GPU timestamps (host wall time of the submission when the queue has no
  // timestamps).
  double run();

 private:
  struct Readback {
    int index;  // device buffer, or -1 for `staging` from an image
    void* host;
    size_t bytes;
    std::unique_ptr<Buffer> staging;
  };
  void ensure_transfers_visible();
  void end_dispatches();

  Context& ctx_;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<std::unique_ptr<Buffer>> staging_;
  std::vector<UniqueDescriptorPool> pools_;
  uint32_t sets_left_ = 0;
  UniqueQueryPool queries_;
  bool pending_transfers_ = false;
  bool dispatched_ = false;
  bool ended_ = false;
  std::vector<Readback> readbacks_;
};

}  // namespace attn::vk
