// A tiny fork-join helper for code outside the tuned kernels (reference, metrics, tile query,
// dataset evaluations).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>

namespace attn {

// Worker count: `requested` if > 0, else ATTNSCOPE_THREADS, else the hardware's thread count
// (cpu::resolve_threads, the one place that reads the variable).
int thread_count(int requested = 0);

// Calls fn(i) for i in [0, n) on up to thread_count(threads) threads; rethrows the first error.
void parallel_for(int n, const std::function<void(int)>& fn, int threads = 0);

// The worker loop of a job whose workers each need state of their own (a backend runs one call
// at a time): items [0, n) are handed out in order, one at a time, to up to
// min(thread_count(threads), n) workers. Each worker calls start() once on its thread and then
// the function it returned for each item it takes, so its state lives in that function:
//
//   parallel_items(n, threads, [&] {
//     auto backend = std::shared_ptr(make_backend("cpu"));
//     return [&, backend](int64_t i) { out[i] = run_one(*backend, i); };
//   });
//
// At least one worker starts, even for n = 0, so that start()'s errors (an unknown backend) are
// reported alike. No item starts once *cancel is true (the call then returns normally: the caller
// says what a cancelled job means) or once an item or start() has thrown; the first error is
// rethrown.
void parallel_items(int64_t n, int threads,
                    const std::function<std::function<void(int64_t)>()>& start,
                    const std::atomic<bool>* cancel = nullptr);

}  // namespace attn
