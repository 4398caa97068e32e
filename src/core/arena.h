// A caller-provided bump arena (zstd's static contexts are the model).  The library sizes a job
// first, the caller hands in that many bytes, and every allocation the job makes afterwards comes
// from here: a request past the end is STK_E_ARENA_TOO_SMALL, never a silent heap fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "core/checked.h"
#include "core/error.h"

namespace stk {

class Arena {
public:
    Arena() = default;
    Arena(void *base, size_t bytes) : base_(static_cast<unsigned char *>(base)), cap_(bytes) {}

    // Raw bytes, aligned to `align` (a power of two).
    void *alloc(size_t bytes, size_t align = 64) {
        uintptr_t start = reinterpret_cast<uintptr_t>(base_) + used_;
        uintptr_t aligned = (start + (align - 1)) & ~uintptr_t(align - 1);
        size_t pad = aligned - start;
        uint64_t need;
        if (!add_ok(uint64_t(used_) + pad, bytes, &need) || need > cap_)
            throw_error(STK_E_ARENA_TOO_SMALL, "arena too small: %zu bytes requested with %zu of %zu used", bytes, used_, cap_);
        used_ = size_t(need);
        if (used_ > peak_) peak_ = used_;
        return reinterpret_cast<void *>(aligned);
    }

    // n default-initialised T (trivially destructible types only: nothing is ever destroyed).
    template <class T>
    T *alloc_array(size_t n, size_t align = alignof(T) < 64 ? 64 : alignof(T)) {
        static_assert(std::is_trivially_destructible_v<T>, "arena objects are never destroyed");
        uint64_t bytes = checked_mul(n, sizeof(T), "arena array");
        T *p = static_cast<T *>(alloc(size_t(bytes), align));
        for (size_t i = 0; i < n; i++) new (p + i) T();
        return p;
    }

    size_t used() const { return used_; }
    size_t capacity() const { return cap_; }
    size_t remaining() const { return cap_ - used_; }

    // Scoped scratch: everything allocated after mark() is released by reset(mark).
    size_t mark() const { return used_; }
    void reset(size_t mark) { used_ = mark; }

    // The most ever used since reset_peak() (job_run_stage checks a stage against its sizing).
    size_t peak() const { return peak_; }
    void reset_peak() { peak_ = used_; }

private:
    unsigned char *base_ = nullptr;
    size_t cap_ = 0;
    size_t used_ = 0;
    size_t peak_ = 0;
};

// Sizing pass: the same code path as Arena, only counting (used to answer stk_job_arena_size).
class ArenaSizer {
public:
    void add(size_t bytes, size_t align = 64) { total_ = size_t(checked_add(align_up(total_, align), bytes, "arena size")); }
    template <class T>
    void add_array(size_t n) {
        add(size_t(checked_mul(n, sizeof(T), "arena size")), 64);
    }
    size_t total() const { return total_ + 64; /* slack for the base's own misalignment */ }

private:
    size_t total_ = 0;
};

// One description of a stage's buffers, run twice: against an ArenaSizer in the stage's *_size
// (pointers stay null) and against the job's arena in its *_run, so the two cannot drift apart
// (zstd's workspace estimates are the model; job_run_stage checks the peak against the sizing).
class Buffers {
public:
    explicit Buffers(ArenaSizer &sizer) : sizer_(&sizer) {}
    explicit Buffers(Arena &arena) : arena_(&arena) {}

    // n T, 64-byte aligned; null while sizing.
    template <class T>
    T *array(uint64_t n) {
        if (sizer_) {
            sizer_->add_array<T>(size_t(n));
            return nullptr;
        }
        return arena_->alloc_array<T>(size_t(n));
    }
    // n T left uninitialised (trivial types), 64-byte aligned, sized as array<T>(n): for a buffer
    // whose every element is written before it is read, no zeroing pass on one thread (array<T>
    // value-initialises) over pages that the workers writing them fault in anyway.
    template <class T>
    T *uninit_array(uint64_t n) {
        static_assert(std::is_trivial_v<T>, "uninit_array: trivial types only");
        return static_cast<T *>(bytes(checked_mul(n, sizeof(T), "arena array")));
    }
    // Raw bytes (left uninitialised), 64-byte aligned; null while sizing.
    void *bytes(uint64_t n) {
        if (sizer_) {
            sizer_->add(size_t(n), 64);
            return nullptr;
        }
        return arena_->alloc(size_t(n), 64);
    }
    // n bytes for a library call that allocates inside them itself (mphf_build_u64, cuckoo_build):
    // a sub-arena over them, so the call's peak is inside what the stage declares; empty while sizing.
    Arena region(uint64_t n) {
        if (sizer_) {
            sizer_->add(size_t(n), 64);
            return Arena();
        }
        return Arena(arena_->alloc(size_t(n), 64), size_t(n));
    }
    bool sizing() const { return sizer_ != nullptr; }

private:
    ArenaSizer *sizer_ = nullptr;
    Arena *arena_ = nullptr;
};

}  // namespace stk
