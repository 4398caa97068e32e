// Seeded draws of random.h: splitmix64 streams, Box-Muller on a pinned log / sincos.
//
// One dynamic dispatch point (Highway's foreach_target; HWY_DYNAMIC_DISPATCH picks the best
// target the CPU supports).  The bytes do not depend on the target: every operation is per
// lane and correctly rounded by IEEE 754 (add, sub, mul, div, sqrt, round-to-integer, exact
// integer <-> double conversions, integer bit operations), in a fixed order, with no fused
// multiply-add (C++20 ISO mode compiles with -ffp-contract=off on GCC; the pragma below says the
// same to clang) and no horizontal reduction.  tests/test_kernels.cc runs every compiled target
// the CPU supports and compares the bytes.
// GCC contracts a * b + c into an FMA in C++ by default (-ffp-contract=fast) wherever the
// target has one (AVX2 / AVX-512 here, not SSE4): that would make the bytes target-dependent.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/random.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/prng.h"
#include "kernels/random.h"

#ifdef __clang__
#  pragma STDC FP_CONTRACT OFF
#endif

HWY_BEFORE_NAMESPACE();
namespace stk::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<double>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(double);  // stack buffers of one vector

// Low 64 bits of a * b from 32 x 32 -> 64 products (no 64-bit lane multiply on every target).
HWY_INLINE VU MulLow64(VU a, VU b) {
#if HWY_TARGET == HWY_SCALAR  // one lane: no 32-bit repartition
    return hn::Set(DU(), hn::GetLane(a) * hn::GetLane(b));
#else
    const hn::Repartition<uint32_t, DU> d32;
    const VU ah = hn::ShiftRight<32>(a), bh = hn::ShiftRight<32>(b);
    const VU lo = hn::MulEven(hn::BitCast(d32, a), hn::BitCast(d32, b));
    const VU cross =
        hn::Add(hn::MulEven(hn::BitCast(d32, ah), hn::BitCast(d32, b)), hn::MulEven(hn::BitCast(d32, a), hn::BitCast(d32, bh)));
    return hn::Add(lo, hn::ShiftLeft<32>(cross));
#endif
}

// splitmix64's output mix of the (already advanced) state z; prng.h's splitmix64_next.
HWY_INLINE VU Mix(VU z) {
    const DU du;
    z = MulLow64(hn::Xor(z, hn::ShiftRight<30>(z)), hn::Set(du, 0xBF58476D1CE4E5B9ull));
    z = MulLow64(hn::Xor(z, hn::ShiftRight<27>(z)), hn::Set(du, 0x94D049BB133111EBull));
    return hn::Xor(z, hn::ShiftRight<31>(z));
}

// Seed 5.1's u = (x >> 11) * 2^-53 (exact: a 53-bit integer converts exactly).
HWY_INLINE VF ToUnit(VU x) {
    const DF df;
    const DI di;
    return hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<11>(x))), hn::Set(df, 0x1.0p-53));
}

// Natural log of a positive normal x (fdlibm's e_log.c algorithm and coefficients, Sun
// Microsystems 1993: x = 2^k m, m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f),
// log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)); error < 1 ulp).  No zero, subnormal, infinite
// or NaN input reaches it (Box-Muller's u is clamped to [2^-52, 1 - 2^-52]).
HWY_INLINE VF Log(VF x) {
    const DF df;
    const DU du;
    const DI di;
    const VU bits = hn::BitCast(du, x);
    VF m = hn::BitCast(df, hn::Or(hn::And(bits, hn::Set(du, 0x000FFFFFFFFFFFFFull)), hn::Set(du, 0x3FF0000000000000ull)));
    VF k = hn::Sub(hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<52>(bits))), hn::Set(df, 1023.0));
    const auto big = hn::Gt(m, hn::Set(df, 0x1.6A09E667F3BCDp+0));  // sqrt(2)
    m = hn::IfThenElse(big, hn::Mul(m, hn::Set(df, 0.5)), m);
    k = hn::IfThenElse(big, hn::Add(k, hn::Set(df, 1.0)), k);
    const VF f = hn::Sub(m, hn::Set(df, 1.0));
    const VF s = hn::Div(f, hn::Add(hn::Set(df, 2.0), f));
    const VF z = hn::Mul(s, s), w = hn::Mul(z, z);
    // R = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))) + w (Lg2 + w (Lg4 + w Lg6))
    VF odd = hn::Add(hn::Set(df, 1.818357216161805012e-01), hn::Mul(w, hn::Set(df, 1.479819860511658591e-01)));   // Lg5 + w Lg7
    odd = hn::Add(hn::Set(df, 2.857142874366239149e-01), hn::Mul(w, odd));                                        // Lg3 + w (...)
    odd = hn::Add(hn::Set(df, 6.666666666666735130e-01), hn::Mul(w, odd));                                        // Lg1 + w (...)
    VF even = hn::Add(hn::Set(df, 2.222219843214978396e-01), hn::Mul(w, hn::Set(df, 1.531383769920937332e-01)));  // Lg4 + w Lg6
    even = hn::Add(hn::Set(df, 3.999999999940941908e-01), hn::Mul(w, even));                                      // Lg2 + w (...)
    const VF R = hn::Add(hn::Mul(z, odd), hn::Mul(w, even));
    const VF hfsq = hn::Mul(hn::Mul(hn::Set(df, 0.5), f), f);
    // k ln2_hi - ((hfsq - (s (hfsq + R) + k ln2_lo)) - f); ln2_hi has 32 significant bits, so
    // k ln2_hi is exact for |k| < 2^11.
    const VF inner = hn::Add(hn::Mul(s, hn::Add(hfsq, R)), hn::Mul(k, hn::Set(df, 1.90821492927058770002e-10)));
    return hn::Sub(hn::Mul(k, hn::Set(df, 6.93147180369123816490e-01)), hn::Sub(hn::Sub(hfsq, inner), f));
}

// sin(2 pi v) and cos(2 pi v) for v in [0, 1).  The reduction is exact: t = 4v, n = round(t)
// (the quadrant), w = t - n in [-1/2, 1/2] (Sterbenz), x = w * pi/2 in [-pi/4, pi/4] (one
// rounding); then fdlibm's k_sin.c / k_cos.c polynomials (FreeBSD's form of the cosine) and the
// quadrant's swap and signs.
HWY_INLINE void SinCos2Pi(VF v, VF *sin_out, VF *cos_out) {
    const DF df;
    const VF t = hn::Mul(v, hn::Set(df, 4.0));
    const VF n = hn::Round(t);
    const VF x = hn::Mul(hn::Sub(t, n), hn::Set(df, 0x1.921FB54442D18p+0));  // pi/2
    const VF z = hn::Mul(x, x);
    // sin x = x + x z (S1 + z (S2 + z (S3 + z (S4 + z (S5 + z S6)))))
    VF ps = hn::Add(hn::Set(df, -2.50507602534068634195e-08), hn::Mul(z, hn::Set(df, 1.58969099521155010221e-10)));
    ps = hn::Add(hn::Set(df, 2.75573137070700676789e-06), hn::Mul(z, ps));
    ps = hn::Add(hn::Set(df, -1.98412698298579493134e-04), hn::Mul(z, ps));
    ps = hn::Add(hn::Set(df, 8.33333333332248946124e-03), hn::Mul(z, ps));
    ps = hn::Add(hn::Set(df, -1.66666666666666324348e-01), hn::Mul(z, ps));
    const VF sn = hn::Add(x, hn::Mul(hn::Mul(z, x), ps));
    // cos x = hi + (((1 - hi) - z/2) + z r), hi = 1 - z/2, r = z (C1 + z (C2 + ... + z C6))
    VF pc = hn::Add(hn::Set(df, 2.08757232129817482790e-09), hn::Mul(z, hn::Set(df, -1.13596475577881948265e-11)));
    pc = hn::Add(hn::Set(df, -2.75573143513906633035e-07), hn::Mul(z, pc));
    pc = hn::Add(hn::Set(df, 2.48015872894767294178e-05), hn::Mul(z, pc));
    pc = hn::Add(hn::Set(df, -1.38888888888741095749e-03), hn::Mul(z, pc));
    pc = hn::Add(hn::Set(df, 4.16666666666666019037e-02), hn::Mul(z, pc));
    const VF r = hn::Mul(z, pc);
    const VF hz = hn::Mul(hn::Set(df, 0.5), z);
    const VF one = hn::Set(df, 1.0);
    const VF hi = hn::Sub(one, hz);
    const VF cs = hn::Add(hi, hn::Add(hn::Sub(hn::Sub(one, hi), hz), hn::Mul(z, r)));
    // Quadrant n in {0, 1, 2, 3, 4} (4 is 0): angle = n pi/2 + x.
    const auto q1 = hn::Eq(n, one), q2 = hn::Eq(n, hn::Set(df, 2.0)), q3 = hn::Eq(n, hn::Set(df, 3.0));
    const auto swap = hn::Or(q1, q3);
    const VF s0 = hn::IfThenElse(swap, cs, sn), c0 = hn::IfThenElse(swap, sn, cs);
    *sin_out = hn::IfThenElse(hn::Or(q2, q3), hn::Neg(s0), s0);
    *cos_out = hn::IfThenElse(hn::Or(q1, q2), hn::Neg(c0), c0);
}

// Pairs first .. first + n - 1, a vector of pairs at a time; sink(i, m, g0, g1) takes the m
// valid lanes of pairs first + i ...  Whole vectors are computed even at the end (extra lanes
// discarded), so each pair goes through the same lane code.
template <class Sink>
HWY_INLINE void ForEachPairBlock(uint64_t seed, uint64_t first, size_t n, const Sink &sink) {
    const DF df;
    const DU du;
    const size_t N = hn::Lanes(df);
    constexpr uint64_t kG = 0x9E3779B97F4A7C15ull;
    HWY_ALIGN uint64_t lane_step[kMaxLanes];
    for (size_t j = 0; j < N; j++) lane_step[j] = uint64_t(j) * 2 * kG;
    const VU step = hn::Load(du, lane_step), block_step = hn::Set(du, uint64_t(N) * 2 * kG);
    // State after advancing to output 2p: seed + (2p + 1) kG (splitmix64_next adds kG first).
    VU zu = hn::Add(hn::Set(du, seed + (2 * first + 1) * kG), step);
    const VU gv = hn::Set(du, kG);
    const VF lo = hn::Set(df, 0x1.0p-52), hi = hn::Set(df, 1.0 - 0x1.0p-52), m2 = hn::Set(df, -2.0);
    for (size_t i = 0; i < n; i += N) {
        VF u = ToUnit(Mix(zu));
        const VF v = ToUnit(Mix(hn::Add(zu, gv)));
        zu = hn::Add(zu, block_step);
        u = hn::Min(hn::Max(u, lo), hi);
        const VF radius = hn::Sqrt(hn::Mul(m2, Log(u)));
        VF sn, cs;
        SinCos2Pi(v, &sn, &cs);
        sink(i, n - i < N ? n - i : N, hn::Mul(radius, cs), hn::Mul(radius, sn));
    }
}

// out[2i], out[2i+1] = g0, g1 of pair first + i, i < n.
void GaussianPairsImpl(uint64_t seed, uint64_t first, size_t n, double *out) {
    const DF df;
    HWY_ALIGN double g0[kMaxLanes], g1[kMaxLanes];
    ForEachPairBlock(seed, first, n, [&](size_t i, size_t m, VF a, VF b) {
        hn::Store(a, df, g0);
        hn::Store(b, df, g1);
        for (size_t j = 0; j < m; j++) {
            out[2 * (i + j)] = g0[j];
            out[2 * (i + j) + 1] = g1[j];
        }
    });
}

// out[2i] = float(g0 * scale[2i]), out[2i+1] = float(g1 * scale[2i+1]) of pair first + i.
void ScaledPairsImpl(uint64_t seed, uint64_t first, size_t n, const double *scale, float *out) {
    const DF df;
    const size_t N = hn::Lanes(df);
    HWY_ALIGN double s0[kMaxLanes], s1[kMaxLanes], p0[kMaxLanes], p1[kMaxLanes];
    ForEachPairBlock(seed, first, n, [&](size_t i, size_t m, VF a, VF b) {
        for (size_t j = 0; j < N; j++) {
            s0[j] = j < m ? scale[2 * (i + j)] : 0.0;
            s1[j] = j < m ? scale[2 * (i + j) + 1] : 0.0;
        }
        hn::Store(hn::Mul(a, hn::Load(df, s0)), df, p0);
        hn::Store(hn::Mul(b, hn::Load(df, s1)), df, p1);
        for (size_t j = 0; j < m; j++) {
            out[2 * (i + j)] = float(p0[j]);  // round to nearest even, as DemoteTo
            out[2 * (i + j) + 1] = float(p1[j]);
        }
    });
}

// The pinned functions alone, for the accuracy measurements (tests, bench).
void PinnedLogImpl(const double *x, size_t n, double *out) {
    const DF df;
    const size_t N = hn::Lanes(df);
    HWY_ALIGN double in[kMaxLanes], res[kMaxLanes];
    for (size_t i = 0; i < n; i += N) {
        const size_t m = n - i < N ? n - i : N;
        for (size_t j = 0; j < N; j++) in[j] = j < m ? x[i + j] : 1.0;
        hn::Store(Log(hn::Load(df, in)), df, res);
        for (size_t j = 0; j < m; j++) out[i + j] = res[j];
    }
}

void PinnedSinCos2PiImpl(const double *v, size_t n, double *s, double *c) {
    const DF df;
    const size_t N = hn::Lanes(df);
    HWY_ALIGN double in[kMaxLanes], rs[kMaxLanes], rc[kMaxLanes];
    for (size_t i = 0; i < n; i += N) {
        const size_t m = n - i < N ? n - i : N;
        for (size_t j = 0; j < N; j++) in[j] = j < m ? v[i + j] : 0.0;
        VF sv, cv;
        SinCos2Pi(hn::Load(df, in), &sv, &cv);
        hn::Store(sv, df, rs);
        hn::Store(cv, df, rc);
        for (size_t j = 0; j < m; j++) {
            s[i + j] = rs[j];
            c[i + j] = rc[j];
        }
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace stk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stk::kernels {

HWY_EXPORT(GaussianPairsImpl);
HWY_EXPORT(ScaledPairsImpl);
HWY_EXPORT(PinnedLogImpl);
HWY_EXPORT(PinnedSinCos2PiImpl);

namespace {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
inline uint64_t output_at(uint64_t seed, uint64_t k) {
    uint64_t state = seed + k * kGolden;  // splitmix64_next adds kGolden before mixing
    return splitmix64_next(&state);
}
}  // namespace

void gaussian_pairs(uint64_t seed, uint64_t first_pair, size_t n_pairs, double *out) {
    if (n_pairs) HWY_DYNAMIC_DISPATCH(GaussianPairsImpl)(seed, first_pair, n_pairs, out);
}

void scaled_gaussian_pairs(uint64_t seed, uint64_t first_pair, size_t n_pairs, const double *scale, float *out) {
    if (n_pairs) HWY_DYNAMIC_DISPATCH(ScaledPairsImpl)(seed, first_pair, n_pairs, scale, out);
}

void gaussian_pair(uint64_t seed, uint64_t pair, double *g0, double *g1) {
    double g[2];
    gaussian_pairs(seed, pair, 1, g);
    *g0 = g[0];
    *g1 = g[1];
}

void gaussians(uint64_t seed, uint64_t first, size_t n, double *out) {
    if (n == 0) return;
    size_t i = 0;
    double g[2];
    if (first & 1) {  // starts on a g1
        gaussian_pairs(seed, first / 2, 1, g);
        out[i++] = g[1];
    }
    const size_t whole = (n - i) / 2;
    gaussian_pairs(seed, (first + i) / 2, whole, out + i);
    i += 2 * whole;
    if (i < n) {  // ends on a g0
        gaussian_pairs(seed, (first + i) / 2, 1, g);
        out[i] = g[0];
    }
}

double random_sign(uint64_t seed, uint64_t index) { return (output_at(seed, index) >> 63) ? -1.0 : 1.0; }

void pinned_log(const double *x, size_t n, double *out) {
    if (n) HWY_DYNAMIC_DISPATCH(PinnedLogImpl)(x, n, out);
}

void pinned_sincos_2pi(const double *v, size_t n, double *s, double *c) {
    if (n) HWY_DYNAMIC_DISPATCH(PinnedSinCos2PiImpl)(v, n, s, c);
}

}  // namespace stk::kernels
#endif  // HWY_ONCE
