// Highway kernels of dot.h.  Compiled once per target (hwy/foreach_target.h); HWY_ONCE holds the
// dispatch.  Unfused (the pragmas keep the compiler from contracting w * x + s into an FMA), no
// reassociation: lane l of vector v is partial sum v * L + l, so the bytes do not depend on the
// target (tests/test_kernels.cc runs every target the CPU supports).
//
// Four rows at a time share each load of x and keep four rows' weight streams in flight (the
// decode GEMV is bound by the weights' memory traffic); a row's order is its own either way.
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
constexpr size_t kV = 8 / kL;                                       // vectors per 8 columns
using DF = hn::CappedTag<float, kL>;
// How far ahead of each row's loads the kernel asks for the weights (bytes).  The decode GEMV
// streams each weight once per token: with only the hardware prefetcher, four short row streams
// kept too few lines in flight (SmolLM2 bf16, one thread: 18.5 tok/s without, 24-26 with 8 KiB;
// 4 KiB and 16-32 KiB measured the same or lower; docs/benchmarks.md "LM runtime").  Non-temporal:
// the lines are not read again this token.
constexpr size_t kPrefetch = 8192;
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

inline float Finish(const float *s) { return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])); }

// The columns past the last full group of 8, and the final sum, of one row with partial sums s.
template <class T>
inline float Tail(const T *w, const float *x, size_t j, size_t n, float *s) {
    for (; j < n; j++) {
        const float p = Widen1(w[j]) * x[j];
        s[j & 7] = s[j & 7] + p;
    }
    return Finish(s);
}

template <class T>
void DotRows(const T *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    const DF df;
    const size_t n8 = n & ~size_t(7);
    size_t r = 0;
    if (hn::Lanes(df) == kL) {
        for (; r + 4 <= rows; r += 4) {
            const T *w0 = w + r * ld, *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
            hn::Vec<DF> a0[kV], a1[kV], a2[kV], a3[kV];
            for (size_t v = 0; v < kV; v++) a0[v] = a1[v] = a2[v] = a3[v] = hn::Zero(df);
            for (size_t j = 0; j < n8; j += 8) {
                if (j % (64 / sizeof(T)) == 0) {  // one cache line of each row
                    PrefetchAhead(w0 + j);
                    PrefetchAhead(w1 + j);
                    PrefetchAhead(w2 + j);
                    PrefetchAhead(w3 + j);
                }
                for (size_t v = 0; v < kV; v++) {
                    const size_t o = j + v * kL;
                    const auto xv = hn::LoadU(df, x + o);
                    a0[v] = hn::Add(a0[v], hn::Mul(LoadW(df, w0 + o), xv));
                    a1[v] = hn::Add(a1[v], hn::Mul(LoadW(df, w1 + o), xv));
                    a2[v] = hn::Add(a2[v], hn::Mul(LoadW(df, w2 + o), xv));
                    a3[v] = hn::Add(a3[v], hn::Mul(LoadW(df, w3 + o), xv));
                }
            }
            HWY_ALIGN float s[4][8];
            for (size_t v = 0; v < kV; v++) {
                hn::StoreU(a0[v], df, s[0] + v * kL);
                hn::StoreU(a1[v], df, s[1] + v * kL);
                hn::StoreU(a2[v], df, s[2] + v * kL);
                hn::StoreU(a3[v], df, s[3] + v * kL);
            }
            y[r] = Tail(w0, x, n8, n, s[0]);
            y[r + 1] = Tail(w1, x, n8, n, s[1]);
            y[r + 2] = Tail(w2, x, n8, n, s[2]);
            y[r + 3] = Tail(w3, x, n8, n, s[3]);
        }
        for (; r < rows; r++) {
            const T *w0 = w + r * ld;
            hn::Vec<DF> a0[kV];
            for (size_t v = 0; v < kV; v++) a0[v] = hn::Zero(df);
            for (size_t j = 0; j < n8; j += 8)
                for (size_t v = 0; v < kV; v++) a0[v] = hn::Add(a0[v], hn::Mul(LoadW(df, w0 + j + v * kL), hn::LoadU(df, x + j + v * kL)));
            HWY_ALIGN float s[8];
            for (size_t v = 0; v < kV; v++) hn::StoreU(a0[v], df, s + v * kL);
            y[r] = Tail(w0, x, n8, n, s);
        }
        return;
    }
    for (; r < rows; r++) {  // a target whose vectors are narrower than kL (not reached on x86)
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
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

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::kernels {

HWY_EXPORT(DotRowsBf16);
HWY_EXPORT(DotRowsF32);
HWY_EXPORT(AxpyF32);

void dot_rows_bf16(const uint16_t *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    HWY_DYNAMIC_DISPATCH(DotRowsBf16)(w, ld, rows, x, n, y);
}
void dot_rows_f32(const float *w, size_t ld, size_t rows, const float *x, size_t n, float *y) {
    HWY_DYNAMIC_DISPATCH(DotRowsF32)(w, ld, rows, x, n, y);
}

void axpy_f32(float a, const float *x, float *y, size_t n) { HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n); }

}  // namespace stk::kernels
#endif  // HWY_ONCE
