#include "compute/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "compute/error.h"

namespace attn::cpu {

namespace {

// Waits up to ~50 us for ready() by spinning, before a caller blocks on a condition variable.
// A decode step runs about a hundred short jobs; waking a blocked thread costs tens of
// microseconds on a VM, which would add milliseconds to a step that reads memory for ~15 ms.
template <class Ready>
bool spin_until(Ready ready) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > limit) return false;
  }
}

}  // namespace

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("ATTNSCOPE_THREADS")) {
    int t = std::atoi(env);
    if (t > 0) return t;
  }
  return std::max(1, int(std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i)
    workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(int worker) {
  while (!abort_.load(std::memory_order_relaxed)) {
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) {
      abort_ = true;
      break;
    }
    int64_t item = next_.fetch_add(1, std::memory_order_relaxed);
    if (item >= n_) break;
    try {
      (*fn_)(item, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      abort_ = true;
    }
  }
}

void ThreadPool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    spin_until([&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    });
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int)>& fn,
                              const std::atomic<bool>* cancel) {
  if (n <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    cancel_ = cancel;
    n_ = n;
    next_ = 0;
    abort_ = false;
    error_ = nullptr;
    busy_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  spin_until([&] { return busy_.load(std::memory_order_acquire) == 0; });
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
  }
  if (error_) std::rethrow_exception(error_);
  if (cancel && cancel->load())
    throw Error(ErrorCode::Cancelled, "cpu backend: attention run cancelled");
}

}  // namespace attn::cpu
