#include "compute/vulkan/context.h"

#include <cstdlib>
#include <cstring>

#include "compute/error.h"
#include "compute/vulkan/device_select.h"
#include "compute/vulkan/pipeline.h"
#include "compute/vulkan/vk_check.h"

namespace attn::vk {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool validation_requested(int option) {
  if (option >= 0) return option == 1;
  if (const char* e = std::getenv("ATTNSCOPE_VK_VALIDATION")) return std::string(e) == "1";
#ifdef ATTN_VK_VALIDATION_DEFAULT
  return true;
#else
  return false;
#endif
}

bool layer_present(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool extension_present(const char* layer, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateInstanceExtensionProperties(layer, &n, ext.data());
  for (const auto& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// Queue family for compute: one that also does graphics (shareable with a renderer), else any.
int pick_queue_family(VkPhysicalDevice dev, uint32_t* timestamp_bits) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fam(n);
  vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, fam.data());
  int pick = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (pick < 0 || ((fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                     !(fam[pick].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
      pick = int(i);
  }
  if (pick >= 0 && timestamp_bits) *timestamp_bits = fam[pick].timestampValidBits;
  return pick;
}

}  // namespace

Context::Context() = default;

Context::~Context() {
  if (device_) vkDeviceWaitIdle(device_);
  pipelines_.reset();
  pool_.reset();
  if (owns_device_) {
    if (device_) vkDestroyDevice(device_, nullptr);
    if (messenger_) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      if (destroy) destroy(instance_, messenger_, nullptr);
    }
    if (instance_) vkDestroyInstance(instance_, nullptr);
  }
}

VKAPI_ATTR VkBool32 VKAPI_CALL Context::on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  auto* ctx = static_cast<Context*>(self);
  const bool error = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  if (error) ctx->validation_errors_.fetch_add(1);
  std::lock_guard<std::mutex> lock(ctx->log_mutex_);
  if (ctx->log_.size() < 200)
    ctx->log_.push_back(std::string(error ? "error: " : "warning: ") +
                        (data && data->pMessage ? data->pMessage : "(no message)"));
  return VK_FALSE;
}

std::shared_ptr<Context> Context::create(const ContextOptions& options) {
  std::shared_ptr<Context> ctx(new Context());
  ctx->owns_device_ = true;

  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&loader_version) != VK_SUCCESS ||
      loader_version < VK_API_VERSION_1_1)
    throw Error(ErrorCode::Device, "Vulkan: the loader supports only Vulkan 1.0; 1.1 is needed");

  std::vector<const char*> layers, extensions;
  const bool validation =
      validation_requested(options.validation) && layer_present(kValidationLayer);
  if (validation) {
    layers.push_back(kValidationLayer);
    if (extension_present(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
        extension_present(kValidationLayer, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "attnscope";
  app.pEngineName = "attnscope-compute";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = uint32_t(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = uint32_t(extensions.size());
  ici.ppEnabledExtensionNames = extensions.data();
  VkResult r = vkCreateInstance(&ici, nullptr, &ctx->instance_);
  if (r != VK_SUCCESS) {
    ctx->instance_ = VK_NULL_HANDLE;
    throw Error(ErrorCode::Device, std::string("Vulkan: no instance (") + result_name(r) +
                                       "); is a Vulkan driver installed (mesa-vulkan-drivers)?");
  }
  if (!extensions.empty()) {
    auto make = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(ctx->instance_, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = &Context::on_debug_message;
    mci.pUserData = ctx.get();
    if (make) ATTN_VK_CHECK(make(ctx->instance_, &mci, nullptr, &ctx->messenger_));
  }

  uint32_t n = 0;
  ATTN_VK_CHECK(vkEnumeratePhysicalDevices(ctx->instance_, &n, nullptr));
  std::vector<VkPhysicalDevice> phys(n);
  if (n) ATTN_VK_CHECK(vkEnumeratePhysicalDevices(ctx->instance_, &n, phys.data()));
  std::vector<DeviceCandidate> candidates;
  for (VkPhysicalDevice p : phys) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(p, &props);
    candidates.push_back(
        {props.deviceName, props.deviceType, props.apiVersion, pick_queue_family(p, nullptr) >= 0});
  }
  std::string request = options.device;
  if (request.empty())
    if (const char* e = std::getenv("ATTNSCOPE_VK_DEVICE")) request = e;
  int pick = choose_device(candidates, request);
  ctx->physical_ = phys[pick];
  ctx->queue_family_ = uint32_t(pick_queue_family(ctx->physical_, &ctx->timestamp_bits_));

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = ctx->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  ATTN_VK_CHECK(vkCreateDevice(ctx->physical_, &dci, nullptr, &ctx->device_));
  vkGetDeviceQueue(ctx->device_, ctx->queue_family_, 0, &ctx->queue_);
  ctx->init_device_info();
  return ctx;
}

std::shared_ptr<Context> Context::adopt(const AdoptedDevice& a) {
  require(a.physical && a.device && a.queue, ErrorCode::InvalidArgument,
          "Vulkan: adopt needs the physical device, the device and a queue");
  std::shared_ptr<Context> ctx(new Context());
  ctx->instance_ = a.instance;
  ctx->physical_ = a.physical;
  ctx->device_ = a.device;
  ctx->queue_ = a.queue;
  ctx->queue_family_ = a.queue_family;
  ctx->queue_mutex_ = a.queue_mutex;
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(a.physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fam(n);
  vkGetPhysicalDeviceQueueFamilyProperties(a.physical, &n, fam.data());
  require(a.queue_family < n && (fam[a.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT),
          ErrorCode::Device, "Vulkan: the adopted queue family does not support compute");
  ctx->timestamp_bits_ = fam[a.queue_family].timestampValidBits;
  ctx->init_device_info();
  return ctx;
}

void Context::init_device_info() {
  vkGetPhysicalDeviceProperties(physical_, &props_);
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
  device_name_ = props_.deviceName;
  if (props_.apiVersion < VK_API_VERSION_1_1)
    throw Error(ErrorCode::Device, "Vulkan: " + device_name_ + " supports only Vulkan 1.0");
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  vkGetPhysicalDeviceProperties2(physical_, &p2);
  const bool shuffle = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  if (!shuffle)
    throw Error(ErrorCode::Device,
                "Vulkan: " + device_name_ + " has no subgroup shuffle in compute shaders");
  subgroup_size_ = sub.subgroupSize;
  // Unified when every device-local type is host visible + coherent (CPU, most integrated GPUs).
  unified_memory_ = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                    props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const VkMemoryPropertyFlags all = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  bool found = false;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
    found |= (memory_.memoryTypes[i].propertyFlags & all) == all;
  unified_memory_ = unified_memory_ && found;

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  VkCommandPool pool;
  ATTN_VK_CHECK(vkCreateCommandPool(device_, &pci, nullptr, &pool));
  pool_ = UniqueCommandPool(device_, pool);
  pipelines_ = std::make_unique<PipelineCache>(device_);
}

int Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
    if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want)
      return int(i);
  return -1;
}

VkCommandBuffer Context::allocate_command_buffer() {
  std::lock_guard<std::mutex> lock(own_mutex_);
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_.get();
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  ATTN_VK_CHECK(vkAllocateCommandBuffers(device_, &ai, &cmd));
  return cmd;
}

void Context::free_command_buffer(VkCommandBuffer cmd) {
  std::lock_guard<std::mutex> lock(own_mutex_);
  vkFreeCommandBuffers(device_, pool_.get(), 1, &cmd);
}

void Context::submit_and_wait(VkCommandBuffer cmd) {
  if (lost())
    throw Error(ErrorCode::Device, "Vulkan: device " + device_name_ + " was lost earlier");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence raw;
  ATTN_VK_CHECK(vkCreateFence(device_, &fci, nullptr, &raw));
  UniqueFence fence(device_, raw);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  VkResult r;
  {
    std::unique_lock<std::recursive_mutex> app_lock;
    if (queue_mutex_) app_lock = std::unique_lock<std::recursive_mutex>(*queue_mutex_);
    std::lock_guard<std::mutex> lock(own_mutex_);
    r = vkQueueSubmit(queue_, 1, &si, fence.get());
  }
  if (r == VK_SUCCESS) r = vkWaitForFences(device_, 1, &raw, VK_TRUE, UINT64_MAX);
  if (r == VK_ERROR_DEVICE_LOST) mark_lost();
  if (r != VK_SUCCESS) throw_vk_error(r, "vkQueueSubmit/vkWaitForFences", __FILE__, __LINE__);
}

std::string Context::validation_log() const {
  std::lock_guard<std::mutex> lock(log_mutex_);
  std::string s;
  for (const auto& l : log_) s += l + "\n";
  return s;
}

void Context::clear_validation_log() {
  std::lock_guard<std::mutex> lock(log_mutex_);
  log_.clear();
  validation_errors_.store(0);
}

namespace {

struct Shared {
  std::mutex mutex;
  std::shared_ptr<Context> ctx;
  bool tried = false;
  std::string error;
};

// Never destroyed: tearing a device down from exit handlers races the driver's and the
// validation layer's own static destructors (a crash at exit was seen); the OS reclaims it.
Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

}  // namespace

std::shared_ptr<Context> shared_context(std::string* why) {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ctx && !s.tried) {
    s.tried = true;
    try {
      s.ctx = Context::create();
    } catch (const std::exception& e) {
      s.error = e.what();
    }
  }
  if (!s.ctx && why) *why = s.error;
  return s.ctx;
}

void set_shared_context(std::shared_ptr<Context> ctx) {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ctx = std::move(ctx);
  s.tried = true;
  s.error = s.ctx ? "" : "Vulkan: the shared context was removed";
}

void reset_shared_context() {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ctx.reset();
  s.tried = false;
  s.error.clear();
}

}  // namespace attn::vk
