#include "ingest/safetensors.h"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_set>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace stk {

namespace {

struct Raw {
    std::string name;
    SrcDType dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end;
};

Raw parse_tensor_info(std::string_view name, simdjson::dom::element v, const std::string &path) {
    using namespace simdjson;
    std::string n = printable(name);
    dom::object o;
    if (v.get_object().get(o))
        throw_error(STK_E_BAD_JSON, "%s: tensor '%s': header entry is not a JSON object", path.c_str(), n.c_str());
    Raw r{std::string(name), SrcDType::U8, {}, 0, 0};
    bool have_dtype = false, have_shape = false, have_offsets = false;
    for (auto field : o) {
        std::string_view k = field.key;
        if (k == "dtype") {
            if (have_dtype) throw_error(STK_E_CORRUPT, "%s: tensor '%s': duplicate key \"dtype\"", path.c_str(), n.c_str());
            std::string_view d;
            if (field.value.get_string().get(d))
                throw_error(STK_E_BAD_JSON, "%s: tensor '%s': dtype is not a string", path.c_str(), n.c_str());
            if (!parse_src_dtype(d.data(), d.size(), &r.dtype))
                throw_error(STK_E_UNSUPPORTED,
                            "%s: tensor '%s': unknown or unsupported dtype \"%s\" (supported: F64 F32 F16 BF16 "
                            "F8_E4M3 F8_E5M2 I64 I32 I16 I8 U64 U32 U16 U8 BOOL)",
                            path.c_str(), n.c_str(), printable(d).c_str());
            have_dtype = true;
        } else if (k == "shape") {
            if (have_shape) throw_error(STK_E_CORRUPT, "%s: tensor '%s': duplicate key \"shape\"", path.c_str(), n.c_str());
            dom::array a;
            if (field.value.get_array().get(a))
                throw_error(STK_E_BAD_JSON, "%s: tensor '%s': shape is not an array", path.c_str(), n.c_str());
            for (dom::element e : a) {
                uint64_t d;
                if (!e.is_int64() && !e.is_uint64())
                    throw_error(STK_E_BAD_JSON, "%s: tensor '%s': shape entry is not an integer", path.c_str(), n.c_str());
                if (e.get_uint64().get(d))
                    throw_error(STK_E_BAD_JSON, "%s: tensor '%s': negative shape entry", path.c_str(), n.c_str());
                r.shape.push_back(d);
            }
            have_shape = true;
        } else if (k == "data_offsets") {
            if (have_offsets)
                throw_error(STK_E_CORRUPT, "%s: tensor '%s': duplicate key \"data_offsets\"", path.c_str(), n.c_str());
            dom::array a;
            if (field.value.get_array().get(a) || a.size() != 2)
                throw_error(STK_E_BAD_JSON, "%s: tensor '%s': data_offsets is not an array of two integers", path.c_str(),
                            n.c_str());
            uint64_t be[2];
            size_t i = 0;
            for (dom::element e : a) {
                if ((!e.is_int64() && !e.is_uint64()) || e.get_uint64().get(be[i]))
                    throw_error(STK_E_BAD_JSON, "%s: tensor '%s': data_offsets entry is not a non-negative integer", path.c_str(),
                                n.c_str());
                i++;
            }
            r.begin = be[0];
            r.end = be[1];
            have_offsets = true;
        } else {
            throw_error(STK_E_BAD_JSON, "%s: tensor '%s': unknown key \"%s\" (expected dtype, shape, data_offsets)", path.c_str(),
                        n.c_str(), printable(k).c_str());
        }
    }
    if (!have_dtype || !have_shape || !have_offsets)
        throw_error(STK_E_BAD_JSON, "%s: tensor '%s': missing %s", path.c_str(), n.c_str(),
                    !have_dtype   ? "dtype"
                    : !have_shape ? "shape"
                                  : "data_offsets");
    return r;
}

}  // namespace

SafetensorsHeader parse_safetensors(const uint8_t *data, uint64_t size, const std::string &path) {
    using namespace simdjson;
    if (size < 8)
        throw_error(STK_E_TRUNCATED, "%s: %llu bytes, too short for a safetensors header (8-byte length)", path.c_str(),
                    (unsigned long long)size);
    refuse_lfs_pointer(data, size, path);
    const uint64_t n = load_u64(data);
    if (n > kSafetensorsMaxHeader)
        throw_error(STK_E_CORRUPT, "%s: safetensors header length %llu at offset 0 is larger than the %llu-byte cap",
                    path.c_str(), (unsigned long long)n, (unsigned long long)kSafetensorsMaxHeader);
    if (n > size - 8)
        throw_error(STK_E_TRUNCATED, "%s: safetensors header of %llu bytes at offset 8 runs past the end of the %llu-byte file",
                    path.c_str(), (unsigned long long)n, (unsigned long long)size);
    if (n == 0 || data[8] != '{')
        throw_error(STK_E_BAD_JSON, "%s: safetensors header at offset 8 does not start with '{'", path.c_str());

    SafetensorsHeader h;
    h.data_start = 8 + n;
    const uint64_t buffer_len = size - h.data_start;

    dom::parser parser;
    dom::element doc;
    auto err = parser.parse(reinterpret_cast<const char *>(data + 8), size_t(n), true).get(doc);
    if (err)
        throw_error(STK_E_BAD_JSON, "%s: safetensors header (offset 8, %llu bytes) is not valid UTF-8 JSON: %s", path.c_str(),
                    (unsigned long long)n, error_message(err));
    dom::object root;
    if (doc.get_object().get(root)) throw_error(STK_E_BAD_JSON, "%s: safetensors header is not a JSON object", path.c_str());

    std::vector<Raw> raws;
    std::unordered_set<std::string_view> seen;
    bool have_meta = false;
    for (auto field : root) {
        std::string_view key = field.key;
        if (!seen.insert(key).second)
            throw_error(STK_E_CORRUPT, "%s: duplicate tensor name '%s' in the safetensors header", path.c_str(),
                        printable(key).c_str());
        if (key == "__metadata__") {
            have_meta = true;
            dom::object m;
            if (field.value.get_object().get(m))
                throw_error(STK_E_BAD_JSON, "%s: __metadata__ is not an object of strings", path.c_str());
            std::unordered_set<std::string_view> mseen;
            for (auto mf : m) {
                std::string_view mv;
                if (mf.value.get_string().get(mv))
                    throw_error(STK_E_BAD_JSON, "%s: __metadata__ key '%s' is not a string -> string entry", path.c_str(),
                                printable(mf.key).c_str());
                if (!mseen.insert(mf.key).second)
                    throw_error(STK_E_CORRUPT, "%s: duplicate __metadata__ key '%s'", path.c_str(), printable(mf.key).c_str());
                h.metadata.emplace_back(std::string(mf.key), std::string(mv));
            }
            continue;
        }
        raws.push_back(parse_tensor_info(key, field.value, path));
    }
    (void)have_meta;

    // The crate's validate(): sort by offsets, each tensor must start where the previous ended,
    // its length must equal shape x dtype, and the last must end at the end of the file.
    std::sort(raws.begin(), raws.end(),
              [](const Raw &a, const Raw &b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t expected = 0;
    h.tensors.reserve(raws.size());
    for (Raw &r : raws) {
        std::string n = printable(r.name);
        if (r.end < r.begin)
            throw_error(STK_E_CORRUPT, "%s: tensor '%s': data_offsets [%llu, %llu) end before they begin (file offset %llu)",
                        path.c_str(), n.c_str(), (unsigned long long)r.begin, (unsigned long long)r.end,
                        (unsigned long long)(h.data_start + r.begin));
        if (r.begin < expected)
            throw_error(STK_E_CORRUPT,
                        "%s: tensor '%s': data_offsets [%llu, %llu) overlap the previous tensor, which ends at %llu "
                        "(file offset %llu)",
                        path.c_str(), n.c_str(), (unsigned long long)r.begin, (unsigned long long)r.end,
                        (unsigned long long)expected, (unsigned long long)(h.data_start + expected));
        if (r.begin > expected)
            throw_error(STK_E_CORRUPT,
                        "%s: tensor '%s': data_offsets [%llu, %llu) leave a hole of %llu unindexed bytes at data offset "
                        "%llu (file offset %llu)",
                        path.c_str(), n.c_str(), (unsigned long long)r.begin, (unsigned long long)r.end,
                        (unsigned long long)(r.begin - expected), (unsigned long long)expected,
                        (unsigned long long)(h.data_start + expected));
        TensorRef t;
        t.dtype = r.dtype;
        t.shape = std::move(r.shape);
        uint64_t ne = 1;
        for (uint64_t d : t.shape) {
            if (!mul_ok(ne, d, &ne))
                throw_error(STK_E_DIMS_OVERFLOW, "%s: tensor '%s': the product of its shape overflows 64 bits", path.c_str(),
                            n.c_str());
        }
        uint64_t nb;
        if (!mul_ok(ne, src_dtype_size(t.dtype), &nb))
            throw_error(STK_E_DIMS_OVERFLOW, "%s: tensor '%s': %llu elements x %zu bytes overflows 64 bits", path.c_str(),
                        n.c_str(), (unsigned long long)ne, src_dtype_size(t.dtype));
        if (nb != r.end - r.begin)
            throw_error(STK_E_SIZE_MISMATCH,
                        "%s: tensor '%s': shape x %s is %llu bytes but data_offsets [%llu, %llu) hold %llu (file offset %llu)",
                        path.c_str(), n.c_str(), src_dtype_name(t.dtype), (unsigned long long)nb, (unsigned long long)r.begin,
                        (unsigned long long)r.end, (unsigned long long)(r.end - r.begin),
                        (unsigned long long)(h.data_start + r.begin));
        if (r.end > buffer_len)
            throw_error(STK_E_TRUNCATED,
                        "%s: tensor '%s': data_offsets [%llu, %llu) run past the end of the file (data buffer of %llu "
                        "bytes at file offset %llu)",
                        path.c_str(), n.c_str(), (unsigned long long)r.begin, (unsigned long long)r.end,
                        (unsigned long long)buffer_len, (unsigned long long)h.data_start);
        t.name = std::move(r.name);
        t.n_elements = ne;
        t.n_bytes = nb;
        t.span_bytes = nb;
        t.file = path;
        t.file_offset = h.data_start + r.begin;
        expected = r.end;
        h.tensors.push_back(std::move(t));
    }
    if (expected != buffer_len)
        throw_error(STK_E_SIZE_MISMATCH,
                    "%s: the tensors index %llu data bytes but the file holds %llu after the header (%llu trailing "
                    "unindexed bytes at file offset %llu)",
                    path.c_str(), (unsigned long long)expected, (unsigned long long)buffer_len,
                    (unsigned long long)(buffer_len - expected), (unsigned long long)(h.data_start + expected));
    return h;
}

namespace {

class SafetensorsSource final : public Source {
public:
    const char *kind() const override { return "safetensors"; }
    explicit SafetensorsSource(const std::string &path) : file_(path) {
        header_ = parse_safetensors(file_.data(), file_.size(), path);
    }
    std::vector<TensorRef> &tensors() override { return header_.tensors; }
    const uint8_t *bytes(const TensorRef &t, std::vector<uint8_t> &) const override { return file_.data() + t.file_offset; }
    const MappedFile &file() const override { return file_; }
    void release(const TensorRef &t) const override { file_.dont_need(t.file_offset, t.n_bytes); }

private:
    MappedFile file_;
    SafetensorsHeader header_;
};

}  // namespace

std::unique_ptr<Source> open_safetensors(const std::string &path) { return std::make_unique<SafetensorsSource>(path); }

}  // namespace stk
