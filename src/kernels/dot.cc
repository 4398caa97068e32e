// Highway kernels of dot.h.  Compiled once per target (hwy/foreach_target.h); HWY_ONCE holds the
// dispatch.  Unfused (the pragmas keep the compiler from contracting w * x + s into an FMA), no
// reassociation: lane l of vector v is partial sum v * L + l, so the bytes do not depend on the
// target (tests/test_kernels.cc runs every target the CPU supports).
//
// One row at a time: the weights are then read as one sequential stream (the decode GEMV is bound
// by their memory traffic; several rows interleaved were slower, see kPrefetch).
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dot.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "kernels/dot.h"

#ifdef __clang__
#  pragma STDC FP_CONTRACT OFF
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kL = HWY_LANES(float) < 8 ? HWY_LANES(float) : 8;  // lanes of one vector (<= 8)
constexpr size_t kV16 = 16 / kL;                                    // vectors per 16 columns
using DF = hn::CappedTag<float, kL>;
// How far ahead of its loads the kernel asks for the weights (bytes).  The decode GEMV streams
// each weight once per token and the hardware prefetcher alone keeps too few lines in flight.
// Measured on this project's 2-core EPYC (bf16 rows of 576 and 1536, quiet; docs/benchmarks.md
// "LM runtime"): four rows interleaved without prefetch 3.6-5.8 GB/s, with 8 KiB 6.6-7.1; one
// row at a time 6.5-7.2 without, 8.9-10.3 with 4 KiB, against 9.5-10.9 for memchr.  Non-temporal:
// the lines are not read again this token.
constexpr size_t kPrefetch = 4096;
HWY_INLINE void PrefetchAhead(const void *p) {
    __builtin_prefetch(reinterpret_cast<const void *>(reinterpret_cast<uintptr_t>(p) + kPrefetch), 0, 0);
}

HWY_INLINE hn::Vec<DF> LoadW(DF df, const float *p) { return hn::LoadU(df, p); }
HWY_INLINE hn::Vec<DF> LoadW(DF df, const uint16_t *p) {
    const hn::RebindToUnsigned<DF> du32;
    const hn::Rebind<uint16_t, DF> du16;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

inline float Widen1(float v) { return v; }
inline float Widen1(uint16_t v) {
    const uint32_t b = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// t_l = s_l + s_(l+8), then the pairwise tree of dot.h.
inline float Finish(const float *s) {
    float t[8];
    for (size_t l = 0; l < 8; l++) t[l] = s[l] + s[l + 8];
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

// The columns past the last full group of 16, and the final sum, of one row with partial sums s.
template <class T>
inline float Tail(const T *w, const float *x, size_t j, size_t n, float *s) {
    for (; j < n; j++) {
        const float p = Widen1(w[j]) * x[j];
        s[j & 15] = s[j & 15] + p;
    }
    return Finish(s);
}

template <class T>
void DotRows(const T *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    const DF df;
    const size_t n16 = n & ~size_t(15);
    size_t r = 0;
    if (hn::Lanes(df) == kL) {
        for (; r < rows; r++) {
            const T *w0 = w + r * ld;
            hn::Vec<DF> a[kV16];
            HWY_UNROLL(4)
            for (size_t v = 0; v < kV16; v++) a[v] = hn::Zero(df);
            for (size_t j = 0; j < n16; j += 16) {
                if (j % (64 / sizeof(T)) == 0) PrefetchAhead(w0 + j);  // one cache line per step
                HWY_UNROLL(4)
                for (size_t v = 0; v < kV16; v++) a[v] = hn::Add(a[v], hn::Mul(LoadW(df, w0 + j + v * kL), hn::LoadU(df, x + j + v * kL)));
            }
            HWY_ALIGN float s[16];
            HWY_UNROLL(4)
            for (size_t v = 0; v < kV16; v++) hn::StoreU(a[v], df, s + v * kL);
            y[r] = Tail(w0, x, n16, n, s);
        }
        return;
    }
    for (; r < rows; r++) {  // a target whose vectors are narrower than kL (not reached on x86)
        float s[16] = {};
        y[r] = Tail(w + r * ld, x, 0, n, s);
    }
}

void DotRowsBf16(const uint16_t *w, size_t ld, size_t rows, const float *x, size_t n, float *y) { DotRows(w, ld, rows, x, n, y); }
void DotRowsF32(const float *w, size_t ld, size_t rows, const float *x, size_t n, float *y) { DotRows(w, ld, rows, x, n, y); }

void AxpyF32(float a, const float *x, float *y, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const auto va = hn::Set(d, a);
    size_t j = 0;
    for (; j + N <= n; j += N) hn::StoreU(hn::Add(hn::LoadU(d, y + j), hn::Mul(va, hn::LoadU(d, x + j))), d, y + j);
    for (; j < n; j++) {
        const float p = a * x[j];
        y[j] = y[j] + p;
    }
}

void AxpyRowsF32(const float *a, const float *V, size_t ldv, size_t rows, float *y, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    size_t j = 0;
    for (; j + 4 * N <= n; j += 4 * N) {  // four vectors of y stay in registers over every row
        auto y0 = hn::LoadU(d, y + j), y1 = hn::LoadU(d, y + j + N), y2 = hn::LoadU(d, y + j + 2 * N), y3 = hn::LoadU(d, y + j + 3 * N);
        for (size_t s = 0; s < rows; s++) {
            const float *v = V + s * ldv + j;
            const auto va = hn::Set(d, a[s]);
            y0 = hn::Add(y0, hn::Mul(va, hn::LoadU(d, v)));
            y1 = hn::Add(y1, hn::Mul(va, hn::LoadU(d, v + N)));
            y2 = hn::Add(y2, hn::Mul(va, hn::LoadU(d, v + 2 * N)));
            y3 = hn::Add(y3, hn::Mul(va, hn::LoadU(d, v + 3 * N)));
        }
        hn::StoreU(y0, d, y + j);
        hn::StoreU(y1, d, y + j + N);
        hn::StoreU(y2, d, y + j + 2 * N);
        hn::StoreU(y3, d, y + j + 3 * N);
    }
    for (; j + N <= n; j += N) {
        auto y0 = hn::LoadU(d, y + j);
        for (size_t s = 0; s < rows; s++) y0 = hn::Add(y0, hn::Mul(hn::Set(d, a[s]), hn::LoadU(d, V + s * ldv + j)));
        hn::StoreU(y0, d, y + j);
    }
    for (; j < n; j++)
        for (size_t s = 0; s < rows; s++) {
            const float p = a[s] * V[s * ldv + j];
            y[j] = y[j] + p;
        }
}

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::kernels {

HWY_EXPORT(DotRowsBf16);
HWY_EXPORT(DotRowsF32);
HWY_EXPORT(AxpyF32);
HWY_EXPORT(AxpyRowsF32);

void dot_rows_bf16(const uint16_t *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    HWY_DYNAMIC_DISPATCH(DotRowsBf16)(w, ld, rows, x, n, y);
}
void dot_rows_f32(const float *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    HWY_DYNAMIC_DISPATCH(DotRowsF32)(w, ld, rows, x, n, y);
}

void axpy_f32(float a, const float *x, float *y, size_t n) { HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n); }
void axpy_rows_f32(const float *a, const float *V, size_t ldv, size_t rows, float *y, size_t n) {
    HWY_DYNAMIC_DISPATCH(AxpyRowsF32)(a, V, ldv, rows, y, n);
}

}  // namespace stk::kernels
#endif  // HWY_ONCE
