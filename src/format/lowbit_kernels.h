// Highway kernels of the .lwt element types (format/lowbit.h): quantise + pack, unpack, and the
// statistics the quantisation rule needs.  Dynamic dispatch (one place, lowbit_kernels.cc): the
// best target the CPU supports among those compiled (AVX-512, AVX2, SSE4, SSSE3, scalar).
//
// Each kernel does the bulk of its input and returns how many elements it did (a multiple of 8,
// so the packed output ends on a byte boundary); format/lowbit.cc finishes the tail with its
// scalar reference code.  The results are bit-identical to that reference on every target
// (tests/test_lwt.cc runs each compiled target against it): every operation is per lane and
// unfused (a division, not a reciprocal; no FMA), and rounding uses the same 1.5 * 2^23 trick.
// Ternary, int2 and fp4 compare |v| with exact boundaries of that division instead of doing it
// (fl_div_le_bound in lowbit_kernels.cc): the same codes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/lowbit.h"

namespace stk::kernels {

// Quantise and pack the first k elements of v (values finite for integer dtypes: the callers
// check).  Returns k; 0 for float32 (a memcpy) and on the scalar target.
uint64_t lwt_pack_bulk(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out);

// The same over bf16 values given as their bits (host order): the codes of their f32 values,
// without converting them to memory first.
uint64_t lwt_pack_bf16_bulk(LwtDType t, const uint16_t *v, uint64_t n, LwtQuant q, uint8_t *out);

// Unpack the first k elements.  Sets *invalid_field when one of them holds a field no value
// encodes to (ternary 0b10); the caller then locates it.  Returns k.
uint64_t lwt_unpack_bulk(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out, bool *invalid_field);

// The statistics of the quantisation rule over the first k elements, in one read: absmax,
// min(0, v...) and max(0, v...) folded into *absmax, *lo, *hi and, when bins is not null
// (ternary, binary), the exact sum of |v| added to bins (LwtQuantStats::kExpBins entries): the
// same number as adding each value's 24-bit significand to its exponent's entry, though spread
// differently over the entries (lwt_stats_abs_total compares them), each entry growing by less
// than 2^25 per value.  Returns how many it did (whole vectors; the caller does the rest one
// value at a time), or UINT64_MAX when one of them is NaN or infinite (the outputs are then
// meaningless); 0 on the scalar target.
uint64_t lwt_stats_f32_bulk(const float *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins);
// The same over bf16 values given as their bits (host order), without converting them first.
uint64_t lwt_stats_bf16_bulk(const uint16_t *v, uint64_t n, float *absmax, float *lo, float *hi, uint64_t *bins);

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols (a plain copy of
// every value, so exact on every target): 8 x 8 blocks in 256-bit registers (AVX2, AVX-512),
// 4 x 4 blocks in 128-bit ones for what is left and on other targets, the edges scalar.
// Export's transposed (Conv1D) tensors go through it.
void lwt_transpose_f32(const float *src, uint64_t src_stride, uint64_t rows, uint64_t cols, float *dst, uint64_t dst_stride);

// For tests: the Highway targets compiled and supported by this CPU (HWY_* bits), the one the
// kernels run on now, and its name.  Tests pin one with hwy::SetSupportedTargetsForTest.
std::vector<int64_t> lowbit_targets();
std::string lowbit_target_name();

}  // namespace stk::kernels
