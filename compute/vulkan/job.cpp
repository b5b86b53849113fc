#include "compute/vulkan/job.h"

#include <chrono>
#include <cstring>

#include "compute/error.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/pipeline.h"
#include "compute/vulkan/vk_check.h"

namespace attn::vk {

namespace {

void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src;
  mb.dstAccessMask = dst;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void image_barrier(VkCommandBuffer cmd, VkImage image, VkImageLayout from, VkImageLayout to,
                   VkPipelineStageFlags src_stage, VkAccessFlags src,
                   VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
  VkImageMemoryBarrier ib{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
  ib.srcAccessMask = src;
  ib.dstAccessMask = dst;
  ib.oldLayout = from;
  ib.newLayout = to;
  ib.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  ib.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  ib.image = image;
  ib.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, nullptr, 0, nullptr, 1, &ib);
}

VkBufferImageCopy image_region(uint32_t w, uint32_t h) {
  VkBufferImageCopy region{};
  region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  region.imageExtent = {w, h, 1};
  return region;
}

}  // namespace

Job::Job(Context& ctx) : ctx_(ctx) {
  if (ctx.lost())
    throw Error(ErrorCode::Device, "Vulkan: device " + ctx.device_name() + " was lost earlier");
  cmd_ = ctx.allocate_command_buffer();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  ATTN_VK_CHECK(vkBeginCommandBuffer(cmd_, &bi));
  if (ctx.has_timestamps()) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = 2;
    VkQueryPool pool;
    ATTN_VK_CHECK(vkCreateQueryPool(ctx.device(), &qci, nullptr, &pool));
    queries_ = UniqueQueryPool(ctx.device(), pool);
    vkCmdResetQueryPool(cmd_, pool, 0, 2);
  }
}

Job::~Job() {
  if (cmd_) ctx_.free_command_buffer(cmd_);
}

int Job::input(const void* data, size_t bytes) {
  auto buf = std::make_unique<Buffer>(ctx_, bytes, Buffer::Kind::Device);
  if (bytes > 0) {
    if (buf->mapped()) {
      std::memcpy(buf->mapped(), data, bytes);
    } else {
      auto staging = std::make_unique<Buffer>(ctx_, bytes, Buffer::Kind::Staging);
      std::memcpy(staging->mapped(), data, bytes);
      VkBufferCopy copy{0, 0, staging->size()};
      vkCmdCopyBuffer(cmd_, staging->get(), buf->get(), 1, &copy);
      staging_.push_back(std::move(staging));
      pending_transfers_ = true;
    }
  }
  buffers_.push_back(std::move(buf));
  return int(buffers_.size()) - 1;
}

int Job::buffer(size_t bytes) {
  auto buf = std::make_unique<Buffer>(ctx_, bytes, Buffer::Kind::Device);
  if (buf->mapped()) {
    std::memset(buf->mapped(), 0, buf->size());
  } else {
    vkCmdFillBuffer(cmd_, buf->get(), 0, VK_WHOLE_SIZE, 0);
    pending_transfers_ = true;
  }
  buffers_.push_back(std::move(buf));
  return int(buffers_.size()) - 1;
}

void Job::ensure_transfers_visible() {
  if (!pending_transfers_) return;
  memory_barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  pending_transfers_ = false;
}

void Job::dispatch(const ComputePipeline& pipeline, std::initializer_list<int> buffers,
                   const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  require(buffers.size() == pipeline.n_buffers(), ErrorCode::InvalidArgument,
          "Vulkan: " + pipeline.name() + " takes " + std::to_string(pipeline.n_buffers()) +
              " buffers, got " + std::to_string(buffers.size()));
  require(push_bytes == pipeline.push_bytes(), ErrorCode::InvalidArgument,
          "Vulkan: " + pipeline.name() + " push constants size mismatch");
  const auto& lim = ctx_.limits().maxComputeWorkGroupCount;
  require(gx <= lim[0] && gy <= lim[1] && gz <= lim[2], ErrorCode::Unsupported,
          "Vulkan: " + pipeline.name() + " needs " + std::to_string(gx) + " x " +
              std::to_string(gy) + " x " + std::to_string(gz) +
              " workgroups, over the device limit");
  if (gx == 0 || gy == 0 || gz == 0) return;
  ensure_transfers_visible();
  if (!dispatched_) {
    if (queries_)
      vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_.get(), 0);
    dispatched_ = true;
  }
  VkDevice dev = ctx_.device();
  if (sets_left_ == 0) {
    const uint32_t sets = 16;
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * 16};
    VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pci.maxSets = sets;
    pci.poolSizeCount = 1;
    pci.pPoolSizes = &size;
    VkDescriptorPool pool;
    ATTN_VK_CHECK(vkCreateDescriptorPool(dev, &pci, nullptr, &pool));
    pools_.emplace_back(dev, pool);
    sets_left_ = sets;
  }
  require(pipeline.n_buffers() <= 16, ErrorCode::InvalidArgument, "Vulkan: too many bindings");
  VkDescriptorSetLayout dsl = pipeline.set_layout();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pools_.back().get();
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &dsl;
  VkDescriptorSet set;
  ATTN_VK_CHECK(vkAllocateDescriptorSets(dev, &ai, &set));
  --sets_left_;
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers.size());
  for (int b : buffers) infos.push_back({buffers_.at(size_t(b))->get(), 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev, uint32_t(writes.size()), writes.data(), 0, nullptr);
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline());
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0,
                          nullptr);
  if (push_bytes)
    vkCmdPushConstants(cmd_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cmd_, gx, gy, gz);
}

void Job::compute_barrier() {
  memory_barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

void Job::end_dispatches() {
  if (ended_) return;
  ended_ = true;
  if (dispatched_ && queries_)
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_.get(), 1);
  memory_barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
}

void Job::copy_to_image(int buffer, VkImage image, uint32_t w, uint32_t h) {
  end_dispatches();
  image_barrier(cmd_, image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_ACCESS_TRANSFER_WRITE_BIT);
  VkBufferImageCopy region = image_region(w, h);
  vkCmdCopyBufferToImage(cmd_, buffers_.at(size_t(buffer))->get(), image,
                         VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &region);
  image_barrier(cmd_, image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL, VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
}

void Job::read_image(VkImage image, uint32_t w, uint32_t h, float* host) {
  end_dispatches();
  size_t bytes = size_t(w) * h * sizeof(float);
  auto staging = std::make_unique<Buffer>(ctx_, bytes, Buffer::Kind::Staging);
  image_barrier(cmd_, image, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL,
                VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
  VkBufferImageCopy region = image_region(w, h);
  vkCmdCopyImageToBuffer(cmd_, image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, staging->get(), 1,
                         &region);
  image_barrier(cmd_, image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_SHADER_READ_BIT);
  readbacks_.push_back({-1, host, bytes, std::move(staging)});
}

void Job::read_back(int index, void* host, size_t bytes) {
  require(bytes <= buffers_.at(size_t(index))->size(), ErrorCode::InvalidArgument,
          "Vulkan: read-back larger than its buffer");
  readbacks_.push_back({index, host, bytes, nullptr});
}

double Job::run() {
  end_dispatches();
  for (Readback& r : readbacks_) {
    if (r.index < 0 || buffers_[r.index]->mapped() || r.bytes == 0) continue;
    r.staging = std::make_unique<Buffer>(ctx_, r.bytes, Buffer::Kind::Staging);
    VkBufferCopy copy{0, 0, r.staging->size()};
    vkCmdCopyBuffer(cmd_, buffers_[r.index]->get(), r.staging->get(), 1, &copy);
  }
  memory_barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  ATTN_VK_CHECK(vkEndCommandBuffer(cmd_));
  auto t0 = std::chrono::steady_clock::now();
  ctx_.submit_and_wait(cmd_);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Readback& r : readbacks_) {
    if (r.bytes == 0) continue;
    const void* src = r.staging ? r.staging->mapped() : buffers_[r.index]->mapped();
    std::memcpy(r.host, src, r.bytes);
  }
  if (!dispatched_) return 0.0;
  if (!queries_) return wall;
  uint64_t ts[2] = {0, 0};
  ATTN_VK_CHECK(vkGetQueryPoolResults(ctx_.device(), queries_.get(), 0, 2, sizeof ts, ts,
                                      sizeof(uint64_t),
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  return double((ts[1] - ts[0]) & ctx_.timestamp_mask()) * ctx_.timestamp_period_ns() * 1e-9;
}

}  // namespace attn::vk
