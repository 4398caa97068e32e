// GGUF (llama.cpp / ggml's model file): a little-endian header, typed metadata key/values, tensor
// infos, then the tensor data, each tensor aligned to general.alignment (default 32).  Versions 2
// and 3 are read; version 1 (32-bit counts) and big-endian files are refused.  Split files
// (NAME-00001-of-0000N.gguf, keys split.no / split.count / split.tensors.count) open as one.
// Everything stays mapped: values and names are views into the mapping.  Every count, length,
// rank, dimension and offset is checked before use (docs/format.md, "GGUF input").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "ingest/source.h"

namespace stk {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kGgufDefaultAlignment = 32;
constexpr uint32_t kGgufMaxDims = 4;         // GGML_MAX_DIMS
constexpr uint32_t kGgufMaxArrayDepth = 16;  // nested arrays deeper than this are refused

// Metadata value types (ids as stored).
enum class GgufType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};
const char *gguf_type_name(GgufType t);  // "u32", "string", "array", ...

// ggml tensor types (ids as stored; gaps are ids ggml retired).
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
};
struct GgmlTypeInfo {
    const char *name;      // "Q4_K"
    uint32_t block;        // elements per block
    uint32_t block_bytes;  // bytes per block
};
// Null for an id ggml does not define.
const GgmlTypeInfo *ggml_type_info(uint32_t type);
// "Q4_K", or "unknown type 77" (a static buffer per thread).
std::string ggml_type_name(uint32_t type);

class GgufFile;

// One metadata value: a view into the mapped file, valid while its GgufFile lives.  The typed
// getters throw STK_E_CORRUPT naming the file, key and offset when the stored type differs.
class GgufValue {
public:
    GgufType type() const { return type_; }
    uint64_t file_offset() const { return offset_; }  // of the value's first byte
    std::string_view key() const { return key_; }

    uint8_t u8() const;
    int8_t i8() const;
    uint16_t u16() const;
    int16_t i16() const;
    uint32_t u32() const;
    int32_t i32() const;
    uint64_t u64() const;
    int64_t i64() const;
    float f32() const;
    double f64() const;
    bool boolean() const;          // refuses bytes other than 0 and 1
    std::string_view str() const;  // raw bytes (GGUF strings are UTF-8, not checked here)
    // Any integer type whose value is >= 0 / fits int64; any float type.  For readers that take
    // what writers disagree on (u32 vs i32 vs u64 counts).
    uint64_t as_uint() const;
    int64_t as_int() const;
    double as_float() const;

    // Arrays.
    GgufType elem_type() const;                     // refuses a non-array
    uint64_t size() const;                          // element count; refuses a non-array
    GgufValue at(uint64_t i) const;                 // element i (O(1)); refuses i >= size()
    std::vector<std::string_view> strings() const;  // an array of strings
    // An array of numbers converted to T (any integer or float element type; an integer that
    // does not fit T is refused).
    std::vector<int64_t> ints() const;
    std::vector<uint64_t> uints() const;
    std::vector<float> floats() const;  // F32 elements exactly; F64 / integers rounded to f32

private:
    friend class GgufFile;
    friend struct GgufParser;
    [[noreturn]] void wrong(const char *wanted) const;
    const std::string *path_ = nullptr;
    std::string_view key_;
    GgufType type_ = GgufType::U8;
    GgufType elem_ = GgufType::U8;   // arrays
    uint64_t count_ = 0;             // arrays: elements; strings: bytes
    const uint8_t *data_ = nullptr;  // scalars: the value; strings: the bytes; arrays: element 0
    uint64_t offset_ = 0;
    // Arrays of strings / arrays: element i starts at data_ + index_[2 i]; a nested array's own
    // index starts at index_[2 i + 1].
    const std::vector<uint64_t> *index_ = nullptr;
    uint64_t index_start_ = 0;
};

struct GgufKV {
    std::string_view key;
    GgufValue value;
};

struct GgufTensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    uint64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ggml order: ne[0] varies fastest; unused = 1
    std::vector<uint64_t> shape;               // row-major (ne reversed, n_dims entries) as stk uses
    uint32_t type = 0;                         // a GgmlType id (ggml_type_info() is non-null)
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;      // stored bytes: n_elements / block * block_bytes
    uint32_t file_index = 0;   // which split file holds the data
    uint64_t data_offset = 0;  // absolute offset of the first byte in that file
    uint64_t info_offset = 0;  // where its tensor info starts (for messages)
};

// A GGUF model: one file, or every file of a split set.  Not copyable or movable (values point
// into it).
class GgufFile {
public:
    // Open `path`.  If it is one file of a split set (split.count > 1), every file of the set is
    // opened from its name (PREFIX-%05d-of-%05d.gguf, as llama.cpp names them), whichever one
    // `path` is.
    explicit GgufFile(const std::string &path);
    // Open exactly these files as one split set, in split.no order.
    explicit GgufFile(const std::vector<std::string> &paths);
    ~GgufFile();
    GgufFile(const GgufFile &) = delete;
    GgufFile &operator=(const GgufFile &) = delete;

    uint32_t version() const;
    uint64_t alignment() const;  // of the first file
    // The model's metadata: the first file's key/values in file order (llama.cpp writes the
    // model's keys there; the other files of a split set hold only split.*).
    const std::vector<GgufKV> &metadata() const;
    const GgufValue *find(std::string_view key) const;  // null if absent
    // Every tensor, in file order (split files in split.no order).
    const std::vector<GgufTensorInfo> &tensors() const { return tensors_; }
    const GgufTensorInfo *find_tensor(std::string_view name) const;
    // The stored bytes of a tensor (n_bytes long), in the mapping.
    const uint8_t *tensor_data(const GgufTensorInfo &t) const;
    size_t file_count() const;
    const MappedFile &file(size_t i) const;

    struct Shard;

private:
    void open_split_set(std::vector<std::string> paths, bool from_names);
    std::vector<std::unique_ptr<Shard>> shards_;
    std::vector<GgufTensorInfo> tensors_;
};

// The checkpoint view of a GGUF (one Source per file of a split set, sharing one GgufFile): the
// raw GGUF tensor names, row-major shapes; F32 / F16 / BF16 tensors as those dtypes straight from
// the mapping; every other supported type (kernels/ggml_dequant.h) dequantised to F32 into the
// caller's scratch, one tensor at a time.  A tensor of any other ggml type is refused at open,
// naming it and its type.  The HF names and layouts are a layer above.
std::vector<std::unique_ptr<Source>> open_gguf_sources(const std::string &path);
// The GgufFile behind a source open_gguf_sources made (null for any other source).
const GgufFile *gguf_file_of(const Source &s);

// Parse one GGUF image held in [data, data+size) (fuzzing and tests: no split handling; the
// metadata and tensors are validated exactly as GgufFile does, every value read through its
// getters).  Returns the tensors (data_offset relative to `data`) and the alignment.
std::vector<GgufTensorInfo> gguf_validate(const uint8_t *data, uint64_t size, const std::string &path,
                                          uint64_t *alignment = nullptr);

// True if `name` looks like one file of a split set: PREFIX-NNNNN-of-MMMMM.gguf.
bool gguf_split_name(const std::string &name, std::string *prefix, uint32_t *no, uint32_t *count);

}  // namespace stk
