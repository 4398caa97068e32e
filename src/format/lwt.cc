// .lwt reader and writer: see lwt.h and docs/format.md ("LWT weight file").
#include "format/lwt.h"

#include <libdeflate.h>
#include <simdjson.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"

namespace stk {

namespace {

// Index entry fields (little-endian).  Version 1 ends at kOffScale (216 bytes: seed 001's C
// struct, 4 bytes of padding at kOffDType); version 2 fills those 4 bytes and appends two more.
constexpr uint64_t kOffName = 0, kOffNdim = 128, kOffDType = 132, kOffShape = 136, kOffData = 200, kOffSize = 208,
                   kOffScale = 216, kOffZero = 220;
static_assert(kOffScale == kLwtEntryBytesV1 && kOffZero + 4 == kLwtEntryBytes);

uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
void put32(std::string &s, uint64_t at, uint32_t v) { std::memcpy(&s[at], &v, 4); }
void put64(std::string &s, uint64_t at, uint64_t v) { std::memcpy(&s[at], &v, 8); }

// Names allowed for model_type and config keys: the writer emits them unescaped.
bool plain_token(std::string_view s) {
    if (s.empty() || s.size() > 63) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

std::string printable(std::string_view s) { return escape_bytes(s, 200); }

// Shared validation of one tensor's shape/dtype -> n_elements and size_bytes.  A block-scaled
// dtype needs rows of whole 32-value blocks (STK_E_CORRUPT reading, STK_E_INVALID_ARGUMENT writing).
void size_tensor(LwtTensor &t, const std::string &file, stk_status bad_blocks = STK_E_CORRUPT) {
    if (lwt_dtype_is_blocked(t.dtype) && (t.ndim == 0 || t.shape[t.ndim - 1] % kBlockQElems))
        throw_at(bad_blocks, file, t.entry_offset + kOffShape,
                 "tensor '%s': %s stores rows of whole 32-value blocks; its last dimension is %" PRIu64,
                 printable(t.name).c_str(), lwt_dtype_name(t.dtype), t.ndim ? t.shape[t.ndim - 1] : uint64_t(1));
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.ndim; d++)
        if (!mul_ok(n, t.shape[d], &n))
            throw_at(STK_E_DIMS_OVERFLOW, file, t.entry_offset + kOffShape,
                     "tensor '%s': the shape's element count overflows 64 bits", printable(t.name).c_str());
    t.n_elements = n;
    if (!lwt_packed_bytes(t.dtype, n, &t.size_bytes) || t.size_bytes > (1ull << 62))
        throw_at(STK_E_DIMS_OVERFLOW, file, t.entry_offset + kOffShape, "tensor '%s': %" PRIu64 " elements of %s overflow",
                 printable(t.name).c_str(), n, lwt_dtype_name(t.dtype));
}

}  // namespace

uint32_t lwt_crc32(const void *data, size_t len, uint32_t crc) { return libdeflate_crc32(crc, data, len); }

// ------------------------------------------------------------------------------------------------
// Reader

LwtFile::LwtFile(const std::string &path, bool verify_crc) : map_(path) {
    data_ = map_.data();
    size_ = map_.size();
    name_ = path;
    parse(verify_crc);
}

LwtFile::LwtFile(const uint8_t *data, uint64_t size, const std::string &name, bool verify_crc)
    : data_(data), size_(size), name_(name) {
    parse(verify_crc);
}

const LwtTensor *LwtFile::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

uint32_t LwtFile::computed_crc32() const {
    if (!crc_known_) {
        crc_ = lwt_crc32(data_ + data_offset_, size_t(header_.total_bytes));
        crc_known_ = true;
    }
    return crc_;
}

void LwtFile::parse(bool verify_crc) {
    using namespace simdjson;
    const std::string &f = name_;
    if (size_ < 16)
        throw_at(STK_E_TRUNCATED, f, size_, "%" PRIu64 " bytes: too short for the 16-byte .lwt preamble (magic, header length)",
                 size_);
    if (std::memcmp(data_, kLwtMagic, 8) != 0) throw_at(STK_E_BAD_MAGIC, f, 0, "not a .lwt file: magic is not \"LWATCHV1\"");
    const uint64_t n = rd64(data_ + 8);
    if (n > kLwtMaxHeaderJson)
        throw_at(STK_E_BAD_HEADER, f, 8, "header JSON length %" PRIu64 " exceeds the %" PRIu64 "-byte cap", n, kLwtMaxHeaderJson);
    if (n > size_ - 16)
        throw_at(STK_E_TRUNCATED, f, 16, "header JSON of %" PRIu64 " bytes runs past the end of the %" PRIu64 "-byte file", n,
                 size_);
    header_json_ = std::string_view(reinterpret_cast<const char *>(data_ + 16), size_t(n));

    dom::parser parser;
    dom::element doc;
    padded_string json(header_json_);
    if (auto err = parser.parse(json).get(doc))
        throw_at(STK_E_BAD_JSON, f, 16, "header JSON is not valid: %s", error_message(err));
    dom::object root;
    if (doc.get_object().get(root)) throw_at(STK_E_BAD_JSON, f, 16, "header JSON is not an object");

    static const char *const kKeys[] = {"version",      "model_type",  "config",          "dtype",        "byte_order",
                                        "tensor_count", "total_bytes", "parameter_count", "tied_lm_head", "data_crc32"};
    constexpr int kNKeys = sizeof(kKeys) / sizeof(kKeys[0]);
    bool seen[kNKeys] = {};
    auto bad = [&](const char *key, const char *want) {
        throw_at(STK_E_BAD_JSON, f, 16, "header JSON field \"%s\" must be %s", key, want);
    };
    auto get_u64 = [&](dom::element v, const char *key) -> uint64_t {
        uint64_t x;
        if (v.get_uint64().get(x)) bad(key, "a non-negative integer");
        return x;
    };
    std::string byte_order;
    std::string crc_text;
    for (auto field : root) {
        std::string_view key = field.key;
        int k = 0;
        while (k < kNKeys && key != kKeys[k]) k++;
        if (k == kNKeys) throw_at(STK_E_BAD_JSON, f, 16, "header JSON has an unknown field \"%s\"", printable(key).c_str());
        if (seen[k]) throw_at(STK_E_BAD_JSON, f, 16, "header JSON field \"%s\" appears twice", kKeys[k]);
        seen[k] = true;
        std::string_view sv;
        switch (k) {
            case 0: {
                uint64_t v = get_u64(field.value, "version");
                if (v != 1 && v != 2)
                    throw_at(STK_E_UNSUPPORTED, f, 16, "header version %" PRIu64 " (this reader knows versions 1 and 2)", v);
                header_.version = uint32_t(v);
                break;
            }
            case 1:
                if (field.value.get_string().get(sv) || !plain_token(sv)) bad("model_type", "a string of 1-63 [A-Za-z0-9_.-]");
                header_.model_type = std::string(sv);
                break;
            case 2: {
                dom::object cfg;
                if (field.value.get_object().get(cfg)) bad("config", "an object");
                for (auto c : cfg) {
                    if (!plain_token(c.key)) bad("config", "an object with keys of 1-63 [A-Za-z0-9_.-]");
                    for (auto &e : header_.config)
                        if (e.first == c.key)
                            throw_at(STK_E_BAD_JSON, f, 16, "header config key \"%s\" appears twice", printable(c.key).c_str());
                    uint64_t v;
                    if (c.value.get_uint64().get(v)) bad("config", "an object of non-negative integers");
                    header_.config.emplace_back(std::string(c.key), v);
                }
                break;
            }
            case 3: {
                LwtDType d;
                if (field.value.get_string().get(sv)) bad("dtype", "a string");
                if (!parse_lwt_dtype(sv, &d))
                    throw_at(STK_E_BAD_DTYPE, f, 16, "header dtype \"%s\" is not a .lwt dtype", printable(sv).c_str());
                header_.dtype = std::string(sv);
                break;
            }
            case 4:
                if (field.value.get_string().get(sv)) bad("byte_order", "a string");
                byte_order = std::string(sv);
                break;
            case 5: header_.tensor_count = get_u64(field.value, "tensor_count"); break;
            case 6: header_.total_bytes = get_u64(field.value, "total_bytes"); break;
            case 7: header_.parameter_count = get_u64(field.value, "parameter_count"); break;
            case 8:
                if (field.value.get_bool().get(header_.tied_lm_head)) bad("tied_lm_head", "true or false");
                break;
            case 9:
                if (field.value.get_string().get(sv)) bad("data_crc32", "a string of 8 lowercase hex digits");
                crc_text = std::string(sv);
                break;
        }
    }
    for (int k = 0; k < kNKeys; k++)
        if (!seen[k]) throw_at(STK_E_BAD_JSON, f, 16, "header JSON lacks the field \"%s\"", kKeys[k]);
    if (byte_order != "little")
        throw_at(STK_E_UNSUPPORTED, f, 16, "byte_order \"%s\" (only \"little\" is defined)", printable(byte_order).c_str());
    if (crc_text.size() != 8 || crc_text.find_first_not_of("0123456789abcdef") != std::string::npos)
        bad("data_crc32", "a string of 8 lowercase hex digits");
    header_.data_crc32 = uint32_t(std::strtoul(crc_text.c_str(), nullptr, 16));

    // The index: tensor_count entries right after the JSON.  Version 1 has seed 001's 216-byte
    // entries; stk wrote 224-byte entries into version-1 files before version 2 existed, so a
    // version-1 file that is not a valid 216-byte layout is read as that, if it is one.  The two
    // never both parse: a 224-byte entry's scale (never 0) lands on the next 216-byte entry's
    // name or on the zero padding before the data section.
    const uint64_t index_at = 16 + n;
    if (header_.version == 2 || header_.dtype != "float32") {  // (version 1 and not float32: stk's old layout)
        parse_index(index_at, kLwtEntryBytes);
    } else {
        try {
            parse_index(index_at, kLwtEntryBytesV1);
        } catch (const Error &first) {
            try {
                parse_index(index_at, kLwtEntryBytes);
            } catch (const Error &) {
                throw first;
            }
        }
    }
    if (verify_crc && computed_crc32() != header_.data_crc32)
        throw_at(STK_E_CHECKSUM, f, data_offset_, "CRC32 of the %" PRIu64 "-byte data section is %08x, the header says %08x",
                 header_.total_bytes, computed_crc32(), header_.data_crc32);
}

void LwtFile::parse_index(uint64_t index_at, uint64_t entry_bytes) {
    const std::string &f = name_;
    const bool extended = entry_bytes == kLwtEntryBytes;
    header_.entry_bytes = entry_bytes;
    tensors_.clear();
    by_name_.clear();
    if (header_.tensor_count > (size_ - index_at) / entry_bytes)
        throw_at(STK_E_TRUNCATED, f, index_at,
                 "the index of %" PRIu64 " entries (%" PRIu64 " bytes each) runs past the end of the %" PRIu64 "-byte file",
                 header_.tensor_count, entry_bytes, size_);
    const uint64_t index_end = index_at + header_.tensor_count * entry_bytes;
    data_offset_ = align_up(index_end, kLwtAlign);
    if (data_offset_ > size_)
        throw_at(STK_E_TRUNCATED, f, index_end, "the file ends before the data section at offset %" PRIu64, data_offset_);
    for (uint64_t p = index_end; p < data_offset_; p++)
        if (data_[p]) throw_at(STK_E_BAD_HEADER, f, p, "nonzero padding byte before the data section");
    if (header_.total_bytes % kLwtAlign)
        throw_at(STK_E_BAD_HEADER, f, 16, "total_bytes %" PRIu64 " is not a multiple of 64", header_.total_bytes);
    if (header_.total_bytes > size_ - data_offset_)
        throw_at(STK_E_TRUNCATED, f, size_,
                 "the header promises a %" PRIu64 "-byte data section at offset %" PRIu64 " but the file has %" PRIu64 " bytes",
                 header_.total_bytes, data_offset_, size_);
    if (header_.total_bytes != size_ - data_offset_)
        throw_at(STK_E_BAD_HEADER, f, data_offset_ + header_.total_bytes,
                 "%" PRIu64 " bytes after the %" PRIu64 "-byte data section the header declares",
                 size_ - data_offset_ - header_.total_bytes, header_.total_bytes);

    tensors_.resize(size_t(header_.tensor_count));
    by_name_.reserve(size_t(header_.tensor_count));
    uint64_t expect_offset = 0, params = 0;
    for (uint64_t i = 0; i < header_.tensor_count; i++) {
        const uint64_t at = index_at + i * entry_bytes;
        const uint8_t *e = data_ + at;
        LwtTensor &t = tensors_[i];
        t.entry_offset = at;
        const void *nul = std::memchr(e + kOffName, 0, kLwtNameBytes);
        if (!nul) throw_at(STK_E_CORRUPT, f, at, "index entry %" PRIu64 ": name is not NUL-terminated within 128 bytes", i);
        size_t len = size_t(static_cast<const uint8_t *>(nul) - e);
        if (len == 0) throw_at(STK_E_CORRUPT, f, at, "index entry %" PRIu64 ": empty name", i);
        t.name.assign(reinterpret_cast<const char *>(e), len);
        for (uint64_t b = len; b < kLwtNameBytes; b++)
            if (e[b])
                throw_at(STK_E_BAD_HEADER, f, at + b, "tensor '%s': nonzero byte after the name's NUL",
                         printable(t.name).c_str());
        std::string tname = printable(t.name);
        const char *tn = tname.c_str();
        t.ndim = rd32(e + kOffNdim);
        if (t.ndim > kLwtMaxDims) throw_at(STK_E_BAD_RANK, f, at + kOffNdim, "tensor '%s': ndim %u exceeds 8", tn, t.ndim);
        // Version 1: the C padding after ndim, whatever a writer left there; float32.
        uint32_t code = extended ? rd32(e + kOffDType) : uint32_t(LwtDType::F32);
        if (!lwt_dtype_valid(code)) throw_at(STK_E_BAD_DTYPE, f, at + kOffDType, "tensor '%s': unknown dtype code %u", tn, code);
        t.dtype = LwtDType(code);
        for (uint32_t d = 0; d < kLwtMaxDims; d++) {
            t.shape[d] = rd64(e + kOffShape + 8 * d);
            if (d >= t.ndim && t.shape[d])
                throw_at(STK_E_BAD_RANK, f, at + kOffShape + 8 * d,
                         "tensor '%s': shape[%u] = %" PRIu64 " beyond ndim %u is not 0", tn, d, t.shape[d], t.ndim);
        }
        size_tensor(t, f);
        t.offset = rd64(e + kOffData);
        uint64_t stored = rd64(e + kOffSize);
        if (stored != t.size_bytes)
            throw_at(STK_E_SIZE_MISMATCH, f, at + kOffSize,
                     "tensor '%s': size_bytes %" PRIu64 " but %" PRIu64 " elements of %s pack into %" PRIu64, tn, stored,
                     t.n_elements, lwt_dtype_name(t.dtype), t.size_bytes);
        if (t.offset % kLwtAlign)
            throw_at(STK_E_MISALIGNED, f, at + kOffData, "tensor '%s': data offset %" PRIu64 " is not a multiple of 64", tn,
                     t.offset);
        if (t.offset != expect_offset)
            throw_at(STK_E_CORRUPT, f, at + kOffData,
                     "tensor '%s': data offset %" PRIu64 ", expected %" PRIu64 " (tensors are contiguous in index order)", tn,
                     t.offset, expect_offset);
        uint64_t end;
        if (!add_ok(t.offset, t.size_bytes, &end) || end > header_.total_bytes)
            throw_at(STK_E_CORRUPT, f, at + kOffData,
                     "tensor '%s': bytes [%" PRIu64 ", +%" PRIu64 ") run past the %" PRIu64 "-byte data section", tn, t.offset,
                     t.size_bytes, header_.total_bytes);
        expect_offset = align_up(end, kLwtAlign);
        float scale = 1.0f;
        if (extended) {
            std::memcpy(&scale, e + kOffScale, 4);
            t.quant.zero_point = rd32(e + kOffZero);
        }
        t.quant.scale = scale;
        if (!lwt_dtype_has_scale(t.dtype)) {  // float and block-scaled (the scales are in the blocks)
            if (scale != 1.0f || t.quant.zero_point != 0)
                throw_at(STK_E_CORRUPT, f, at + kOffScale, "tensor '%s': a %s tensor must store scale 1 and zero point 0", tn,
                         lwt_dtype_name(t.dtype));
        } else {
            if (!(scale >= kLwtMinScale && scale <= kLwtMaxScale))
                throw_at(STK_E_CORRUPT, f, at + kOffScale, "tensor '%s': scale %g is outside [2^-100, 2^100]", tn, double(scale));
            if (t.quant.zero_point > lwt_unsigned_max(t.dtype))
                throw_at(STK_E_CORRUPT, f, at + kOffZero, "tensor '%s': zero point %u is out of range for %s", tn,
                         t.quant.zero_point, lwt_dtype_name(t.dtype));
        }
        if (!by_name_.emplace(std::string_view(t.name), uint32_t(i)).second)
            throw_at(STK_E_CORRUPT, f, at, "tensor '%s' appears twice in the index", tn);
        if (!add_ok(params, t.n_elements, &params)) throw_at(STK_E_DIMS_OVERFLOW, f, at, "the parameter count overflows 64 bits");
        // Padding between this tensor and the next (or the section end) must be zero.
        for (uint64_t p = end; p < expect_offset && p < header_.total_bytes; p++)
            if (data_[data_offset_ + p])
                throw_at(STK_E_BAD_HEADER, f, data_offset_ + p, "nonzero padding byte after tensor '%s'", tn);
    }
    if (expect_offset != header_.total_bytes)
        throw_at(STK_E_BAD_HEADER, f, 16, "total_bytes %" PRIu64 " but the tensors end at %" PRIu64 " (rounded up to 64)",
                 header_.total_bytes, expect_offset);
    if (params != header_.parameter_count)
        throw_at(STK_E_BAD_HEADER, f, 16, "parameter_count %" PRIu64 " but the tensors hold %" PRIu64 " elements",
                 header_.parameter_count, params);
}

void LwtFile::read_f32(const LwtTensor &t, float *out) const {
    uint64_t r = lwt_unpack(t.dtype, tensor_data(t), t.n_elements, t.quant, out);
    if (r == t.n_elements) return;
    uint64_t at = data_offset_ + t.offset;
    if (r > t.n_elements)
        throw_at(STK_E_CORRUPT, name_, at + t.size_bytes - 1, "tensor '%s': nonzero padding bits after the last element",
                 printable(t.name).c_str());
    if (lwt_dtype_is_blocked(t.dtype)) {
        const BlockQType b = lwt_blockq(t.dtype);
        const uint64_t block = r / kBlockQElems;
        throw_at(STK_E_CORRUPT, name_, at + block * blockq_block_bytes(b),
                 "tensor '%s': %s block %" PRIu64 " has scale 0x%04x, infinite or NaN (no value quantises to it)",
                 printable(t.name).c_str(), lwt_dtype_name(t.dtype), block, unsigned(blockq_scale_bits(b, tensor_data(t), block)));
    }
    throw_at(STK_E_CORRUPT, name_, at + r * lwt_dtype_bits(t.dtype) / 8,
             "tensor '%s': element %" PRIu64 " holds %s field %u, which no value encodes to", printable(t.name).c_str(), r,
             lwt_dtype_name(t.dtype), lwt_field_at(t.dtype, tensor_data(t), r));
}

// ------------------------------------------------------------------------------------------------
// Writer

LwtWriter::LwtWriter(const std::string &path, const LwtHeader &header, std::vector<LwtTensorSpec> specs)
    : path_(path), header_(header) {
    if (!plain_token(header_.model_type))
        throw_error(STK_E_INVALID_ARGUMENT, "%s: model_type '%s' is not 1-63 [A-Za-z0-9_.-]", path.c_str(),
                    printable(header_.model_type).c_str());
    LwtDType hd;
    if (!parse_lwt_dtype(header_.dtype, &hd))
        throw_error(STK_E_BAD_DTYPE, "%s: header dtype '%s' is not a .lwt dtype", path.c_str(), printable(header_.dtype).c_str());
    for (auto &c : header_.config)
        if (!plain_token(c.first))
            throw_error(STK_E_INVALID_ARGUMENT, "%s: config key '%s' is not 1-63 [A-Za-z0-9_.-]", path.c_str(),
                        printable(c.first).c_str());
    std::unordered_map<std::string_view, uint32_t> names;
    tensors_.resize(specs.size());
    uint64_t offset = 0, params = 0;
    for (size_t i = 0; i < specs.size(); i++) {
        LwtTensor &t = tensors_[i];
        LwtTensorSpec &s = specs[i];
        t.name = std::move(s.name);
        if (t.name.empty() || t.name.size() >= kLwtNameBytes || t.name.find('\0') != std::string::npos)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor name '%s' must be 1-127 bytes without NUL", path.c_str(),
                        printable(t.name).c_str());
        if (s.shape.size() > kLwtMaxDims)
            throw_error(STK_E_BAD_RANK, "%s: tensor '%s' has %zu dims (at most 8)", path.c_str(), printable(t.name).c_str(),
                        s.shape.size());
        t.dtype = s.dtype;
        t.ndim = uint32_t(s.shape.size());
        for (uint32_t d = 0; d < t.ndim; d++) t.shape[d] = s.shape[d];
        size_tensor(t, path, STK_E_INVALID_ARGUMENT);
        t.offset = offset;
        offset = align_up(checked_add(offset, t.size_bytes, "lwt data section"), kLwtAlign);
        params = checked_add(params, t.n_elements, "lwt parameter count");
    }
    for (auto &t : tensors_)
        if (!names.emplace(std::string_view(t.name), 0).second)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor name '%s' appears twice", path.c_str(), printable(t.name).c_str());
    // Seed 001's layout (version 1) whenever it can say everything: every tensor float32.
    header_.version = 1;
    if (hd != LwtDType::F32) header_.version = 2;
    for (auto &t : tensors_)
        if (t.dtype != LwtDType::F32) header_.version = 2;
    header_.entry_bytes = header_.version == 1 ? kLwtEntryBytesV1 : kLwtEntryBytes;
    header_.tensor_count = tensors_.size();
    header_.total_bytes = offset;
    header_.parameter_count = params;

    std::string head = header_text(0);
    std::string index = index_bytes();
    data_offset_ = align_up(head.size() + index.size(), kLwtAlign);
    out_ = std::make_unique<OutputFile>(path);
    out_->write(head.data(), head.size());
    out_->write(index.data(), index.size());
    static const uint8_t zeros[kLwtAlign] = {};
    out_->write(zeros, size_t(data_offset_ - head.size() - index.size()));
}

std::string LwtWriter::header_text(uint32_t crc) const {
    std::string j = format("{\"version\":%u,\"model_type\":\"", header_.version) + header_.model_type + "\",\"config\":{";
    for (size_t i = 0; i < header_.config.size(); i++)
        j += format("%s\"%s\":%" PRIu64, i ? "," : "", header_.config[i].first.c_str(), header_.config[i].second);
    j += format("},\"dtype\":\"%s\",\"byte_order\":\"little\",\"tensor_count\":%" PRIu64 ",\"total_bytes\":%" PRIu64
                ",\"parameter_count\":%" PRIu64 ",\"tied_lm_head\":%s,\"data_crc32\":\"%08x\"}",
                header_.dtype.c_str(), header_.tensor_count, header_.total_bytes, header_.parameter_count,
                header_.tied_lm_head ? "true" : "false", crc);
    std::string out(kLwtMagic, 8);
    uint64_t n = j.size();
    out.append(reinterpret_cast<const char *>(&n), 8);
    return out + j;
}

std::string LwtWriter::index_bytes() const {
    const uint64_t eb = header_.entry_bytes;
    std::string idx(tensors_.size() * eb, '\0');
    for (size_t i = 0; i < tensors_.size(); i++) {
        const LwtTensor &t = tensors_[i];
        uint64_t at = i * eb;
        std::memcpy(&idx[at + kOffName], t.name.data(), t.name.size());
        put32(idx, at + kOffNdim, t.ndim);
        for (uint32_t d = 0; d < kLwtMaxDims; d++) put64(idx, at + kOffShape + 8 * d, t.shape[d]);
        put64(idx, at + kOffData, t.offset);
        put64(idx, at + kOffSize, t.size_bytes);
        if (eb == kLwtEntryBytes) {  // version 2; version 1 leaves the C padding at kOffDType zero
            put32(idx, at + kOffDType, uint32_t(t.dtype));
            std::memcpy(&idx[at + kOffScale], &t.quant.scale, 4);
            put32(idx, at + kOffZero, t.quant.zero_point);
        }
    }
    return idx;
}

void LwtWriter::write_tensor(uint32_t i, const uint8_t *packed, uint64_t len, LwtQuant quant) {
    begin_tensor(i, quant);
    append(packed, len);
    end_tensor();
}

void LwtWriter::begin_tensor(uint32_t i, LwtQuant quant) {
    if (in_tensor_ || i != next_ || i >= tensors_.size())
        throw_error(STK_E_INTERNAL, "%s: tensor %u written out of order (expected %u)", path_.c_str(), i, next_);
    LwtTensor &t = tensors_[i];
    if (!lwt_dtype_has_scale(t.dtype)) quant = LwtQuant{};
    t.quant = quant;
    in_tensor_ = true;
    tensor_written_ = 0;
}

void LwtWriter::append(const uint8_t *packed, uint64_t len) {
    if (!in_tensor_) throw_error(STK_E_INTERNAL, "%s: bytes appended outside a tensor", path_.c_str());
    const LwtTensor &t = tensors_[next_];
    if (len > t.size_bytes - tensor_written_)
        throw_error(STK_E_INTERNAL, "%s: tensor '%s' given more than the %" PRIu64 " bytes of its layout", path_.c_str(),
                    t.name.c_str(), t.size_bytes);
    put(packed, len);
    tensor_written_ += len;
}

void LwtWriter::set_quant(LwtQuant quant) {
    if (!in_tensor_) throw_error(STK_E_INTERNAL, "%s: set_quant outside a tensor", path_.c_str());
    LwtTensor &t = tensors_[next_];
    t.quant = lwt_dtype_has_scale(t.dtype) ? quant : LwtQuant{};
}

void LwtWriter::end_tensor() {
    if (!in_tensor_) throw_error(STK_E_INTERNAL, "%s: end_tensor without begin_tensor", path_.c_str());
    const LwtTensor &t = tensors_[next_];
    if (tensor_written_ != t.size_bytes)
        throw_error(STK_E_INTERNAL, "%s: tensor '%s' given %" PRIu64 " bytes, its layout says %" PRIu64, path_.c_str(),
                    t.name.c_str(), tensor_written_, t.size_bytes);
    static const uint8_t zeros[kLwtAlign] = {};
    uint64_t pad = align_up(t.offset + t.size_bytes, kLwtAlign) - (t.offset + t.size_bytes);
    put(zeros, pad);
    written_ = t.offset + t.size_bytes + pad;
    in_tensor_ = false;
    next_++;
}

// CRC on the bytes while they are in cache; the file gets them in large blocks.
void LwtWriter::put(const uint8_t *p, uint64_t len) {
    crc_ = lwt_crc32(p, size_t(len), crc_);
    if (buf_.capacity() < kWriteBuffer) buf_.reserve(kWriteBuffer);
    while (len) {
        if (buf_.empty() && len >= kWriteBuffer) {  // large pieces go straight out
            out_->write(p, size_t(len));
            return;
        }
        uint64_t k = std::min<uint64_t>(len, kWriteBuffer - buf_.size());
        buf_.insert(buf_.end(), p, p + k);
        p += k;
        len -= k;
        if (buf_.size() == kWriteBuffer) flush();
    }
}

void LwtWriter::flush() {
    if (!buf_.empty()) out_->write(buf_.data(), buf_.size());
    buf_.clear();
}

void LwtWriter::commit() {
    if (in_tensor_ || next_ != tensors_.size())
        throw_error(STK_E_INTERNAL, "%s: %u of %zu tensors written", path_.c_str(), next_, tensors_.size());
    flush();
    std::string head = header_text(crc_);
    std::string index = index_bytes();
    out_->pwrite(head.data(), head.size(), 0);
    out_->pwrite(index.data(), index.size(), head.size());
    out_->commit();
}

// ------------------------------------------------------------------------------------------------
// Whole models

void lwt_check_quant(const std::string &name, LwtDType dtype, LwtQuant q) {
    if (!lwt_dtype_has_scale(dtype)) return;
    if (!(q.scale >= kLwtMinScale && q.scale <= kLwtMaxScale))
        throw_error(STK_E_UNSUPPORTED, "tensor '%s': %s scale %g is outside [2^-100, 2^100] (values too large to quantise)",
                    name.c_str(), lwt_dtype_name(dtype), double(q.scale));
    if (q.zero_point > lwt_unsigned_max(dtype))
        throw_error(STK_E_INVALID_ARGUMENT, "tensor '%s': zero point %u out of range for %s", name.c_str(), q.zero_point,
                    lwt_dtype_name(dtype));
}

LwtQuant lwt_quantize_tensor(const std::string &name, LwtDType dtype, const float *v, uint64_t n, const LwtQuant *fixed,
                             uint8_t *out, const uint16_t *block_scales) {
    LwtQuant q;
    if (!lwt_dtype_is_float(dtype)) {
        for (uint64_t i = 0; i < n; i++)
            if (!std::isfinite(v[i]))
                throw_error(STK_E_NONFINITE, "tensor '%s': element %" PRIu64 " is %g, which %s cannot hold", name.c_str(), i,
                            double(v[i]), lwt_dtype_name(dtype));
        q = fixed ? *fixed : lwt_choose_quant(dtype, v, n);
        lwt_check_quant(name, dtype, q);
    }
    if (lwt_dtype_is_blocked(dtype)) {
        const BlockQType b = lwt_blockq(dtype);
        if (block_scales) blockq_quantize_scaled(b, v, n, block_scales, out);
        else blockq_quantize(b, v, n, out);
        lwt_check_blocks(name, dtype, out, n);
        return q;
    }
    lwt_pack(dtype, v, n, q, out);
    return q;
}

void lwt_check_blocks(const std::string &name, LwtDType dtype, const uint8_t *packed, uint64_t n, uint64_t first_element) {
    const BlockQType b = lwt_blockq(dtype);
    const uint64_t bad = blockq_first_bad_scale(b, packed, n);
    if (bad < n / kBlockQElems) {
        const uint64_t e = first_element + bad * kBlockQElems;
        throw_error(STK_E_UNSUPPORTED,
                    "tensor '%s': the %s block of elements %" PRIu64 "..%" PRIu64
                    " needs a scale beyond float16's range (values too large to quantise)",
                    name.c_str(), lwt_dtype_name(dtype), e, e + kBlockQElems - 1);
    }
}

LwtModel load_lwt(const std::string &path) {
    LwtFile f(path);
    LwtModel m;
    m.header = f.header();
    m.tensors.resize(f.tensors().size());
    for (size_t i = 0; i < f.tensors().size(); i++) {
        const LwtTensor &t = f.tensors()[i];
        LwtModelTensor &o = m.tensors[i];
        o.name = t.name;
        o.shape.assign(t.shape, t.shape + t.ndim);
        o.dtype = t.dtype;
        o.has_quant = !lwt_dtype_is_float(t.dtype);
        o.quant = t.quant;
        o.values.resize(size_t(t.n_elements));
        f.read_f32(t, o.values.data());
        if (lwt_dtype_is_blocked(t.dtype)) {  // each block's scale, kept for saving
            o.block_scales.resize(size_t(t.n_elements / kBlockQElems));
            for (uint64_t b = 0; b < o.block_scales.size(); b++)
                o.block_scales[b] = blockq_scale_bits(lwt_blockq(t.dtype), f.tensor_data(t), b);
        }
    }
    return m;
}

void save_lwt(const LwtModel &model, const std::string &path) {
    std::vector<LwtTensorSpec> specs;
    for (auto &t : model.tensors) specs.push_back({t.name, t.dtype, t.shape});
    LwtWriter w(path, model.header, std::move(specs));
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < model.tensors.size(); i++) {
        const LwtModelTensor &t = model.tensors[i];
        const LwtTensor &lt = w.tensors()[i];
        if (t.values.size() != lt.n_elements)
            throw_error(STK_E_SIZE_MISMATCH, "%s: tensor '%s' holds %zu values, its shape %" PRIu64, path.c_str(), t.name.c_str(),
                        t.values.size(), lt.n_elements);
        const bool keep_blocks = t.has_quant && lwt_dtype_is_blocked(t.dtype);
        if (keep_blocks && t.block_scales.size() != lt.n_elements / kBlockQElems)
            throw_error(STK_E_SIZE_MISMATCH, "%s: tensor '%s' holds %zu block scales, its shape %" PRIu64 " blocks", path.c_str(),
                        t.name.c_str(), t.block_scales.size(), lt.n_elements / kBlockQElems);
        buf.resize(size_t(lt.size_bytes));
        LwtQuant q = lwt_quantize_tensor(t.name, t.dtype, t.values.data(), lt.n_elements, t.has_quant ? &t.quant : nullptr,
                                         buf.data(), keep_blocks ? t.block_scales.data() : nullptr);
        w.write_tensor(uint32_t(i), buf.data(), buf.size(), q);
    }
    w.commit();
}

}  // namespace stk
