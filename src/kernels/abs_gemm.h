// The FFN collapse's GEMMs (seed 7.2): C = op_a(A) * op_b(B) with an elementwise transform applied
// while a block of each operand is packed, so no transformed copy of a whole matrix ever exists
// (|W2| |W1| is never materialised).  The arithmetic is BLIS sgemm, single-threaded per call, on
// packed blocks of a fixed grid: output column blocks of kGemmNB (in a product of kGemmNB rows or
// more the threads take even column ranges, one call per block a range meets: the same bits as
// the whole block's call), depth blocks of kGemmKB.  Each output column is owned by one thread and
// its depth blocks are summed in ascending order, so the bytes of C do not depend on the thread
// count (docs/decisions.md, "FFN collapse").
#pragma once

#include <cstddef>
#include <cstdint>

namespace stk {

// What is done to A's elements while packing.
enum class PackA : uint8_t { Copy, Abs };

// What is done to B's elements while packing.  With a second matrix B2 (a gated FFN's "up"
// projection) the element is g = B[k][j], u = B2[k][j]; without, u = 1.
//   Abs  -> |g| |u|          (the influence bound's B: |W1|, or |W_gate| |W_up|)
//   Pos  -> max(0, g) u      (the response to +e_j with ReLU for the activation)
//   Neg  -> max(0, -g) (-u)  (the response to -e_j)
enum class PackB : uint8_t { Abs, Pos, Neg };

constexpr uint64_t kGemmKB = 256;  // depth of one packed block
constexpr uint64_t kGemmNB = 512;  // width of one output column block

// Floats of scratch one thread needs for an m-row product (an A block m x KB and a B block KB x NB).
uint64_t abs_gemm_scratch_floats(uint64_t m);

// C[m x n] (row stride ldc) = op_a(A[m x k], row stride lda) * op_b(B[k x n], row stride ldb).
// `scratch` holds threads * abs_gemm_scratch_floats(m) floats.  threads >= 1 (std::thread; the
// caller's thread is one of them).  No other allocation of ours (BLIS keeps its own pack pool).
void abs_gemm(uint64_t m, uint64_t n, uint64_t k, PackA opa, const float *A, uint64_t lda, PackB opb, const float *B,
              const float *B2, uint64_t ldb, float *C, uint64_t ldc, float *scratch, unsigned threads);

// Plain BLIS sgemm C = A B (row-major, single-threaded BLIS call per fixed block as above), the
// peak the collapse is measured against (bench/ffn_bench).
void plain_sgemm(uint64_t m, uint64_t n, uint64_t k, const float *A, uint64_t lda, const float *B, uint64_t ldb, float *C,
                 uint64_t ldc, unsigned threads);

}  // namespace stk
