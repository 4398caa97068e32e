// Sera arrays (seed 2.3, 2.4; spec-notes 1-2): a 128-byte little-endian header, then the payload
// at offset 128 (64-byte aligned), then end of file.  docs/format.md specifies every byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/checksum.h"
#include "core/mapped_file.h"
#include "core/output_file.h"

namespace stk {

enum class DType : uint16_t {
    F64 = 1,
    F32 = 2,
    I32 = 3,
    I16 = 4,
    I8 = 5,
    U8 = 6,
    Q8_8 = 7,
    Q4_12 = 8,
    BF16 = 9,
    // Block-scaled (issue 37; format/lowbit.h BlockQType, docs/format.md "Block-scaled arrays"):
    // the last dim in ggml blocks of 32 values, each block d (f16) then its codes; no element
    // size (dtype_size is 0 for them): array_bytes_of gives the payload.
    Q4_0 = 10,
    Q8_0 = 11,
};
constexpr uint16_t kDTypeLast = 11;

constexpr uint32_t kArrayMagic = 0x53455241u;  // "SERA" as a LE u32: bytes 41 52 45 53
constexpr size_t kArrayHeaderSize = 128;
constexpr uint32_t kMaxRank = 5;

constexpr uint32_t kFlagRowMajor = 1u << 0;
constexpr uint32_t kFlagAligned64 = 1u << 1;
constexpr uint32_t kFlagFtzOn = 1u << 2;
constexpr uint32_t kKnownFlags = kFlagRowMajor | kFlagAligned64 | kFlagFtzOn;

// Bytes per element, 0 for an unknown dtype value or a block-scaled one (Q4_0, Q8_0).
size_t dtype_size(uint16_t dtype);
const char *dtype_name(uint16_t dtype);
// 1..kDTypeLast.
bool dtype_known(uint16_t dtype);
// Q4_0 / Q8_0: true, and the block's bytes (18, 34) of 32 values.
bool dtype_is_block(uint16_t dtype, uint64_t *block_bytes = nullptr);
// The payload bytes of `rank` dims under a known dtype: prod(dims) * dtype_size, or for a block
// type prod(dims) / 32 * block bytes.  ArrayBytes::Overflow when it does not fit 64 bits;
// ::RowNot32 when a block type's last dim (its rows' length) is not a multiple of 32.
enum class ArrayBytes { Ok, Overflow, RowNot32 };
ArrayBytes array_bytes_of(uint16_t dtype, uint32_t rank, const uint64_t *dims, uint64_t *out);

struct ArrayHeader {
    uint16_t dtype = 0;
    uint16_t rank = 0;
    uint64_t dims[kMaxRank] = {1, 1, 1, 1, 1};
    uint64_t byte_len = 0;
    uint32_t crc32c = 0;  // stored in a u64 field, high 32 bits zero
    uint64_t sha256_low64 = 0;
    uint32_t flags = kFlagRowMajor | kFlagAligned64;

    uint64_t element_count() const;  // product of dims[0..rank) (validated headers only)
};

// Serialize into exactly 128 bytes (header checksum included).
void encode_array_header(const ArrayHeader &h, uint8_t out[kArrayHeaderSize]);

// Parse and validate a header from the first `size` bytes of a file named `file` (for messages):
// magic, header checksum, dtype, rank, dims, byte_len = prod(dims)*size with checked arithmetic,
// flags, reserved bytes, and that `size` (the file length) is exactly 128 + byte_len.
ArrayHeader decode_array_header(const uint8_t *data, uint64_t size, const std::string &file);

// A validated, mapped array.
class ArrayReader {
public:
    // Maps and validates the header; with verify_payload also the crc32c and sha256_low64.
    explicit ArrayReader(const std::string &path, bool verify_payload = true);
    const ArrayHeader &header() const { return header_; }
    const uint8_t *payload() const { return file_.data() + kArrayHeaderSize; }
    uint64_t payload_size() const { return header_.byte_len; }
    const std::string &path() const { return file_.path(); }

private:
    MappedFile file_;
    ArrayHeader header_;
};

// Verify payload checksums of a decoded header against bytes; throws STK_E_CHECKSUM naming the
// file and the field's offset.  With `mapping` (the file the payload lies in, mapped read-only),
// the pages already summed go back to the kernel 64 MiB at a time (the page cache keeps them): a
// verifier's resident set holds a window of each array, not the whole of it.
void verify_array_payload(const ArrayHeader &h, const uint8_t *payload, const std::string &file,
                          const MappedFile *mapping = nullptr);

// Payload bytes of an array: prod(dims) * dtype size (array_bytes_of), checked (STK_E_BAD_DTYPE, STK_E_BAD_RANK,
// overflow), `what` naming it in the message.  The writers and the dry-run planner use it.
uint64_t array_payload_bytes(DType dtype, uint32_t rank, const uint64_t *dims, const char *what);

// One array as a stage writes it: its file name under arrays/, dtype, rank and dims.  A stage
// builds it with a dims function and hands it to job_write_array / ArrayWriter; the dry-run
// planner (stages/plan.h) calls the same function.
struct ArraySpec {
    std::string name;
    DType dtype = DType::U8;
    uint32_t rank = 1;
    uint64_t dims[kMaxRank] = {1, 1, 1, 1, 1};

    ArraySpec() = default;
    ArraySpec(std::string n, DType t, std::initializer_list<uint64_t> d);
    uint64_t payload_bytes() const;  // array_payload_bytes (checked)
    uint64_t file_bytes() const;     // payload + the 128-byte header (checked)
};

// Streaming writer: header reserved, payload appended in any chunking, checksums computed on the
// way, header written once at finish(), then fsync + rename (write-once).
class ArrayWriter {
public:
    ArrayWriter(const std::string &path, DType dtype, uint32_t rank, const uint64_t *dims,
                uint32_t flags = kFlagRowMajor | kFlagAligned64);
    // spec's array in directory dir (dir/spec.name).
    ArrayWriter(const std::string &dir, const ArraySpec &spec)
        : ArrayWriter(dir + "/" + spec.name, spec.dtype, spec.rank, spec.dims) {}
    // threads > 1: a large payload's SHA-256 runs on a second thread while this one takes its
    // CRC and writes it (the same checksums and bytes; the three passes were one thread's).
    void append(const void *data, size_t len, unsigned threads = 1);
    // Append `len` zero bytes: checksummed like any others, allocated by fallocate (OutputFile::
    // write_zeros): the same file bytes, without pushing the zeros through write(2), and no hole
    // that a reader on a full file system would fault on.
    void append_zeros(uint64_t len);
    uint64_t byte_len() const { return header_.byte_len; }
    // Checks that exactly byte_len bytes were appended; returns the final header.  With a queue
    // the file is committed on the queue's thread (OutputFile::commit_later), else here.
    ArrayHeader finish(CommitQueue *queue = nullptr);
    uint64_t bytes_written() const { return out_.bytes_written(); }  // header writes included

private:
    OutputFile out_;
    ArrayHeader header_;
    uint64_t written_ = 0;
    uint32_t crc_ = 0;
    Sha256 sha_;
};

// Seed 18.5 ("CRC mismatch: recompute header; never rewrite payloads after first write"):
// finish() reads the header back before commit; if its CRC (or any field) does not match what
// was meant, the header alone is recomputed and written again (at most twice; then STK_E_IO).
// The payload is never written twice.  A count per thread of such repairs, for the stage's
// record (src/stages/policy.cc).
uint64_t array_header_repairs();

// One-shot: write a whole array.  Returns its header (with checksums).  queue: as finish().
ArrayHeader write_array(const std::string &path, DType dtype, uint32_t rank, const uint64_t *dims, const void *payload,
                        uint32_t flags = kFlagRowMajor | kFlagAligned64, unsigned threads = 1, CommitQueue *queue = nullptr);

}  // namespace stk
