// MXFP4 weights as the hub ships gpt-oss (quantization_config "quant_method": "mxfp4"): a U8
// tensor NAME_blocks [..., R, G, 16] (two 4-bit E2M1 codes a byte, low nibble first) and a U8
// tensor NAME_scales [..., R, G] (one E8M0 exponent, bias 127, per 32 values).  transformers
// (integrations/mxfp4.py, convert_moe_packed_tensors) dequantises value k of block g of row r as
// FP4_VALUES[code] * 2^(scale - 127) into [..., R, G * 32], then transposes the last two axes.
//
// wrap_mxfp4 pairs them: the checkpoint it returns lists one tensor NAME_blocks of dtype MXFP4,
// shape [..., R, G * 32] (the layout before transformers' transpose), whose scales lie
// aux_offset bytes from its blocks in the same mapped file; NAME_scales is no longer listed.
// convert_to_f32 dequantises it exactly as transformers does (docs/decisions.md, "MXFP4").
#pragma once

#include <memory>
#include <string>

#include "ingest/checkpoint.h"

namespace stk {

// The E2M1 code's value (transformers' FP4_VALUES).
extern const float kFp4Values[16];

// `count` MXFP4 values from logical element `first` (blocks at `blocks`, scales at `scales`).
void mxfp4_to_f32(const uint8_t *blocks, const uint8_t *scales, uint64_t first, uint64_t count, float *out);

// The same values stored as ggml's MXFP4 blocks (GGUF type 39, llama.cpp's gpt-oss experts): 17
// bytes per 32 values, the E8M0 exponent first, then 16 bytes whose low nibbles hold values 0..15
// and high nibbles values 16..31 (ggml's dequantize_row_mxfp4; its doubled value table times half
// the scale is the same number, except code 8: ggml's +0 where transformers' table has -0).
inline constexpr uint32_t kGgmlMxfp4 = 39;
void mxfp4_ggml_to_f32(const uint8_t *blocks, uint64_t first, uint64_t count, float *out);
// One ggml MXFP4 block re-laid as transformers' block (two values a byte, low nibble first) and
// its scale byte: the same 32 values.
void mxfp4_ggml_to_hf(const uint8_t ggml_block[17], uint8_t hf_block[16], uint8_t *scale);

// Pairs every NAME_blocks with its NAME_scales.  Refused (STK_E_CORRUPT, naming file, tensor and
// offset): blocks without scales or scales without blocks, a dtype other than U8, a last axis
// other than 16, scales whose shape is not the blocks' without that axis; STK_E_DIMS_OVERFLOW:
// groups x 32 values past 64 bits (possible only with a zero dimension); STK_E_UNSUPPORTED: the
// two in different files, or a checkpoint that is not safetensors.
std::unique_ptr<Checkpoint> wrap_mxfp4(std::unique_ptr<Checkpoint> inner);

}  // namespace stk
