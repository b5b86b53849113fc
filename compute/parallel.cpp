#include "compute/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "compute/cpu/thread_pool.h"

namespace attn {

namespace {

// One persistent pool per thread count: starting threads for every call costs tens of
// microseconds, which dominates the many small calls of a decode step. A pool runs one job at
// a time; a caller that finds it busy (another thread's job) starts threads of its own, and a
// call from inside a job runs serially (its caller already uses every thread).
struct SharedPool {
  std::mutex busy;
  std::unique_ptr<cpu::ThreadPool> pool;
};

SharedPool& shared_pool(int threads) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<SharedPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[threads];
  if (!p) {
    p = std::make_unique<SharedPool>();
    p->pool = std::make_unique<cpu::ThreadPool>(threads);
  }
  return *p;
}

thread_local bool in_parallel_job = false;

}  // namespace

int thread_count(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("ATTNSCOPE_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(int n, const std::function<void(int)>& fn, int threads) {
  int t = std::min(thread_count(threads), n);
  if (t <= 1 || in_parallel_job) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  SharedPool& sp = shared_pool(t);
  if (std::unique_lock<std::mutex> lock(sp.busy, std::try_to_lock); lock.owns_lock()) {
    struct Flag {
      bool saved = in_parallel_job;
      Flag() { in_parallel_job = true; }
      ~Flag() { in_parallel_job = saved; }
    } flag;
    sp.pool->parallel_for(n, [&](int64_t i, int) {
      in_parallel_job = true;  // pool workers run only inside jobs
      fn(int(i));
    });
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (int i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // stop handing out work
      }
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace attn
