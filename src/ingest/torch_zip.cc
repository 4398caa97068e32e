#include "ingest/torch_zip.h"

#include <libdeflate.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "ingest/dtype_convert.h"
#include "ingest/pickle.h"

namespace stk {

namespace {

constexpr uint32_t kSigLocal = 0x04034b50;
constexpr uint32_t kSigCentral = 0x02014b50;
constexpr uint32_t kSigEnd = 0x06054b50;
constexpr uint32_t kSigEnd64 = 0x06064b50;
constexpr uint32_t kSigEnd64Locator = 0x07064b50;
// DEFLATE cannot expand more than ~1032:1; anything claiming more is a bomb or a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Zip entry names that could escape a directory if anything ever extracted them are refused
// outright: a checkpoint has no reason to hold them.
void check_entry_name(const std::string &name, const std::string &path, uint64_t cd_off) {
    std::string why;
    if (name.empty()) why = "an empty name";
    else if (name[0] == '/' || name[0] == '\\') why = "an absolute path";
    else if (name.size() >= 2 && name[1] == ':') why = "a drive-letter path";
    else if (name.find('\\') != std::string::npos) why = "a backslash";
    else if (name.find('\0') != std::string::npos) why = "a NUL byte";
    else {
        size_t start = 0;
        while (start <= name.size()) {
            size_t end = name.find('/', start);
            if (end == std::string::npos) end = name.size();
            if (name.compare(start, end - start, "..") == 0 && end - start == 2) {
                why = "a '..' component";
                break;
            }
            start = end + 1;
        }
    }
    if (!why.empty())
        throw_error(STK_E_CORRUPT, "%s: zip entry '%s' (central directory offset %llu) has %s; refused", path.c_str(),
                    printable(name).c_str(), (unsigned long long)cd_off, why.c_str());
}

}  // namespace

std::vector<ZipEntry> parse_zip_directory(const uint8_t *d, uint64_t size, const std::string &path) {
    if (size < 22)
        throw_error(STK_E_TRUNCATED, "%s: %llu bytes, too short for a zip archive", path.c_str(), (unsigned long long)size);
    // End of central directory: the last record whose comment runs exactly to the end of file.
    uint64_t eocd = UINT64_MAX;
    uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
    for (uint64_t p = size - 22 + 1; p-- > lowest;) {
        if (load_u32(d + p) == kSigEnd && p + 22 + load_u16(d + p + 20) == size) {
            eocd = p;
            break;
        }
    }
    if (eocd == UINT64_MAX)
        throw_error(STK_E_CORRUPT, "%s: no zip end-of-central-directory record (truncated or not a zip)", path.c_str());
    uint64_t disk = load_u16(d + eocd + 4), cd_disk = load_u16(d + eocd + 6);
    uint64_t n_disk = load_u16(d + eocd + 8), n_total = load_u16(d + eocd + 10);
    uint64_t cd_size = load_u32(d + eocd + 12), cd_off = load_u32(d + eocd + 16);
    uint64_t cd_end_limit = eocd;
    if (eocd >= 20 && load_u32(d + eocd - 20) == kSigEnd64Locator) {
        uint64_t z64 = load_u64(d + eocd - 20 + 8);
        if (load_u32(d + eocd - 20 + 4) != 0 || load_u32(d + eocd - 20 + 16) > 1)
            throw_error(STK_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", path.c_str());
        if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || load_u32(d + z64) != kSigEnd64)
            throw_error(STK_E_CORRUPT,
                        "%s: zip64 end-of-central-directory locator at offset %llu points to %llu, where "
                        "there is no zip64 record",
                        path.c_str(), (unsigned long long)(eocd - 20), (unsigned long long)z64);
        disk = load_u32(d + z64 + 16);
        cd_disk = load_u32(d + z64 + 20);
        n_disk = load_u64(d + z64 + 24);
        n_total = load_u64(d + z64 + 32);
        cd_size = load_u64(d + z64 + 40);
        cd_off = load_u64(d + z64 + 48);
        cd_end_limit = z64;
    } else if (n_total == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {
        throw_error(STK_E_CORRUPT, "%s: zip end record at offset %llu needs a zip64 record, which is missing", path.c_str(),
                    (unsigned long long)eocd);
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total)
        throw_error(STK_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", path.c_str());
    uint64_t cd_end;
    if (!add_ok(cd_off, cd_size, &cd_end) || cd_end > cd_end_limit)
        throw_error(STK_E_CORRUPT, "%s: zip central directory [%llu, +%llu) runs past its end record at %llu", path.c_str(),
                    (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)cd_end_limit);
    if (n_total > cd_size / 46)
        throw_error(STK_E_CORRUPT, "%s: zip claims %llu entries in a %llu-byte central directory", path.c_str(),
                    (unsigned long long)n_total, (unsigned long long)cd_size);

    std::vector<ZipEntry> entries;
    entries.reserve(size_t(n_total));
    std::set<std::string> names;
    uint64_t p = cd_off;
    for (uint64_t i = 0; i < n_total; i++) {
        if (cd_end - p < 46 || load_u32(d + p) != kSigCentral)
            throw_error(STK_E_CORRUPT, "%s: zip central directory entry %llu at offset %llu is malformed", path.c_str(),
                        (unsigned long long)i, (unsigned long long)p);
        ZipEntry e;
        uint16_t flags = load_u16(d + p + 8);
        e.method = load_u16(d + p + 10);
        e.crc32 = load_u32(d + p + 16);
        e.compressed_size = load_u32(d + p + 20);
        e.size = load_u32(d + p + 24);
        uint64_t nlen = load_u16(d + p + 28), xlen = load_u16(d + p + 30), clen = load_u16(d + p + 32);
        uint16_t start_disk = load_u16(d + p + 34);
        e.local_header_offset = load_u32(d + p + 42);
        if (cd_end - p - 46 < nlen + xlen + clen)
            throw_error(STK_E_CORRUPT, "%s: zip central directory entry at offset %llu runs past the directory", path.c_str(),
                        (unsigned long long)p);
        e.name.assign(reinterpret_cast<const char *>(d + p + 46), size_t(nlen));
        check_entry_name(e.name, path, p);
        // Zip64 extended information: the 8-byte fields present are those whose 32-bit field is saturated.
        const uint8_t *x = d + p + 46 + nlen, *xend = x + xlen;
        bool need_u = e.size == 0xFFFFFFFF, need_c = e.compressed_size == 0xFFFFFFFF,
             need_o = e.local_header_offset == 0xFFFFFFFF;
        while (xend - x >= 4) {
            uint16_t id = load_u16(x), len = load_u16(x + 2);
            if (uint64_t(xend - x - 4) < len)
                throw_error(STK_E_CORRUPT, "%s: zip entry '%s': extra field runs past its end", path.c_str(),
                            printable(e.name).c_str());
            if (id == 0x0001) {
                const uint8_t *q = x + 4, *qend = q + len;
                auto next = [&](uint64_t *field) {
                    if (qend - q < 8)
                        throw_error(STK_E_CORRUPT, "%s: zip entry '%s': zip64 extra field too short", path.c_str(),
                                    printable(e.name).c_str());
                    *field = load_u64(q);
                    q += 8;
                };
                if (need_u) next(&e.size), need_u = false;
                if (need_c) next(&e.compressed_size), need_c = false;
                if (need_o) next(&e.local_header_offset), need_o = false;
            }
            x += 4 + len;
        }
        if (need_u || need_c || need_o)
            throw_error(STK_E_CORRUPT, "%s: zip entry '%s' has saturated 32-bit sizes but no zip64 extra field", path.c_str(),
                        printable(e.name).c_str());
        if (flags & 0x41)
            throw_error(STK_E_UNSUPPORTED, "%s: zip entry '%s' is encrypted", path.c_str(), printable(e.name).c_str());
        if (start_disk != 0 && start_disk != 0xFFFF)
            throw_error(STK_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", path.c_str());
        if (e.method != 0 && e.method != 8)
            throw_error(STK_E_UNSUPPORTED, "%s: zip entry '%s' uses compression method %u (only STORED and DEFLATED are read)",
                        path.c_str(), printable(e.name).c_str(), e.method);
        if (e.method == 0 && e.compressed_size != e.size)
            throw_error(STK_E_CORRUPT, "%s: STORED zip entry '%s' has compressed size %llu != size %llu", path.c_str(),
                        printable(e.name).c_str(), (unsigned long long)e.compressed_size, (unsigned long long)e.size);
        if (!names.insert(e.name).second)
            throw_error(STK_E_CORRUPT, "%s: zip entry name '%s' appears twice", path.c_str(), printable(e.name).c_str());

        // Local header: must agree with the central directory.
        uint64_t lh = e.local_header_offset;
        if (lh > cd_off || cd_off - lh < 30 || load_u32(d + lh) != kSigLocal)
            throw_error(STK_E_CORRUPT, "%s: zip entry '%s': no local header at offset %llu", path.c_str(),
                        printable(e.name).c_str(), (unsigned long long)lh);
        uint16_t lflags = load_u16(d + lh + 6), lmethod = load_u16(d + lh + 8);
        uint64_t lnlen = load_u16(d + lh + 26), lxlen = load_u16(d + lh + 28);
        if (cd_off - lh - 30 < lnlen + lxlen)
            throw_error(STK_E_CORRUPT, "%s: zip entry '%s': local header at %llu runs into the central directory", path.c_str(),
                        printable(e.name).c_str(), (unsigned long long)lh);
        if (lnlen != nlen || std::memcmp(d + lh + 30, e.name.data(), size_t(nlen)) != 0 || lmethod != e.method)
            throw_error(STK_E_CORRUPT,
                        "%s: zip entry '%s': local header at offset %llu disagrees with the central directory "
                        "(name or method)",
                        path.c_str(), printable(e.name).c_str(), (unsigned long long)lh);
        if (!(lflags & 0x08)) {
            uint32_t lcrc = load_u32(d + lh + 14), lc = load_u32(d + lh + 18), lu = load_u32(d + lh + 22);
            bool sizes_ok = (lc == 0xFFFFFFFF || lc == e.compressed_size) && (lu == 0xFFFFFFFF || lu == e.size);
            if (lcrc != e.crc32 || !sizes_ok)
                throw_error(STK_E_CORRUPT,
                            "%s: zip entry '%s': local header at offset %llu disagrees with the central "
                            "directory (crc or sizes)",
                            path.c_str(), printable(e.name).c_str(), (unsigned long long)lh);
        }
        e.data_offset = lh + 30 + lnlen + lxlen;
        if (e.compressed_size > cd_off - e.data_offset)
            throw_error(STK_E_TRUNCATED,
                        "%s: zip entry '%s': %llu bytes of data at offset %llu run past the central directory "
                        "at %llu",
                        path.c_str(), printable(e.name).c_str(), (unsigned long long)e.compressed_size,
                        (unsigned long long)e.data_offset, (unsigned long long)cd_off);
        if (e.method == 8 && e.size / kMaxDeflateRatio > e.compressed_size + 1)
            throw_error(STK_E_CORRUPT,
                        "%s: DEFLATED zip entry '%s' claims %llu bytes from %llu compressed (more than "
                        "DEFLATE can expand)",
                        path.c_str(), printable(e.name).c_str(), (unsigned long long)e.size,
                        (unsigned long long)e.compressed_size);
        entries.push_back(std::move(e));
        p += 46 + nlen + xlen + clen;
    }
    // Entries must not overlap (overlapping entries are how zip bombs multiply their output).
    std::vector<const ZipEntry *> order;
    for (const ZipEntry &e : entries) order.push_back(&e);
    std::sort(order.begin(), order.end(),
              [](const ZipEntry *a, const ZipEntry *b) { return a->local_header_offset < b->local_header_offset; });
    for (size_t i = 1; i < order.size(); i++)
        if (order[i - 1]->data_offset + order[i - 1]->compressed_size > order[i]->local_header_offset)
            throw_error(STK_E_CORRUPT, "%s: zip entries '%s' and '%s' overlap (at offset %llu)", path.c_str(),
                        printable(order[i - 1]->name).c_str(), printable(order[i]->name).c_str(),
                        (unsigned long long)order[i]->local_header_offset);
    return entries;
}

const uint8_t *zip_entry_bytes(const uint8_t *data, const ZipEntry &e, std::vector<uint8_t> &scratch, const std::string &path) {
    if (e.method == 0) return data + e.data_offset;
    scratch.resize(size_t(e.size));
    libdeflate_decompressor *dec = libdeflate_alloc_decompressor();
    if (!dec) throw_error(STK_E_NOMEM, "libdeflate_alloc_decompressor failed");
    size_t in_used = 0, out_got = 0;
    libdeflate_result r = libdeflate_deflate_decompress_ex(dec, data + e.data_offset, size_t(e.compressed_size), scratch.data(),
                                                           scratch.size(), &in_used, &out_got);
    libdeflate_free_decompressor(dec);
    if (r != LIBDEFLATE_SUCCESS || out_got != e.size)
        throw_error(STK_E_CORRUPT, "%s: DEFLATED zip entry '%s' (data at offset %llu) does not inflate to its %llu bytes",
                    path.c_str(), printable(e.name).c_str(), (unsigned long long)e.data_offset, (unsigned long long)e.size);
    uint32_t crc = libdeflate_crc32(0, scratch.data(), scratch.size());
    if (crc != e.crc32)
        throw_error(STK_E_CHECKSUM, "%s: zip entry '%s' (data at offset %llu): crc32 %08x, the directory says %08x", path.c_str(),
                    printable(e.name).c_str(), (unsigned long long)e.data_offset, crc, e.crc32);
    return scratch.data();
}

namespace {

// A pickled view over a storage whose bytes start at file offset `storage_offset` (for messages;
// `in_place`: the bytes are the file's own, so file_offset can point at the first element).
TensorRef make_view_ref(const PickledTensor &pt, const PickledStorage &s, uint64_t storage_offset, bool in_place,
                        const std::string &path) {
    TensorRef t;
    t.name = pt.name;
    t.dtype = s.dtype;
    t.shape = pt.shape;
    t.file = path;
    t.storage_index = pt.storage;
    const size_t es = src_dtype_size(s.dtype);
    const char *n = t.name.c_str();
    if (pt.shape.size() > 64)
        throw_error(STK_E_UNSUPPORTED, "%s: tensor '%s' has rank %zu (> 64)", path.c_str(), n, pt.shape.size());
    uint64_t ne = 1;
    for (uint64_t d : pt.shape)
        if (!mul_ok(ne, d, &ne))
            throw_error(STK_E_DIMS_OVERFLOW, "%s: tensor '%s': the product of its shape overflows 64 bits", path.c_str(), n);
    if (!mul_ok(ne, es, &t.n_bytes))
        throw_error(STK_E_DIMS_OVERFLOW, "%s: tensor '%s': %llu elements x %zu bytes overflows", path.c_str(), n,
                    (unsigned long long)ne, es);
    t.n_elements = ne;
    // The view must lie inside its storage: offset + sum((size_i - 1) * stride_i) < numel.
    uint64_t last = pt.offset;
    bool contiguous = true;
    uint64_t expect_stride = 1;
    for (size_t i = pt.shape.size(); i-- > 0;) {
        if (pt.shape[i] == 0) continue;
        uint64_t step;
        if (!mul_ok(pt.shape[i] - 1, pt.stride[i], &step) || !add_ok(last, step, &last))
            throw_error(STK_E_DIMS_OVERFLOW, "%s: tensor '%s': stride x size overflows", path.c_str(), n);
        if (pt.shape[i] != 1 && pt.stride[i] != expect_stride) contiguous = false;
        if (!mul_ok(expect_stride, pt.shape[i], &expect_stride)) contiguous = false;
    }
    if (ne > 0 && last >= s.numel)
        throw_error(STK_E_SIZE_MISMATCH,
                    "%s: tensor '%s': view (offset %llu, last element %llu) does not fit in storage '%s' of %llu elements "
                    "(entry at offset %llu)",
                    path.c_str(), n, (unsigned long long)pt.offset, (unsigned long long)last, printable(s.key).c_str(),
                    (unsigned long long)s.numel, (unsigned long long)storage_offset);
    // Views must not overlap themselves (no stride-0 broadcasts, no overlapping windows): then
    // every element is a distinct storage element, so a tensor is never larger than its
    // storage and a hostile file cannot make a few bytes stand for 2^60 elements.
    if (ne > 1) {
        std::vector<std::pair<uint64_t, uint64_t>> dims;  // (stride, size) of dims with size > 1
        for (size_t i = 0; i < pt.shape.size(); i++)
            if (pt.shape[i] > 1) dims.emplace_back(pt.stride[i], pt.shape[i]);
        std::sort(dims.begin(), dims.end());
        uint64_t reach = 1;  // elements covered by the dims so far
        for (auto &[stride, sz] : dims) {
            if (stride < reach)
                throw_error(STK_E_UNSUPPORTED,
                            "%s: tensor '%s' is a self-overlapping view (stride %llu on a dimension of "
                            "size %llu, e.g. an expand()); save a contiguous copy (.contiguous() or .clone())",
                            path.c_str(), n, (unsigned long long)stride, (unsigned long long)sz);
            reach = stride * sz;  // stride <= last < numel: no overflow
        }
    }
    t.span_bytes = ne == 0 ? 0 : (last - pt.offset + 1) * es;
    t.storage_byte_offset = ne == 0 ? 0 : pt.offset * es;
    t.file_offset = storage_offset + (in_place ? t.storage_byte_offset : 0);
    if (!contiguous) t.strides = pt.stride;
    return t;
}

class TorchZipSource final : public Source {
public:
    explicit TorchZipSource(MappedFile file) : file_(std::move(file)) { init(file_.data(), file_.size(), file_.path()); }
    TorchZipSource(const uint8_t *data, uint64_t size, const std::string &path) { init(data, size, path); }

    const char *kind() const override { return "pytorch-zip"; }
    std::vector<TensorRef> &tensors() override { return tensors_; }
    const MappedFile &file() const override { return file_; }

    const uint8_t *bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const override {
        if (t.storage_index >= storages_.size())
            throw_error(STK_E_INVALID_ARGUMENT, "tensor '%s': storage %u does not exist", t.name.c_str(), t.storage_index);
        const uint8_t *base = zip_entry_bytes(data_, *storages_[t.storage_index], scratch, path_);
        return base + t.storage_byte_offset;
    }

    void release(const TensorRef &t) const override {
        if (t.storage_index < storages_.size()) {
            const ZipEntry *e = storages_[t.storage_index];
            file_.dont_need(e->data_offset, e->compressed_size);
        }
    }

private:
    void init(const uint8_t *data, uint64_t size, const std::string &path) {
        data_ = data;
        path_ = path;
        entries_ = parse_zip_directory(data, size, path);
        // The pickle is "<prefix>/data.pkl"; every storage "<prefix>/data/<key>".
        const ZipEntry *pkl = nullptr;
        for (const ZipEntry &e : entries_) {
            size_t slash = e.name.find('/');
            if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
                if (pkl)
                    throw_error(STK_E_CORRUPT, "%s: two pickles ('%s' and '%s') in one archive", path.c_str(),
                                printable(pkl->name).c_str(), printable(e.name).c_str());
                pkl = &e;
            }
        }
        if (!pkl)
            throw_error(STK_E_CORRUPT, "%s: a zip archive without '<name>/data.pkl': not a PyTorch checkpoint", path.c_str());
        std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // keeps the '/'
        std::map<std::string, const ZipEntry *> by_name;
        for (const ZipEntry &e : entries_) by_name[e.name] = &e;

        // torch >= 1.10 records the writer's byte order; storages are raw native elements.
        if (auto bo = by_name.find(prefix + "byteorder"); bo != by_name.end()) {
            std::vector<uint8_t> bs;
            const ZipEntry &e = *bo->second;
            if (e.size > 16)
                throw_error(STK_E_CORRUPT, "%s: '%s' is %llu bytes", path.c_str(), e.name.c_str(), (unsigned long long)e.size);
            const uint8_t *b = zip_entry_bytes(data, e, bs, path);
            std::string order(reinterpret_cast<const char *>(b), size_t(e.size));
            if (order != "little")
                throw_error(STK_E_UNSUPPORTED, "%s: storages written in '%s' byte order (only little-endian is read)",
                            path.c_str(), printable(order).c_str());
        }
        std::vector<uint8_t> pkl_scratch;
        const uint8_t *pb = zip_entry_bytes(data, *pkl, pkl_scratch, path);
        if (pkl->method == 0 && libdeflate_crc32(0, pb, size_t(pkl->size)) != pkl->crc32)
            throw_error(STK_E_CHECKSUM, "%s: '%s' fails its crc32", path.c_str(), printable(pkl->name).c_str());
        PickleResult pr = unpickle_state_dict(pb, size_t(pkl->size), path + ":" + pkl->name);

        // Storages: each must be an entry whose size is exactly numel x element size.
        for (const PickledStorage &s : pr.storages) {
            std::string name = prefix + "data/" + s.key;
            auto it = by_name.find(name);
            if (it == by_name.end())
                throw_error(STK_E_CORRUPT, "%s: the pickle names storage '%s', but the archive has no entry '%s'", path.c_str(),
                            printable(s.key).c_str(), printable(name).c_str());
            uint64_t want;
            if (!mul_ok(s.numel, src_dtype_size(s.dtype), &want) || want != it->second->size)
                throw_error(STK_E_SIZE_MISMATCH,
                            "%s: storage '%s' (%s x %llu elements) needs %llu bytes but its entry '%s' "
                            "(offset %llu) holds %llu",
                            path.c_str(), printable(s.key).c_str(), src_dtype_name(s.dtype), (unsigned long long)s.numel,
                            (unsigned long long)want, printable(name).c_str(), (unsigned long long)it->second->data_offset,
                            (unsigned long long)it->second->size);
            storages_.push_back(it->second);
        }
        for (PickledTensor &pt : pr.tensors) {
            const ZipEntry *e = storages_[pt.storage];
            tensors_.push_back(make_view_ref(pt, pr.storages[pt.storage], e->data_offset, e->method == 0, path));
        }
    }

    MappedFile file_;  // empty when reading caller-owned memory
    const uint8_t *data_ = nullptr;
    std::string path_;
    std::vector<ZipEntry> entries_;
    std::vector<const ZipEntry *> storages_;  // by PickleResult storage index
    std::vector<TensorRef> tensors_;
};

class TorchLegacySource final : public Source {
public:
    explicit TorchLegacySource(MappedFile file) : file_(std::move(file)) {
        const std::string &path = file_.path();
        const uint8_t *d = file_.data();
        const uint64_t size = file_.size();
        LegacyLayout lay = unpickle_legacy(d, size_t(size), path);
        std::map<std::string, uint32_t> by_key;
        for (uint32_t i = 0; i < lay.result.storages.size(); i++) by_key[lay.result.storages[i].key] = i;
        if (lay.storage_order.size() != by_key.size())
            throw_error(STK_E_CORRUPT, "%s: the storage key list names %zu storages, the pickle %zu", path.c_str(),
                        lay.storage_order.size(), by_key.size());
        offsets_.assign(lay.result.storages.size(), UINT64_MAX);
        uint64_t pos = lay.data_start;
        for (const std::string &key : lay.storage_order) {
            auto it = by_key.find(key);
            if (it == by_key.end() || offsets_[it->second] != UINT64_MAX)
                throw_error(STK_E_CORRUPT, "%s: storage key list entry '%s' is unknown or repeated", path.c_str(),
                            printable(key).c_str());
            const PickledStorage &s = lay.result.storages[it->second];
            if (size - pos < 8)
                throw_error(STK_E_TRUNCATED, "%s: storage '%s': record header at offset %llu past the end of the file",
                            path.c_str(), printable(key).c_str(), (unsigned long long)pos);
            uint64_t numel = load_u64(d + pos), nbytes;
            if (numel != s.numel || !mul_ok(numel, src_dtype_size(s.dtype), &nbytes))
                throw_error(STK_E_SIZE_MISMATCH, "%s: storage '%s' at offset %llu holds %llu elements, the pickle says %llu",
                            path.c_str(), printable(key).c_str(), (unsigned long long)pos, (unsigned long long)numel,
                            (unsigned long long)s.numel);
            pos += 8;
            if (nbytes > size - pos)
                throw_error(STK_E_TRUNCATED, "%s: storage '%s': %llu bytes at offset %llu run past the end of the file",
                            path.c_str(), printable(key).c_str(), (unsigned long long)nbytes, (unsigned long long)pos);
            offsets_[it->second] = pos;
            pos += nbytes;
        }
        if (pos != size)
            throw_error(STK_E_SIZE_MISMATCH, "%s: %llu trailing bytes after the last storage (offset %llu)", path.c_str(),
                        (unsigned long long)(size - pos), (unsigned long long)pos);
        for (const PickledTensor &pt : lay.result.tensors)
            tensors_.push_back(make_view_ref(pt, lay.result.storages[pt.storage], offsets_[pt.storage], true, path));
    }

    const char *kind() const override { return "pytorch-legacy"; }
    std::vector<TensorRef> &tensors() override { return tensors_; }
    const MappedFile &file() const override { return file_; }
    const uint8_t *bytes(const TensorRef &t, std::vector<uint8_t> &) const override { return file_.data() + t.file_offset; }
    void release(const TensorRef &t) const override { file_.dont_need(t.file_offset, t.span_bytes); }

private:
    MappedFile file_;
    std::vector<uint64_t> offsets_;  // file offset of each storage's first byte
    std::vector<TensorRef> tensors_;
};

}  // namespace

std::unique_ptr<Source> open_torch_legacy(MappedFile file) { return std::make_unique<TorchLegacySource>(std::move(file)); }

std::unique_ptr<Source> open_torch_zip(MappedFile file) { return std::make_unique<TorchZipSource>(std::move(file)); }

std::unique_ptr<Source> open_torch_zip_memory(const uint8_t *data, uint64_t size, const std::string &path) {
    return std::make_unique<TorchZipSource>(data, size, path);
}

}  // namespace stk
