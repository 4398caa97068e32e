// The ingestion layer's interface: a checkpoint directory (safetensors, sharded or not; PyTorch
// zip .bin, sharded or not) seen as a list of named tensors whose bytes are mapped, never read
// whole into memory.  Owner: src/ingest (readers).  Consumers: model description, parse_tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stk {

// Element types of source checkpoints (safetensors names; torch storages map onto them).
enum class SrcDType : uint8_t {
    F64,
    F32,
    F16,
    BF16,
    F8_E4M3,
    F8_E5M2,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    BOOL,
    MXFP4,  // never stored as such: a NAME_blocks + NAME_scales pair made one tensor (ingest/mxfp4.h)
};
const char *src_dtype_name(SrcDType t);  // "BF16", ...
size_t src_dtype_size(SrcDType t);       // bytes per element

struct TensorRef {
    std::string name;  // as stored ("h.0.attn.c_attn.weight")
    SrcDType dtype;
    std::vector<uint64_t> shape;  // row-major; [] for a scalar
    uint64_t n_elements = 0;      // product of shape (validated, no overflow)
    uint64_t n_bytes = 0;         // n_elements * dtype size (validated against the file)
    std::string file;             // file the bytes live in (for messages)
    uint64_t file_offset = 0;     // offset of the first byte in that file (for messages)
    // Row-major element strides for torch views (safetensors: contiguous).  Empty = contiguous.
    std::vector<uint64_t> strides;
    uint32_t source_index = 0;  // which Checkpoint source (shard) holds it
    // Bytes tensor_bytes() returns: from the first element to one past the last element the
    // view addresses.  == n_bytes when contiguous; differs for strided torch views (a transpose
    // spans the same bytes; a slice with stride > 1 spans more).
    uint64_t span_bytes = 0;
    // Reader-private (torch zip): which storage holds the tensor and the byte offset of its
    // first element inside that storage.  Unused for safetensors.
    uint32_t storage_index = 0;
    uint64_t storage_byte_offset = 0;
    // F8 block-scaled weights (config.json quantization_config quant_method "fp8", as DeepSeek-V3
    // and Qwen3-FP8 ship): the <name>_scale_inv grid in f32, one value per block_rows x block_cols
    // block (the last ones cut short), multiplied in by convert_to_f32 (attach_fp8_scales).
    std::shared_ptr<const std::vector<float>> block_scale;
    uint32_t block_rows = 0, block_cols = 0;
    // GGUF: the stored bytes are blocks of this ggml type (its numeric id; format/ggml_dequant.h),
    // which convert_to_f32 dequantises range by range, so no reader needs an f32 copy of the
    // whole tensor.  dtype is then F32 (the values' type) and n_bytes their f32 size.  0: the
    // stored bytes are elements of dtype.
    uint32_t ggml_type = 0;
    // MXFP4 only: the scales start this many bytes from the blocks' first byte, in the same
    // mapped file (ingest/mxfp4.h checked both lie inside it).
    int64_t aux_offset = 0;
};

class Checkpoint {
public:
    virtual ~Checkpoint() = default;
    // "safetensors", "safetensors-sharded", "pytorch-zip", "pytorch-zip-sharded", ...
    virtual const char *format() const = 0;
    // Every tensor of the checkpoint, in a fixed deterministic order (sorted by name).
    virtual const std::vector<TensorRef> &tensors() const = 0;
    // The same list, for attach_fp8_scales (readers that cannot hold F8 scales refuse).
    virtual std::vector<TensorRef> &mutable_tensors();
    // The raw stored bytes of a tensor (n_bytes long).  For STORED/mapped data this points into
    // the mapping; for compressed zip entries the bytes are inflated into `scratch` (resized),
    // which the caller provides so memory stays bounded by one tensor.
    virtual const uint8_t *tensor_bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const = 0;
    // Total bytes of the checkpoint files.
    virtual uint64_t file_bytes() const = 0;
    // Hint that the tensor's bytes are done with (drop page cache pressure, bounded RSS).
    virtual void release(const TensorRef &t) const {}

    const TensorRef *find(const std::string &name) const;
    // Names of the files read (index first, then shards in order), for messages and inspect.
    virtual std::vector<std::string> files() const { return {}; }
};

// Open a model directory: picks model.safetensors(.index.json) first, then
// pytorch_model.bin(.index.json) (seed 001's priority).  Also accepts a single file path.
// Errors name the file, the tensor and the offset (STK_E_* statuses).
std::unique_ptr<Checkpoint> open_checkpoint(const std::string &path);
// The checkpoint of resolved files (ingest/model_files.h): files.checkpoint (a file, a shard
// index or the GGUF beside config.json), or the refusal kept there; the directory is not probed
// again.
struct ModelFiles;
std::unique_ptr<Checkpoint> open_checkpoint(const ModelFiles &files);
// A GGUF known to be one (the first file of a split set opens the set), as a checkpoint.
std::unique_ptr<Checkpoint> open_gguf_checkpoint(const std::string &path);

// Convert `count` elements starting at element `first` of a tensor's stored bytes (`bytes`, as
// returned by tensor_bytes) to f32, honouring strides.  Integer types convert by value; BOOL to
// 0/1; F8 formats per the OCP spec.
void convert_to_f32(const TensorRef &t, const uint8_t *bytes, uint64_t first, uint64_t count, float *out);

// Offset in t.file of the stored byte that holds element `element` (row-major, contiguous): for
// ggml blocks the first byte of its block, for MXFP4 the byte holding its nibble (two per byte).
// For messages: strided torch views are not followed.
uint64_t stored_byte_offset(const TensorRef &t, uint64_t element);

// quantization_config quant_method "fp8" with weight_block_size [block_rows, block_cols]: every
// "<w>_scale_inv" (F32 / BF16 [ceil(rows / block_rows), ceil(cols / block_cols)]) is read and
// attached to its F8 weight "<w>" (2-D F8_E4M3 / F8_E5M2), which convert_to_f32 then returns as
// f32(w) x f32(scale) rounded once to f32, as transformers' fp8 dequantisation computes it in
// float32.  Scale of the wrong shape / dtype, without its weight or on a non-2-D-F8 tensor, F8 without a
// scale: STK_E_CORRUPT naming file, tensor and offset; a block size of 0: STK_E_INVALID_ARGUMENT.
void attach_fp8_scales(Checkpoint &ck, uint32_t block_rows, uint32_t block_cols);

// Parse a dtype name as safetensors spells it ("BF16"); false if unknown.
bool parse_src_dtype(const char *name, size_t len, SrcDType *out);

// Helper for parse_tensors (NaN/Inf policy): index of the first non-finite value among
// `count` f32 values, or count if all are finite.
uint64_t first_nonfinite(const float *values, uint64_t count);

}  // namespace stk
