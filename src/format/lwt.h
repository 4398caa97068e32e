// The .lwt weight file (seed 001; seed 002's per-tensor dtypes in version 2).  Byte-by-byte
// layout: docs/format.md, "LWT weight file".
//
//   0        magic "LWATCHV1"
//   8        u64 N: length of the header JSON
//   16       N bytes of header JSON (UTF-8, canonical form written by LwtWriter)
//   16+N     tensor_count index entries (little-endian): version 1 (every tensor float32) uses
//            seed 001's TensorIndexEntry as a C compiler lays it out, 216 bytes with 4 bytes of
//            padding after ndim; version 2 uses 224-byte entries with the dtype in those 4 bytes
//            and scale, zero_point after size_bytes
//   D        data section, D = align64(16 + N + entry_bytes * tensor_count): tensors at 64-byte
//            aligned offsets in index order, zero padding, total_bytes long (a multiple of 64);
//            the file ends there.  header.data_crc32 = CRC32 (libdeflate) of the whole section.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "core/output_file.h"
#include "format/lowbit.h"

namespace stk {

constexpr char kLwtMagic[8] = {'L', 'W', 'A', 'T', 'C', 'H', 'V', '1'};
constexpr uint64_t kLwtEntryBytesV1 = 216;  // seed 001's struct: float32 only
constexpr uint64_t kLwtEntryBytes = 224;    // version 2: dtype, scale, zero_point
constexpr uint32_t kLwtMaxDims = 8;
constexpr uint64_t kLwtNameBytes = 128;  // NUL-terminated: names up to 127 bytes
constexpr uint64_t kLwtMaxHeaderJson = 1u << 24;
constexpr uint64_t kLwtAlign = 64;

// What the header JSON says besides sizes (those the writer derives from the tensors).
struct LwtHeader {
    // 1 when every tensor is float32 (seed 001's layout), else 2.  The writer derives it.
    uint32_t version = 1;
    // Bytes per index entry: 216 (version 1), 224 (version 2, and the version-1 files stk wrote
    // before version 2 existed, which the reader still accepts).  Filled by the reader.
    uint64_t entry_bytes = kLwtEntryBytesV1;
    std::string model_type;
    std::vector<std::pair<std::string, uint64_t>> config;  // written in this order
    std::string dtype = "float32";                         // the dtype export chose for matrices (seed's "dtype")
    bool tied_lm_head = false;                             // the output projection is the token embedding (not stored)
    // Derived; filled by the reader (the writer computes them).
    uint64_t tensor_count = 0;
    uint64_t total_bytes = 0;
    uint64_t parameter_count = 0;
    uint32_t data_crc32 = 0;
};

struct LwtTensor {
    std::string name;
    LwtDType dtype = LwtDType::F32;
    uint32_t ndim = 0;
    uint64_t shape[kLwtMaxDims] = {};
    uint64_t n_elements = 1;
    uint64_t offset = 0;      // from the start of the data section
    uint64_t size_bytes = 0;  // lwt_packed_bytes(dtype, n_elements)
    LwtQuant quant;
    uint64_t entry_offset = 0;  // file offset of its index entry (messages)
};

// CRC32 (zlib / IEEE 802.3 polynomial, libdeflate): crc32("123456789") == 0xCBF43926.
uint32_t lwt_crc32(const void *data, size_t len, uint32_t crc = 0);

// A parsed .lwt over bytes it does not own (the fuzz target) or over its own mapping.
class LwtFile {
public:
    // Maps and validates `path`.  verify_crc=false skips only the CRC pass (stk inspect reports
    // it instead); every structural check still runs.
    explicit LwtFile(const std::string &path, bool verify_crc = true);
    // Validate bytes in memory (kept by the caller); `name` names them in messages.
    LwtFile(const uint8_t *data, uint64_t size, const std::string &name, bool verify_crc = true);
    LwtFile(const LwtFile &) = delete;  // the name index points into tensors_
    LwtFile &operator=(const LwtFile &) = delete;

    const LwtHeader &header() const { return header_; }
    std::string_view header_json() const { return header_json_; }
    const std::vector<LwtTensor> &tensors() const { return tensors_; }
    const LwtTensor *find(std::string_view name) const;
    const uint8_t *tensor_data(const LwtTensor &t) const { return data_ + data_offset_ + t.offset; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return size_; }
    const std::string &name() const { return name_; }
    // CRC32 of the data section (computes it if the constructor skipped it).
    uint32_t computed_crc32() const;
    // Unpack to f32 (n_elements floats).  STK_E_CORRUPT naming the tensor and element for a
    // field no value encodes to or nonzero padding bits.
    void read_f32(const LwtTensor &t, float *out) const;

private:
    void parse(bool verify_crc);
    void parse_index(uint64_t index_at, uint64_t entry_bytes);
    MappedFile map_;
    const uint8_t *data_ = nullptr;
    uint64_t size_ = 0;
    std::string name_;
    LwtHeader header_;
    std::string_view header_json_;
    std::vector<LwtTensor> tensors_;
    std::unordered_map<std::string_view, uint32_t> by_name_;
    uint64_t data_offset_ = 0;
    mutable bool crc_known_ = false;
    mutable uint32_t crc_ = 0;
};

// What the writer needs of a tensor before its bytes: the layout depends only on these.
struct LwtTensorSpec {
    std::string name;
    LwtDType dtype = LwtDType::F32;
    std::vector<uint64_t> shape;
};

// Streams a .lwt: construct with the header and every tensor's spec (validated: names 1..127
// bytes without NUL and unique, rank <= 8, sizes checked), then write_tensor() in index order,
// then commit().  Bytes go to a temporary file renamed over `path` only by commit(), which
// refuses an existing file (STK_E_OUTPUT_EXISTS); the JSON's CRC and each entry's scale are
// patched in before the rename.
class LwtWriter {
public:
    LwtWriter(const std::string &path, const LwtHeader &header, std::vector<LwtTensorSpec> specs);
    const std::vector<LwtTensor> &tensors() const { return tensors_; }
    // Packed bytes of tensor i (size_bytes long), with the quantisation they were packed with.
    void write_tensor(uint32_t i, const uint8_t *packed, uint64_t len, LwtQuant quant);
    // The same in parts (streaming export): begin_tensor, append the packed bytes in order in any
    // number of pieces, end_tensor (which checks that exactly size_bytes came).  The CRC32 is
    // computed on the bytes as they are appended; writes go out in kWriteBuffer-sized blocks.
    void begin_tensor(uint32_t i, LwtQuant quant);
    void append(const uint8_t *packed, uint64_t len);
    void end_tensor();
    // The open tensor's quantisation, replaced before end_tensor: for a dtype whose codes do not
    // depend on it (binary: the sign), packed before its scale is known.  The index is written
    // at commit.
    void set_quant(LwtQuant quant);
    static constexpr size_t kWriteBuffer = 4u << 20;
    void commit();
    uint64_t file_size() const { return data_offset_ + header_.total_bytes; }
    uint32_t data_crc32() const { return crc_; }

private:
    std::string header_text(uint32_t crc) const;
    std::string index_bytes() const;
    std::string path_;
    LwtHeader header_;
    std::vector<LwtTensor> tensors_;
    std::unique_ptr<OutputFile> out_;
    uint64_t data_offset_ = 0;
    uint64_t written_ = 0;  // bytes of the data section written so far
    uint32_t next_ = 0;
    uint32_t crc_ = 0;
    bool in_tensor_ = false;
    uint64_t tensor_written_ = 0;  // bytes appended to the open tensor
    std::vector<uint8_t> buf_;     // pending writes (at most kWriteBuffer)
    void put(const uint8_t *p, uint64_t len);
    void flush();
};

// A whole model held as f32 values with each tensor's stored dtype and quantisation: what
// "load" gives and "save" takes (the seed's round trip).  Saving quantises with the tensor's own
// parameters when it has them (loaded: the scale and zero point, or the block scales), otherwise
// chooses them (lwt_choose_quant; block-scaled: gguf-py's rule per block).
struct LwtModelTensor {
    std::string name;
    std::vector<uint64_t> shape;
    LwtDType dtype = LwtDType::F32;
    bool has_quant = false;
    LwtQuant quant;
    // Block-scaled dtypes with has_quant: each block's f16 scale bits, as loaded; saving encodes
    // the values under them (blockq_quantize_scaled), so load -> save gives the same bytes.
    std::vector<uint16_t> block_scales;
    std::vector<float> values;
};
struct LwtModel {
    LwtHeader header;
    std::vector<LwtModelTensor> tensors;
};
LwtModel load_lwt(const std::string &path);
void save_lwt(const LwtModel &model, const std::string &path);
// Quantise values to `dtype` with fresh parameters (STK_E_NONFINITE naming tensor and element
// for NaN/Inf under an integer dtype); returns the parameters, writes packed bytes to out.
// STK_E_UNSUPPORTED / STK_E_INVALID_ARGUMENT naming the tensor when q cannot be stored for dtype
// (a scale outside [2^-100, 2^100], a zero point beyond the dtype's codes).
void lwt_check_quant(const std::string &name, LwtDType dtype, LwtQuant q);
// Block-scaled: block_scales (nullptr: chosen per block) as blockq_quantize_scaled takes them;
// STK_E_UNSUPPORTED naming the tensor and block when a scale overflows f16 (lwt_check_blocks).
LwtQuant lwt_quantize_tensor(const std::string &name, LwtDType dtype, const float *v, uint64_t n, const LwtQuant *fixed,
                             uint8_t *out, const uint16_t *block_scales = nullptr);
// STK_E_UNSUPPORTED naming the tensor and the elements of the first of n / 32 packed blocks
// (the first holding element first_element) whose scale is infinite or NaN (gguf-py's rule
// writes one for values beyond f16's range times 8 or 127).
void lwt_check_blocks(const std::string &name, LwtDType dtype, const uint8_t *packed, uint64_t n,
                      uint64_t first_element = 0);

}  // namespace stk
