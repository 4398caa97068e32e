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

// Pairs every NAME_blocks with its NAME_scales.  Refused (STK_E_CORRUPT, naming file, tensor and
// offset): blocks without scales or scales without blocks, a dtype other than U8, a last axis
// other than 16, scales whose shape is not the blocks' without that axis; STK_E_DIMS_OVERFLOW:
// groups x 32 values past 64 bits (possible only with a zero dimension); STK_E_UNSUPPORTED: the
// two in different files, or a checkpoint that is not safetensors.
std::unique_ptr<Checkpoint> wrap_mxfp4(std::unique_ptr<Checkpoint> inner);

}  // namespace stk
