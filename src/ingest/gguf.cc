// GGUF reader.  The parser overflows reported against ggml's gguf.cpp (huge tensor or key
// counts, string lengths past the end, n_dims > 4, dimension products that wrap, offsets that
// overlap or run off the file) are each a checked refusal here; tests/test_gguf.cc holds one case
// per report.
#include "ingest/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "ingest/source.h"

namespace stk {

namespace {

const GgmlTypeInfo kTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},      {"Q4_0", 32, 18},   {"Q4_1", 32, 20},    {nullptr, 0, 0},      {nullptr, 0, 0},
    {"Q5_0", 32, 22},     {"Q5_1", 32, 24},   {"Q8_0", 32, 34},   {"Q8_1", 32, 40},    {"Q2_K", 256, 84},    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176}, {"Q6_K", 256, 210}, {"Q8_K", 256, 292},  {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},
    {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50}, {"IQ4_NL", 32, 18}, {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},      {"I32", 1, 4},      {"I64", 1, 8},       {"F64", 1, 8},        {"IQ1_M", 256, 56},
    {"BF16", 1, 2},       {nullptr, 0, 0},    {nullptr, 0, 0},    {nullptr, 0, 0},     {"TQ1_0", 256, 54},   {"TQ2_0", 256, 66},
    {nullptr, 0, 0},      {nullptr, 0, 0},    {nullptr, 0, 0},    {"MXFP4", 32, 17},   {"NVFP4", 64, 36},    {"Q1_0", 128, 18},
};

// Bytes of a fixed-size value type; 0 for string / array; -1 for an unknown id.
int scalar_size(uint32_t t) {
    switch (t) {
        case 0:
        case 1:
        case 7: return 1;
        case 2:
        case 3: return 2;
        case 4:
        case 5:
        case 6: return 4;
        case 10:
        case 11:
        case 12: return 8;
        case 8:
        case 9: return 0;
        default: return -1;
    }
}

}  // namespace

const GgmlTypeInfo *ggml_type_info(uint32_t type) {
    if (type >= sizeof kTypes / sizeof kTypes[0] || !kTypes[type].name) return nullptr;
    return &kTypes[type];
}

std::string ggml_type_name(uint32_t type) {
    const GgmlTypeInfo *i = ggml_type_info(type);
    return i ? std::string(i->name) : format("unknown type %u", type);
}

const char *gguf_type_name(GgufType t) {
    static const char *kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    uint32_t i = uint32_t(t);
    return i < 13 ? kNames[i] : "unknown";
}

// ---- values ----

void GgufValue::wrong(const char *wanted) const {
    std::string type = type_ == GgufType::ARRAY ? format("array of %s", gguf_type_name(elem_)) : gguf_type_name(type_);
    throw_at(STK_E_CORRUPT, path_ ? *path_ : std::string("gguf"), offset_, "key '%s': a %s where %s was expected",
             printable(key_).c_str(), type.c_str(), wanted);
}

#define STK_GGUF_GETTER(NAME, T, TYPE)         \
  T GgufValue::NAME() const {                  \
    if (type_ != GgufType::TYPE) wrong(#NAME); \
    return load_le<T>(data_);                  \
  }
STK_GGUF_GETTER(u8, uint8_t, U8)
STK_GGUF_GETTER(i8, int8_t, I8)
STK_GGUF_GETTER(u16, uint16_t, U16)
STK_GGUF_GETTER(i16, int16_t, I16)
STK_GGUF_GETTER(u32, uint32_t, U32)
STK_GGUF_GETTER(i32, int32_t, I32)
STK_GGUF_GETTER(u64, uint64_t, U64)
STK_GGUF_GETTER(i64, int64_t, I64)
STK_GGUF_GETTER(f32, float, F32)
STK_GGUF_GETTER(f64, double, F64)
#undef STK_GGUF_GETTER

bool GgufValue::boolean() const {
    if (type_ != GgufType::BOOL) wrong("bool");
    return data_[0] != 0;  // 0 / 1 checked by the parser
}

std::string_view GgufValue::str() const {
    if (type_ != GgufType::STRING) wrong("string");
    return std::string_view(reinterpret_cast<const char *>(data_), size_t(count_));
}

namespace {

// Integer value of a scalar of integer type t at p; false for non-integers.
bool load_int(GgufType t, const uint8_t *p, int64_t *s, uint64_t *u, bool *is_signed) {
    *is_signed = true;
    switch (t) {
        case GgufType::U8:
            *u = p[0];
            *is_signed = false;
            return true;
        case GgufType::U16:
            *u = load_le<uint16_t>(p);
            *is_signed = false;
            return true;
        case GgufType::U32:
            *u = load_le<uint32_t>(p);
            *is_signed = false;
            return true;
        case GgufType::U64:
            *u = load_le<uint64_t>(p);
            *is_signed = false;
            return true;
        case GgufType::I8: *s = int8_t(p[0]); return true;
        case GgufType::I16: *s = load_le<int16_t>(p); return true;
        case GgufType::I32: *s = load_le<int32_t>(p); return true;
        case GgufType::I64: *s = load_le<int64_t>(p); return true;
        default: return false;
    }
}

}  // namespace

uint64_t GgufValue::as_uint() const {
    int64_t s;
    uint64_t u;
    bool sg;
    if (!load_int(type_, data_, &s, &u, &sg)) wrong("an integer");
    if (!sg) return u;
    if (s < 0)
        throw_at(STK_E_CORRUPT, *path_, offset_, "key '%s': %lld where a count >= 0 was expected", printable(key_).c_str(),
                 (long long)s);
    return uint64_t(s);
}

int64_t GgufValue::as_int() const {
    int64_t s;
    uint64_t u;
    bool sg;
    if (!load_int(type_, data_, &s, &u, &sg)) wrong("an integer");
    if (sg) return s;
    if (u > uint64_t(INT64_MAX))
        throw_at(STK_E_CORRUPT, *path_, offset_, "key '%s': %llu does not fit a signed 64-bit integer", printable(key_).c_str(),
                 (unsigned long long)u);
    return int64_t(u);
}

double GgufValue::as_float() const {
    if (type_ == GgufType::F32) return load_le<float>(data_);
    if (type_ == GgufType::F64) return load_le<double>(data_);
    wrong("a float");
}

GgufType GgufValue::elem_type() const {
    if (type_ != GgufType::ARRAY) wrong("an array");
    return elem_;
}

uint64_t GgufValue::size() const {
    if (type_ != GgufType::ARRAY) wrong("an array");
    return count_;
}

GgufValue GgufValue::at(uint64_t i) const {
    if (type_ != GgufType::ARRAY) wrong("an array");
    if (i >= count_)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: key '%s': element %llu of an array of %llu", path_->c_str(),
                    printable(key_).c_str(), (unsigned long long)i, (unsigned long long)count_);
    GgufValue v;
    v.path_ = path_;
    v.key_ = key_;
    v.type_ = elem_;
    int sz = scalar_size(uint32_t(elem_));
    if (sz > 0) {
        v.data_ = data_ + i * uint64_t(sz);
        v.offset_ = offset_ + uint64_t(v.data_ - data_);
        return v;
    }
    // String or array element: the parser indexed where each starts (relative to data_).
    uint64_t rel = (*index_)[index_start_ + 2 * i];
    const uint8_t *p = data_ + rel;
    v.offset_ = offset_ + rel;
    if (elem_ == GgufType::STRING) {
        v.count_ = load_u64(p);
        v.data_ = p + 8;
    } else {
        v.elem_ = GgufType(load_u32(p));
        v.count_ = load_u64(p + 4);
        v.data_ = p + 12;
        v.index_ = index_;
        v.index_start_ = (*index_)[index_start_ + 2 * i + 1];
    }
    return v;
}

std::vector<std::string_view> GgufValue::strings() const {
    if (type_ != GgufType::ARRAY || elem_ != GgufType::STRING) wrong("an array of strings");
    std::vector<std::string_view> out;
    out.reserve(size_t(count_));
    for (uint64_t i = 0; i < count_; i++) {
        const uint8_t *p = data_ + (*index_)[index_start_ + 2 * i];
        out.emplace_back(reinterpret_cast<const char *>(p + 8), size_t(load_u64(p)));
    }
    return out;
}

std::vector<int64_t> GgufValue::ints() const {
    if (type_ != GgufType::ARRAY) wrong("an array of integers");
    std::vector<int64_t> out;
    out.reserve(size_t(count_));
    for (uint64_t i = 0; i < count_; i++) out.push_back(at(i).as_int());
    return out;
}

std::vector<uint64_t> GgufValue::uints() const {
    if (type_ != GgufType::ARRAY) wrong("an array of integers");
    std::vector<uint64_t> out;
    out.reserve(size_t(count_));
    for (uint64_t i = 0; i < count_; i++) out.push_back(at(i).as_uint());
    return out;
}

std::vector<float> GgufValue::floats() const {
    if (type_ != GgufType::ARRAY) wrong("an array of numbers");
    std::vector<float> out;
    out.reserve(size_t(count_));
    for (uint64_t i = 0; i < count_; i++) {
        GgufValue e = at(i);
        if (elem_ == GgufType::F32) out.push_back(e.f32());
        else if (elem_ == GgufType::F64) out.push_back(float(e.f64()));
        else out.push_back(float(e.as_int()));
    }
    return out;
}

// ---- parser ----

struct GgufFile::Shard {
    MappedFile file;
    std::string path;
    uint32_t version = 0;
    uint64_t alignment = kGgufDefaultAlignment;
    uint64_t data_start = 0;
    std::vector<GgufKV> kv;
    std::unordered_map<std::string_view, size_t> by_key;
    std::vector<uint64_t> index;  // element offsets of string / nested arrays (GgufValue::index_)
    std::vector<GgufTensorInfo> tensors;
};

struct GgufParser {
    const uint8_t *d;
    uint64_t n;
    uint64_t pos = 0;
    const std::string &path;
    GgufFile::Shard &s;

    [[noreturn]] void past_end(uint64_t at, uint64_t need, const char *what) const {
        throw_at(STK_E_TRUNCATED, path, at, "%s needs %llu bytes, but the %llu-byte file ends first", what,
                 (unsigned long long)need, (unsigned long long)n);
    }
    void need(uint64_t bytes, const char *what) const {
        if (bytes > n - pos) past_end(pos, bytes, what);
    }
    uint32_t u32(const char *what) {
        need(4, what);
        uint32_t v = load_u32(d + pos);
        pos += 4;
        return v;
    }
    uint64_t u64(const char *what) {
        need(8, what);
        uint64_t v = load_u64(d + pos);
        pos += 8;
        return v;
    }
    std::string_view string(const char *what) {
        uint64_t at = pos;
        uint64_t len = u64(what);
        if (len > n - pos)
            throw_at(STK_E_TRUNCATED, path, at, "%s: string length %llu runs past the end of the %llu-byte file", what,
                     (unsigned long long)len, (unsigned long long)n);
        std::string_view v(reinterpret_cast<const char *>(d + pos), size_t(len));
        pos += len;
        return v;
    }

    // Skip over (and validate) one value of type t at pos; index string / array elements.
    void value(uint32_t t, std::string_view key, uint32_t depth) {
        const std::string k = printable(key);
        int sz = scalar_size(t);
        if (sz < 0) throw_at(STK_E_CORRUPT, path, pos - 4, "key '%s': unknown value type %u (GGUF defines 0..12)", k.c_str(), t);
        if (sz > 0) {
            need(uint64_t(sz), "a metadata value");
            if (t == uint32_t(GgufType::BOOL) && d[pos] > 1)
                throw_at(STK_E_CORRUPT, path, pos, "key '%s': bool byte %u is neither 0 nor 1", k.c_str(), d[pos]);
            pos += uint64_t(sz);
            return;
        }
        if (t == uint32_t(GgufType::STRING)) {
            (void)string("a string value");
            return;
        }
        // Array: element type, count, elements.
        if (depth >= kGgufMaxArrayDepth)
            throw_at(STK_E_CORRUPT, path, pos, "key '%s': arrays nested deeper than %u levels", k.c_str(), kGgufMaxArrayDepth);
        uint64_t at = pos;
        uint32_t et = u32("an array's element type");
        uint64_t count = u64("an array's element count");
        int esz = scalar_size(et);
        if (esz < 0)
            throw_at(STK_E_CORRUPT, path, at, "key '%s': array of unknown value type %u (GGUF defines 0..12)", k.c_str(), et);
        // Smallest stored element: the type's size, 8 for a string (its length), 12 for an array.
        uint64_t min_elem = esz > 0 ? uint64_t(esz) : et == uint32_t(GgufType::STRING) ? 8 : 12;
        uint64_t bytes;
        if (!mul_ok(count, min_elem, &bytes) || bytes > n - pos)
            throw_at(STK_E_TRUNCATED, path, at,
                     "key '%s': array of %llu %s elements needs at least %llu bytes per element, more than the %llu "
                     "bytes left in the file",
                     k.c_str(), (unsigned long long)count, gguf_type_name(GgufType(et)), (unsigned long long)min_elem,
                     (unsigned long long)(n - pos));
        if (esz > 0) {
            if (et == uint32_t(GgufType::BOOL))
                for (uint64_t i = 0; i < count; i++)
                    if (d[pos + i] > 1)
                        throw_at(STK_E_CORRUPT, path, pos + i, "key '%s': bool element %llu is %u, neither 0 nor 1", k.c_str(),
                                 (unsigned long long)i, d[pos + i]);
            pos += bytes;
            return;
        }
        // Strings / arrays: record where each element starts, relative to element 0.  The index
        // is bounded by the file: each element takes >= 8 bytes of it, and 16 bytes of index.
        const uint64_t base = pos;
        const size_t start = s.index.size();
        s.index.resize(start + size_t(2 * count));
        for (uint64_t i = 0; i < count; i++) {
            s.index[start + 2 * i] = pos - base;
            if (et == uint32_t(GgufType::STRING)) {
                (void)string("an array's string element");
            } else {
                s.index[start + 2 * i + 1] = s.index.size();
                value(et, key, depth + 1);
            }
        }
    }

    GgufValue make_value(uint32_t t, std::string_view key, uint64_t at, size_t index_start) const {
        GgufValue v;
        v.path_ = &s.path;
        v.key_ = key;
        v.type_ = GgufType(t);
        v.offset_ = at;
        if (t == uint32_t(GgufType::STRING)) {
            v.count_ = load_u64(d + at);
            v.data_ = d + at + 8;
        } else if (t == uint32_t(GgufType::ARRAY)) {
            v.elem_ = GgufType(load_u32(d + at));
            v.count_ = load_u64(d + at + 4);
            v.data_ = d + at + 12;
            v.index_ = &s.index;
            v.index_start_ = index_start;
        } else {
            v.data_ = d + at;
        }
        return v;
    }

    void parse() {
        if (n < 24)
            throw_at(STK_E_TRUNCATED, path, 0, "%llu bytes, too short for a GGUF header (24 bytes)", (unsigned long long)n);
        if (load_u32(d) != kGgufMagic) throw_at(STK_E_BAD_MAGIC, path, 0, "not a GGUF file (magic is not 'GGUF')");
        pos = 4;
        uint32_t version = u32("the version");
        if (version == 0x02000000u || version == 0x03000000u)
            throw_at(STK_E_UNSUPPORTED, path, 4,
                     "a big-endian GGUF (version field %u byte-swapped); stk reads little-endian GGUF only: convert it "
                     "with gguf-py or llama.cpp's tools on a little-endian machine",
                     __builtin_bswap32(version));
        if (version == 1)
            throw_at(STK_E_UNSUPPORTED, path, 4, "GGUF version 1 (32-bit counts) is not read; re-save it as version 3");
        if (version != 2 && version != 3)
            throw_at(STK_E_UNSUPPORTED, path, 4, "GGUF version %u (stk reads versions 2 and 3)", version);
        s.version = version;
        const uint64_t n_tensors = u64("the tensor count");
        const uint64_t n_kv = u64("the key/value count");
        // A key/value takes >= 13 bytes (8-byte key length, 4-byte type, 1-byte value), a tensor
        // info >= 24 (name length, n_dims, type, offset): counts beyond that are refused before
        // anything is reserved.
        if (n_kv > (n - pos) / 13)
            throw_at(STK_E_CORRUPT, path, 16, "%llu metadata key/values cannot fit in the %llu-byte file",
                     (unsigned long long)n_kv, (unsigned long long)n);
        if (n_tensors > (n - pos) / 24)
            throw_at(STK_E_CORRUPT, path, 8, "%llu tensor infos cannot fit in the %llu-byte file", (unsigned long long)n_tensors,
                     (unsigned long long)n);

        s.kv.reserve(size_t(n_kv));
        s.by_key.reserve(size_t(n_kv));
        std::vector<size_t> index_starts;
        index_starts.reserve(size_t(n_kv));
        std::vector<uint64_t> value_at;
        value_at.reserve(size_t(n_kv));
        std::vector<uint32_t> types;
        types.reserve(size_t(n_kv));
        for (uint64_t i = 0; i < n_kv; i++) {
            uint64_t kat = pos;
            std::string_view key = string("a metadata key");
            if (key.empty()) throw_at(STK_E_CORRUPT, path, kat, "metadata key %llu is empty", (unsigned long long)i);
            if (s.by_key.count(key)) throw_at(STK_E_CORRUPT, path, kat, "duplicate metadata key '%s'", printable(key).c_str());
            uint32_t t = u32("a value type");
            index_starts.push_back(s.index.size());
            value_at.push_back(pos);
            types.push_back(t);
            value(t, key, 0);
            s.by_key.emplace(key, s.kv.size());
            s.kv.push_back(GgufKV{key, GgufValue()});
        }
        // Values are built after the index stops growing (they point into it).
        for (size_t i = 0; i < s.kv.size(); i++) s.kv[i].value = make_value(types[i], s.kv[i].key, value_at[i], index_starts[i]);

        if (auto it = s.by_key.find("general.alignment"); it != s.by_key.end()) {
            const GgufValue &a = s.kv[it->second].value;
            if (a.type() != GgufType::U32)
                throw_at(STK_E_CORRUPT, path, a.file_offset(), "general.alignment is a %s, not a u32", gguf_type_name(a.type()));
            uint32_t al = a.u32();
            if (al == 0 || (al & (al - 1)) != 0)
                throw_at(STK_E_CORRUPT, path, a.file_offset(), "general.alignment %u is not a power of two", al);
            s.alignment = al;
        }

        std::unordered_set<std::string_view> names;
        names.reserve(size_t(n_tensors));
        s.tensors.reserve(size_t(n_tensors));
        std::vector<uint64_t> rel;
        rel.reserve(size_t(n_tensors));
        for (uint64_t i = 0; i < n_tensors; i++) {
            GgufTensorInfo t;
            t.info_offset = pos;
            std::string_view name = string("a tensor name");
            if (!names.insert(name).second)
                throw_at(STK_E_CORRUPT, path, t.info_offset, "duplicate tensor name '%s'", printable(name).c_str());
            t.name = std::string(name);
            const std::string pn = printable(name);
            uint64_t dims_at = pos;
            t.n_dims = u32("a tensor's n_dims");
            if (t.n_dims > kGgufMaxDims)
                throw_at(STK_E_BAD_RANK, path, dims_at, "tensor '%s': n_dims %u is more than ggml's %u", pn.c_str(), t.n_dims,
                         kGgufMaxDims);
            for (uint32_t j = 0; j < t.n_dims; j++) {
                uint64_t at = pos;
                t.ne[j] = u64("a tensor dimension");
                if (t.ne[j] > uint64_t(INT64_MAX))
                    throw_at(STK_E_CORRUPT, path, at, "tensor '%s': dimension %u is %lld (negative as ggml's int64)", pn.c_str(),
                             j, (long long)t.ne[j]);
                // An empty tensor has no place in a model, and no data to point at.
                if (t.ne[j] == 0) throw_at(STK_E_CORRUPT, path, at, "tensor '%s': dimension %u is 0", pn.c_str(), j);
            }
            uint64_t type_at = pos;
            t.type = u32("a tensor's type");
            uint64_t off_at = pos;
            uint64_t off = u64("a tensor's data offset");
            const GgmlTypeInfo *ti = ggml_type_info(t.type);
            if (!ti) throw_at(STK_E_UNSUPPORTED, path, type_at, "tensor '%s': unknown ggml type %u", pn.c_str(), t.type);
            uint64_t ne = 1;
            for (uint32_t j = 0; j < kGgufMaxDims; j++)
                if (!mul_ok(ne, t.ne[j], &ne) || ne > uint64_t(INT64_MAX))
                    throw_at(STK_E_DIMS_OVERFLOW, path, dims_at,
                             "tensor '%s': the product of its dimensions overflows ggml's int64", pn.c_str());
            if (t.ne[0] % ti->block != 0)
                throw_at(STK_E_SIZE_MISMATCH, path, dims_at,
                         "tensor '%s': its first dimension %llu is not a multiple of %s's block of %u", pn.c_str(),
                         (unsigned long long)t.ne[0], ti->name, ti->block);
            uint64_t nb;
            if (!mul_ok(ne / ti->block, ti->block_bytes, &nb))
                throw_at(STK_E_DIMS_OVERFLOW, path, dims_at, "tensor '%s': its byte size overflows 64 bits", pn.c_str());
            if (off % s.alignment != 0)
                throw_at(STK_E_MISALIGNED, path, off_at, "tensor '%s': data offset %llu is not a multiple of the alignment %llu",
                         pn.c_str(), (unsigned long long)off, (unsigned long long)s.alignment);
            t.n_elements = ne;
            t.n_bytes = nb;
            for (uint32_t j = t.n_dims; j-- > 0;) t.shape.push_back(t.ne[j]);
            rel.push_back(off);
            s.tensors.push_back(std::move(t));
        }

        // Data: each tensor where the previous one ended, padded to the alignment (as ggml lays
        // them out and checks them), all inside the file.
        s.data_start = align_up(pos, s.alignment);
        uint64_t expected = 0;
        for (size_t i = 0; i < s.tensors.size(); i++) {
            GgufTensorInfo &t = s.tensors[i];
            const std::string pn = printable(t.name);
            uint64_t off_at = t.info_offset + 8 + t.name.size() + 4 + 8ull * t.n_dims + 4;
            if (rel[i] != expected)
                throw_at(STK_E_CORRUPT, path, off_at,
                         "tensor '%s': data offset %llu %s (tensors follow each other in info order, each padded to %llu "
                         "bytes)",
                         pn.c_str(), (unsigned long long)rel[i],
                         rel[i] < expected
                             ? format("overlaps the previous tensor, which ends at %llu", (unsigned long long)expected).c_str()
                             : format("leaves a hole after the previous tensor, which ends at %llu", (unsigned long long)expected)
                                   .c_str(),
                         (unsigned long long)s.alignment);
            uint64_t abs, end;
            if (!add_ok(s.data_start, rel[i], &abs) || !add_ok(abs, t.n_bytes, &end) || end > n)
                throw_at(STK_E_TRUNCATED, path, off_at,
                         "tensor '%s': %llu bytes at data offset %llu (file offset %llu) run past the end of the %llu-byte file",
                         pn.c_str(), (unsigned long long)t.n_bytes, (unsigned long long)rel[i],
                         (unsigned long long)(s.data_start + std::min(rel[i], UINT64_MAX - s.data_start)), (unsigned long long)n);
            t.data_offset = abs;
            // end <= n, so this cannot wrap.
            expected = align_up(rel[i] + t.n_bytes, s.alignment);
        }
    }
};

GgufFile::~GgufFile() = default;

namespace {

std::unique_ptr<GgufFile::Shard> parse_shard(MappedFile file, const std::string &path) {
    auto s = std::make_unique<GgufFile::Shard>();
    s->file = std::move(file);
    s->path = path;
    GgufParser p{s->file.data(), s->file.size(), 0, s->path, *s};
    p.parse();
    return s;
}

const GgufValue *shard_find(const GgufFile::Shard &s, std::string_view key) {
    auto it = s.by_key.find(key);
    return it == s.by_key.end() ? nullptr : &s.kv[it->second].value;
}

// split.count of a shard (1 when absent).
uint64_t split_count(const GgufFile::Shard &s) {
    const GgufValue *v = shard_find(s, "split.count");
    return v ? v->as_uint() : 1;
}

}  // namespace

bool gguf_split_name(const std::string &name, std::string *prefix, uint32_t *no, uint32_t *count) {
    // PREFIX-NNNNN-of-MMMMM.gguf
    static const char kTail[] = "-of-";
    if (name.size() < 1 + 1 + 5 + 4 + 5 + 5) return false;  // a non-empty prefix
    size_t end = name.size() - 5;
    if (name.compare(end, 5, ".gguf") != 0) return false;
    size_t c0 = end - 5, of = c0 - 4, n0 = of - 5;
    if (name.compare(of, 4, kTail) != 0 || name[n0 - 1] != '-') return false;
    auto digits = [&](size_t at, uint32_t *out) {
        uint32_t v = 0;
        for (size_t i = at; i < at + 5; i++) {
            if (name[i] < '0' || name[i] > '9') return false;
            v = v * 10 + uint32_t(name[i] - '0');
        }
        *out = v;
        return true;
    };
    uint32_t a, b;
    if (!digits(n0, &a) || !digits(c0, &b) || a == 0 || b == 0 || a > b) return false;
    if (prefix) *prefix = name.substr(0, n0 - 1);
    if (no) *no = a;
    if (count) *count = b;
    return true;
}

GgufFile::GgufFile(const std::string &path) {
    auto first = parse_shard(MappedFile(path), path);
    uint64_t count = split_count(*first);
    if (count <= 1) {
        shards_.push_back(std::move(first));
        open_split_set({}, false);
        return;
    }
    std::string prefix;
    uint32_t no, cnt;
    if (!gguf_split_name(path, &prefix, &no, &cnt))
        throw_error(STK_E_CORRUPT,
                    "%s: split.count is %llu, but the file name is not PREFIX-NNNNN-of-MMMMM.gguf, so the other files of "
                    "the set cannot be found; open them together",
                    path.c_str(), (unsigned long long)count);
    if (cnt != count)
        throw_error(STK_E_CORRUPT, "%s: the name says %u files but split.count is %llu", path.c_str(), cnt,
                    (unsigned long long)count);
    std::vector<std::string> paths;
    for (uint32_t i = 1; i <= cnt; i++) paths.push_back(format("%s-%05u-of-%05u.gguf", prefix.c_str(), i, cnt));
    for (uint32_t i = 0; i < cnt; i++)
        if (paths[i] == path) shards_.push_back(std::move(first));
        else shards_.push_back(nullptr);
    open_split_set(std::move(paths), true);
}

GgufFile::GgufFile(const std::vector<std::string> &paths) {
    if (paths.empty()) throw_error(STK_E_INVALID_ARGUMENT, "GgufFile: no files given");
    shards_.resize(paths.size());
    open_split_set(paths, false);
}

void GgufFile::open_split_set(std::vector<std::string> paths, bool from_names) {
    (void)from_names;
    for (size_t i = 0; i < paths.size(); i++) {
        if (shards_[i]) continue;
        if (!file_exists(paths[i]))
            throw_error(STK_E_NOT_FOUND, "%s: file %zu of the split set is missing", paths[i].c_str(), i + 1);
        shards_[i] = parse_shard(MappedFile(paths[i]), paths[i]);
    }
    const size_t count = shards_.size();
    uint64_t total_tensors = 0;
    for (size_t i = 0; i < count; i++) {
        Shard &s = *shards_[i];
        if (count > 1) {
            const GgufValue *c = shard_find(s, "split.count");
            const GgufValue *no = shard_find(s, "split.no");
            if (!c || !no)
                throw_error(STK_E_CORRUPT, "%s: file %zu of a split set of %zu has no split.%s key", s.path.c_str(), i + 1, count,
                            !c ? "count" : "no");
            if (c->as_uint() != count)
                throw_at(STK_E_CORRUPT, s.path, c->file_offset(), "split.count is %llu, but the set has %zu files",
                         (unsigned long long)c->as_uint(), count);
            if (no->as_uint() != i)
                throw_at(STK_E_CORRUPT, s.path, no->file_offset(),
                         "split.no is %llu, but this is file %zu of the set (expected %zu)", (unsigned long long)no->as_uint(),
                         i + 1, i);
        } else if (split_count(s) > 1) {
            throw_error(STK_E_CORRUPT, "%s: split.count is %llu; open the whole split set", s.path.c_str(),
                        (unsigned long long)split_count(s));
        }
        for (GgufTensorInfo &t : s.tensors) {
            t.file_index = uint32_t(i);
            total_tensors++;
        }
    }
    if (const GgufValue *tc = shard_find(*shards_[0], "split.tensors.count"))
        if (tc->as_uint() != total_tensors)
            throw_at(STK_E_CORRUPT, shards_[0]->path, tc->file_offset(),
                     "split.tensors.count is %llu, but the %zu file(s) hold %llu tensors", (unsigned long long)tc->as_uint(),
                     count, (unsigned long long)total_tensors);
    std::unordered_set<std::string_view> names;
    tensors_.reserve(size_t(total_tensors));
    for (auto &s : shards_)
        for (GgufTensorInfo &t : s->tensors) {
            if (!names.insert(t.name).second)
                throw_at(STK_E_CORRUPT, s->path, t.info_offset, "tensor '%s' is also in an earlier file of the split set",
                         printable(t.name).c_str());
            tensors_.push_back(t);
        }
}

uint32_t GgufFile::version() const { return shards_[0]->version; }
uint64_t GgufFile::alignment() const { return shards_[0]->alignment; }
const std::vector<GgufKV> &GgufFile::metadata() const { return shards_[0]->kv; }
const GgufValue *GgufFile::find(std::string_view key) const { return shard_find(*shards_[0], key); }

const GgufTensorInfo *GgufFile::find_tensor(std::string_view name) const {
    for (const GgufTensorInfo &t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

const uint8_t *GgufFile::tensor_data(const GgufTensorInfo &t) const {
    if (t.file_index >= shards_.size())
        throw_error(STK_E_INVALID_ARGUMENT, "tensor '%s': file %u of %zu", printable(t.name).c_str(), t.file_index,
                    shards_.size());
    return shards_[t.file_index]->file.data() + t.data_offset;
}

size_t GgufFile::file_count() const { return shards_.size(); }
const MappedFile &GgufFile::file(size_t i) const { return shards_.at(i)->file; }

std::vector<GgufTensorInfo> gguf_validate(const uint8_t *data, uint64_t size, const std::string &path, uint64_t *alignment) {
    GgufFile::Shard s;
    s.path = path;
    GgufParser p{data, size, 0, s.path, s};
    p.parse();
    // Exercise the typed getters on every value (the fuzzer reaches them through this).
    for (const GgufKV &kv : s.kv) {
        const GgufValue &v = kv.value;
        if (v.type() == GgufType::ARRAY) {
            for (uint64_t i = 0; i < v.size(); i++) {
                GgufValue e = v.at(i);
                if (e.type() == GgufType::STRING) (void)e.str();
            }
            if (v.elem_type() == GgufType::STRING) (void)v.strings();
        }
    }
    if (alignment) *alignment = s.alignment;
    return std::move(s.tensors);
}

}  // namespace stk
