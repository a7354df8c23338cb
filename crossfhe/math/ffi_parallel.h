/* Splitting a custom call's independent work items across XLA's intra-op thread pool (the kernels of
   crossfhe registered through jax.ffi include this header).

   parallel_for(pool, count, grain, fn) calls fn(lo, hi) on disjoint ranges covering [0, count). The calling
   thread takes ranges too and waits only for ranges another thread has already taken, so it cannot wait on a
   task that no free thread would run (XLA may call a handler from one of the pool's own threads). The state is
   shared with the scheduled tasks, which may start after the call has returned and then find nothing left. */
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "xla/ffi/api/ffi.h"

namespace crossfhe {

template <typename Fn>
void parallel_for(xla::ffi::ThreadPool &pool, int64_t count, int64_t grain, Fn fn) {
    if (grain < 1) grain = 1;
    int64_t pieces = (count + grain - 1) / grain;
    int64_t helpers = pool.num_threads();
    if (helpers > pieces - 1) helpers = pieces - 1;
    if (helpers <= 0) {
        if (count > 0) fn(int64_t{0}, count);
        return;
    }
    struct State {
        std::atomic<int64_t> next{0};
        std::atomic<int64_t> done{0};
        std::mutex mu;
        std::condition_variable cv;
    };
    auto state = std::make_shared<State>();
    /* runs ranges until none is left; fn is only called while the handler waits, so capturing it by pointer
       is safe: a task that starts late takes no range and never touches it */
    auto work = [state, count, grain, pieces](Fn *f) {
        for (;;) {
            int64_t i = state->next.fetch_add(1);
            if (i >= pieces) return;
            int64_t lo = i * grain, hi = lo + grain < count ? lo + grain : count;
            (*f)(lo, hi);
            if (state->done.fetch_add(1) + 1 == pieces) {
                std::lock_guard<std::mutex> lock(state->mu);
                state->cv.notify_all();
            }
        }
    };
    Fn *f = &fn;
    for (int64_t h = 0; h < helpers; h++) pool.Schedule([work, f]() { work(f); });
    work(f);
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] { return state->done.load() == pieces; });
}

}  // namespace crossfhe
