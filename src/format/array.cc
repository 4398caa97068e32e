#include "format/array.h"

#include <cstring>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/test_fault.h"
#include "format/lowbit.h"

namespace stk {

// Header byte offsets (docs/format.md, "Sera array").
namespace off {
constexpr size_t magic = 0, dtype = 4, rank = 6, dims = 8, byte_len = 48, crc32c = 56, sha256_low64 = 64, flags = 72,
                 reserved = 76, header_crc = 120;
}

size_t dtype_size(uint16_t dtype) {
    switch (dtype) {
        case 1: return 8;
        case 2:
        case 3: return 4;
        case 4:
        case 7:
        case 8:
        case 9: return 2;
        case 5:
        case 6: return 1;
        default: return 0;
    }
}

const char *dtype_name(uint16_t dtype) {
    static const char *const names[] = {"?", "f64", "f32", "i32", "i16", "i8", "u8", "q8_8", "q4_12", "bf16", "q4_0", "q8_0"};
    return dtype >= 1 && dtype <= kDTypeLast ? names[dtype] : "unknown";
}

bool dtype_known(uint16_t dtype) { return dtype >= 1 && dtype <= kDTypeLast; }

bool dtype_is_block(uint16_t dtype, uint64_t *block_bytes) {
    if (dtype != uint16_t(DType::Q4_0) && dtype != uint16_t(DType::Q8_0)) return false;
    if (block_bytes) *block_bytes = blockq_block_bytes(dtype == uint16_t(DType::Q4_0) ? BlockQType::Q4_0 : BlockQType::Q8_0);
    return true;
}

ArrayBytes array_bytes_of(uint16_t dtype, uint32_t rank, const uint64_t *dims, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        if (!mul_ok(n, dims[i], &n)) return ArrayBytes::Overflow;
    uint64_t block = 0;
    if (dtype_is_block(dtype, &block)) {
        if (rank < 1 || dims[rank - 1] % kBlockQElems) return ArrayBytes::RowNot32;
        return mul_ok(n / kBlockQElems, block, out) ? ArrayBytes::Ok : ArrayBytes::Overflow;
    }
    return mul_ok(n, dtype_size(dtype), out) ? ArrayBytes::Ok : ArrayBytes::Overflow;
}

uint64_t ArrayHeader::element_count() const {
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank && i < kMaxRank; i++) n *= dims[i];
    return n;
}

void encode_array_header(const ArrayHeader &h, uint8_t out[kArrayHeaderSize]) {
    std::memset(out, 0, kArrayHeaderSize);
    store_le<uint32_t>(out + off::magic, kArrayMagic);
    store_le<uint16_t>(out + off::dtype, h.dtype);
    store_le<uint16_t>(out + off::rank, h.rank);
    for (uint32_t i = 0; i < kMaxRank; i++) store_le<uint64_t>(out + off::dims + 8 * i, i < h.rank ? h.dims[i] : 1);
    store_le<uint64_t>(out + off::byte_len, h.byte_len);
    store_le<uint64_t>(out + off::crc32c, h.crc32c);
    store_le<uint64_t>(out + off::sha256_low64, h.sha256_low64);
    store_le<uint32_t>(out + off::flags, h.flags);
    store_le<uint64_t>(out + off::header_crc, crc32c(out, off::header_crc));
}

ArrayHeader decode_array_header(const uint8_t *p, uint64_t size, const std::string &file) {
    if (size < kArrayHeaderSize)
        throw_at(STK_E_TRUNCATED, file, size, "%llu bytes, shorter than the 128-byte array header", (unsigned long long)size);
    uint32_t magic = load_u32(p + off::magic);
    if (magic != kArrayMagic) throw_at(STK_E_BAD_MAGIC, file, 0, "magic 0x%08x is not a Sera array (0x%08x)", magic, kArrayMagic);
    uint64_t stored_hcrc = load_u64(p + off::header_crc);
    uint32_t hcrc = crc32c(p, off::header_crc);
    if (stored_hcrc != hcrc)
        throw_at(STK_E_CHECKSUM, file, off::header_crc, "header checksum 0x%08llx, computed 0x%08x (header corrupted)",
                 (unsigned long long)stored_hcrc, hcrc);
    ArrayHeader h;
    h.dtype = load_u16(p + off::dtype);
    if (!dtype_known(h.dtype)) throw_at(STK_E_BAD_DTYPE, file, off::dtype, "unknown dtype %u (1..%u)", h.dtype, kDTypeLast);
    h.rank = load_u16(p + off::rank);
    if (h.rank < 1 || h.rank > kMaxRank) throw_at(STK_E_BAD_RANK, file, off::rank, "rank %u not in 1..5", h.rank);
    uint64_t elements = 1;
    for (uint32_t i = 0; i < kMaxRank; i++) {
        h.dims[i] = load_u64(p + off::dims + 8 * i);
        if (i >= h.rank && h.dims[i] != 1)
            throw_at(STK_E_BAD_RANK, file, off::dims + 8 * i, "unused dims[%u] = %llu, must be 1", i,
                     (unsigned long long)h.dims[i]);
        if (i < h.rank && !mul_ok(elements, h.dims[i], &elements))
            throw_at(STK_E_DIMS_OVERFLOW, file, off::dims + 8 * i, "product of dims overflows 64 bits");
    }
    uint64_t expect = 0;
    const ArrayBytes ab = array_bytes_of(h.dtype, h.rank, h.dims, &expect);
    if (ab == ArrayBytes::Overflow)
        throw_at(STK_E_DIMS_OVERFLOW, file, off::dims, "%llu elements of %s overflow 64 bits", (unsigned long long)elements,
                 dtype_name(h.dtype));
    if (ab == ArrayBytes::RowNot32)
        throw_at(STK_E_SIZE_MISMATCH, file, off::dims + 8 * (h.rank - 1), "%s rows of %llu values: not whole blocks of 32",
                 dtype_name(h.dtype), (unsigned long long)h.dims[h.rank - 1]);
    h.byte_len = load_u64(p + off::byte_len);
    if (h.byte_len != expect)
        throw_at(STK_E_SIZE_MISMATCH, file, off::byte_len, "byte_len %llu, but dims x %s give %llu",
                 (unsigned long long)h.byte_len, dtype_name(h.dtype), (unsigned long long)expect);
    uint64_t crc_field = load_u64(p + off::crc32c);
    if (crc_field >> 32) throw_at(STK_E_BAD_HEADER, file, off::crc32c, "crc32c field has high bits set");
    h.crc32c = uint32_t(crc_field);
    h.sha256_low64 = load_u64(p + off::sha256_low64);
    h.flags = load_u32(p + off::flags);
    if (h.flags & ~kKnownFlags) throw_at(STK_E_BAD_HEADER, file, off::flags, "unknown flag bits 0x%x", h.flags & ~kKnownFlags);
    if (!(h.flags & kFlagAligned64))
        throw_at(STK_E_MISALIGNED, file, off::flags, "aligned_64B flag clear; payloads start at offset 128");
    for (size_t i = off::reserved; i < off::header_crc; i++)
        if (p[i]) throw_at(STK_E_BAD_HEADER, file, i, "reserved header byte is 0x%02x, must be 0", p[i]);
    uint64_t total;
    if (!add_ok(kArrayHeaderSize, h.byte_len, &total) || size < total)
        throw_at(STK_E_TRUNCATED, file, size, "%llu bytes, the header promises %llu + 128", (unsigned long long)size,
                 (unsigned long long)h.byte_len);
    if (size > total)
        throw_at(STK_E_SIZE_MISMATCH, file, total, "%llu trailing bytes after the payload", (unsigned long long)(size - total));
    return h;
}

void verify_array_payload(const ArrayHeader &h, const uint8_t *payload, const std::string &file, const MappedFile *mapping) {
    const uint64_t base = mapping ? uint64_t(payload - mapping->data()) : 0;
    PayloadSums s = mapping ? payload_sums(payload, size_t(h.byte_len), size_t(64) << 20,
                                           [&](size_t off, size_t len) { mapping->dont_need(base + off, len); })
                            : payload_sums(payload, size_t(h.byte_len));
    if (s.crc32c != h.crc32c)
        throw_at(STK_E_CHECKSUM, file, kArrayHeaderSize,
                 "payload bytes %zu..%llu: crc32c 0x%08x, header says 0x%08x (one checksum covers the whole payload: "
                 "the damage is somewhere in that range)",
                 kArrayHeaderSize, (unsigned long long)(kArrayHeaderSize + h.byte_len - 1), s.crc32c, h.crc32c);
    if (s.sha256_low64 != h.sha256_low64)
        throw_at(STK_E_CHECKSUM, file, kArrayHeaderSize,
                 "payload bytes %zu..%llu: sha256_low64 0x%016llx, header says 0x%016llx (one checksum covers the "
                 "whole payload: the damage is somewhere in that range)",
                 kArrayHeaderSize, (unsigned long long)(kArrayHeaderSize + h.byte_len - 1), (unsigned long long)s.sha256_low64,
                 (unsigned long long)h.sha256_low64);
}

ArrayReader::ArrayReader(const std::string &path, bool verify_payload) : file_(path, false) {
    header_ = decode_array_header(file_.data(), file_.size(), path);
    if (reinterpret_cast<uintptr_t>(payload()) % 64 != 0)
        throw_error(STK_E_MISALIGNED, "%s: payload not 64-byte aligned in memory", path.c_str());
    if (verify_payload) verify_array_payload(header_, payload(), path);
}

uint64_t array_payload_bytes(DType dtype, uint32_t rank, const uint64_t *dims, const char *what) {
    if (!dtype_known(uint16_t(dtype))) throw_error(STK_E_BAD_DTYPE, "%s: cannot write dtype %u", what, unsigned(dtype));
    if (rank < 1 || rank > kMaxRank) throw_error(STK_E_BAD_RANK, "%s: cannot write rank %u", what, rank);
    uint64_t out = 0;
    switch (array_bytes_of(uint16_t(dtype), rank, dims, &out)) {
        case ArrayBytes::Ok: return out;
        case ArrayBytes::RowNot32:
            throw_error(STK_E_INVALID_ARGUMENT, "%s: %s rows of %llu values are not whole blocks of 32", what,
                        dtype_name(uint16_t(dtype)), (unsigned long long)dims[rank - 1]);
        case ArrayBytes::Overflow: break;
    }
    throw_error(STK_E_DIMS_OVERFLOW, "%s: size overflows 64 bits", what);
}

ArraySpec::ArraySpec(std::string n, DType t, std::initializer_list<uint64_t> d) : name(std::move(n)), dtype(t) {
    if (d.size() < 1 || d.size() > kMaxRank) throw_error(STK_E_INTERNAL, "array %s: rank %zu", name.c_str(), d.size());
    rank = uint32_t(d.size());
    uint32_t i = 0;
    for (uint64_t x : d) dims[i++] = x;
}

uint64_t ArraySpec::payload_bytes() const { return array_payload_bytes(dtype, rank, dims, name.c_str()); }

uint64_t ArraySpec::file_bytes() const { return checked_add(payload_bytes(), kArrayHeaderSize, "array file bytes"); }

static ArrayHeader make_header(const std::string &path, DType dtype, uint32_t rank, const uint64_t *dims, uint32_t flags) {
    ArrayHeader h;
    h.byte_len = array_payload_bytes(dtype, rank, dims, path.c_str());
    if (flags & ~kKnownFlags) throw_error(STK_E_INVALID_ARGUMENT, "%s: unknown flags 0x%x", path.c_str(), flags);
    h.dtype = uint16_t(dtype);
    h.rank = uint16_t(rank);
    for (uint32_t i = 0; i < rank; i++) h.dims[i] = dims[i];
    h.flags = flags | kFlagAligned64;
    return h;
}

namespace {
thread_local uint64_t t_header_repairs = 0;
}

ArrayWriter::ArrayWriter(const std::string &path, DType dtype, uint32_t rank, const uint64_t *dims, uint32_t flags)
    : out_(path), header_(make_header(path, dtype, rank, dims, flags)) {
    uint8_t zeros[kArrayHeaderSize] = {};
    out_.write(zeros, sizeof zeros);  // the real header is written once, at finish()
}

void ArrayWriter::append(const void *data, size_t len, unsigned threads) {
    uint64_t next;
    if (!add_ok(written_, len, &next) || next > header_.byte_len)
        throw_error(STK_E_SIZE_MISMATCH, "%s: writer got more than byte_len %llu bytes", out_.path().c_str(),
                    (unsigned long long)header_.byte_len);
    constexpr size_t kSplitBytes = size_t(1) << 20;  // below this a thread costs more than it saves
    if (threads > 1 && len >= kSplitBytes) {
        run_workers(2, [&](unsigned w) {
            if (w == 1) return sha_.update(data, len);
            crc_ = crc32c(data, len, crc_);
            out_.write(data, len);
        });
    } else {
        crc_ = crc32c(data, len, crc_);
        sha_.update(data, len);
        out_.write(data, len);
    }
    written_ = next;
}

void ArrayWriter::append_zeros(uint64_t len) {
    uint64_t next;
    if (!add_ok(written_, len, &next) || next > header_.byte_len)
        throw_error(STK_E_SIZE_MISMATCH, "%s: writer got more than byte_len %llu bytes", out_.path().c_str(),
                    (unsigned long long)header_.byte_len);
    alignas(64) static const uint8_t zeros[64 * 1024] = {};
    for (uint64_t left = len; left > 0;) {
        const size_t n = size_t(left < sizeof zeros ? left : sizeof zeros);
        crc_ = crc32c(zeros, n, crc_);
        sha_.update(zeros, n);
        left -= n;
    }
    out_.write_zeros(len);
    written_ = next;
}

ArrayHeader ArrayWriter::finish(CommitQueue *queue) {
    if (written_ != header_.byte_len)
        throw_error(STK_E_SIZE_MISMATCH, "%s: writer got %llu of %llu payload bytes", out_.path().c_str(),
                    (unsigned long long)written_, (unsigned long long)header_.byte_len);
    header_.crc32c = crc_;
    header_.sha256_low64 = sha_.finish().low64();
    uint8_t bytes[kArrayHeaderSize];
    encode_array_header(header_, bytes);
    out_.pwrite(bytes, sizeof bytes, 0);
    if (test_fault("array_header_crc")) {
        // Test-only: a header that went bad between its write and the read-back below.
        uint8_t bad = bytes[off::header_crc] ^ 0x5a;
        out_.pwrite(&bad, 1, off::header_crc);
        set_test_fault("");  // one array
    }
    // 18.5: read the header back; a mismatch recomputes the header only (bytes 0..127).
    for (int attempt = 0;; attempt++) {
        uint8_t back[kArrayHeaderSize];
        out_.pread(back, sizeof back, 0);
        if (std::memcmp(back, bytes, sizeof back) == 0) break;
        if (attempt == 2)
            throw_error(STK_E_IO, "%s: the array header does not read back as written after 2 rewrites", out_.path().c_str());
        t_header_repairs++;
        encode_array_header(header_, bytes);
        out_.pwrite(bytes, sizeof bytes, 0);
    }
    if (queue) out_.commit_later(*queue);
    else out_.commit();
    return header_;
}

uint64_t array_header_repairs() { return t_header_repairs; }

ArrayHeader write_array(const std::string &path, DType dtype, uint32_t rank, const uint64_t *dims, const void *payload,
                        uint32_t flags, unsigned threads, CommitQueue *queue) {
    ArrayWriter w(path, dtype, rank, dims, flags);
    w.append(payload, size_t(w.byte_len()), threads);
    return w.finish(queue);
}

}  // namespace stk
