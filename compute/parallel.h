// A tiny fork-join helper for code outside the tuned kernels (reference, metrics, tile query).
#pragma once
#include <functional>

namespace attn {

// Worker count: `requested` if > 0, else ATTNSCOPE_THREADS, else the hardware's thread count.
int thread_count(int requested = 0);

// Calls fn(i) for i in [0, n) on up to thread_count(threads) threads; rethrows the first error.
void parallel_for(int n, const std::function<void(int)>& fn, int threads = 0);

}  // namespace attn
