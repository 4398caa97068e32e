// The library's worker threads, one place.  Determinism stays with the callers: a worker's share
// is a function of its index and the worker count only, never of timing, so the bytes come out
// the same on any thread count (the tests compare digests at threads 1 and 2).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stk {

// fn(w) for w = 0..n-1 at once: worker 0 on the calling thread, the others on threads started for
// this call and joined before it returns.  An exception of a worker is rethrown here (the lowest
// worker's) once every worker has finished, instead of ending the process.
template <class Fn>
void run_workers(unsigned n, Fn &&fn) {
    if (n <= 1) {
        fn(0u);
        return;
    }
    std::vector<std::exception_ptr> errors(n);
    auto guarded = [&](unsigned w) {
        try {
            fn(w);
        } catch (...) {
            errors[w] = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(n - 1);
    try {
        for (unsigned w = 1; w < n; w++) pool.emplace_back(guarded, w);
    } catch (...) {  // a thread that could not start: finish the ones that did, then fail
        for (std::thread &t : pool) t.join();
        throw;
    }
    guarded(0);
    for (std::thread &t : pool) t.join();
    for (std::exception_ptr &e : errors)
        if (e) std::rethrow_exception(e);
}

// Workers kept for many rounds (the export runs one per piece of every tensor): n - 1 threads
// started once, the caller is worker 0; run(fn) as run_workers.
class WorkerPool {
public:
    explicit WorkerPool(unsigned n) : n_(n ? n : 1), errors_(n_) {  // sized once: run() allocates nothing
        for (unsigned i = 1; i < n_; i++) threads_.emplace_back([this, i] { loop(i); });
    }
    ~WorkerPool() {
        {
            std::lock_guard<std::mutex> g(m_);
            stop_.store(true, std::memory_order_relaxed);
        }
        start_.notify_all();
        for (std::thread &t : threads_) t.join();
    }
    WorkerPool(const WorkerPool &) = delete;
    WorkerPool &operator=(const WorkerPool &) = delete;
    unsigned size() const { return n_; }
    // fn(w) for every worker w; returns when all are done, rethrowing the lowest worker's error.
    void run(const std::function<void(unsigned)> &fn) {
        if (n_ == 1) return fn(0);
        errors_.assign(n_, nullptr);
        {
            std::lock_guard<std::mutex> g(m_);
            fn_ = &fn;
            pending_.store(n_ - 1, std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
        }
        start_.notify_all();
        call(0);
        {
            std::unique_lock<std::mutex> g(m_);
            done_.wait(g, [&] { return pending_.load(std::memory_order_acquire) == 0; });
            fn_ = nullptr;
        }
        for (std::exception_ptr &e : errors_)
            if (e) std::rethrow_exception(e);
    }

private:
    void call(unsigned w) {
        try {
            (*fn_)(w);
        } catch (...) {
            errors_[w] = std::current_exception();
        }
    }
    void loop(unsigned w) {
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> g(m_);
                start_.wait(g, [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_relaxed) != seen; });
                if (stop_.load(std::memory_order_relaxed)) return;
                seen = generation_.load(std::memory_order_relaxed);
            }
            call(w);
            // The last one wakes the caller; under the mutex, so the caller cannot miss it between
            // its test and its sleep.
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> g(m_);
                done_.notify_one();
            }
        }
    }
    const unsigned n_;
    std::vector<std::thread> threads_;
    std::mutex m_;
    std::condition_variable start_, done_;
    const std::function<void(unsigned)> *fn_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<unsigned> pending_{0};
    std::atomic<bool> stop_{false};
    std::vector<std::exception_ptr> errors_;
};

}  // namespace stk
