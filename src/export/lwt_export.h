// HuggingFace checkpoint directory -> .lwt (seed 001), through the ingestion layer (safetensors
// first, pytorch_model.bin second; config.json; roles; dtype conversion).  docs/format.md ("LWT
// weight file") and docs/decisions.md ("The .lwt export") say what is stored:
//   - GPT-2: seed 001's names ("transformer." + the hub name, in the seed's table order), Conv1D
//     weights transposed to [out, in], the tied lm_head not stored (header tied_lm_head = true),
//     parameters counted from shapes and checked against config.json (124,439,808 for GPT-2 small).
//   - every other family the ingestion layer knows: its own tensor names and stored shapes, in
//     stream order, model_type as config.json says.
// Buffers (attention masks, rotary inv_freq, a stored copy of a tied head) are never written.
// Matrices (rank >= 2) are stored in the requested dtype, vectors in float32.  A block-scaled dtype
// (q4_0, q8_0) needs every matrix's stored rows to be whole blocks of 32 (else STK_E_UNSUPPORTED).
// Tensors stream through in chunks: a first pass over the mapped source chooses the quantisation
// (and refuses NaN/Inf), a second converts, quantises, packs and writes (binary, whose codes do
// not depend on the scale, in the second pass alone); memory stays at a chunk plus the source
// pages of the tensor being read (a tensor of up to 128 MiB stays mapped between its passes,
// larger ones are released as the passes go).  With N threads
// each pass goes in rounds of N pieces of a tensor, one per thread (the caller is one of them);
// the caller merges the statistics and appends the packed pieces in order (CRC32, writes), so
// the bytes are those of one thread, and memory is N pieces' buffers more.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/lwt.h"

namespace stk {

struct LwtExportOptions {
    std::string in;   // model directory (or a single checkpoint file beside a config.json)
    std::string out;  // the .lwt to create (must not exist)
    LwtDType dtype = LwtDType::F32;
    // Elements converted and packed at a time (rounded up to a multiple of 8, of 32 for q4_0 / q8_0;
    // 0: kLwtExportChunk).
    // The output does not depend on it (tests vary it).
    uint64_t chunk_elements = 0;
    // Threads converting and packing (0 or 1: the caller alone; at most kLwtExportMaxThreads).
    // The output does not depend on it: the statistics are exact integers merged per tensor, the
    // packed chunks independent once the scale is known, and the CRC32 taken on one thread in
    // file order.
    uint32_t threads = 0;
};
constexpr uint32_t kLwtExportMaxThreads = 64;

// 64 Ki f32 values (256 KiB): a chunk and its packed bytes stay in L2 between the conversion,
// the quantisation and the CRC.
constexpr uint64_t kLwtExportChunk = 1u << 16;

struct LwtExportResult {
    std::string model_type;
    std::string source_format;  // Checkpoint::format()
    uint64_t checkpoint_bytes = 0;
    uint64_t tensors = 0;
    uint64_t parameters = 0;
    uint64_t file_bytes = 0;
    uint32_t data_crc32 = 0;
    bool tied_lm_head = false;
    uint64_t peak_buffer_bytes = 0;  // the largest f32 buffer held at once (one chunk)
};

LwtExportResult export_lwt(const LwtExportOptions &opt);

// Seed 001's GPT-2 tensors as the .lwt stores them (names, [out, in] shapes), in file order,
// from the config alone: 2 + 12 * n_layer + 2 tensors.  export_lwt checks every GPT-2 tensor
// against it; for GPT-2 small (12, 768, 50257, 1024) the element counts add up to 124,439,808.
std::vector<LwtTensorSpec> gpt2_lwt_layout(uint64_t n_layer, uint64_t n_embd, uint64_t vocab_size, uint64_t block_size,
                                           uint64_t n_inner = 0);

}  // namespace stk
