// The cpu backend's thread pool: every item runs once per job on a valid worker index, whether
// the workers are spinning or blocked when the job starts, and errors and cancellation leave the
// pool usable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "compute/cpu/thread_pool.h"
#include "compute/error.h"

namespace attn {
namespace {

// Runs a job of n items and checks that each ran exactly once on a valid worker index.
void expect_each_item_once(cpu::ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad_worker{false};
  pool.parallel_for(n, [&](int64_t i, int w) {
    if (w < 0 || w >= pool.size()) bad_worker = true;
    hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
  });
  EXPECT_FALSE(bad_worker);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[size_t(i)].load(), 1) << "item " << i << " of " << n;
}

TEST(ThreadPool, EveryItemOnceAcrossJobsWithIdleGaps) {
  std::mt19937 rng(3);
  for (int threads : {1, 2, 3, 5}) {
    cpu::ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int job = 0; job < 200; ++job) {
      expect_each_item_once(pool, int64_t(rng() % 97));  // 0 .. 96 items, many below the pool
      // Now and then long enough for the workers to stop spinning and block, so the next job
      // starts with sleeping workers.
      if (job % 25 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

TEST(ThreadPool, SlowItemsAreSharedAndResultsComplete) {
  cpu::ThreadPool pool(3);
  std::vector<double> out(4000, 0.0);
  pool.parallel_for(int64_t(out.size()), [&](int64_t i, int) {
    double s = 0;
    for (int k = 1; k <= 200; ++k) s += double(i % 7) / k;
    out[size_t(i)] = s;
  });
  for (size_t i = 0; i < out.size(); ++i) {
    double s = 0;
    for (int k = 1; k <= 200; ++k) s += double(i % 7) / k;
    ASSERT_DOUBLE_EQ(out[i], s) << i;
  }
}

TEST(ThreadPool, ErrorIsRethrownAndThePoolStaysUsable) {
  cpu::ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t i, int) {
                                   if (i == 37) throw std::runtime_error("item 37 failed");
                                 }),
               std::runtime_error);
  expect_each_item_once(pool, 1000);
}

TEST(ThreadPool, CancellationThrowsCancelledAndThePoolStaysUsable) {
  cpu::ThreadPool pool(2);
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> ran{0};
  try {
    pool.parallel_for(
        100000,
        [&](int64_t i, int) {
          ++ran;
          if (i == 10) cancel = true;
        },
        &cancel);
    FAIL() << "expected a cancellation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
  EXPECT_LT(ran.load(), 100000);
  cancel = false;
  expect_each_item_once(pool, 1000);
}

}  // namespace
}  // namespace attn
