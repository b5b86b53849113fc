// The Vulkan backend: device choice, fallbacks (missing device, lost device, unsupported
// variant), adopted devices, and kernels against the reference on layouts built by hand
// (per-head blocks with partial masks, per-head index lists with empty rows, positions with
// gaps, odd head dimensions, rows longer than one key chunk).
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/layout.h"
#include "compute/metrics.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "compute/vulkan/attention_kernels.h"
#include "compute/vulkan/device_select.h"
#include "compute/vulkan/kernel_layout.h"
#include "compute/vulkan/vulkan_backend.h"
#include "test_util.h"
#include "test_vulkan_util.h"

using namespace attn;

// LeakSanitizer (asan preset): the Vulkan driver (Mesa's lavapipe and its LLVM JIT) and the
// validation layer keep allocations of their own until process exit; they are not ours.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libvulkan_lvp.so\nleak:libVkLayer_khronos_validation.so\nleak:libLLVM\n";
}

namespace {

// Relative output error and worst row-statistic error of `r` against the reference over r's
// own layout.
void expect_matches_reference(const Variant& v, const Problem& p, const Result& r,
                              const std::string& what, double tol = 1e-4) {
  auto reference = make_reference_backend();
  Result ref = reference->execute(v, p, r.layout, {});
  ASSERT_EQ(r.o.size(), ref.o.size()) << what;
  for (float x : r.o) ASSERT_TRUE(std::isfinite(x)) << what << ": non-finite output";
  double norm = 0;
  for (float x : ref.o) norm += double(x) * x;
  if (norm > 0) {
    EXPECT_LT(relative_error(r.o, ref.o), tol) << what;
  } else {
    for (float x : r.o) ASSERT_EQ(x, 0.0f) << what;
  }
  for (size_t i = 0; i < ref.row_stat.size(); ++i)
    ASSERT_NEAR(r.row_stat[i], ref.row_stat[i], tol * (1.0 + std::abs(ref.row_stat[i])))
        << what << " row " << i;
}

// Keeps (q, k) when a hash of the positions says so: an irregular mask for partial blocks.
class HashMask : public Mask {
 public:
  bool keep(int32_t qp, int32_t kp) const override { return (qp * 7 + kp * 13) % 5 != 0; }
};

using VulkanBackendTest = test::VulkanTest;

vk::DeviceCandidate dev(const char* name, VkPhysicalDeviceType type, bool compute = true) {
  return {name, type, VK_API_VERSION_1_3, compute};
}

TEST(VulkanDeviceSelect, PrefersDiscreteThenIntegratedThenCpu) {
  std::vector<vk::DeviceCandidate> d = {dev("llvmpipe (LLVM 15)", VK_PHYSICAL_DEVICE_TYPE_CPU),
                                        dev("Intel UHD", VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU),
                                        dev("NVIDIA H200", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)};
  EXPECT_EQ(vk::choose_device(d, ""), 2);
  d.pop_back();
  EXPECT_EQ(vk::choose_device(d, ""), 1);
  d.pop_back();
  EXPECT_EQ(vk::choose_device(d, ""), 0);
}

TEST(VulkanDeviceSelect, ByIndexNameOrKind) {
  std::vector<vk::DeviceCandidate> d = {dev("llvmpipe (LLVM 15)", VK_PHYSICAL_DEVICE_TYPE_CPU),
                                        dev("NVIDIA H200", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU),
                                        dev("NVIDIA T4", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)};
  EXPECT_EQ(vk::choose_device(d, "0"), 0);
  EXPECT_EQ(vk::choose_device(d, "2"), 2);
  EXPECT_EQ(vk::choose_device(d, "t4"), 2);
  EXPECT_EQ(vk::choose_device(d, "lavapipe"), 0);
  EXPECT_EQ(vk::choose_device(d, "cpu"), 0);
  EXPECT_EQ(vk::choose_device(d, "gpu"), 1);
}

TEST(VulkanDeviceSelect, UnmatchedRequestNamesTheDevices) {
  std::vector<vk::DeviceCandidate> d = {dev("llvmpipe (LLVM 15)", VK_PHYSICAL_DEVICE_TYPE_CPU),
                                        dev("Broken", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, false)};
  try {
    vk::choose_device(d, "nonexistent");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Device);
    EXPECT_NE(std::string(e.what()).find("nonexistent"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("llvmpipe"), std::string::npos) << e.what();
  }
  // A device without a compute queue is never chosen, not even by index or name.
  EXPECT_EQ(vk::choose_device(d, ""), 0);
  EXPECT_THROW(vk::choose_device(d, "1"), Error);
  EXPECT_THROW(vk::choose_device(d, "broken"), Error);
  EXPECT_THROW(vk::choose_device({}, ""), Error);
}

TEST_F(VulkanBackendTest, IsRegisteredAndReportsItsDevice) {
  auto names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "vulkan"), names.end());
  EXPECT_EQ(make_backend("vulkan")->name(), "vulkan");
  EXPECT_FALSE(ctx_->device_name().empty());
  EXPECT_GE(ctx_->subgroup_size(), 1u);
  std::printf("Vulkan device: %s (%s), validation %s\n", ctx_->device_name().c_str(),
              vk::device_type_name(ctx_->device_type()), ctx_->validation_enabled() ? "on" : "off");
}

// The messenger the tests rely on really reports misuse: an invalid call raises the count.
TEST_F(VulkanBackendTest, ValidationLayerReportsMisuse) {
  if (!ctx_->validation_enabled()) GTEST_SKIP() << "VK_LAYER_KHRONOS_validation not installed";
  VkBufferCreateInfo bad{};
  bad.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bad.size = 0;  // VUID-VkBufferCreateInfo-size-00912: size must be greater than 0
  bad.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(ctx_->device(), &bad, nullptr, &buffer) == VK_SUCCESS && buffer)
    vkDestroyBuffer(ctx_->device(), buffer, nullptr);
  EXPECT_GT(ctx_->validation_errors(), 0);
  EXPECT_NE(ctx_->validation_log().find("size"), std::string::npos) << ctx_->validation_log();
  ctx_->clear_validation_log();  // the misuse was deliberate
}

TEST_F(VulkanBackendTest, MissingDeviceFallsBackToCpu) {
  setenv("ATTNSCOPE_VK_DEVICE", "nonexistent", 1);
  vk::reset_shared_context();
  auto gpu = make_backend("vulkan");  // constructing never throws for a missing device
  Variant v = make_variant("window(size=8)");
  Problem p = random_problem(2, 1, 40, 40, 16, true, 3);
  std::string why;
  EXPECT_FALSE(gpu->supports(v, p, &why));
  EXPECT_NE(why.find("nonexistent"), std::string::npos) << why;
  try {
    gpu->execute(v, p, v.select(p), {});
    ADD_FAILURE() << "execute without a device must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Device);
  }
  std::string note;
  Result r = run_falling_back(std::move(gpu), v, p, &note);
  EXPECT_EQ(r.stats.backend, "cpu");
  EXPECT_NE(note.find("nonexistent"), std::string::npos) << note;
  expect_matches_reference(v, p, r, "cpu fallback");
  unsetenv("ATTNSCOPE_VK_DEVICE");
  vk::reset_shared_context();
  std::string again;
  EXPECT_TRUE(vk::shared_context(&again)) << again;
}

TEST_F(VulkanBackendTest, SelectiveIsUnsupportedAndFallsBack) {
  auto gpu = make_backend("vulkan");
  Variant v = make_variant("selective");
  Problem p = random_problem(1, 1, 30, 30, 16, true, 4);
  std::string why;
  EXPECT_FALSE(gpu->supports(v, p, &why));
  EXPECT_NE(why.find("selective"), std::string::npos) << why;
  try {
    run(v, p, *gpu);
    ADD_FAILURE() << "run must refuse an unsupported variant";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
  std::string note;
  Result r = run_falling_back(std::move(gpu), v, p, &note);
  EXPECT_EQ(r.stats.backend, "cpu");
  EXPECT_FALSE(note.empty());
}

TEST_F(VulkanBackendTest, FallbackBackendRunsEachVariantWhereItCan) {
  // What `attnscope run --backend vulkan` uses: one backend object, per-variant choice.
  auto both = make_backend_with_fallback("vulkan");
  auto* fb = dynamic_cast<FallbackBackend*>(both.get());
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(both->name(), "vulkan");
  Problem p = random_problem(2, 1, 130, 130, 32, true, 6);
  Variant dense = make_variant("dense"), sel = make_variant("selective");
  Result rd = run(dense, p, *both);
  EXPECT_EQ(rd.stats.backend, "vulkan");
  expect_matches_reference(dense, p, rd, "dense via fallback backend");
  EXPECT_TRUE(fb->notes().empty());
  std::vector<Problem> layers{p, random_problem(2, 1, 130, 130, 32, true, 7)};
  std::vector<Result> rs = run_layers(sel, layers, *both);
  ASSERT_EQ(rs.size(), 2u);
  for (size_t l = 0; l < rs.size(); ++l) {
    EXPECT_EQ(rs[l].stats.backend, "cpu");
    expect_matches_reference(sel, layers[l], rs[l], "selective via fallback backend");
  }
  ASSERT_EQ(fb->notes().size(), 1u);  // one note per distinct reason, not per layer
  EXPECT_NE(fb->notes()[0].find("selective"), std::string::npos) << fb->notes()[0];
  EXPECT_EQ(make_backend_with_fallback("cpu")->name(), "cpu");
  EXPECT_THROW(make_backend_with_fallback("tpu"), Error);
}

TEST_F(VulkanBackendTest, LostDeviceFallsBackToCpu) {
  // A private device, marked lost the way a VK_ERROR_DEVICE_LOST from a submission marks it.
  auto own = vk::Context::create({"", 1});
  auto gpu = make_vulkan_backend(own);
  Variant v = make_variant("dense");
  Problem p = random_problem(1, 1, 20, 20, 16, true, 5);
  EXPECT_EQ(run(v, p, *gpu).stats.backend, "vulkan");
  own->mark_lost();
  std::string why;
  EXPECT_FALSE(gpu->supports(v, p, &why));
  EXPECT_NE(why.find("lost"), std::string::npos) << why;
  EXPECT_THROW(gpu->execute(v, p, v.select(p), {}), Error);
  std::string note;
  Result r = run_falling_back(std::move(gpu), v, p, &note);
  EXPECT_EQ(r.stats.backend, "cpu");
  EXPECT_NE(note.find("lost"), std::string::npos) << note;
  EXPECT_EQ(own->validation_errors(), 0) << own->validation_log();
}

TEST_F(VulkanBackendTest, CancelledBeforeTheKernelIsAnError) {
  auto gpu = make_backend("vulkan");
  std::atomic<bool> cancel{true};
  RunOptions opt;
  opt.cancel = &cancel;
  Problem p = random_problem(1, 1, 20, 20, 16, true, 6);
  try {
    run(make_variant("dense"), p, *gpu, opt);
    ADD_FAILURE() << "expected cancellation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
}

// An app-owned instance and device (as the renderer creates them), adopted for compute.
TEST_F(VulkanBackendTest, AdoptedDeviceRunsAndIsNotDestroyed) {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{};
  ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ici.pApplicationInfo = &app;
  VkInstance instance;
  ASSERT_EQ(vkCreateInstance(&ici, nullptr, &instance), VK_SUCCESS);
  uint32_t n = 1;
  VkPhysicalDevice phys;
  vkEnumeratePhysicalDevices(instance, &n, &phys);
  ASSERT_EQ(n, 1u);
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, nullptr);
  std::vector<VkQueueFamilyProperties> fam(nf);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, fam.data());
  uint32_t family = 0;
  while (!(fam[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  float prio = 1;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkDevice device;
  ASSERT_EQ(vkCreateDevice(phys, &dci, nullptr, &device), VK_SUCCESS);
  VkQueue queue;
  vkGetDeviceQueue(device, family, 0, &queue);
  std::recursive_mutex queue_mutex;
  {
    auto ctx = vk::Context::adopt({instance, phys, device, queue, family, &queue_mutex});
    auto gpu = make_vulkan_backend(ctx);
    Variant v = make_variant("sinks_window(sinks=2,window=16)+softcap(cap=5)");
    Problem p = random_problem(2, 2, 90, 90, 32, true, 7);
    Result r = run(v, p, *gpu);
    EXPECT_EQ(r.stats.backend, "vulkan");
    expect_matches_reference(v, p, r, "adopted device");
  }
  // The context is gone; the app's device still works and is the app's to destroy.
  EXPECT_EQ(vkDeviceWaitIdle(device), VK_SUCCESS);
  vkDestroyDevice(device, nullptr);
  vkDestroyInstance(instance, nullptr);
}

// Per-head block layouts with random kept blocks, random full/partial flags, a hash mask, GQA,
// fewer queries than keys and positions with gaps.
TEST_F(VulkanBackendTest, BlockLayoutsPerHeadWithPartialMasks) {
  Problem p = random_problem(4, 2, 150, 230, 40, true, 8);
  p.k_pos.resize(p.n_k);
  p.q_pos.resize(p.n_q);
  for (int j = 0; j < p.n_k; ++j) p.k_pos[j] = 3 * j + (j % 2);
  for (int i = 0; i < p.n_q; ++i) p.q_pos[i] = p.k_pos[p.n_k - p.n_q + i] + 1;
  std::mt19937 rng(9);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.mask = std::make_shared<HashMask>();
  for (int h = 0; h < p.n_heads; ++h) {
    BlockLayout b;
    b.bq = 48;
    b.bk = 20 + 4 * h;  // not a multiple of 32: partial tiles straddle mask words
    b.n_qb = (p.n_q + b.bq - 1) / b.bq;
    b.n_kb = (p.n_k + b.bk - 1) / b.bk;
    b.row_ptr.push_back(0);
    for (int r = 0; r < b.n_qb; ++r) {
      for (int c = 0; c < b.n_kb; ++c)
        if (rng() % 3 != 0) {
          b.col.push_back(c);
          b.full.push_back(rng() % 2);
        }
      b.row_ptr.push_back(int32_t(b.col.size()));
    }
    l.blocks.push_back(b);
  }
  auto gpu = make_backend("vulkan");
  for (const char* spec : {"dense", "dense+entmax15", "dense+alibi+softplus", "dense+relu"}) {
    Variant v = make_variant(spec);
    Result r = gpu->execute(v, p, l, {});
    expect_matches_reference(v, p, r, spec);
  }
}

// Per-head index lists, some rows empty, some listing future keys that the causal rule drops.
TEST_F(VulkanBackendTest, IndexLayoutsPerHeadWithEmptyRows) {
  Problem p = random_problem(3, 1, 70, 100, 32, true, 10);
  std::mt19937 rng(11);
  Layout l;
  l.kind = Layout::Kind::Indices;
  for (int h = 0; h < p.n_heads; ++h) {
    IndexLayout x;
    x.row_ptr.push_back(0);
    for (int i = 0; i < p.n_q; ++i) {
      if (i % 7 != 3)
        for (int j = 0; j < p.n_k; ++j)
          if (rng() % 4 == 0) x.col.push_back(j);
      x.row_ptr.push_back(int64_t(x.col.size()));
    }
    l.indices.push_back(x);
  }
  auto gpu = make_backend("vulkan");
  for (const char* spec :
       {"dense", "dense+entmax15", "dense+sigmoid", "dense+temperature(t=0.5)"}) {
    Variant v = make_variant(spec);
    Result r = gpu->execute(v, p, l, {});
    expect_matches_reference(v, p, r, spec);
    for (int h = 0; h < p.n_heads; ++h) {
      EXPECT_EQ(r.o_row(h, 3)[0], 0.0f) << spec;  // empty row: O = 0, statistic 0
      EXPECT_EQ(r.row_stat[size_t(h) * p.n_q + 3], 0.0f) << spec;
    }
  }
}

// Line layouts run as lines (no per-query lists): per-head and shared columns and diagonals,
// columns lying on diagonals, offsets past every key and future keys, causal and bidirectional
// with n_q != n_k, GQA, every normaliser's passes, a modifier that reads key positions, and the
// unrolled build with small key chunks.
TEST_F(VulkanBackendTest, LineLayoutsRunAsLines) {
  struct Case {
    int H, Hkv, n_q, n_k, d;
    bool causal, per_head;
  };
  std::vector<Case> cases = {{2, 1, 77, 77, 64, true, true},
                             {3, 3, 130, 300, 24, false, true},
                             {2, 2, 1, 50, 16, true, false},
                             {2, 1, 200, 131, 32, true, false}};
  if (!test::quick()) cases.push_back({1, 1, 1500, 1500, 64, true, true});
  uint64_t seed = 40;
  for (const Case& k : cases) {
    const Problem p = random_problem(k.H, k.Hkv, k.n_q, k.n_k, k.d, k.causal, seed++);
    std::mt19937_64 rng(seed++);
    Layout l;
    l.kind = Layout::Kind::Lines;
    for (int h = 0; h < (k.per_head ? p.n_heads : 1); ++h) {
      LineLayout x;
      for (int e = 0; e < 12 + 20 * h; ++e) x.columns.push_back(int32_t(rng() % uint64_t(p.n_k)));
      std::sort(x.columns.begin(), x.columns.end());
      x.columns.erase(std::unique(x.columns.begin(), x.columns.end()), x.columns.end());
      // Offsets from past the last key to before the first (future keys, when bidirectional),
      // plus the diagonal through every column's first query, so columns and diagonals meet.
      const int64_t span = int64_t(p.qpos(p.n_q - 1)) + 1;
      std::vector<int64_t> offs = {0, 1, 3, span + 5, -int64_t(p.n_k) - 7, int64_t(1) << 31};
      for (int e = 0; e < 15; ++e) offs.push_back(int64_t(rng() % uint64_t(2 * span)) - span / 2);
      for (int32_t c : x.columns) offs.push_back(int64_t(p.qpos(0)) - c);
      std::sort(offs.begin(), offs.end(), std::greater<>());
      offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
      x.offsets = offs;
      l.lines.push_back(x);
    }
    const vk::KernelLayout kl = vk::make_kernel_layout(p, l, 32, -1, true);
    ASSERT_TRUE(kl.lines);
    EXPECT_TRUE(kl.idx.empty());
    int64_t kept = 0;
    for (int h = 0; h < p.n_heads; ++h) kept += layout_kept_entries(l, p, h);
    EXPECT_EQ(kl.computed_entries, double(kept));
    auto gpu = make_backend("vulkan");
    const std::string what = std::to_string(p.n_q) + "x" + std::to_string(p.n_k);
    for (const char* spec : {"dense", "dense+entmax15", "dense+alibi+sigmoid"}) {
      Variant v = make_variant(spec);
      Result r = gpu->execute(v, p, l, {});
      EXPECT_EQ(r.layout.kind, Layout::Kind::Lines);
      expect_matches_reference(v, p, r, what + " " + spec);
    }
    vk::KernelConfig c;
    c.lanes = 4;
    c.d_padded = (p.d + 15) / 16 * 16;
    c.rows = 32;
    c.tile = 8;
    for (bool unrolled : {true, false}) {
      c.unrolled = unrolled;
      c.keys_per_dispatch = unrolled ? 0 : 28;
      Variant v = make_variant("dense+entmax15");
      const Result r =
          vk::attention_result(vk::run_attention(*ctx_, p, l, v.mods(), v.normaliser(), &c), p, l);
      expect_matches_reference(v, p, r, what + (unrolled ? " unrolled" : " chunks of 28"));
    }
  }
  // Explicit positions: the lines become the lists they stand for.
  Problem p = random_problem(1, 1, 40, 40, 16, true, 3);
  p.k_pos.resize(40);
  p.q_pos.resize(40);
  for (int j = 0; j < 40; ++j) p.k_pos[j] = p.q_pos[j] = 2 * j;
  Layout l;
  l.kind = Layout::Kind::Lines;
  l.lines = {LineLayout{{0, 5}, {4, 0}}};
  const vk::KernelLayout kl = vk::make_kernel_layout(p, l, 32, -1, true);
  EXPECT_FALSE(kl.lines);
  EXPECT_TRUE(kl.indices);
  Result r = make_backend("vulkan")->execute(make_variant("dense"), p, l, {});
  expect_matches_reference(make_variant("dense"), p, r, "positions");
}

TEST_F(VulkanBackendTest, HeadDimensionsViaPaddingAndSpecialisation) {
  auto gpu = make_backend("vulkan");
  for (int d : {8, 24, 80, 96, 200, 256}) {
    Problem p = random_problem(2, 1, 70, 70, d, d % 3 == 0, 12 + d);
    Variant v = make_variant(d == 80 ? "window(size=16)+softcap(cap=5)" : "dense");
    Result r = run(v, p, *gpu);
    expect_matches_reference(v, p, r, "d=" + std::to_string(d));
  }
  std::string why;
  EXPECT_FALSE(
      gpu->supports(make_variant("dense"), random_problem(1, 1, 2, 2, 300, true, 1), &why));
  EXPECT_NE(why.find("300"), std::string::npos) << why;
}

// Rows longer than one key chunk (lavapipe's silent loop limit is why chunks exist): every pass
// of every normaliser must carry its state across chunk dispatches.
TEST_F(VulkanBackendTest, RowsLongerThanAKeyChunk) {
  auto gpu = make_backend("vulkan");
  for (const char* spec : {"dense", "dense+entmax15", "window(size=3000)+sigmoid", "topk(k=40)",
                           "block_topk(block=64,k=8)+softplus"}) {
    for (bool causal : {true, false}) {
      Problem p = random_problem(1, 1, 24, 12289, 64, causal, 13);
      Variant v = make_variant(spec);
      Result r = run(v, p, *gpu);
      expect_matches_reference(v, p, r, std::string(spec) + (causal ? " causal" : " bidir"));
    }
  }
}

// The unrolled build (what GPUs run; lavapipe normally runs the looped one, which compiles much
// faster) and the chunked schedule with small chunks, on every layout kind and normaliser.
TEST_F(VulkanBackendTest, UnrolledGpuBuildAndSmallKeyChunks) {
  Problem p = random_problem(2, 1, 90, 150, 32, true, 16);
  for (bool unrolled : {true, false}) {
    vk::KernelConfig c;
    c.lanes = 4;
    c.d_padded = 32;
    c.rows = 32;
    c.tile = 8;
    c.unrolled = unrolled;
    // Chunks of 28 keys start inside 32-bit mask words, so a tile's kept bits straddle two.
    c.keys_per_dispatch = unrolled ? 0 : 28;
    for (const char* spec : {"dense+entmax15", "window(size=20)+alibi", "topk(k=9)+softplus",
                             "block_topk(block=16,k=2)+relu2", "sinks_window(sinks=3,window=9)",
                             "hash-masked blocks"}) {
      const bool hashed = std::string(spec) == "hash-masked blocks";
      Variant v = make_variant(hashed ? "dense" : spec);
      Layout l = v.select(p);
      if (hashed) {  // every causal 64x64 block partial, kept bits from an irregular mask
        l.kind = Layout::Kind::Blocks;
        l.mask = std::make_shared<HashMask>();
        BlockLayout b;
        b.bq = b.bk = 64;
        b.n_qb = 2;
        b.n_kb = 3;
        b.row_ptr = {0, 3, 6};
        b.col = {0, 1, 2, 0, 1, 2};
        b.full.assign(6, 0);
        l.blocks = {b};
      }
      const Result r =
          vk::attention_result(vk::run_attention(*ctx_, p, l, v.mods(), v.normaliser(), &c), p, l);
      expect_matches_reference(v, p, r, std::string(spec) + (unrolled ? " unrolled" : " chunks"));
    }
  }
}

TEST_F(VulkanBackendTest, SparseLayoutsSkipWorkAndTimesAreMeasured) {
  auto gpu = make_backend("vulkan");
  Problem p = random_problem(1, 1, 4096, 4096, 32, true, 14);
  Result dense = run(make_variant("dense"), p, *gpu);
  Result window = run(make_variant("window(size=64)"), p, *gpu);
  EXPECT_GT(dense.stats.kernel_seconds, 0.0);
  EXPECT_GT(window.stats.kernel_seconds, 0.0);
  // Dense causal scores ~N^2/2 entries; the window only its blocks near the diagonal.
  EXPECT_GE(dense.stats.counted.flops, 4.0 * 32 * 4096.0 * 4097 / 2);
  EXPECT_LT(window.stats.counted.flops, 0.1 * dense.stats.counted.flops);
  EXPECT_GE(window.stats.counted.flops, 4.0 * 32 * double(window.stats.kept_entries));
  expect_matches_reference(make_variant("window(size=64)"), p, window, "window 4096");
}

TEST_F(VulkanBackendTest, LayoutThatDoesNotFitIsAnError) {
  auto gpu = make_backend("vulkan");
  Problem p = random_problem(1, 1, 64, 64, 16, true, 15);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  BlockLayout b;
  b.bq = 16;
  b.bk = 16;
  b.n_qb = 2;  // 64 queries need 4 blocks of 16
  b.n_kb = 4;
  b.row_ptr = {0, 0, 0};
  l.blocks.push_back(b);
  try {
    gpu->execute(make_variant("dense"), p, l, {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("query blocks"), std::string::npos) << e.what();
  }
  Layout x;
  x.kind = Layout::Kind::Indices;
  x.indices.push_back({{0, 1}, {99}});
  EXPECT_THROW(gpu->execute(make_variant("dense"), p, x, {}), Error);
}

}  // namespace
#endif  // ATTN_HAVE_VULKAN
