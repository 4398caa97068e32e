// Overflow-checked size arithmetic for everything computed from untrusted bytes.
#pragma once

#include <cstdint>

#include "core/error.h"

namespace stk {

// a * b, or throw STK_E_DIMS_OVERFLOW naming `what`.
inline uint64_t checked_mul(uint64_t a, uint64_t b, const char *what) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        throw_error(STK_E_DIMS_OVERFLOW, "%s: %llu * %llu overflows 64 bits", what, (unsigned long long)a, (unsigned long long)b);
    return r;
}

// a + b, or throw STK_E_DIMS_OVERFLOW naming `what`.
inline uint64_t checked_add(uint64_t a, uint64_t b, const char *what) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        throw_error(STK_E_DIMS_OVERFLOW, "%s: %llu + %llu overflows 64 bits", what, (unsigned long long)a, (unsigned long long)b);
    return r;
}

// Non-throwing forms for hot paths: false on overflow.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_mul_overflow(a, b, r); }
inline bool add_ok(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_add_overflow(a, b, r); }

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + (a - 1)) & ~(a - 1); }

}  // namespace stk
