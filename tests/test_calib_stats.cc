// Calibration statistics (format/calib_stats.*): a file stk calibrate wrote (tests/data/calib,
// README.md there has the command) read back value for value, a file of every section built here
// from docs/format.md's layout, and hostile variants of it, each refused with its own status and a
// message naming the file, the layer / section and the offset.
// (before test_util.h: cmocka.h defines a fail() macro that <chrono>'s iostream parts would meet)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/bytes.h"
#include "core/checksum.h"
#include "core/error.h"
#include "format/calib_stats.h"

using namespace stk;

namespace {

std::string g_dir;

// A valid file: header, layer table, sections with value v[i] = base + i / 8 per section, the
// checksums computed over the result.
struct Spec {
    uint32_t n_layers = 2, d_model = 3, d_v = 4, n_pairs = 2;
    std::vector<uint32_t> sections = {0xF, kCalibFfn | kCalibRopePairs};
    uint64_t tokens = 7;
};

uint64_t section_values(const Spec &s, uint32_t bit) {
    const uint64_t d = s.d_model, dv = s.d_v;
    switch (bit) {
        case kCalibPrfPairs: return d * (d + 1) / 2 + d + 2;
        case kCalibAttnOut: return dv * (dv + 1) / 2;
        case kCalibRopePairs: return s.n_pairs;
        default: return 2 * d * (2 * d + 1) / 2 + 2 * d * d + d;
    }
}

double value_at(uint32_t layer, uint32_t bit, uint64_t i) { return 100.0 * layer + 10.0 * bit + double(i) / 8; }

// Each layer's bytes [start, end) as docs/format.md lays them out (the sizes from the header's
// dimensions and the table's section bits), as far as they lie inside b.
struct Span {
    uint64_t start, end;
};
std::vector<Span> layer_spans(const std::vector<uint8_t> &b) {
    const uint64_t L = load_u32(&b[28]), d = load_u32(&b[32]), dv = load_u32(&b[36]), np = load_u32(&b[40]);
    std::vector<Span> out;
    uint64_t at = 128 + 16 * L;
    for (uint64_t l = 0; l < L && 128 + 16 * (l + 1) <= b.size(); l++) {
        const uint32_t secs = load_u32(&b[128 + 16 * l]);
        uint64_t n = 0;
        if (secs & kCalibPrfPairs) n += d * (d + 1) / 2 + d + 2;
        if (secs & kCalibAttnOut) n += dv * (dv + 1) / 2;
        if (secs & kCalibRopePairs) n += np;
        if (secs & kCalibFfn) n += 2 * d * (2 * d + 1) / 2 + 2 * d * d + d;
        if (at > b.size() || 8 * n > b.size() - at) break;
        out.push_back({at, at + 8 * n});
        at += 8 * n;
    }
    return out;
}

// Version 2: each layer's crc32c over its sections' bytes, in its table entry's second u32.
void reseal_layers(std::vector<uint8_t> &b) {
    const std::vector<Span> sp = layer_spans(b);
    for (size_t l = 0; l < sp.size(); l++)
        store_le<uint32_t>(&b[128 + 16 * l + 4], crc32c(b.data() + sp[l].start, sp[l].end - sp[l].start));
}

// The payload's SHA-256 and the header crc32c (the layers' crc32c left as they are).
void reseal_digest(std::vector<uint8_t> &b) {
    Sha256Digest d = sha256(b.data() + 128, b.size() - 128);
    std::memcpy(b.data() + 64, d.bytes, 32);
    store_le<uint32_t>(b.data() + 124, crc32c(b.data(), 124));
}

// Every checksum: the layers', the payload's, the header's.
void reseal(std::vector<uint8_t> &b) {
    reseal_layers(b);
    reseal_digest(b);
}

void reseal_header(std::vector<uint8_t> &b) { store_le<uint32_t>(b.data() + 124, crc32c(b.data(), 124)); }

std::vector<uint8_t> build(const Spec &s) {
    std::vector<uint8_t> b(128 + 16 * s.n_layers, 0);
    std::memcpy(b.data(), "STKCAL01", 8);
    store_le<uint32_t>(&b[8], 2);
    store_le<uint64_t>(&b[16], 0x0123456789abcdefull);
    store_le<uint32_t>(&b[24], 0xfeedbeefu);
    store_le<uint32_t>(&b[28], s.n_layers);
    store_le<uint32_t>(&b[32], s.d_model);
    store_le<uint32_t>(&b[36], s.d_v);
    store_le<uint32_t>(&b[40], s.n_pairs);
    store_le<uint64_t>(&b[48], s.tokens);
    for (uint32_t l = 0; l < s.n_layers; l++) {
        store_le<uint32_t>(&b[128 + 16 * l], s.sections[l]);
        store_le<uint64_t>(&b[128 + 16 * l + 8], (s.sections[l] & kCalibPrfPairs) ? 1000 + l : 0);
        for (uint32_t bit = 1; bit <= kCalibFfn; bit <<= 1) {
            if (!(s.sections[l] & bit)) continue;
            for (uint64_t i = 0; i < section_values(s, bit); i++) {
                uint8_t v[8];
                store_le<double>(v, value_at(l, bit, i));
                b.insert(b.end(), v, v + 8);
            }
        }
    }
    store_le<uint64_t>(&b[56], b.size());
    reseal(b);
    return b;
}

// The bytes in 8-aligned storage (a vector<uint8_t>'s data is malloc'd: 16-aligned).
std::string refuse(stk_status st, const std::vector<uint8_t> &b) {
    return test::expect_error(st, [&] { CalibStats c(b.data(), b.size(), "hostile.stats"); });
}

std::string fixture() { return test::test_data("calib/tiny-gpt2.stats"); }

}  // namespace

// The file python -m stk calibrate wrote on tiny-gpt2: header fields, the digest it printed, and
// every view equal to the bytes at the offsets docs/format.md gives.
static void reads_python_fixture(void **) {
    CalibStats c(fixture());
    std::vector<uint8_t> raw = test::read_bytes(fixture());
    assert_int_equal(raw.size(), 21696);
    assert_int_equal(c.n_layers(), 2);
    assert_int_equal(c.d_model(), 16);
    assert_int_equal(c.d_v(), 16);
    assert_int_equal(c.n_pairs(), 0);
    assert_int_equal(c.tokens(), 96);
    assert_true(c.model_sha256_low64() == load_u64(&raw[16]));
    assert_int_equal(c.model_crc32c(), load_u32(&raw[24]));
    assert_string_equal(c.digest_hex().c_str(), "a22985689fb79dd767f821c812011218f11170eb2095830b83d3d1fa3643362f");
    const uint64_t d = 16, nm = d * (d + 1) / 2, nc = nm, ng = 2 * d * (2 * d + 1) / 2;
    uint64_t at = 128 + 32;
    for (uint32_t l = 0; l < 2; l++) {
        const CalibLayer &L = c.layer(l);
        assert_int_equal(L.sections, kCalibPrfPairs | kCalibAttnOut | kCalibFfn);
        assert_int_equal(L.pairs, 1176);  // 3 contexts x (16*17/2 + 16*16)
        assert_null(L.rope_pairs);
        const uint8_t *base = c.layer(0).prf_m ? reinterpret_cast<const uint8_t *>(c.layer(0).prf_m) - 160 : nullptr;
        assert_non_null(base);
        auto check = [&](const double *v, uint64_t n) {
            assert_int_equal(reinterpret_cast<const uint8_t *>(v) - base, at);
            assert_int_equal(reinterpret_cast<uintptr_t>(v) % 8, 0);
            for (uint64_t i = 0; i < n; i++) assert_true(v[i] == load_le<double>(&raw[at + 8 * i]));
            at += 8 * n;
        };
        check(L.prf_m, nm);
        check(L.prf_b, d);
        check(L.prf_l, 2);
        check(L.attn_out, nc);
        check(L.ffn_g, ng);
        check(L.ffn_x, 2 * d * d);
        check(L.ffn_yy, d);
    }
    assert_int_equal(at, raw.size());
    // version 2: each layer's crc32c, over its sections' bytes as laid out
    assert_int_equal(load_u32(&raw[8]), 2);
    for (uint32_t l = 0; l < 2; l++)
        assert_int_equal(c.layer(l).crc32c, crc32c(&raw[160 + 10768 * l], 10768));
    // values the writer computed (pinned: python -m stk calibrate, tests/data/calib/README.md)
    assert_true(c.layer(0).prf_m[0] == 1.4617191064024555);
    assert_true(c.layer(0).prf_l[1] == 1.8361946072110148e-05);
    assert_true(c.layer(1).attn_out[nc - 1] == 0.00113135200554805);
    assert_true(c.layer(0).ffn_yy[d - 1] == 1.1334567813724884e-05);
    // the diagonal of a second moment is non-negative; E[l^2] >= E[l]^2
    for (uint32_t l = 0; l < 2; l++) {
        for (uint64_t i = 0; i < 2 * d; i++) assert_true(c.layer(l).ffn_g[calib_packed_index(2 * d, i, i)] >= 0);
        assert_true(c.layer(l).prf_l[1] >= c.layer(l).prf_l[0] * c.layer(l).prf_l[0]);
    }
}

// Every section, built here: each view at its place with its values.
static void reads_every_section(void **) {
    Spec s;
    std::vector<uint8_t> b = build(s);
    CalibStats c(b.data(), b.size(), "built.stats");
    assert_string_equal(c.name().c_str(), "built.stats");
    assert_int_equal(c.n_pairs(), 2);
    assert_int_equal(c.tokens(), 7);
    assert_true(c.model_sha256_low64() == 0x0123456789abcdefull);
    assert_int_equal(c.model_crc32c(), 0xfeedbeefu);
    Sha256Digest d = sha256(b.data() + 128, b.size() - 128);
    assert_memory_equal(c.digest(), d.bytes, 32);
    const CalibLayer &a = c.layer(0);
    assert_int_equal(a.sections, 0xF);
    assert_int_equal(a.pairs, 1000);
    assert_true(a.prf_m[0] == value_at(0, kCalibPrfPairs, 0));
    assert_true(a.prf_b[0] == value_at(0, kCalibPrfPairs, 6));
    assert_true(a.prf_l[1] == value_at(0, kCalibPrfPairs, 10));
    assert_true(a.attn_out[9] == value_at(0, kCalibAttnOut, 9));
    assert_true(a.rope_pairs[1] == value_at(0, kCalibRopePairs, 1));
    assert_true(a.ffn_g[20] == value_at(0, kCalibFfn, 20));
    assert_true(a.ffn_x[0] == value_at(0, kCalibFfn, 21));
    assert_true(a.ffn_x[17] == value_at(0, kCalibFfn, 38));
    assert_true(a.ffn_yy[2] == value_at(0, kCalibFfn, 41));
    const CalibLayer &z = c.layer(1);
    assert_int_equal(z.pairs, 0);
    assert_null(z.prf_m);
    assert_null(z.prf_b);
    assert_null(z.prf_l);
    assert_null(z.attn_out);
    assert_true(z.rope_pairs[0] == value_at(1, kCalibRopePairs, 0));
    assert_true(z.ffn_yy[0] == value_at(1, kCalibFfn, 39));
    assert_int_equal(b.size(), 128 + 32 + 8 * (11 + 10 + 2 + 42 + 2 + 42));
    // each layer's crc32c as its table entry records it: its sections' bytes, [160, 680), [680, 1032)
    assert_int_equal(a.crc32c, crc32c(b.data() + 160, 520));
    assert_int_equal(z.crc32c, crc32c(b.data() + 680, 352));
    assert_int_equal(load_u32(&b[132]), a.crc32c);
    assert_int_equal(load_u32(&b[148]), z.crc32c);
    // the packed index: row i holds columns i .. n-1
    assert_int_equal(calib_packed_index(4, 0, 0), 0);
    assert_int_equal(calib_packed_index(4, 0, 3), 3);
    assert_int_equal(calib_packed_index(4, 1, 1), 4);
    assert_int_equal(calib_packed_index(4, 3, 2), 8);
    assert_int_equal(calib_packed_index(4, 3, 3), 9);
    assert_int_equal(calib_packed_count(4), 10);
}

static void refuses_truncation(void **) {
    std::vector<uint8_t> b = build(Spec{});
    for (uint64_t n : {uint64_t(0), uint64_t(7), uint64_t(64), uint64_t(127)}) {
        std::vector<uint8_t> t(b.begin(), b.begin() + n);
        std::string m = refuse(STK_E_TRUNCATED, t);
        assert_contains(m, "hostile.stats: offset " + std::to_string(n) + ": ");
        assert_contains(m, "shorter than the 128-byte calibration statistics header");
    }
    for (uint64_t n : {uint64_t(128), uint64_t(150), uint64_t(200), uint64_t(b.size() - 8), uint64_t(b.size() - 1)}) {
        std::vector<uint8_t> t(b.begin(), b.begin() + n);
        std::string m = refuse(STK_E_TRUNCATED, t);
        assert_contains(m, "offset " + std::to_string(n) + ": the header's file_bytes is " + std::to_string(b.size()));
    }
}

static void refuses_header_fields(void **) {
    const std::vector<uint8_t> good = build(Spec{});
    // each header byte flipped, the header crc left as it was: magic and version are read before
    // the crc, every other byte (the crc's own included) fails the crc
    for (uint64_t i = 0; i < 128; i++) {
        std::vector<uint8_t> b = good;
        b[i] ^= 0x40;
        if (i < 8) {
            assert_contains(refuse(STK_E_BAD_MAGIC, b), "offset 0: not a calibration statistics file: magic is not \"STKCAL01\"");
        } else if (i < 12) {
            assert_contains(refuse(STK_E_UNSUPPORTED, b), "offset 8: calibration statistics version ");
        } else {
            assert_contains(refuse(STK_E_CHECKSUM, b), "offset 124: header crc32c 0x");
        }
    }
    struct Case {
        uint64_t at;
        uint32_t value;
        stk_status status;
        const char *msg;
    };
    const Case cases[] = {
        {12, 1, STK_E_BAD_HEADER, "offset 12: flags 0x00000001: reserved, must be 0"},
        {44, 5, STK_E_BAD_HEADER, "offset 44: reserved u32 is 0x00000005, must be 0"},
        {96, 1, STK_E_BAD_HEADER, "offset 96: reserved header byte is 0x01, must be 0"},
        {120, 0x100, STK_E_BAD_HEADER, "offset 121: reserved header byte is 0x01, must be 0"},
        {28, 0, STK_E_CORRUPT, "offset 28: n_layers is 0, below 1"},
        {28, 65537, STK_E_DIMS_OVERFLOW, "offset 28: n_layers is 65537, above the limit 65536"},
        {32, 0, STK_E_CORRUPT, "offset 32: d_model is 0, below 1"},
        {32, 0xFFFFFFFFu, STK_E_DIMS_OVERFLOW, "offset 32: d_model is 4294967295, above the limit 65536"},
        {36, 0, STK_E_CORRUPT, "offset 36: d_v is 0, below 1"},
        {36, (1u << 20) + 1, STK_E_DIMS_OVERFLOW, "offset 36: d_v is 1048577, above the limit 1048576"},
        {40, 65537, STK_E_DIMS_OVERFLOW, "offset 40: n_pairs is 65537, above the limit 65536"},
        {48, 0, STK_E_CORRUPT, "offset 48: tokens is 0"},
        {4, 0, STK_E_BAD_MAGIC, "offset 0: not a calibration statistics file"},
        {8, 3, STK_E_UNSUPPORTED, "offset 8: calibration statistics version 3 (this reader knows version 2)"},
        {8, 0, STK_E_UNSUPPORTED, "offset 8: calibration statistics version 0 (this reader knows version 2)"},
        {8, 1, STK_E_UNSUPPORTED,
         "offset 8: calibration statistics version 1: made by an older `stk calibrate` (its layers carry no crc32c, "
         "and one made before the ffn moments left out position 0 of each context cannot be told apart); rerun "
         "`stk calibrate` to write version 2"},
    };
    for (const Case &k : cases) {
        std::vector<uint8_t> b = good;
        store_le<uint32_t>(&b[k.at], k.value);
        if (k.at == 48) store_le<uint64_t>(&b[48], 0);
        reseal_header(b);
        std::string m = refuse(k.status, b);
        assert_contains(m, std::string("hostile.stats: ") + k.msg);
    }
    // the model digest fields are data: another value reads back
    std::vector<uint8_t> b = good;
    store_le<uint32_t>(&b[24], 0x11111111u);
    reseal_header(b);
    CalibStats c(b.data(), b.size(), "x");
    assert_int_equal(c.model_crc32c(), 0x11111111u);
}

static void refuses_bad_checksums(void **) {
    const std::vector<uint8_t> good = build(Spec{});
    std::vector<uint8_t> b = good;
    store_le<uint32_t>(&b[124], load_u32(&b[124]) ^ 1);
    assert_contains(refuse(STK_E_CHECKSUM, b), "hostile.stats: offset 124: header crc32c 0x");
    // The SHA-256 field changed, the header resealed: every layer matches its crc32c, so the
    // whole-payload digest is the guard that refuses it, naming what the crc32cs do not cover.
    b = good;
    b[70] ^= 0x80;
    reseal_header(b);
    std::string m = refuse(STK_E_CHECKSUM, b);
    assert_contains(m, "hostile.stats: offset 128: bytes 128..1032 do not match the SHA-256 the header records at offset 64 "
                       "(the header passed its crc32c), yet every layer's sections match the crc32c in their table entry: "
                       "the change is in the layer table, bytes [128, 160) (a sections or pairs field: one 16-byte entry "
                       "per layer), or the digest at offset 64 was rewritten with the header's crc32c");
}

// Issue 39 item 4: a payload byte flipped is named by its layer, that layer's sections and their
// byte range [start, end), and the table entry whose crc32c it fails (version 1 could say only
// "somewhere in bytes 128..end").  Every byte of every layer, each flip on its own.
static void payload_flip_named_by_layer(void **) {
    const std::vector<uint8_t> good = build(Spec{});  // layer 0: every section, [160, 680); layer 1: rope_pairs, ffn, [680, 1032)
    assert_int_equal(good.size(), 1032);
    struct Layer {
        uint64_t start, end;
        const char *sections;
    };
    const Layer layers[] = {{160, 680, "prf_pairs, attn_out, rope_pairs, ffn"}, {680, 1032, "rope_pairs, ffn"}};
    char want[512];
    for (uint32_t k = 0; k < 2; k++) {
        const Layer &L = layers[k];
        const uint32_t stored = load_u32(&good[128 + 16 * k + 4]);
        for (uint64_t at = L.start; at < L.end; at++) {
            std::vector<uint8_t> b = good;
            b[at] ^= uint8_t(1u << (at % 8));
            const uint32_t have = crc32c(b.data() + L.start, L.end - L.start);
            std::snprintf(want, sizeof want,
                          "hostile.stats: offset %llu: layer %u: its sections (%s), bytes [%llu, %llu), have crc32c 0x%08x, "
                          "but its layer table entry at offset %u records 0x%08x (at offset %u): a byte in [%llu, %llu) was "
                          "changed after the file was written (or that crc32c field was)",
                          (unsigned long long)L.start, k, L.sections, (unsigned long long)L.start, (unsigned long long)L.end,
                          have, 128 + 16 * k, stored, 128 + 16 * k + 4, (unsigned long long)L.start,
                          (unsigned long long)L.end);
            const std::string m = refuse(STK_E_CHECKSUM, b);
            if (m.find(want) == std::string::npos) fail_msg("byte %llu flipped: got \"%s\"\nwant \"%s\"", (unsigned long long)at, m.c_str(), want);
        }
    }
    // The first failing layer is the one named: layer 0 and layer 1 both changed -> layer 0.
    std::vector<uint8_t> b = good;
    b[700] ^= 4;
    b[300] ^= 4;
    assert_contains(refuse(STK_E_CHECKSUM, b), "offset 160: layer 0: its sections (prf_pairs, attn_out, rope_pairs, ffn), bytes [160, 680)");
    // The same value changed with layer 1's crc32c resealed (the payload digest not): the layers
    // match, the digest is the guard (it names the table's range: what the crc32cs do not cover).
    b = good;
    b[1000] ^= 4;
    reseal_layers(b);
    assert_contains(refuse(STK_E_CHECKSUM, b), "offset 128: bytes 128..1032 do not match the SHA-256");
}

// A layer table entry changed: its crc32c field (named with the entry's offset), its pairs field
// (the crc32cs do not cover the table: the digest names the table's range), its sections field
// (the sizes no longer add up, or an unknown bit at the entry), an entry without sections whose
// crc32c is not 0 (the crc32c of no bytes).
static void table_entry_flip(void **) {
    const std::vector<uint8_t> good = build(Spec{});
    std::vector<uint8_t> b = good;
    b[150] ^= 0x20;  // layer 1's crc32c field, byte 2
    std::string m = refuse(STK_E_CHECKSUM, b);
    char want[256];
    std::snprintf(want, sizeof want, "offset 680: layer 1: its sections (rope_pairs, ffn), bytes [680, 1032), have crc32c 0x%08x, "
                  "but its layer table entry at offset 144 records 0x%08x (at offset 148)",
                  load_u32(&good[148]), load_u32(&good[148]) ^ 0x200000u);
    assert_contains(m, want);
    b = good;
    b[136] ^= 1;  // layer 0's pairs, 1000 -> 1001
    assert_contains(refuse(STK_E_CHECKSUM, b), "offset 128: bytes 128..1032 do not match the SHA-256 the header records at "
                                               "offset 64 (the header passed its crc32c), yet every layer's sections match the "
                                               "crc32c in their table entry: the change is in the layer table, bytes [128, 160)");
    b = good;
    b[128] ^= 2;  // layer 0's sections 0xF -> 0xD (attn_out gone): the sizes no longer add up
    assert_contains(refuse(STK_E_SIZE_MISMATCH, b), "the header and layer table describe 952 bytes, the file has 1032");
    b = good;
    b[131] ^= 0x10;
    assert_contains(refuse(STK_E_BAD_HEADER, b), "offset 128: layer 0: unknown section bits 0x10000000");
    // a layer without sections: its crc32c must be 0
    Spec s;
    s.sections = {0xF, 0};
    b = build(s);
    assert_int_equal(load_u32(&b[148]), 0);
    CalibStats ok(b.data(), b.size(), "empty-layer.stats");
    assert_int_equal(ok.layer(1).crc32c, 0);
    store_le<uint32_t>(&b[148], 5);
    reseal_digest(b);
    assert_contains(refuse(STK_E_CHECKSUM, b), "hostile.stats: offset 148: layer 1 has no sections (no bytes), but its layer "
                                               "table entry at offset 144 records crc32c 0x00000005 at offset 148 (the crc32c "
                                               "of no bytes is 0x00000000): the entry was changed after it was written");
}

static void refuses_nonfinite(void **) {
    Spec s;
    const uint64_t layer1 = 128 + 32 + 8 * (11 + 10 + 2 + 42);  // layer 1's rope pairs
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
        std::vector<uint8_t> b = build(s);
        store_le<double>(&b[layer1 + 8 * 2 + 8 * 5], bad);  // ffn value 5 of layer 1
        reseal(b);
        std::string m = refuse(STK_E_CORRUPT, b);
        assert_contains(m, "hostile.stats: offset " + std::to_string(layer1 + 56) + ": layer 1: section ffn: value 5 is not finite");
    }
    std::vector<uint8_t> b = build(s);
    store_le<double>(&b[128 + 32 + 8 * 10], std::nan(""));  // E[l^2] of layer 0
    reseal(b);
    assert_contains(refuse(STK_E_CORRUPT, b), "offset 240: layer 0: section prf_pairs: value 10 is not finite");
}

static void refuses_layer_table(void **) {
    const std::vector<uint8_t> good = build(Spec{});
    std::vector<uint8_t> b = good;
    store_le<uint32_t>(&b[144], kCalibFfn | kCalibRopePairs | 0x10);
    reseal(b);
    assert_contains(refuse(STK_E_BAD_HEADER, b), "hostile.stats: offset 144: layer 1: unknown section bits 0x00000010 (known: 0xf)");
    b = good;
    store_le<uint32_t>(&b[128], 0x80000000u | 0xF);
    reseal(b);
    assert_contains(refuse(STK_E_BAD_HEADER, b), "offset 128: layer 0: unknown section bits 0x80000000");
    b = good;
    store_le<uint32_t>(&b[132], 3);  // version 1's reserved u32 is version 2's crc32c: 3 is not layer 0's
    reseal_digest(b);
    assert_contains(refuse(STK_E_CHECKSUM, b), "offset 160: layer 0: its sections (prf_pairs, attn_out, rope_pairs, ffn), "
                                               "bytes [160, 680), have crc32c 0x");
    assert_contains(refuse(STK_E_CHECKSUM, b), "records 0x00000003 (at offset 132)");
    b = good;
    store_le<uint64_t>(&b[136], 0);
    reseal(b);
    assert_contains(refuse(STK_E_CORRUPT, b), "offset 136: layer 0: section prf_pairs present with 0 pairs");
    b = good;
    store_le<uint64_t>(&b[152], 9);
    reseal(b);
    assert_contains(refuse(STK_E_CORRUPT, b), "offset 152: layer 1: pairs is 9 without the prf_pairs section");
    // a section bit dropped or added: the sizes no longer add up
    b = good;
    store_le<uint32_t>(&b[144], kCalibFfn);
    reseal(b);
    assert_contains(refuse(STK_E_SIZE_MISMATCH, b), "layer table describe " + std::to_string(good.size() - 16) + " bytes, the file has " +
                                                        std::to_string(good.size()));
    b = good;
    store_le<uint32_t>(&b[144], kCalibFfn | kCalibRopePairs | kCalibAttnOut);
    reseal(b);
    assert_contains(refuse(STK_E_TRUNCATED, b), "offset " + std::to_string(good.size()) + ": the header and layer table describe " +
                                                     std::to_string(good.size() + 80) + " bytes");
    // rope_pairs without rotary pairs
    Spec s;
    s.n_pairs = 0;
    b = build(s);
    assert_contains(refuse(STK_E_CORRUPT, b), "offset 128: layer 0: section rope_pairs present but n_pairs is 0 (no RoPE)");
}

static void refuses_sizes(void **) {
    const std::vector<uint8_t> good = build(Spec{});
    // file_bytes smaller than the file, and bytes appended beyond what the table describes
    std::vector<uint8_t> b = good;
    store_le<uint64_t>(&b[56], good.size() - 8);
    reseal_header(b);
    assert_contains(refuse(STK_E_SIZE_MISMATCH, b), "offset 56: the header's file_bytes is " + std::to_string(good.size() - 8) +
                                                         " but the file has " + std::to_string(good.size()) + " bytes");
    b = good;
    b.resize(good.size() + 8, 0);
    store_le<uint64_t>(&b[56], b.size());
    reseal(b);
    assert_contains(refuse(STK_E_SIZE_MISMATCH, b), "offset " + std::to_string(good.size()) + ": the header and layer table describe " +
                                                         std::to_string(good.size()) + " bytes, the file has " + std::to_string(b.size()));
    // the largest dimensions: 65536 layers of every section at d_model 65536, d_v 2^20 (~4e17
    // bytes, computed without overflow) against a small file
    b = good;
    store_le<uint32_t>(&b[28], 65536);
    store_le<uint32_t>(&b[32], 65536);
    store_le<uint32_t>(&b[36], 1u << 20);
    store_le<uint32_t>(&b[40], 65536);
    reseal_header(b);
    assert_contains(refuse(STK_E_TRUNCATED, b), "the layer table of 65536 layers ends at byte 1048704");
    Spec big;
    big.n_layers = 1;
    big.d_model = 65536;
    big.d_v = 1u << 20;
    big.n_pairs = 65536;
    big.sections = {0};
    b = build(big);
    store_le<uint32_t>(&b[128], 0xF);
    store_le<uint64_t>(&b[136], 1);
    reseal(b);
    const uint64_t want = 144 + 8 * (uint64_t(65536) * 65537 / 2 + 65536 + 2 + uint64_t(1 << 20) * ((1 << 20) + 1) / 2 + 65536 +
                                     uint64_t(131072) * 131073 / 2 + uint64_t(131072) * 65536 + 65536);
    assert_contains(refuse(STK_E_TRUNCATED, b), "the header and layer table describe " + std::to_string(want) + " bytes, the file has 144");
}

static void refuses_misaligned_and_missing(void **) {
    std::vector<uint8_t> good = build(Spec{});
    std::vector<uint8_t> shifted(good.size() + 1);
    std::memcpy(shifted.data() + 1, good.data(), good.size());
    std::string m = test::expect_error(STK_E_MISALIGNED, [&] { CalibStats c(shifted.data() + 1, good.size(), "odd.stats"); });
    assert_contains(m, "odd.stats: offset 0: the statistics' bytes are not 8-aligned in memory");
    m = test::expect_error(STK_E_NOT_FOUND, [&] { CalibStats c(g_dir + "/absent.stats"); });
    assert_contains(m, "absent.stats");
    // from a path: the same bytes read back, the name is the path
    test::write_bytes(g_dir + "/built.stats", good);
    CalibStats c(g_dir + "/built.stats");
    assert_string_equal(c.name().c_str(), (g_dir + "/built.stats").c_str());
    assert_true(c.layer(1).ffn_yy[2] == value_at(1, kCalibFfn, 41));
    std::vector<uint8_t> t(good.begin(), good.begin() + 100);
    test::write_bytes(g_dir + "/short.stats", t);
    m = test::expect_error(STK_E_TRUNCATED, [&] { CalibStats c2(g_dir + "/short.stats"); });
    assert_contains(m, "short.stats: offset 100: 100 bytes: shorter than the 128-byte");
}

// A file that cannot be statistics is refused without waiting and without reading its payload:
// a FIFO nobody writes (open() would block forever without O_NONBLOCK), and 64 GiB sparse files
// whose header is valid (the whole file used to be hashed first: 597 s).  alarm(): a hang or a
// full hash kills the test (SIGALRM's default action) instead of passing slowly.
static void refuses_fifo_and_huge_files_at_once(void **) {
    const std::string fifo = g_dir + "/fifo.stats";
    assert_int_equal(::mkfifo(fifo.c_str(), 0600), 0);
    ::alarm(30);
    std::string m = test::expect_error(STK_E_IO, [&] { CalibStats c(fifo); });
    ::alarm(0);
    assert_contains(m, fifo + ": not a regular file (a FIFO (named pipe))");

    const uint64_t huge = uint64_t(64) << 30;
    auto sparse = [&](const std::string &path, std::vector<uint8_t> head, uint64_t size) {
        test::write_bytes(path, head);
        return ::truncate(path.c_str(), off_t(size)) == 0;
    };
    // 1. a valid header declaring 64 GiB (file_bytes = the size), a layer table describing 144 bytes
    Spec one;
    one.n_layers = 1;
    one.sections = {0};
    std::vector<uint8_t> b = build(one);
    store_le<uint64_t>(&b[56], huge);
    reseal_header(b);
    if (!sparse(g_dir + "/huge.stats", b, huge)) {
        std::printf("note: no 64 GiB sparse file here (%s): the huge-file cases are not run\n", std::strerror(errno));
        return;
    }
    auto t0 = std::chrono::steady_clock::now();
    ::alarm(60);
    m = test::expect_error(STK_E_SIZE_MISMATCH, [&] { CalibStats c(g_dir + "/huge.stats"); });
    ::alarm(0);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    assert_contains(m, "offset 144: the header and layer table describe 144 bytes, the file has 68719476736");
    assert_true(secs < 5);
    std::printf("64 GiB sparse, table describing 144 bytes: refused in %.4f s\n", secs);
    ::unlink((g_dir + "/huge.stats").c_str());
    // 2. header and table describing the whole 64 GiB exactly (2 layers of ffn at d_model 32768):
    //    the caller's shape check (the model's d_model) runs before the digest and refuses it
    Spec wide;
    wide.n_layers = 2;
    wide.d_model = 32768;
    wide.d_v = 1;
    wide.n_pairs = 0;
    wide.sections = {0, 0};
    b = build(wide);
    store_le<uint32_t>(&b[128], kCalibFfn);
    store_le<uint32_t>(&b[144], kCalibFfn);
    const uint64_t d = 32768, size = 160 + 2 * 8 * (4 * d * d + 2 * d);
    store_le<uint64_t>(&b[56], size);
    reseal_header(b);
    assert_true(sparse(g_dir + "/wide.stats", b, size));
    uint32_t seen_d = 0;
    t0 = std::chrono::steady_clock::now();
    ::alarm(60);
    m = test::expect_error(STK_E_INVALID_ARGUMENT, [&] {
        CalibStats c(g_dir + "/wide.stats", [&](const CalibStats &st) {
            seen_d = st.d_model();
            throw_error(STK_E_INVALID_ARGUMENT, "d_model is %u, this model's is 16", st.d_model());
        });
    });
    ::alarm(0);
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    assert_int_equal(seen_d, 32768);
    assert_contains(m, "d_model is 32768, this model's is 16");
    assert_true(secs < 5);
    std::printf("64 GiB sparse (%llu bytes) described by its table, another model's shape: refused in %.4f s\n",
                (unsigned long long)size, secs);
    ::unlink((g_dir + "/wide.stats").c_str());
}

int main() {
    g_dir = test::make_temp_dir("calib_stats");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_python_fixture),  cmocka_unit_test(reads_every_section),
        cmocka_unit_test(refuses_truncation),    cmocka_unit_test(refuses_header_fields),
        cmocka_unit_test(refuses_bad_checksums), cmocka_unit_test(payload_flip_named_by_layer),
        cmocka_unit_test(table_entry_flip),      cmocka_unit_test(refuses_nonfinite),
        cmocka_unit_test(refuses_layer_table),   cmocka_unit_test(refuses_sizes),
        cmocka_unit_test(refuses_misaligned_and_missing), cmocka_unit_test(refuses_fifo_and_huge_files_at_once),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
