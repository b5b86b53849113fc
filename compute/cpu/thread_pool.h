// A small persistent thread pool for the cpu backend: dynamic scheduling of independent work
// items, the calling thread taking part, cooperative cancellation between items.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attn::cpu {

// Threads to use: `requested` when > 0, else env ATTNSCOPE_THREADS when set and > 0, else
// std::thread::hardware_concurrency() (at least 1).
int resolve_threads(int requested);

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // total threads, the caller included
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Runs fn(item, worker) for every item in [0, n); worker is in [0, size()). Items are handed
  // out in order, one at a time. When *cancel becomes true no new item starts and the call
  // throws Error(Cancelled); an exception thrown by fn stops the run and is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int)>& fn,
                    const std::atomic<bool>* cancel = nullptr);

 private:
  void worker_main(int index);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  // Written under mu_; atomic so that a thread may spin on them briefly before it blocks.
  std::atomic<uint64_t> generation_{0};  // bumped per job
  std::atomic<int> busy_{0};             // workers still inside the current job
  std::atomic<bool> stop_{false};

  // The current job.
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> abort_{false};
  std::exception_ptr error_;
};

}  // namespace attn::cpu
