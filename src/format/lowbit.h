// Element types of .lwt tensors and their native bit-packing (seed 002, "The Bit-Packing System";
// docs/format.md, ".lwt element types").  One place defines, per dtype: the stored field width,
// the quantisation rule that turns f32 values into codes (with the per-tensor scale and zero point
// it chooses), the bit order inside a byte, and the value a stored code decodes to.
//
// The round-trip property the .lwt format promises (load -> save byte-identical) rests on one
// fact tested for every code of every dtype: encode(decode(code)) == code under the same scale
// and zero point.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/float16.h"  // f32_to_f16_rne, f32_to_bf16_rne: the element conversions of F16 and BF16

namespace stk {

// Values are the u32 stored in the .lwt index entry.  Pinned.
enum class LwtDType : uint32_t {
    F32 = 1,
    F16 = 2,
    BF16 = 3,
    I8 = 4,
    U8 = 5,
    I4 = 6,
    U4 = 7,
    FP4 = 8,
    I2 = 9,
    U2 = 10,
    TERNARY = 11,
    BINARY = 12,
    // Block-scaled (issue 37): ggml's Q4_0 / Q8_0 blocks of 32 values, each block with its own
    // f16 scale (BlockQType below); no per-tensor scale (the entry stores 1 and 0).
    Q4_0 = 13,
    Q8_0 = 14,
};
constexpr uint32_t kLwtDTypeFirst = 1, kLwtDTypeLast = 14;
// One `case` per dtype other than F32, each calling CALL(dtype): the one list the dtype
// dispatchers (lowbit.cc, format/lowbit_kernels.cc) expand, so a new dtype is added once.
#define STK_LWT_NON_F32_CASES(CALL)                \
  case LwtDType::F16: CALL(LwtDType::F16);         \
  case LwtDType::BF16: CALL(LwtDType::BF16);       \
  case LwtDType::I8: CALL(LwtDType::I8);           \
  case LwtDType::U8: CALL(LwtDType::U8);           \
  case LwtDType::I4: CALL(LwtDType::I4);           \
  case LwtDType::U4: CALL(LwtDType::U4);           \
  case LwtDType::FP4: CALL(LwtDType::FP4);         \
  case LwtDType::I2: CALL(LwtDType::I2);           \
  case LwtDType::U2: CALL(LwtDType::U2);           \
  case LwtDType::TERNARY: CALL(LwtDType::TERNARY); \
  case LwtDType::BINARY: CALL(LwtDType::BINARY);
// The block-scaled dtypes, which the per-element dispatchers skip (their callers branch on
// lwt_dtype_is_blocked first).
#define STK_LWT_BLOCK_CASES \
  case LwtDType::Q4_0:      \
  case LwtDType::Q8_0:

inline bool lwt_dtype_valid(uint32_t code) { return code >= kLwtDTypeFirst && code <= kLwtDTypeLast; }
// "float32", "float16", "bfloat16", "int8", "uint8", "int4", "uint4", "fp4", "int2", "uint2",
// "ternary", "binary", "q4_0", "q8_0".
const char *lwt_dtype_name(LwtDType t);
bool parse_lwt_dtype(std::string_view name, LwtDType *out);
// Stored bits per element: 32, 16, 8, 4, 2 or 1; 0 for the block-scaled dtypes, whose size is
// per block of 32 values (lwt_packed_bytes).
unsigned lwt_dtype_bits(LwtDType t);
// Float dtypes carry no scale (scale 1, zero point 0).
bool lwt_dtype_is_float(LwtDType t);
// Q4_0 / Q8_0: the scales are in the blocks; a tensor's last dimension is a multiple of 32.
inline bool lwt_dtype_is_blocked(LwtDType t) { return t == LwtDType::Q4_0 || t == LwtDType::Q8_0; }
// A per-tensor scale (and, unsigned, a zero point) in the index entry: every integer dtype.
inline bool lwt_dtype_has_scale(LwtDType t) { return !lwt_dtype_is_float(t) && !lwt_dtype_is_blocked(t); }
// Largest code of an unsigned dtype (255, 15, 3); 0 for the others.
uint32_t lwt_unsigned_max(LwtDType t);

// ceil(n * bits / 8) (block-scaled: n / 32 blocks of 18 or 34 bytes, false when n is not a
// multiple of 32), or false on overflow.
bool lwt_packed_bytes(LwtDType t, uint64_t n_elements, uint64_t *out);

// The per-tensor quantisation parameters stored in the index entry.
struct LwtQuant {
    float scale = 1.0f;
    uint32_t zero_point = 0;  // unsigned dtypes only
};

// Scales a .lwt may hold: within this range encode(decode(code)) == code for every code (no
// product overflows or loses bits to subnormals).
constexpr float kLwtMinScale = 0x1p-100f, kLwtMaxScale = 0x1p100f;

// Parameters the quantisation rule chooses for `n` f32 values (all finite; the caller checks).
//   signed intN: scale = absmax / (2^(N-1) - 1)
//   unsigned:    affine over [min(min,0), max(max,0)]: scale = range / (2^N - 1),
//                zero_point = clamp(rne(-lo / scale), 0, 2^N - 1)
//   fp4 (E2M1):  scale = absmax / 6
//   ternary, binary: scale = mean(|v|): float(S / n), S the exact sum of |v| rounded once to
//                    binary64 (kept as integers per binary exponent, so it does not depend on
//                    the order the values come in), see lwt_stats_abs_total
// A scale below 2^-100 (all-zero or vanishing tensors) becomes 1.  Float and block-scaled
// dtypes: {1, 0}.
LwtQuant lwt_choose_quant(LwtDType t, const float *v, uint64_t n);

// The same rule over values that arrive in chunks, in any order (export streams tensors and
// reads transposed ones in source order): add every chunk, then lwt_quant_from_stats.  Every
// statistic is exact (absmax, min, max, and the sum of |v| as integers per exponent), so the
// parameters equal lwt_choose_quant's over the whole tensor.  lwt_stats_add returns false when
// one of the n values is NaN or infinite (the stats are then meaningless).
struct LwtQuantStats {
    float absmax = 0.0f, lo = 0.0f, hi = 0.0f;  // lo <= 0 <= hi
    uint64_t n = 0;
    // Ternary and binary: the exact sum of |v| as sum_e abs_sum[e] * 2^(e - 150).  One value at
    // a time, |v| = m * 2^(e - 150) with m < 2^24 goes into entry e (its exponent field;
    // subnormals: e = 1); the vector kernels may write the same number into other entries.
    // Carried into the next entry before any could overflow.
    static constexpr unsigned kExpBins = 320;
    static constexpr uint64_t kCarryEvery = 1ull << 38;  // values between two carries
    uint64_t abs_sum[kExpBins] = {};
};
bool lwt_stats_add(LwtDType t, LwtQuantStats *s, const float *v, uint64_t n);
// The same over n bf16 values (little-endian bits at `bits`, any alignment), read as they lie:
// the statistics of their f32 values, without converting them (export's first pass over a bf16
// checkpoint), min/max and the sum of |v| in one vector read (lwt_stats_bf16_bulk).
bool lwt_stats_add_bf16(LwtDType t, LwtQuantStats *s, const uint8_t *bits, uint64_t n);
LwtQuant lwt_quant_from_stats(LwtDType t, const LwtQuantStats &s);
// The exact sum of |v| (abs_sum), rounded once to binary64, to nearest even: the same double for
// every way the entries hold the same number.  canonical (optional): the entries carried so that
// each but the last holds one bit, the same array for the same number (tests compare them).
double lwt_stats_abs_total(const LwtQuantStats &s, uint64_t canonical[LwtQuantStats::kExpBins]);
// Statistics of two disjoint parts of one tensor -> those of the whole (into s): the same
// absmax, lo, hi, n and sum of |v| (the same number, lwt_stats_abs_total) that adding every
// value to one LwtQuantStats gives, so the same parameters, as long as s->n + b.n < kCarryEvery
// (no carry taken in either).
// Returns false (s unchanged) otherwise.
bool lwt_stats_merge(LwtQuantStats *s, const LwtQuantStats &b);

// One value -> its stored field (the low lwt_dtype_bits bits), and back.  Round half to even
// (the FE_TONEAREST default), then clamp to the dtype's code range.
uint32_t lwt_encode(LwtDType t, float v, LwtQuant q);
float lwt_decode(LwtDType t, uint32_t field, LwtQuant q);
// A field that no value encodes to (only ternary's 0b10).
inline bool lwt_field_valid(LwtDType t, uint32_t field) { return !(t == LwtDType::TERNARY && field == 2); }

// Pack n values into lwt_packed_bytes(t, n) bytes at out (every byte written; the unused low bits
// of the last byte are zero).  Block-scaled dtypes: blockq_quantize (q ignored; n a multiple of
// 32; a block whose f16 scale overflows is written as it comes, so writers check
// blockq_first_bad_scale).  Values must be finite for the integer dtypes (lwt_quantize_tensor
// checks).  Highway kernels do the bulk, the scalar reference the tail.  Bit order: 4-bit fields high nibble first (even index ->
// bits 7..4), 2-bit fields at shift 6 - 2*(i%4), 1-bit fields MSB first; 16/32-bit fields little-endian.
void lwt_pack(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out);

// The same over n bf16 values (little-endian bits at `bits`, any alignment): the bytes lwt_pack
// writes for their f32 values, without converting them to memory first (export packs a bf16
// checkpoint's tensors straight from the mapping).
void lwt_pack_bf16(LwtDType t, const uint8_t *bits, uint64_t n, LwtQuant q, uint8_t *out);

// Unpack n values.  Returns n on success, or the index of the first element whose field is
// invalid (lwt_field_valid; block-scaled: the first element of the first block whose scale is
// infinite or NaN), or n + 1 when padding bits after the last element are not zero.
uint64_t lwt_unpack(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out);

// The scalar reference code of lwt_pack / lwt_unpack (the Highway kernels in
// format/lowbit_kernels.cc must match it bit for bit; tests and the bench compare them).
void lwt_pack_scalar(LwtDType t, const float *v, uint64_t n, LwtQuant q, uint8_t *out);
uint64_t lwt_unpack_scalar(LwtDType t, const uint8_t *in, uint64_t n, LwtQuant q, float *out);

// The stored field of element i (for tests and the inspector; not for block-scaled dtypes).
uint32_t lwt_field_at(LwtDType t, const uint8_t *in, uint64_t i);

}  // namespace stk

namespace stk {

// Block-scaled types (issue 37): the values in blocks of 32, each block with its own f16 scale,
// byte for byte ggml's types of the same name (docs/format.md, "Block-scaled types"); the rule
// that makes the codes is gguf-py's quantize (gguf.quants), which equals ggml-quants.c's
// reference rows:
//   Q4_0 (ggml type 2), 18 bytes a block: d (f16, little-endian), then 16 bytes qs; element j
//        of the block is qs[j] & 15 (j < 16) or qs[j - 16] >> 4, decoding to (q - 8) * d.
//        Encoding: m = the element of largest |v| (the first), d = m / -8, id = 1 / d (0 when
//        d = 0), q = min(15, trunc(v * id + 8.5)) in f32; d stored as f16 (rne).
//   Q8_0 (ggml type 8), 34 bytes a block: d (f16), then 32 int8 q; value q * d.  Encoding:
//        d = absmax / 127, id = 1 / d (0 when d = 0), q = round-half-away(v * id) in f32.
// Decoding: f32(d) * f32(q), one rounding.  A row length must be a multiple of 32.
enum class BlockQType : uint32_t { Q4_0 = 2, Q8_0 = 8 };  // ggml's type numbers
constexpr uint64_t kBlockQElems = 32;
inline BlockQType lwt_blockq(LwtDType t) { return t == LwtDType::Q4_0 ? BlockQType::Q4_0 : BlockQType::Q8_0; }
const char *blockq_name(BlockQType t);              // "q4_0", "q8_0"
bool parse_blockq(std::string_view name, BlockQType *out);
uint64_t blockq_block_bytes(BlockQType t);          // 18, 34
// Bytes of n values (n a multiple of 32), false when n is not or the size overflows.
bool blockq_bytes(BlockQType t, uint64_t n, uint64_t *out);
// n values (finite, n a multiple of 32) -> blockq_bytes bytes; and back.
void blockq_quantize(BlockQType t, const float *v, uint64_t n, uint8_t *out);
void blockq_dequantize(BlockQType t, const uint8_t *in, uint64_t n, float *out);
// The codes of n values under given block scales (d[b]: block b's f16 bits), the scale bytes
// copied: what saving a loaded tensor does, as a per-tensor dtype keeps its loaded scale.  The
// code is gguf-py's rule with id = 1 / f32(d[b]) (0 when d is 0), clamped to the code range, so
// the codes of a block's own values come back unchanged (tested for every code).
void blockq_quantize_scaled(BlockQType t, const float *v, uint64_t n, const uint16_t *d, uint8_t *out);
// The f16 scale bits of block b.
inline uint16_t blockq_scale_bits(BlockQType t, const uint8_t *in, uint64_t b) {
    const uint8_t *o = in + b * blockq_block_bytes(t);
    return uint16_t(o[0] | (o[1] << 8));
}
// The index of the first of n / 32 blocks whose scale is infinite or NaN (a value above the
// f16 range quantises to one), or n / 32 when none is.
uint64_t blockq_first_bad_scale(BlockQType t, const uint8_t *in, uint64_t n);
// sum_j value_j * x[j] over n values of a row: per block, the integer codes times x summed in f32
// (8 partial sums, added pairwise), times d; the blocks' terms added in order.
float blockq_dot(BlockQType t, const uint8_t *row, const float *x, uint64_t n);

}  // namespace stk
