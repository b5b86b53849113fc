#include "compute/parallel.h"

#include <algorithm>
#include <atomic>
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

// Items [0, n) handed out in order from one counter to every worker that calls work(); the first
// error stops the handing out and is kept for the caller to rethrow.
class ItemQueue {
 public:
  ItemQueue(int64_t n, const std::atomic<bool>* cancel) : n_(n), cancel_(cancel) {}

  void work(const std::function<std::function<void(int64_t)>()>& start) {
    try {
      const std::function<void(int64_t)> item = start();
      for (int64_t i = next_++; i < n_; i = next_++) {
        if (cancel_ && cancel_->load(std::memory_order_relaxed)) break;
        item(i);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      next_ = n_;  // the other workers stop too
    }
  }

  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  const int64_t n_;
  const std::atomic<bool>* cancel_;
  std::atomic<int64_t> next_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace

int thread_count(int requested) {
  return cpu::resolve_threads(requested);
}

void parallel_for(int n, const std::function<void(int)>& fn, int threads) {
  // Serial cases first: thread_count() may ask the system for its processor count (a sysfs read),
  // which costs more than the small nested calls it would decide.
  const int t = n <= 1 || in_parallel_job ? 1 : std::min(thread_count(threads), n);
  if (t <= 1) {
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
  ItemQueue items(n, nullptr);
  auto worker = [&] { items.work([&] { return [&](int64_t i) { fn(int(i)); }; }); };
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  items.rethrow();
}

void parallel_items(int64_t n, int threads,
                    const std::function<std::function<void(int64_t)>()>& start,
                    const std::atomic<bool>* cancel) {
  const int workers = int(std::clamp<int64_t>(n, 1, thread_count(threads)));
  ItemQueue items(n, cancel);
  // One parallel_for item per worker: each worker then drains the shared queue.
  parallel_for(
      workers, [&](int) { items.work(start); }, workers);
  items.rethrow();
}

}  // namespace attn
