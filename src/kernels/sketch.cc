// The sketch passes of sketch.h.  This file is compiled once per target (hwy/foreach_target.h);
// the HWY_ONCE part at the end is the one dispatch point (HWY_DYNAMIC_DISPATCH).
//
// Register blocking: 8 rows of W at a time (4 on targets with 16 vector registers), the columns
// of X / Y in blocks of 3 vectors of at most 8 lanes (24 columns), so one row block's
// accumulators stay in registers; for each j one element of each of the 4 rows is broadcast and
// multiplied into the row j of X (vectors along the columns).  No lane ever holds part of a sum
// that another lane finishes: the order of every sum is the same on every target and thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/sketch.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "kernels/sketch.h"

#ifndef STK_KERNELS_SKETCH_ARGS
#  define STK_KERNELS_SKETCH_ARGS
namespace stk::kernels {
struct SketchArgs {
    const float *w;
    size_t m, n, ld_w;
    const float *x;  // null: y is an input
    size_t ld_x, cy;
    float *y;
    size_t ld_y, ct;
    float *xt;  // null: no transposed product
    size_t ld_xt;
    float *partials;
};
}  // namespace stk::kernels
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
// 256-bit vectors at most: with 22 columns (r_v 12 + oversampling 10) three 8-lane vectors
// waste 2 lanes where two 16-lane ones would waste 10, and on AMD Zen 4 a 512-bit operation
// costs two 256-bit ones anyway.
using DF = hn::CappedTag<float, 8>;
using VF = hn::Vec<DF>;

// Rows per block: 8 where there are 32 vector registers (8 x 3 accumulators), else 4.
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
constexpr size_t kRows = 8;
#else
constexpr size_t kRows = 4;
#endif
constexpr size_t kVecs = 3;

const char *SketchTargetName() { return hwy::TargetName(HWY_TARGET); }

// y[r, 0 .. V*N) = sum_j w[r, j] x[j, 0 .. V*N) for r < R, j in order (T: float or double;
// W's f32 entries are widened exactly).
template <class D, size_t R, size_t V, typename T = hn::TFromD<D>>
HWY_INLINE void ProductBlock(const float *HWY_RESTRICT w, size_t ld_w, size_t n, const T *HWY_RESTRICT x, size_t ld_x,
                             T *HWY_RESTRICT y, size_t ld_y) {
    const D d;
    const size_t N = hn::Lanes(d);
    hn::Vec<D> acc[R][V];
    HWY_UNROLL(8) for (size_t r = 0; r < R; r++)
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) acc[r][v] = hn::Zero(d);
    for (size_t j = 0; j < n; j++) {
        hn::Vec<D> xv[V];
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) xv[v] = hn::LoadU(d, x + j * ld_x + v * N);
        HWY_UNROLL(8) for (size_t r = 0; r < R; r++) {
            const hn::Vec<D> b = hn::Set(d, T(w[r * ld_w + j]));
            HWY_UNROLL(8) for (size_t v = 0; v < V; v++) acc[r][v] = hn::MulAdd(b, xv[v], acc[r][v]);
        }
    }
    HWY_UNROLL(8) for (size_t r = 0; r < R; r++)
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) hn::StoreU(acc[r][v], d, y + r * ld_y + v * N);
}

// p[j, 0 .. V*N) += sum_r w[r, j] y[r, 0 .. V*N) for every j, r < R in order.
template <size_t R, size_t V>
HWY_INLINE void TransposedBlock(const float *HWY_RESTRICT w, size_t ld_w, size_t n, const float *HWY_RESTRICT y, size_t ld_y,
                                float *HWY_RESTRICT p, size_t ld_p) {
    const DF d;
    const size_t N = hn::Lanes(d);
    VF yv[R][V];
    HWY_UNROLL(8) for (size_t r = 0; r < R; r++)
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) yv[r][v] = hn::LoadU(d, y + r * ld_y + v * N);
    for (size_t j = 0; j < n; j++) {
        VF a[V];
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) a[v] = hn::LoadU(d, p + j * ld_p + v * N);
        HWY_UNROLL(8) for (size_t r = 0; r < R; r++) {
            const VF b = hn::Set(d, w[r * ld_w + j]);
            HWY_UNROLL(8) for (size_t v = 0; v < V; v++) a[v] = hn::MulAdd(b, yv[r][v], a[v]);
        }
        HWY_UNROLL(8) for (size_t v = 0; v < V; v++) hn::StoreU(a[v], d, p + j * ld_p + v * N);
    }
}

template <class D, size_t R, typename T = hn::TFromD<D>>
void ProductR(size_t nv, const float *w, size_t ld_w, size_t n, const T *x, size_t ld_x, T *y, size_t ld_y) {
    if (nv == 1) ProductBlock<D, R, 1>(w, ld_w, n, x, ld_x, y, ld_y);
    else if (nv == 2) ProductBlock<D, R, 2>(w, ld_w, n, x, ld_x, y, ld_y);
    else ProductBlock<D, R, kVecs>(w, ld_w, n, x, ld_x, y, ld_y);
}

template <size_t R>
void TransposedR(size_t nv, const float *w, size_t ld_w, size_t n, const float *y, size_t ld_y, float *p, size_t ld_p) {
    if (nv == 1) TransposedBlock<R, 1>(w, ld_w, n, y, ld_y, p, ld_p);
    else if (nv == 2) TransposedBlock<R, 2>(w, ld_w, n, y, ld_y, p, ld_p);
    else TransposedBlock<R, kVecs>(w, ld_w, n, y, ld_y, p, ld_p);
}

// Row count 1 .. kRows as a template argument.
template <class D, size_t R = kRows, typename T = hn::TFromD<D>>
void ProductRows(size_t rows, size_t nv, const float *w, size_t ld_w, size_t n, const T *x, size_t ld_x, T *y, size_t ld_y) {
    if constexpr (R > 1)
        if (rows < R) return ProductRows<D, R - 1>(rows, nv, w, ld_w, n, x, ld_x, y, ld_y);
    ProductR<D, R>(nv, w, ld_w, n, x, ld_x, y, ld_y);
}

template <size_t R = kRows>
void TransposedRows(size_t rows, size_t nv, const float *w, size_t ld_w, size_t n, const float *y, size_t ld_y, float *p,
                    size_t ld_p) {
    if constexpr (R > 1)
        if (rows < R) return TransposedRows<R - 1>(rows, nv, w, ld_w, n, y, ld_y, p, ld_p);
    TransposedR<R>(nv, w, ld_w, n, y, ld_y, p, ld_p);
}

// Groups [g0, g1) of the fixed kSketchGroups row groups: the product rows, then (fused, block by
// block while the rows are in cache) the group's partial W^T Y.
void GroupsImpl(const SketchArgs *a, size_t g0, size_t g1) {
    const size_t N = hn::Lanes(DF());
    const size_t per = (a->m + kSketchGroups - 1) / kSketchGroups;
    for (size_t g = g0; g < g1; g++) {
        const size_t i0 = std::min(a->m, g * per), i1 = std::min(a->m, i0 + per);
        float *p = a->xt ? a->partials + g * a->n * a->ld_xt : nullptr;
        if (p) std::fill(p, p + a->n * a->ld_xt, 0.0f);
        for (size_t i = i0; i < i1; i += kRows) {
            const size_t rows = std::min(kRows, i1 - i);
            const float *wi = a->w + i * a->ld_w;
            float *yi = a->y + i * a->ld_y;
            if (a->x)
                for (size_t c0 = 0; c0 < a->cy; c0 += kVecs * N) {
                    const size_t nv = std::min(kVecs, (a->cy - c0 + N - 1) / N);
                    ProductRows<DF>(rows, nv, wi, a->ld_w, a->n, a->x + c0, a->ld_x, yi + c0, a->ld_y);
                }
            if (p)
                for (size_t c0 = 0; c0 < a->ct; c0 += kVecs * N) {
                    const size_t nv = std::min(kVecs, (a->ct - c0 + N - 1) / N);
                    TransposedRows(rows, nv, wi, a->ld_w, a->n, yi + c0, a->ld_y, p + c0, a->ld_xt);
                }
        }
    }
}

size_t LanesImpl() { return hn::Lanes(DF()); }

// The double product: rows [i0, i1) of y = W x.
using DD = hn::CappedTag<double, 4>;
void ProductF64Impl(const float *w, size_t ld_w, size_t n, const double *x, size_t ld_x, size_t c, double *y, size_t ld_y,
                    size_t i0, size_t i1) {
    const size_t N = hn::Lanes(DD());
    for (size_t i = i0; i < i1; i += kRows) {
        const size_t rows = std::min(kRows, i1 - i);
        for (size_t c0 = 0; c0 < c; c0 += kVecs * N) {
            const size_t nv = std::min(kVecs, (c - c0 + N - 1) / N);
            ProductRows<DD>(rows, nv, w + i * ld_w, ld_w, n, x + c0, ld_x, y + i * ld_y + c0, ld_y);
        }
    }
}

size_t LanesF64Impl() { return hn::Lanes(DD()); }

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#  include "core/error.h"
#  include "core/parallel.h"

namespace stk::kernels {

HWY_EXPORT(GroupsImpl);
HWY_EXPORT(LanesImpl);
HWY_EXPORT(ProductF64Impl);
HWY_EXPORT(LanesF64Impl);
HWY_EXPORT(SketchTargetName);

const char *sketch_target() { return HWY_DYNAMIC_DISPATCH(SketchTargetName)(); }

void sketch_pass(const float *w, size_t m, size_t n, size_t ld_w, const float *x, size_t ld_x, size_t cy, float *y, size_t ld_y,
                 size_t ct, float *xt, size_t ld_xt, float *partials, unsigned threads) {
    auto bad_stride = [](size_t ld, size_t cols) { return ld < cols || ld % kSketchAlign != 0; };
    if (!w || !y || m == 0 || n == 0 || ld_w < n || cy == 0 || bad_stride(ld_y, cy))
        throw_error(STK_E_INVALID_ARGUMENT, "sketch_pass: bad W or Y (m %zu, n %zu, ld_w %zu, cy %zu, ld_y %zu)", m, n, ld_w, cy,
                    ld_y);
    if (x && bad_stride(ld_x, cy)) throw_error(STK_E_INVALID_ARGUMENT, "sketch_pass: X stride %zu for %zu columns", ld_x, cy);
    if (xt && (!partials || ct == 0 || ct > cy || bad_stride(ld_xt, ct)))
        throw_error(STK_E_INVALID_ARGUMENT, "sketch_pass: bad X' (ct %zu of %zu, ld %zu)", ct, cy, ld_xt);
    const size_t lanes = HWY_DYNAMIC_DISPATCH(LanesImpl)();
    if (lanes == 0 || kSketchAlign % lanes != 0)
        throw_error(STK_E_INTERNAL, "sketch_pass: %zu lanes do not divide the stride alignment", lanes);
    const SketchArgs a{w, m, n, ld_w, x, ld_x, cy, y, ld_y, xt ? ct : 0, xt, ld_xt, partials};
    const size_t t_n = std::max<size_t>(1, std::min<size_t>(threads, kSketchGroups));
    auto run = [&](size_t t) { HWY_DYNAMIC_DISPATCH(GroupsImpl)(&a, t * kSketchGroups / t_n, (t + 1) * kSketchGroups / t_n); };
    run_workers(unsigned(t_n), [&](unsigned t) { run(t); });
    if (!xt) return;
    // X' = P_0 + P_1 + ... in group order.
    for (size_t j = 0; j < n; j++) {
        float *out = xt + j * ld_xt;
        const float *p0 = partials + j * ld_xt;
        for (size_t c = 0; c < ct; c++) out[c] = p0[c];
        for (size_t g = 1; g < kSketchGroups; g++) {
            const float *pg = partials + g * n * ld_xt + j * ld_xt;
            for (size_t c = 0; c < ct; c++) out[c] = out[c] + pg[c];
        }
    }
}

void sketch_product_f64(const float *w, size_t m, size_t n, size_t ld_w, const double *x, size_t ld_x, size_t c, double *y,
                        size_t ld_y, unsigned threads) {
    if (!w || !x || !y || m == 0 || n == 0 || ld_w < n || c == 0 || ld_x < c || ld_y < c || ld_x % kSketchAlign ||
        ld_y % kSketchAlign)
        throw_error(STK_E_INVALID_ARGUMENT, "sketch_product_f64: bad arguments (m %zu, n %zu, c %zu, ld %zu %zu %zu)", m, n, c,
                    ld_w, ld_x, ld_y);
    const size_t lanes = HWY_DYNAMIC_DISPATCH(LanesF64Impl)();
    if (lanes == 0 || kSketchAlign % lanes != 0)
        throw_error(STK_E_INTERNAL, "sketch_product_f64: %zu lanes do not divide the stride alignment", lanes);
    const size_t t_n = std::max<size_t>(1, std::min<size_t>(threads, kSketchGroups)), per = (m + t_n - 1) / t_n;
    auto run = [&](size_t t) {
        const size_t i0 = std::min(m, t * per), i1 = std::min(m, i0 + per);
        if (i0 < i1) HWY_DYNAMIC_DISPATCH(ProductF64Impl)(w, ld_w, n, x, ld_x, c, y, ld_y, i0, i1);
    };
    run_workers(unsigned(t_n), [&](unsigned t) { run(t); });
}

}  // namespace stk::kernels
#endif  // HWY_ONCE
