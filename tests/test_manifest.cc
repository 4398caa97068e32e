// The Sera manifest: pinned schema digest and exact bytes (the docs/format.md test vector), a
// round trip of every field at its documented offset, and each malformed manifest refused with
// its own status and the offset in the message.
#include <cmath>
#include <sstream>  // before test_util.h: cmocka defines a fail() macro

#include "test_util.h"

#include "core/bytes.h"
#include "core/checksum.h"
#include "format/array.h"
#include "format/manifest.h"

using namespace stk;

static std::string g_dir;

// Pinned: changing the schema text (any field, bound, offset) changes this digest, and every
// reader of the old schema refuses the new manifests.  Update docs/format.md with it.
static const char kSchemaSha256[] = "231c9fb7cb7b42bf833121c7d5764e43b1d27d4081da341e9ee1b5cf4d3e8dd6";

static void fix_hash(std::vector<uint8_t> &b) {
    Sha256Digest d = sha256(b.data(), b.size() - 32);
    std::memcpy(&b[b.size() - 32], d.bytes, 32);
}

static std::string read_text(const std::string &path) {
    std::vector<uint8_t> b = test::read_bytes(path);
    return std::string(b.begin(), b.end());
}

static std::string docs_format() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return read_text(std::string(root ? root : ".") + "/docs/format.md");
}

// The docs/format.md test vector: a manifest with two P_gen ids, one array, one record.
struct Small {
    ManifestFields fields;
    uint32_t p_gen[2] = {7, 3};
    ManifestArray array;
    ManifestRecord record;
    ManifestInput in;
};

static void make_small(Small &s) {
    s.fields.abi_flags = kAbiFtz;
    s.fields.tokenizer.mode = 3;
    s.fields.tokenizer.l_tok = 8;
    s.fields.tokenizer.vocab_size = 10;
    s.fields.tokenizer.unicode_policy = 1;
    s.fields.prf.r = 512;
    s.fields.prf.tau = 2.0;
    ArrayHeader h;
    h.dtype = 2;
    h.rank = 2;
    h.dims[0] = 2;
    h.dims[1] = 3;
    h.byte_len = 24;
    h.crc32c = 0x0bd5ab40u;
    h.sha256_low64 = 0xe352c2b2a05b2a7cull;
    h.flags = kFlagRowMajor | kFlagAligned64;
    s.array = manifest_array_from_header("vector.bin", STK_STAGE_PRF, h);
    s.record.stage = STK_STAGE_OVERLAYS;
    s.record.kind = kRecordFeatureDisabled;
    s.record.feature = kFeatureOverlays;
    s.record.status = STK_E_NOT_IMPLEMENTED;
    std::strcpy(s.record.text, "overlays_build is not implemented");
    s.in.fields = &s.fields;
    s.in.p_gen = s.p_gen;
    s.in.n_pgen = 2;
    s.in.arrays = &s.array;
    s.in.n_arrays = 1;
    for (int i = 0; i < 10; i++) s.in.stages[i].state = kStageRan;
    s.in.stages[STK_STAGE_OVERLAYS - 1].state = kStageNotImplemented;
    s.in.stages[STK_STAGE_CHECK - 1].state = kStagePending;
    s.in.stages[STK_STAGE_PRF - 1].crc32c = 0x11223344u;
    s.in.stages[STK_STAGE_PRF - 1].sha256_low64 = 0x0102030405060708ull;
    s.in.records = &s.record;
    s.in.n_records = 1;
}

static std::vector<uint8_t> small_bytes() {
    Small s;
    make_small(s);
    return encode_manifest(s.in);
}

static std::string hex_dump(const std::vector<uint8_t> &b) {
    std::string out;
    char line[128];
    for (size_t i = 0; i < b.size(); i += 16) {
        int n = std::snprintf(line, sizeof line, "%04zx:", i);
        for (size_t j = i; j < i + 16 && j < b.size(); j++) n += std::snprintf(line + n, sizeof line - n, " %02x", b[j]);
        out += line;
        out += "\n";
    }
    return out;
}

static void schema_digest_pinned(void **) {
    assert_string_equal(hex32(manifest_schema_sha256()).c_str(), kSchemaSha256);
    const std::string &t = manifest_schema_text();
    assert_string_equal(hex32(sha256(t.data(), t.size()).bytes).c_str(), kSchemaSha256);
    assert_int_equal(manifest_fixed_size(), 552);
    // docs/format.md reproduces the text verbatim and names the digest.
    std::string doc = docs_format();
    assert_contains(doc, t);
    assert_contains(doc, kSchemaSha256);
}

static void small_manifest_exact_bytes(void **) {
    std::vector<uint8_t> b = small_bytes();
    assert_int_equal(b.size(), 552 + 8 + 136 + 160 + 128 + 64);
    assert_int_equal(b.size(), manifest_total_size(2, 1, 1));
    assert_memory_equal(&b[0], "MRES", 4);
    assert_memory_equal(&b[4], "\x04\x03\x02\x01", 4);
    assert_memory_equal(&b[8], manifest_schema_sha256(), 32);
    assert_int_equal(load_u32(&b[40]), 2);
    assert_int_equal(load_u32(&b[44]), 1);
    assert_int_equal(load_u32(&b[48]), 10);
    assert_int_equal(load_u32(&b[52]), 1);
    assert_int_equal(load_u32(&b[56]), kAbiFtz);
    assert_int_equal(load_u32(&b[148]), 512);
    assert_true(load_le<double>(&b[152]) == 2.0);
    assert_int_equal(load_u32(&b[552]), 7);
    assert_int_equal(load_u32(&b[556]), 3);
    const uint8_t *a = &b[560];
    assert_string_equal(reinterpret_cast<const char *>(a), "vector.bin");
    assert_int_equal(load_u16(a + 64), STK_STAGE_PRF);
    assert_int_equal(load_u16(a + 66), 2);
    assert_int_equal(load_u16(a + 68), 2);
    assert_int_equal(load_u32(a + 72), 3);
    assert_int_equal(load_u32(a + 76), 0x0bd5ab40u);
    assert_int_equal(load_u64(a + 80), 2);
    assert_int_equal(load_u64(a + 88), 3);
    assert_int_equal(load_u64(a + 96), 1);
    assert_int_equal(load_u64(a + 120), 24);
    assert_true(load_u64(a + 128) == 0xe352c2b2a05b2a7cull);
    const uint8_t *st = &b[696];
    for (int i = 0; i < 10; i++) assert_int_equal(load_u16(st + 16 * i), i + 1);
    assert_int_equal(load_u16(st + 16 * 2 + 2), kStageRan);
    assert_int_equal(load_u32(st + 16 * 2 + 4), 0x11223344u);
    assert_true(load_u64(st + 16 * 2 + 8) == 0x0102030405060708ull);
    assert_int_equal(load_u16(st + 16 * 3 + 2), kStageNotImplemented);
    assert_int_equal(load_u16(st + 16 * 9 + 2), kStagePending);
    const uint8_t *r = &b[856];
    assert_int_equal(load_u16(r), STK_STAGE_OVERLAYS);
    assert_int_equal(load_u16(r + 2), kRecordFeatureDisabled);
    assert_int_equal(load_u32(r + 4), kFeatureOverlays);
    assert_int_equal(load_u32(r + 8), STK_E_NOT_IMPLEMENTED);
    assert_string_equal(reinterpret_cast<const char *>(r + 32), "overlays_build is not implemented");
    for (int i = 984; i < 1016; i++) assert_int_equal(b[i], 0);  // prev_hash: first generation
    Sha256Digest h = sha256(b.data(), 1016);
    assert_memory_equal(&b[1016], h.bytes, 32);
    // The whole file, pinned: the docs/format.md test vector.
    std::string whole = hex32(sha256(b.data(), b.size()).bytes);
    assert_string_equal(whole.c_str(), "f43a0bdc41d6ebce5931862e14787f9cd4dc4aede7ad21bf869d2e13bd381c65");
    std::string doc = docs_format();
    assert_contains(doc, hex_dump(b));
    assert_contains(doc, whole);
}

static void decode_small(void **) {
    std::vector<uint8_t> b = small_bytes();
    Manifest m = decode_manifest(b.data(), b.size(), "m.bin");
    assert_int_equal(m.fields.prf.r, 512);
    assert_true(m.fields.prf.tau == 2.0);
    assert_int_equal(m.fields.tokenizer.vocab_size, 10);
    assert_int_equal(m.p_gen.size(), 2);
    assert_int_equal(m.p_gen[0], 7);
    assert_int_equal(m.arrays.size(), 1);
    assert_string_equal(m.arrays[0].name, "vector.bin");
    assert_int_equal(m.arrays[0].crc32c, 0x0bd5ab40u);
    assert_int_equal(m.stages[STK_STAGE_OVERLAYS - 1].state, kStageNotImplemented);
    assert_int_equal(m.records.size(), 1);
    assert_int_equal(m.records[0].status, STK_E_NOT_IMPLEMENTED);
    assert_memory_equal(m.curr_hash, &b[b.size() - 32], 32);
}

// Every fixed field, found through the schema text's "@offset type name lo..hi" lines: a distinct
// in-bounds value written at the documented offset survives decode and re-encode.
static void round_trip_every_field(void **) {
    std::vector<uint8_t> base = small_bytes();
    std::istringstream lines(manifest_schema_text());
    std::string line;
    int fields = 0;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] != '@') continue;
        std::istringstream ls(line.substr(1));
        size_t off;
        std::string type, name, range;
        ls >> off >> type >> name >> range;
        if (off < 56 || type == "end") continue;  // head (magic, counts) tested elsewhere
        fields++;
        std::vector<uint8_t> b = base;
        if (type == "u8[32]") {
            for (int i = 0; i < 32; i++) b[off + i] = uint8_t(off + i * 3);
        } else {
            size_t dots = range.find("..");
            double hi = std::stod(range.substr(dots + 2));
            if (type == "u32") store_le<uint32_t>(&b[off], uint32_t(hi));
            else if (type == "u64") store_le<uint64_t>(&b[off], uint64_t(hi));
            else if (type == "f64") store_le<double>(&b[off], hi * 0.75);
            else fail_msg("type %s", type.c_str());
        }
        if (name == "tokenizer.vocab_size") store_le<uint32_t>(&b[off], 16777216);
        fix_hash(b);
        Manifest m = decode_manifest(b.data(), b.size(), "m.bin");
        ManifestInput in;
        in.fields = &m.fields;
        in.p_gen = m.p_gen.data();
        in.n_pgen = uint32_t(m.p_gen.size());
        in.arrays = m.arrays.data();
        in.n_arrays = uint32_t(m.arrays.size());
        for (int i = 0; i < 10; i++) in.stages[i] = m.stages[i];
        in.records = m.records.data();
        in.n_records = uint32_t(m.records.size());
        std::memcpy(in.prev_hash, m.prev_hash, 32);
        std::vector<uint8_t> again = encode_manifest(in);
        if (again != b) fail_msg("field %s at %zu does not round-trip", name.c_str(), off);
    }
    assert_int_equal(fields, 61);
    // Spot checks through the struct.
    std::vector<uint8_t> b = base;
    store_le<uint32_t>(&b[332], 3);
    store_le<double>(&b[400], 0.95);
    store_le<uint64_t>(&b[216], 123456789);
    fix_hash(b);
    Manifest m = decode_manifest(b.data(), b.size(), "m.bin");
    assert_int_equal(m.fields.bridge.w, 3);
    assert_true(m.fields.bridge.store_load_max == 0.95);
    assert_true(m.fields.linear.c == 123456789);
}

static void unknown_schema_refused(void **) {
    std::vector<uint8_t> b = small_bytes();
    b[8 + 31] ^= 0x01;
    fix_hash(b);
    std::string msg = test::expect_error(STK_E_SCHEMA, [&] { decode_manifest(b.data(), b.size(), "gen/sera_manifest.bin"); });
    assert_contains(msg, "gen/sera_manifest.bin: offset 8:");
    assert_contains(msg, kSchemaSha256);
    test::expect_error(STK_E_BAD_MAGIC, [&] {
        std::vector<uint8_t> c = small_bytes();
        c[0] = 'X';
        decode_manifest(c.data(), c.size(), "m");
    });
    test::expect_error(STK_E_CORRUPT, [&] {
        std::vector<uint8_t> c = small_bytes();
        store_le<uint32_t>(&c[4], 0x04030201u);  // a big-endian writer
        decode_manifest(c.data(), c.size(), "m");
    });
}

static void truncated_refused(void **) {
    std::vector<uint8_t> b = small_bytes();
    for (size_t n = 0; n < b.size(); n++) {
        std::vector<uint8_t> c(b.begin(), b.begin() + long(n));
        std::string msg = test::expect_error(STK_E_TRUNCATED, [&] { decode_manifest(c.data(), c.size(), "t.bin"); });
        assert_contains(msg, "t.bin: offset " + std::to_string(n) + ":");
    }
    std::vector<uint8_t> c = b;
    c.push_back(0);
    std::string msg = test::expect_error(STK_E_SIZE_MISMATCH, [&] { decode_manifest(c.data(), c.size(), "t.bin"); });
    assert_contains(msg, "offset 1048:");
}

static void inconsistent_counts_refused(void **) {
    std::vector<uint8_t> b = small_bytes();
    auto with = [&](size_t off, uint32_t v) {
        std::vector<uint8_t> c = b;
        store_le<uint32_t>(&c[off], v);
        return c;
    };
    std::vector<uint8_t> c = with(44, 2);  // one array more than the file holds
    test::expect_error(STK_E_TRUNCATED, [&] { decode_manifest(c.data(), c.size(), "m"); });
    c = with(44, 0);  // one fewer: bytes left over
    test::expect_error(STK_E_SIZE_MISMATCH, [&] { decode_manifest(c.data(), c.size(), "m"); });
    c = with(40, 3);
    test::expect_error(STK_E_TRUNCATED, [&] { decode_manifest(c.data(), c.size(), "m"); });
    c = with(48, 9);
    std::string msg = test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); });
    assert_contains(msg, "offset 48:");
    c = with(44, 0xFFFFFFFFu);  // far beyond the bound: refused before any arithmetic
    msg = test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); });
    assert_contains(msg, "offset 44:");
    c = with(52, 4097);
    test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); });
    c = with(40, (1u << 20) + 1);
    test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); });
}

static void hash_and_chain(void **) {
    std::vector<uint8_t> b = small_bytes();
    // A flipped bit anywhere in the body: curr_hash catches it, offset = where curr_hash sits.
    for (size_t i = 56; i < b.size() - 64; i += 37) {
        std::vector<uint8_t> c = b;
        c[i] ^= 0x10;
        std::string msg = test::expect_error(STK_E_CHECKSUM, [&] { decode_manifest(c.data(), c.size(), "m"); });
        assert_contains(msg, "offset 1016:");
    }
    // Two generations chained.
    Small s1;
    make_small(s1);
    std::string p1 = g_dir + "/gen1.bin", p2 = g_dir + "/gen2.bin";
    uint8_t h1[32];
    write_manifest(p1, s1.in, h1);
    assert_true(test::read_bytes(p1) == b);  // streamed writer == in-memory encoder
    Small s2;
    make_small(s2);
    std::memcpy(s2.in.prev_hash, h1, 32);
    uint8_t h2[32];
    write_manifest(p2, s2.in, h2);
    Manifest m1 = read_manifest(p1), m2 = read_manifest(p2);
    assert_memory_equal(m1.curr_hash, h1, 32);
    assert_memory_equal(m2.prev_hash, h1, 32);
    assert_memory_equal(m2.curr_hash, h2, 32);
    assert_memory_not_equal(h1, h2, 32);
    check_chain(m1, m2);
    std::string msg = test::expect_error(STK_E_CHECKSUM, [&] { check_chain(m2, m1); });
    assert_contains(msg, "chain broken");
    // Write-once: the same path again is refused and the first file is untouched.
    test::expect_error(STK_E_OUTPUT_EXISTS, [&] { write_manifest(p1, s2.in, nullptr); });
    assert_true(test::read_bytes(p1) == b);
}

static void bounds_enforced(void **) {
    // Writer: refuses what a reader would refuse, naming the field.
    Small s;
    make_small(s);
    s.fields.prf.r = 5000;
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(s.in); });
    assert_contains(msg, "prf.r = 5000");
    make_small(s);
    s.fields.prf.tau = NAN;
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(s.in); });
    make_small(s);
    s.p_gen[1] = 10;  // == vocab_size
    msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(s.in); });
    assert_contains(msg, "P_gen[1] = 10");
    // Reader: the same, with the offset.
    std::vector<uint8_t> b = small_bytes();
    store_le<uint32_t>(&b[148], 4097);
    fix_hash(b);
    msg = test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(b.data(), b.size(), "m"); });
    assert_contains(msg, "m: offset 148: prf.r = 4097");
    b = small_bytes();
    store_le<double>(&b[160], INFINITY);
    fix_hash(b);
    msg = test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(b.data(), b.size(), "m"); });
    assert_contains(msg, "offset 160: prf.whitening_eps");
    b = small_bytes();
    store_le<double>(&b[152], -1.0);
    fix_hash(b);
    test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(b.data(), b.size(), "m"); });
}

static void bad_tables_refused(void **) {
    const size_t a = 560, st = 696, r = 856;
    struct Case {
        size_t off;
        int width;
        uint64_t value;
        stk_status status;
        const char *needle;
    } cases[] = {
        {a + 0, 1, '/', STK_E_CORRUPT, "offset 560:"},  // "/ector.bin": not a plain name
        {a + 62, 1, 'x', STK_E_CORRUPT, "padding not zero"},
        {a + 64, 2, 9, STK_E_CORRUPT, "stage 9 not in 1..8"},
        {a + 64, 2, STK_STAGE_OVERLAYS, STK_E_CORRUPT, "whose state is 2"},
        {a + 66, 2, 12, STK_E_BAD_DTYPE, "offset 626:"},
        {a + 68, 2, 6, STK_E_BAD_RANK, "offset 628:"},
        {a + 70, 2, 1, STK_E_CORRUPT, "zero field"},
        {a + 72, 4, 0x13, STK_E_BAD_HEADER, "unknown flag bits 0x10"},
        {a + 72, 4, 0x1, STK_E_MISALIGNED, "aligned_64B"},
        {a + 96, 8, 2, STK_E_BAD_RANK, "unused dims[2]"},
        {a + 80, 8, 1ull << 62, STK_E_DIMS_OVERFLOW, "overflow"},
        {a + 120, 8, 25, STK_E_SIZE_MISMATCH, "byte_len 25"},
        {st + 16, 2, 5, STK_E_CORRUPT, "names stage 5"},
        {st + 18, 2, 5, STK_E_CORRUPT, "state 5 not in 0..4"},
        {r + 0, 2, 11, STK_E_CORRUPT, "record stage 11"},
        {r + 2, 2, 5, STK_E_CORRUPT, "record kind 5"},
        {r + 4, 4, 9, STK_E_CORRUPT, "record feature 9"},
        {r + 8, 4, 100, STK_E_CORRUPT, "record status 100"},
        {r + 12, 4, 1, STK_E_CORRUPT, "record zero field"},
        {r + 16, 8, 0x7ff8000000000000ull, STK_E_CORRUPT, "value is not finite"},
        {r + 32, 1, 0x07, STK_E_CORRUPT, "not printable"},
        {r + 127, 1, 'x', STK_E_CORRUPT, "record text padding not zero"},
        {552, 4, 10, STK_E_CORRUPT, "P_gen[0] = 10"},
    };
    for (const Case &c : cases) {
        std::vector<uint8_t> b = small_bytes();
        switch (c.width) {
            case 1: b[c.off] = uint8_t(c.value); break;
            case 2: store_le<uint16_t>(&b[c.off], uint16_t(c.value)); break;
            case 4: store_le<uint32_t>(&b[c.off], uint32_t(c.value)); break;
            case 8: store_le<uint64_t>(&b[c.off], c.value); break;
        }
        fix_hash(b);
        std::string msg = test::expect_error(c.status, [&] { decode_manifest(b.data(), b.size(), "m"); });
        assert_contains(msg, c.needle);
    }
    std::vector<uint8_t> b = small_bytes();
    std::memset(&b[a], 'a', 64);  // a name filling all 64 bytes
    fix_hash(b);
    std::string m64 = test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(b.data(), b.size(), "m"); });
    assert_contains(m64, "offset 560: array name not NUL-terminated");
    // Two arrays with one name.
    Small s;
    make_small(s);
    ManifestArray two[2] = {s.array, s.array};
    s.in.arrays = two;
    s.in.n_arrays = 2;
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(s.in); });
    assert_contains(msg, "vector.bin listed twice");
    // Names that would leave arrays/.
    assert_false(valid_array_name("..", 2));
    assert_false(valid_array_name("a/b", 3));
    assert_false(valid_array_name("", 0));
    assert_true(valid_array_name("T_1.bin", 7));
}

static void draft_records(void **) {
    static ManifestDraft d;  // large: keep it off the stack
    draft_add_record(d, STK_STAGE_TOKENIZER, kRecordFeatureDisabled, kFeatureTokenizerFst, STK_E_SP_REJECTED, 2, 0,
                     "SP witness %s\x01 of length %d", "ab", 2);
    assert_int_equal(d.n_records, 1);
    assert_string_equal(d.records[0].text, "SP witness ab? of length 2");
    std::string longtext(300, 'x');
    draft_add_record(d, STK_STAGE_PRF, kRecordInvariantFail, kFeaturePrf, STK_E_NONFINITE, NAN, 1, "%s", longtext.c_str());
    assert_int_equal(std::strlen(d.records[1].text), 95);
    assert_string_equal(d.records[1].text + 92, "...");  // a cut is marked
    assert_true(d.records[1].value == 0);                // non-finite values are stored as 0 (bounded field)
    // A number at the edge is never cut in two ("absmax 2.51" for 2.51e-05): the text is cut
    // before it, at a word boundary, and marked.
    static ManifestDraft e;
    draft_add_record(e, STK_STAGE_BRIDGE_INIT, kRecordNote, kFeatureBridge, STK_OK, 0, 0,
                     "9.3 Q8.8 p99 scaling: clipped share (value) of 66816 entries in every leg; rms err p99 0.0155, "
                     "absmax %.3g",
                     2.51e-05);
    assert_string_equal(e.records[0].text,
                        "9.3 Q8.8 p99 scaling: clipped share (value) of 66816 entries in every leg; rms err p99...");
    for (uint32_t i = 2; i < kMaxDraftRecords + 5; i++)
        draft_add_record(d, STK_STAGE_PRF, kRecordNote, kFeaturePrf, STK_OK, i, 0, "note %u", i);
    assert_int_equal(d.n_records, kMaxDraftRecords);
    assert_string_equal(d.records[kMaxDraftRecords - 1].text, "6 records dropped: more than 127");
}

// The faithful profile's runtime block (docs/format.md "Runtime block"): the second schema digest,
// the block's fields at their documented offsets between the records and the hashes, a round
// trip, and bounds refused by the writer (naming the field) and by the reader (with the offset).
static const char kRuntimeSchemaSha256[] = "e1186d6c507a3e9469845135b92fcc58a31b28290478dedd11ec63d30a5fbf47";

struct WithRuntime {
    Small s;
    ManifestRuntime r;
    RuntimeLayer layers[2];
};

static void make_runtime(WithRuntime &w) {
    make_small(w.s);
    ManifestRuntime &r = w.r;
    r.profile = 1, r.sinks = 4, r.window = 252, r.kv_dtype = 2, r.weight_dtype = 9, r.ffn_dtype = 9;
    std::strcpy(reinterpret_cast<char *>(r.model_type), "gemma3_text");
    r.n_layers = 2, r.d_model = 64, r.n_heads = 4, r.n_kv_heads = 2, r.head_dim = 16, r.vocab_size = 10, r.ffn_dim = 128;
    r.ffn_kind = 1;
    std::strcpy(reinterpret_cast<char *>(r.activation), "gelu_pytorch_tanh");
    r.norm_kind = 1, r.norms_per_layer = 2, r.post_norms = 1, r.qk_norm = 1;
    r.norm_eps = 1e-6, r.norm_offset = 1, r.emb_multiplier = 8, r.residual_multiplier = 1, r.logit_scale = 1;
    r.score_scale = 0.25, r.positions = 2, r.rotary_dim = 16, r.rope_pairs = 8;
    r.rope_theta = 1e6, r.rope_local_theta = 1e4, r.rope_attn_factor = 1, r.sliding_window = 512;
    r.policy = 2, r.recent = 100;  // h2o keeping the 100 most recent
    w.layers[0] = RuntimeLayer{1, 512, 0, 1};
    w.layers[1] = RuntimeLayer{0, 0, 0, 0};
    w.s.in.runtime = &w.r;
    w.s.in.runtime_layers = w.layers;
}

static void runtime_block(void **) {
    // The first digest is untouched (schema_digest_pinned); the second is pinned here and named
    // in docs/format.md, whose runtime table lists every field the schema text does.
    assert_string_equal(hex32(manifest_schema_sha256(true)).c_str(), kRuntimeSchemaSha256);
    const std::string doc = docs_format();
    assert_contains(doc, kRuntimeSchemaSha256);
    assert_int_equal(manifest_runtime_fixed_size(), 548);
    WithRuntime w;
    make_runtime(w);
    std::vector<uint8_t> b = encode_manifest(w.s.in);
    assert_int_equal(b.size(), small_bytes().size() + 548 + 2 * 16);
    assert_memory_equal(&b[8], manifest_schema_sha256(true), 32);
    // Everything before the block is the default manifest's but the schema digest.
    std::vector<uint8_t> d = small_bytes();
    const size_t block = d.size() - 64;
    assert_memory_equal(&b[40], &d[40], block - 40);
    // The block's bytes at docs/format.md's offsets.
    assert_int_equal(load_le<uint32_t>(&b[block + 0]), 1);
    assert_int_equal(load_le<uint32_t>(&b[block + 4]), 4);
    assert_int_equal(load_le<uint32_t>(&b[block + 8]), 252);
    assert_string_equal(reinterpret_cast<const char *>(&b[block + 24]), "gemma3_text");
    assert_int_equal(load_le<uint32_t>(&b[block + 56]), 2);
    assert_true(load_le<double>(&b[block + 188]) == 0.25);
    assert_true(load_le<double>(&b[block + 228]) == 1e6);
    assert_true(load_le<double>(&b[block + 236]) == 1e4);
    assert_int_equal(load_le<uint32_t>(&b[block + 356]), 512);
    assert_int_equal(load_le<uint32_t>(&b[block + 540]), 2);    // runtime.policy: h2o
    assert_int_equal(load_le<uint32_t>(&b[block + 544]), 100);  // runtime.recent
    assert_int_equal(load_le<uint32_t>(&b[block + 548 + 0]), 1);    // layer 0: sliding
    assert_int_equal(load_le<uint32_t>(&b[block + 548 + 4]), 512);  // its window
    assert_int_equal(load_le<uint32_t>(&b[block + 548 + 12]), 1);   // the local rotary table
    // Round trip.
    Manifest m = decode_manifest(b.data(), b.size(), "rt");
    assert_true(m.has_runtime);
    assert_int_equal(m.runtime.window, 252);
    assert_true(m.runtime.rope_local_theta == 1e4);
    assert_string_equal(reinterpret_cast<const char *>(m.runtime.activation), "gelu_pytorch_tanh");
    assert_int_equal(m.runtime_layers.size(), 2);
    assert_int_equal(m.runtime_layers[0].model_window, 512);
    assert_int_equal(m.runtime.policy, 2);
    assert_int_equal(m.runtime.recent, 100);
    assert_false(decode_manifest(d.data(), d.size(), "d").has_runtime);
    // Writer: a bound broken is refused naming the field.
    make_runtime(w);
    w.r.window = 0;
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "runtime.window");
    make_runtime(w);
    w.layers[1].kind = 1;  // sliding without a window
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "runtime layer 1");
    make_runtime(w);
    w.r.policy = 4;  // past tova-head
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "runtime.policy");
    make_runtime(w);
    w.r.recent = 252;  // not fewer than the window
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "runtime.recent");
    make_runtime(w);
    w.r.policy = 1;  // tova keeps no recent positions apart
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "runtime.recent");
    make_runtime(w);
    w.r.n_kv_heads = 3;
    assert_contains(test::expect_error(STK_E_INVALID_ARGUMENT, [&] { encode_manifest(w.s.in); }), "kv heads");
    // Reader: the same with the offset; a layer count that disagrees with the size; truncation.
    std::vector<uint8_t> c = b;
    store_le<uint32_t>(&c[block + 8], 0);
    fix_hash(c);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); }),
                    "offset " + std::to_string(block + 8) + ": runtime.window");
    c = b;
    store_le<uint32_t>(&c[block + 540], 7);  // an unknown policy
    fix_hash(c);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); }),
                    "offset " + std::to_string(block + 540) + ": runtime.policy");
    c = b;
    store_le<uint32_t>(&c[block + 544], 300);  // recent above the window
    fix_hash(c);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); }),
                    "offset " + std::to_string(block + 544) + ": runtime.recent");
    c = b;
    store_le<double>(&c[block + 148], NAN);
    fix_hash(c);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { decode_manifest(c.data(), c.size(), "m"); }), "runtime.norm_eps");
    c = b;
    store_le<uint32_t>(&c[block + 56], 3);  // one layer more than the bytes hold
    fix_hash(c);
    test::expect_error(STK_E_TRUNCATED, [&] { decode_manifest(c.data(), c.size(), "m"); });
    c = b;
    store_le<uint32_t>(&c[block + 56], 1);  // one fewer
    fix_hash(c);
    test::expect_error(STK_E_SIZE_MISMATCH, [&] { decode_manifest(c.data(), c.size(), "m"); });
    for (size_t n = d.size() - 64; n < b.size(); n += 7) {
        std::vector<uint8_t> t(b.begin(), b.begin() + long(n));
        test::expect_error(STK_E_TRUNCATED, [&] { decode_manifest(t.data(), t.size(), "t"); });
    }
}

int main() {
    g_dir = test::make_temp_dir("manifest");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schema_digest_pinned),
        cmocka_unit_test(small_manifest_exact_bytes),
        cmocka_unit_test(decode_small),
        cmocka_unit_test(round_trip_every_field),
        cmocka_unit_test(unknown_schema_refused),
        cmocka_unit_test(truncated_refused),
        cmocka_unit_test(inconsistent_counts_refused),
        cmocka_unit_test(hash_and_chain),
        cmocka_unit_test(bounds_enforced),
        cmocka_unit_test(bad_tables_refused),
        cmocka_unit_test(draft_records),
        cmocka_unit_test(runtime_block),
    };
    return cmocka_run_group_tests_name("manifest", tests, nullptr, nullptr);
}
