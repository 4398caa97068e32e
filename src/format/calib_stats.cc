// The calibration statistics reader: see calib_stats.h and docs/format.md ("Calibration
// statistics").  Every size is computed with checked arithmetic from the header's dimensions
// (bounded first), the file must be exactly as long as they say (checked before the payload is
// read: a huge file whose header and table do not describe it costs nothing), each layer's
// sections must match the crc32c its table entry records (so a changed byte is located to one
// layer's range), and no value is read before the header crc32c, every layer's crc32c and the
// payload's SHA-256 have matched.
#include "format/calib_stats.h"

#include <cinttypes>
#include <cmath>
#include <cstring>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/checksum.h"
#include "core/error.h"

namespace stk {

namespace {

// Header byte offsets (the table in calib_stats.h).
namespace off {
constexpr uint64_t magic = 0, version = 8, flags = 12, model_low64 = 16, model_crc = 24, n_layers = 28, d_model = 32,
                   d_v = 36, n_pairs = 40, reserved1 = 44, tokens = 48, file_bytes = 56, sha256 = 64, reserved2 = 96,
                   header_crc = 124;
}  // namespace off

constexpr uint32_t kMaxLayers = 65536, kMaxDModel = 65536, kMaxDV = 1u << 20, kMaxPairs = 65536;

const char *section_name(uint32_t bit) {
    switch (bit) {
        case kCalibPrfPairs: return "prf_pairs";
        case kCalibAttnOut: return "attn_out";
        case kCalibRopePairs: return "rope_pairs";
        case kCalibFfn: return "ffn";
        default: return "unknown";
    }
}

}  // namespace

CalibStats::CalibStats(const std::string &path, const std::function<void(const CalibStats &)> &before_digest)
    : file_(path), name_(path) {
    parse(file_.data(), file_.size(), before_digest);
}

CalibStats::CalibStats(const uint8_t *data, uint64_t size, const std::string &name) : name_(name) { parse(data, size, {}); }

std::string CalibStats::digest_hex() const {
    static const char kHex[] = "0123456789abcdef";
    std::string s(64, '0');
    for (int i = 0; i < 32; i++) {
        s[2 * i] = kHex[digest_[i] >> 4];
        s[2 * i + 1] = kHex[digest_[i] & 15];
    }
    return s;
}

void CalibStats::parse(const uint8_t *p, uint64_t size, const std::function<void(const CalibStats &)> &before_digest) {
    const std::string &f = name_;
    if (size < kCalibHeaderBytes)
        throw_at(STK_E_TRUNCATED, f, size, "%" PRIu64 " bytes: shorter than the 128-byte calibration statistics header",
                 size);
    if (reinterpret_cast<uintptr_t>(p) % 8 != 0)
        throw_at(STK_E_MISALIGNED, f, 0, "the statistics' bytes are not 8-aligned in memory (the f64 views need it)");
    if (std::memcmp(p + off::magic, kCalibMagic, 8) != 0)
        throw_at(STK_E_BAD_MAGIC, f, off::magic, "not a calibration statistics file: magic is not \"STKCAL01\"");
    const uint32_t version = load_u32(p + off::version);
    if (version == 1)
        throw_at(STK_E_UNSUPPORTED, f, off::version,
                 "calibration statistics version 1: made by an older `stk calibrate` (its layers carry no crc32c, and "
                 "one made before the ffn moments left out position 0 of each context cannot be told apart); rerun "
                 "`stk calibrate` to write version %u",
                 kCalibVersion);
    if (version != kCalibVersion)
        throw_at(STK_E_UNSUPPORTED, f, off::version, "calibration statistics version %u (this reader knows version %u)",
                 version, kCalibVersion);
    const uint32_t stored_hcrc = load_u32(p + off::header_crc);
    const uint32_t hcrc = crc32c(p, off::header_crc);
    if (stored_hcrc != hcrc)
        throw_at(STK_E_CHECKSUM, f, off::header_crc, "header crc32c 0x%08x, computed 0x%08x (header corrupted)", stored_hcrc,
                 hcrc);
    const uint32_t flags = load_u32(p + off::flags);
    if (flags != 0) throw_at(STK_E_BAD_HEADER, f, off::flags, "flags 0x%08x: reserved, must be 0", flags);
    if (load_u32(p + off::reserved1) != 0)
        throw_at(STK_E_BAD_HEADER, f, off::reserved1, "reserved u32 is 0x%08x, must be 0", load_u32(p + off::reserved1));
    for (uint64_t i = off::reserved2; i < off::header_crc; i++)
        if (p[i] != 0) throw_at(STK_E_BAD_HEADER, f, i, "reserved header byte is 0x%02x, must be 0", p[i]);

    model_sha256_low64_ = load_u64(p + off::model_low64);
    model_crc32c_ = load_u32(p + off::model_crc);
    n_layers_ = load_u32(p + off::n_layers);
    d_model_ = load_u32(p + off::d_model);
    d_v_ = load_u32(p + off::d_v);
    n_pairs_ = load_u32(p + off::n_pairs);
    tokens_ = load_u64(p + off::tokens);
    auto dim = [&](uint64_t at, const char *what, uint32_t v, uint32_t lo, uint32_t hi) {
        if (v < lo) throw_at(STK_E_CORRUPT, f, at, "%s is %u, below %u", what, v, lo);
        if (v > hi) throw_at(STK_E_DIMS_OVERFLOW, f, at, "%s is %u, above the limit %u", what, v, hi);
    };
    dim(off::n_layers, "n_layers", n_layers_, 1, kMaxLayers);
    dim(off::d_model, "d_model", d_model_, 1, kMaxDModel);
    dim(off::d_v, "d_v", d_v_, 1, kMaxDV);
    dim(off::n_pairs, "n_pairs", n_pairs_, 0, kMaxPairs);
    if (tokens_ == 0) throw_at(STK_E_CORRUPT, f, off::tokens, "tokens is 0: the moments average over no token");
    const uint64_t file_bytes = load_u64(p + off::file_bytes);
    if (file_bytes > size)
        throw_at(STK_E_TRUNCATED, f, size, "the header's file_bytes is %" PRIu64 " but the file ends after %" PRIu64 " bytes",
                 file_bytes, size);
    if (file_bytes != size)
        throw_at(STK_E_SIZE_MISMATCH, f, off::file_bytes,
                 "the header's file_bytes is %" PRIu64 " but the file has %" PRIu64 " bytes", file_bytes, size);

    // Section sizes in f64 values (checked: the bounds above keep them far from 2^64, but every
    // size from input is computed the checked way).
    const uint64_t dm = d_model_, dv = d_v_, d2 = checked_mul(2, dm, "calibration statistics: 2 d_model");
    auto packed = [](uint64_t n, const char *what) {
        return checked_mul(n, checked_add(n, 1, what), what) / 2;
    };
    const uint64_t n_prf = checked_add(checked_add(packed(dm, "prf_pairs M"), dm, "prf_pairs"), 2, "prf_pairs");
    const uint64_t n_attn = packed(dv, "attn_out C");
    const uint64_t n_rope = n_pairs_;
    const uint64_t n_ffn =
        checked_add(checked_add(packed(d2, "ffn G"), checked_mul(d2, dm, "ffn X"), "ffn"), dm, "ffn");
    auto values_of = [&](uint32_t bit) -> uint64_t {
        switch (bit) {
            case kCalibPrfPairs: return n_prf;
            case kCalibAttnOut: return n_attn;
            case kCalibRopePairs: return n_rope;
            default: return n_ffn;
        }
    };

    // The layer table.
    const uint64_t table_end =
        checked_add(kCalibHeaderBytes, checked_mul(kCalibLayerEntryBytes, n_layers_, "layer table"), "layer table");
    if (table_end > size)
        throw_at(STK_E_TRUNCATED, f, size, "the layer table of %u layers ends at byte %" PRIu64 ", past the %" PRIu64
                 "-byte file", n_layers_, table_end, size);
    uint64_t expect = table_end;
    layers_.assign(n_layers_, CalibLayer{});
    for (uint32_t l = 0; l < n_layers_; l++) {
        const uint64_t e = kCalibHeaderBytes + kCalibLayerEntryBytes * l;
        CalibLayer &L = layers_[l];
        L.sections = load_u32(p + e);
        L.crc32c = load_u32(p + e + 4);
        L.pairs = load_u64(p + e + 8);
        if (L.sections & ~uint32_t(kCalibAllSections))
            throw_at(STK_E_BAD_HEADER, f, e, "layer %u: unknown section bits 0x%08x (known: 0x%x)", l,
                     L.sections & ~uint32_t(kCalibAllSections), unsigned(kCalibAllSections));
        if ((L.sections & kCalibPrfPairs) && L.pairs == 0)
            throw_at(STK_E_CORRUPT, f, e + 8, "layer %u: section prf_pairs present with 0 pairs", l);
        if (!(L.sections & kCalibPrfPairs) && L.pairs != 0)
            throw_at(STK_E_CORRUPT, f, e + 8, "layer %u: pairs is %" PRIu64 " without the prf_pairs section", l, L.pairs);
        if ((L.sections & kCalibRopePairs) && n_pairs_ == 0)
            throw_at(STK_E_CORRUPT, f, e, "layer %u: section rope_pairs present but n_pairs is 0 (no RoPE)", l);
        for (uint32_t bit = 1; bit <= kCalibFfn; bit <<= 1)
            if (L.sections & bit)
                expect = checked_add(expect, checked_mul(values_of(bit), 8, "calibration section bytes"),
                                     "calibration statistics size");
    }
    if (expect != size)
        throw_at(expect > size ? STK_E_TRUNCATED : STK_E_SIZE_MISMATCH, f, expect > size ? size : expect,
                 "the header and layer table describe %" PRIu64 " bytes, the file has %" PRIu64, expect, size);
    // The caller's checks of the dimensions (the model's shape), still before the digest: a file
    // that cannot be used is refused without reading its payload (a 64 GiB one in microseconds).
    if (before_digest) before_digest(*this);

    // Layer by layer, the crc32c of its sections against the one its table entry records, and
    // the SHA-256 of bytes 128 .. end over the same bytes in the same pass; before any value is
    // read.  The header passed its crc32c, the sizes add up: a layer whose crc32c differs had a
    // byte changed in its own range (or its entry's crc32c field did), and is named with it.
    Sha256 sha;
    sha.update(p + kCalibHeaderBytes, size_t(table_end - kCalibHeaderBytes));
    uint64_t start = table_end;
    for (uint32_t l = 0; l < n_layers_; l++) {
        const CalibLayer &L = layers_[l];
        const uint64_t e = kCalibHeaderBytes + kCalibLayerEntryBytes * l;
        uint64_t end = start;
        std::string names;
        for (uint32_t bit = 1; bit <= kCalibFfn; bit <<= 1)
            if (L.sections & bit) {
                end += 8 * values_of(bit);  // inside the file: the sizes were checked above
                names += names.empty() ? "" : ", ";
                names += section_name(bit);
            }
        const uint32_t crc = crc32c(p + start, size_t(end - start));
        if (crc != L.crc32c) {
            if (start == end)
                throw_at(STK_E_CHECKSUM, f, e + 4,
                         "layer %u has no sections (no bytes), but its layer table entry at offset %" PRIu64
                         " records crc32c 0x%08x at offset %" PRIu64 " (the crc32c of no bytes is 0x00000000): "
                         "the entry was changed after it was written",
                         l, e, L.crc32c, e + 4);
            throw_at(STK_E_CHECKSUM, f, start,
                     "layer %u: its sections (%s), bytes [%" PRIu64 ", %" PRIu64 "), have crc32c 0x%08x, but its "
                     "layer table entry at offset %" PRIu64 " records 0x%08x (at offset %" PRIu64 "): a byte in "
                     "[%" PRIu64 ", %" PRIu64 ") was changed after the file was written (or that crc32c field was)",
                     l, names.c_str(), start, end, crc, e, L.crc32c, e + 4, start, end);
        }
        sha.update(p + start, size_t(end - start));
        start = end;
    }
    // The whole-payload guard.  Every layer's sections matched their crc32c, so a mismatch here
    // is a change the crc32cs do not cover: in the layer table's sections or pairs fields, or a
    // digest at 64 rewritten together with the header's crc32c.
    const Sha256Digest d = sha.finish();
    if (std::memcmp(d.bytes, p + off::sha256, 32) != 0)
        throw_at(STK_E_CHECKSUM, f, kCalibHeaderBytes,
                 "bytes 128..%" PRIu64 " do not match the SHA-256 the header records at offset 64 (the header passed "
                 "its crc32c), yet every layer's sections match the crc32c in their table entry: the change is in the "
                 "layer table, bytes [128, %" PRIu64 ") (a sections or pairs field: one 16-byte entry per layer), or "
                 "the digest at offset 64 was rewritten with the header's crc32c",
                 size, table_end);
    std::memcpy(digest_, d.bytes, 32);

    // The views, every value finite.
    uint64_t at = table_end;
    for (uint32_t l = 0; l < n_layers_; l++) {
        CalibLayer &L = layers_[l];
        for (uint32_t bit = 1; bit <= kCalibFfn; bit <<= 1) {
            if (!(L.sections & bit)) continue;
            const uint64_t n = values_of(bit);
            const double *v = reinterpret_cast<const double *>(p + at);
            for (uint64_t i = 0; i < n; i++) {
                double x;
                std::memcpy(&x, p + at + 8 * i, 8);
                if (!std::isfinite(x))
                    throw_at(STK_E_CORRUPT, f, at + 8 * i, "layer %u: section %s: value %" PRIu64 " is not finite (%g)", l,
                             section_name(bit), i, x);
            }
            switch (bit) {
                case kCalibPrfPairs:
                    L.prf_m = v;
                    L.prf_b = v + calib_packed_count(dm);
                    L.prf_l = L.prf_b + dm;
                    break;
                case kCalibAttnOut: L.attn_out = v; break;
                case kCalibRopePairs: L.rope_pairs = v; break;
                default:
                    L.ffn_g = v;
                    L.ffn_x = v + calib_packed_count(d2);
                    L.ffn_yy = L.ffn_x + d2 * dm;
                    break;
            }
            at += 8 * n;
        }
    }
}

}  // namespace stk
