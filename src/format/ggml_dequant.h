// Dequantisation of ggml's block formats (GGUF tensors) to f32, bit-exact against gguf-py's
// numpy `gguf.quants.dequantize`: every value is computed in f32 in the order gguf-py computes it
// (scales as f16 -> f32 exactly, then d * q, or d * q + m / d * q - m as two roundings, never
// fused), lane by lane, so every SIMD target and the scalar reference give the same bytes.
// Types are ggml's numeric ids (ingest/gguf.h names them).  Here in format (not kernels): these
// are byte layouts of a file format, and ingest reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stk::ggml {

// True for the ids dequantised here: F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8,
// Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ4_NL 20, IQ4_XS 23, BF16 30, TQ1_0 34, TQ2_0 35.
bool ggml_dequant_supported(uint32_t type);
// Elements per block and bytes per block of a supported type (0 otherwise).
uint32_t ggml_dequant_block(uint32_t type);
uint32_t ggml_dequant_block_bytes(uint32_t type);

// out[0 .. n_blocks * block) from n_blocks blocks at src (any alignment).  Unsupported ids are
// the caller's error (it checks ggml_dequant_supported first): they write nothing and return
// false.
bool ggml_dequantize(uint32_t type, const uint8_t *src, uint64_t n_blocks, float *out);
// The plain scalar definition (tests and bench compare the dispatched kernels with it).
bool ggml_dequantize_reference(uint32_t type, const uint8_t *src, uint64_t n_blocks, float *out);

// Highway targets compiled and supported here (tests run each) and the dispatched one's name.
std::vector<int64_t> ggml_dequant_targets();
std::string ggml_dequant_target_name();

}  // namespace stk::ggml
