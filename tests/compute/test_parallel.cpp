// The fork-join helpers of compute/parallel.h: parallel_items hands every item out once to
// workers with state of their own, stops on the first error or on cancellation, and
// thread_count reads ATTNSCOPE_THREADS the way the cpu backend's pool does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "compute/cpu/thread_pool.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "test_util.h"

using namespace attn;
using attn::test::error_of;

namespace {

TEST(ParallelItems, EveryItemOnceEachWorkerWithItsOwnState) {
  const int n = 2000;
  std::vector<std::atomic<int>> runs(n);
  std::vector<int> worker_of(n, -1);
  std::atomic<int> workers{0};
  parallel_items(n, 4, [&]() -> std::function<void(int64_t)> {
    const int me = workers++;
    auto items = std::make_shared<int>(0);  // this worker's own state
    return [&, me, items](int64_t i) {
      ++runs[size_t(i)];
      worker_of[size_t(i)] = me;
      ++*items;
    };
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(runs[size_t(i)].load(), 1) << i;
  EXPECT_GE(workers.load(), 1);
  EXPECT_LE(workers.load(), 4);
  // Every item ran on a worker that had made its state. (Not necessarily worker 0: on a loaded
  // machine the workers started later can drain all 2,000 items before it takes one.)
  std::set<int> seen(worker_of.begin(), worker_of.end());
  EXPECT_GE(*seen.begin(), 0);
  EXPECT_LT(*seen.rbegin(), workers.load());
}

TEST(ParallelItems, FirstErrorStopsTheJobAndIsRethrown) {
  const int n = 100000;
  std::atomic<int> ran{0};
  const std::string m = error_of(
      [&] {
        parallel_items(n, 4, [&]() -> std::function<void(int64_t)> {
          return [&](int64_t i) {
            ++ran;
            if (i == 10) throw Error(ErrorCode::InvalidArgument, "item 10 is bad");
            std::this_thread::yield();
          };
        });
      },
      ErrorCode::InvalidArgument);
  EXPECT_EQ(m, "item 10 is bad");
  EXPECT_LT(ran.load(), n / 2);  // the other workers stopped taking items
}

TEST(ParallelItems, CancellationStopsHandingOutItems) {
  const int n = 100000;
  std::atomic<bool> cancel{false};
  std::atomic<int> ran{0};
  parallel_items(
      n, 3,
      [&]() -> std::function<void(int64_t)> {
        return [&](int64_t i) {
          ++ran;
          if (i == 5) cancel = true;
          std::this_thread::yield();
        };
      },
      &cancel);
  EXPECT_GE(ran.load(), 1);  // item 5 at least
  EXPECT_LT(ran.load(), n / 2);
}

TEST(ParallelItems, AWorkerStartsEvenWithNoItemsSoItsErrorsReachTheCaller) {
  int started = 0;
  parallel_items(0, 4, [&]() -> std::function<void(int64_t)> {
    ++started;
    return [](int64_t) { ADD_FAILURE() << "no item to run"; };
  });
  EXPECT_EQ(started, 1);
  error_of(
      [] {
        parallel_items(0, 4, []() -> std::function<void(int64_t)> {
          throw Error(ErrorCode::InvalidArgument, "unknown backend");
        });
      },
      ErrorCode::InvalidArgument);
}

// One reading of ATTNSCOPE_THREADS for the fork-join helpers and the cpu backend's pool.
TEST(ThreadCount, ReadsAttnscopeThreadsLikeTheCpuPool) {
  const char* saved = std::getenv("ATTNSCOPE_THREADS");
  const std::string restore = saved ? saved : "";
  setenv("ATTNSCOPE_THREADS", "3", 1);
  EXPECT_EQ(thread_count(), 3);
  EXPECT_EQ(cpu::resolve_threads(0), 3);
  EXPECT_EQ(thread_count(5), 5);  // an explicit request wins
  setenv("ATTNSCOPE_THREADS", "0", 1);
  const int all = int(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(thread_count(), all);
  EXPECT_EQ(cpu::resolve_threads(0), all);
  if (saved)
    setenv("ATTNSCOPE_THREADS", restore.c_str(), 1);
  else
    unsetenv("ATTNSCOPE_THREADS");
}

}  // namespace
