// Seeded draws of seed 5.1 / 10.4: Gaussians by Box-Muller from splitmix64 streams, and the
// +-1 "Hadamard-like" signs of seed 6.1.  Pure functions of (stream seed, index): the k-th draw
// of a stream does not depend on how the stream was split between threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk::kernels {

// Module ids of the PRNG streams (seed 10.4: (module, layer, counter)).  Equal to the stk_stage
// number of the stage that draws them; the acceptance suites use their own.
constexpr uint32_t kStreamPrf = 3;
constexpr uint32_t kStreamOverlaysH = 4;
constexpr uint32_t kStreamOverlaysOmega = 0x104;
constexpr uint32_t kStreamOverlaysCheck = 0x204;
constexpr uint32_t kStreamAcceptancePrf = 0x1001;
constexpr uint32_t kStreamAcceptanceMemory = 0x1007;
constexpr uint32_t kStreamReplay = 0x1010;  // stk replay's probe vectors (layer id = token id)

// Gaussian pair number `pair` of the stream `seed`: u = splitmix64 output 2*pair, v = output
// 2*pair+1 (the state after k outputs is seed + k * 0x9E3779B97F4A7C15), each mapped to [0,1)
// by (x >> 11) * 2^-53; u clamped to [2^-52, 1 - 2^-52]; g0 = sqrt(-2 ln u) cos(2 pi v),
// g1 = sqrt(-2 ln u) sin(2 pi v), with ln and sin/cos(2 pi .) the pinned functions below
// (seed 10.2), so the bytes are the same on every CPU and SIMD target.
void gaussian_pair(uint64_t seed, uint64_t pair, double *g0, double *g1);

// out[2i], out[2i+1] = g0, g1 of pair first_pair + i, i < n_pairs (vectorised).
void gaussian_pairs(uint64_t seed, uint64_t first_pair, size_t n_pairs, double *out);

// out[2i + c] = float(g_c * scale[2i + c]) (c = 0, 1) of pair first_pair + i, i < n_pairs: the
// draws of gaussian_pairs scaled and rounded to f32 (nearest even) without a double buffer.
void scaled_gaussian_pairs(uint64_t seed, uint64_t first_pair, size_t n_pairs, const double *scale, float *out);

// out[i] = Gaussian number first + i of the stream (number 2p is g0 of pair p, 2p+1 its g1).
void gaussians(uint64_t seed, uint64_t first, size_t n, double *out);

// +1 or -1: bit 63 of splitmix64 output `index` of the stream (set: -1).
double random_sign(uint64_t seed, uint64_t index);

// The pinned math of the draws (docs/decisions.md "Pinned math functions"): fdlibm's log
// algorithm for positive normal x (< 1 ulp), and sin / cos of 2 pi v for v in [0, 1) with an
// exact quadrant reduction and fdlibm's kernels.  Same bytes on every target.
void pinned_log(const double *x, size_t n, double *out);
void pinned_sincos_2pi(const double *v, size_t n, double *s, double *c);

}  // namespace stk::kernels
