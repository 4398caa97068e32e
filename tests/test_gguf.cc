// GGUF reader: hostile files built here, each refused with its status and a message naming the
// file, the key or tensor and the byte offset.  Every GGUF parser bug reported against ggml's
// gguf.cpp that stk's reader could share has a case (the report is named beside it).  Also: the
// typed getters, the checkpoint view (names, shapes, dtypes, bytes) and the dequantisation
// kernels on every Highway target against the scalar reference.  (gguf-py's files and values:
// tests/gguf_reference.py and tests/ggml_dequant_reference.py.)
#include <hwy/targets.h>
#include <sys/stat.h>

#include <cmath>

#include "core/checked.h"
#include "format/ggml_dequant.h"
#include "ingest/checkpoint.h"
#include "ingest/gguf.h"
#include "test_util.h"

using namespace stk;

namespace {

// A little-endian GGUF writer for building hostile files byte by byte.
struct G {
    std::vector<uint8_t> b;
    G &u8(uint8_t v) {
        b.push_back(v);
        return *this;
    }
    G &u32(uint32_t v) {
        for (int i = 0; i < 4; i++) b.push_back(uint8_t(v >> (8 * i)));
        return *this;
    }
    G &u64(uint64_t v) {
        for (int i = 0; i < 8; i++) b.push_back(uint8_t(v >> (8 * i)));
        return *this;
    }
    G &str(const std::string &s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    G &header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        b.insert(b.end(), {'G', 'G', 'U', 'F'});
        return u32(version).u64(n_tensors).u64(n_kv);
    }
    G &kv_u32(const std::string &k, uint32_t v) { return str(k).u32(4).u32(v); }
    G &kv_str(const std::string &k, const std::string &v) { return str(k).u32(8).str(v); }
    // A tensor info: name, ne (ggml order), type, offset.
    G &tensor(const std::string &name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).u32(uint32_t(ne.size()));
        for (uint64_t d : ne) u64(d);
        return u32(type).u64(offset);
    }
    G &pad(uint64_t a = 32) {
        while (b.size() % a) b.push_back(0);
        return *this;
    }
    G &zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
    size_t size() const { return b.size(); }
};

std::string g_dir;

std::string write(const char *name, const G &g) {
    std::string p = g_dir + "/" + name;
    test::write_bytes(p, g.b);
    return p;
}

// The parse of `g` must fail with `status`; the message must name the file and hold each needle.
void refused(const char *name, const G &g, stk_status status, std::initializer_list<const char *> needles) {
    std::string p = write(name, g);
    std::string msg = test::expect_error(status, [&] { GgufFile f(p); });
    assert_contains(msg, p);
    for (const char *n : needles) assert_contains(msg, n);
    // The in-memory parse (fuzz entry) says the same.
    std::string m2 = test::expect_error(status, [&] { gguf_validate(g.b.data(), g.b.size(), p); });
    assert_string_equal(msg.c_str(), m2.c_str());
}

// A valid file: metadata of several types, two F32 tensors and a Q8_0 one.
G valid(uint32_t version = 3) {
    G g;
    g.header(version, 3, 4);
    g.kv_str("general.architecture", "llama");
    g.kv_u32("llama.block_count", 2);
    g.str("t.arr").u32(9).u32(8).u64(2).str("ab").str("");  // array of 2 strings
    g.str("t.nested").u32(9).u32(9).u64(2);                 // [[1, 2], [3]] as arrays of i32
    g.u32(5).u64(2).u32(1).u32(2).u32(5).u64(1).u32(3);
    g.tensor("a", {4, 2}, 0, 0).tensor("b", {3}, 0, 32).tensor("q", {32, 2}, 8, 64);
    g.pad();
    std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
    for (float v : a) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        g.u32(u);
    }
    std::vector<float> bv = {-1, 0.5f, 9};
    for (float v : bv) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        g.u32(u);
    }
    g.pad();
    for (int r = 0; r < 2; r++) {  // Q8_0 rows: d = 0.5 (f16 0x3800), q = -16..15 (+r)
        g.u8(0x00).u8(0x38);
        for (int i = 0; i < 32; i++) g.u8(uint8_t(int8_t(i - 16 + r)));
    }
    return g;
}

}  // namespace

static void valid_file_reads(void **) {
    std::string p = write("ok.gguf", valid());
    GgufFile f(p);
    assert_int_equal(f.version(), 3);
    assert_int_equal(f.alignment(), 32);
    assert_int_equal(f.metadata().size(), 4);
    assert_string_equal(std::string(f.metadata()[0].key).c_str(), "general.architecture");
    assert_string_equal(std::string(f.find("general.architecture")->str()).c_str(), "llama");
    assert_int_equal(f.find("llama.block_count")->u32(), 2);
    assert_int_equal(f.find("llama.block_count")->as_uint(), 2);
    auto strs = f.find("t.arr")->strings();
    assert_int_equal(strs.size(), 2);
    assert_string_equal(std::string(strs[0]).c_str(), "ab");
    assert_true(strs[1].empty());
    const GgufValue *n = f.find("t.nested");
    assert_int_equal(int(n->elem_type()), int(GgufType::ARRAY));
    assert_int_equal(n->size(), 2);
    assert_true((n->at(0).ints() == std::vector<int64_t>{1, 2}));
    assert_true((n->at(1).ints() == std::vector<int64_t>{3}));
    assert_null(f.find("absent"));
    // Typed getters refuse other types, naming key and offset (llama.cpp #26690: arrays read as
    // another element type than stored).
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { (void)f.find("llama.block_count")->i32(); }),
                    "key 'llama.block_count': a u32 where i32 was expected");
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { (void)f.find("t.nested")->strings(); }),
                    "a array of array where an array of strings was expected");
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { (void)f.find("t.arr")->at(0).f32(); }), "a string where f32");
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { (void)f.find("t.arr")->at(2); });

    const auto &ts = f.tensors();
    assert_int_equal(ts.size(), 3);
    assert_true((ts[0].shape == std::vector<uint64_t>{2, 4}));  // row-major: ne reversed
    assert_int_equal(ts[0].ne[0], 4);
    assert_int_equal(ts[2].n_bytes, 68);
    assert_int_equal(ts[2].n_elements, 64);

    // The checkpoint view: sorted names, F32 mapped, Q8_0 mapped as blocks that convert_to_f32
    // dequantises, any range of them.
    auto ck = open_checkpoint(p);
    assert_string_equal(ck->format(), "gguf");
    assert_int_equal(ck->tensors().size(), 3);
    const TensorRef *q = ck->find("q");
    assert_int_equal(int(q->dtype), int(SrcDType::F32));
    assert_true((q->shape == std::vector<uint64_t>{2, 32}));
    assert_int_equal(q->n_bytes, 256);
    assert_int_equal(q->ggml_type, 8);  // Q8_0
    std::vector<uint8_t> scratch;
    const uint8_t *qb = ck->tensor_bytes(*q, scratch);
    assert_true(scratch.empty());  // no f32 copy of the tensor
    float qv[64];
    convert_to_f32(*q, qb, 0, 64, qv);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 32; i++) assert_true(qv[r * 32 + i] == 0.5f * float(i - 16 + r));
    float part[40];  // across the block boundary, starting and ending inside a block
    convert_to_f32(*q, qb, 5, 40, part);
    for (int k = 0; k < 40; k++) assert_true(part[k] == qv[5 + k]);
    convert_to_f32(*q, qb, 33, 1, part);
    assert_true(part[0] == qv[33]);
    const TensorRef *a = ck->find("a");
    float av[8];
    convert_to_f32(*a, ck->tensor_bytes(*a, scratch), 0, 8, av);
    assert_true(av[0] == 1 && av[7] == 8);
    // A directory holding it.
    std::string d = g_dir + "/dir";
    ::mkdir(d.c_str(), 0755);
    test::write_bytes(d + "/m.gguf", valid().b);
    assert_string_equal(open_checkpoint(d)->format(), "gguf");
}

static void header_refusals(void **) {
    G short_;
    short_.b = {'G', 'G', 'U', 'F', 3, 0};
    refused("short.gguf", short_, STK_E_TRUNCATED, {"offset 0", "6 bytes, too short for a GGUF header"});
    G bad;
    bad.b = {'G', 'G', 'U', 'X'};
    bad.zeros(20);
    refused("magic.gguf", bad, STK_E_BAD_MAGIC, {"offset 0", "magic"});
    // Big-endian: the version field reads byte-swapped.
    G be;
    be.b = {'G', 'G', 'U', 'F', 0, 0, 0, 3};
    be.zeros(16);
    refused("be.gguf", be, STK_E_UNSUPPORTED, {"offset 4", "big-endian GGUF (version field 3 byte-swapped)"});
    refused("v1.gguf", G().header(1, 0, 0), STK_E_UNSUPPORTED, {"offset 4", "version 1"});
    refused("v4.gguf", G().header(4, 0, 0), STK_E_UNSUPPORTED, {"offset 4", "GGUF version 4"});
    // Counts that cannot fit in the file are refused before anything is reserved (llama.cpp
    // #15711: n_tensors times the per-tensor overhead overflowed).
    refused("ntensors.gguf", G().header(3, uint64_t(1) << 60, 0), STK_E_CORRUPT,
            {"offset 8", "1152921504606846976 tensor infos cannot fit in the 24-byte file"});
    refused("nkv.gguf", G().header(3, 0, ~uint64_t(0)), STK_E_CORRUPT,
            {"offset 16", "18446744073709551615 metadata key/values cannot fit"});
}

static void metadata_refusals(void **) {
    // String length past the end (llama.cpp #19003: the length resized a std::string unchecked).
    G g;
    g.header(3, 0, 1).u64(uint64_t(1) << 63).zeros(8);
    refused("keylen.gguf", g, STK_E_TRUNCATED, {"offset 24", "string length 9223372036854775808 runs past the end"});
    G v;
    v.header(3, 0, 1).str("k").u32(8).u64(~uint64_t(0) - 3).zeros(4);
    refused("vallen.gguf", v, STK_E_TRUNCATED, {"offset 37", "a string value: string length 18446744073709551612"});
    // Empty key (llama.cpp #24263: an assertion compiled out in release builds).
    refused("emptykey.gguf", G().header(3, 0, 1).str("").u32(4).u32(1), STK_E_CORRUPT, {"offset 24", "metadata key 0 is empty"});
    refused("dupkey.gguf", G().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2), STK_E_CORRUPT,
            {"offset 41", "duplicate metadata key 'a'"});
    refused("vtype.gguf", G().header(3, 0, 1).str("k").u32(13).u32(0), STK_E_CORRUPT,
            {"offset 33", "key 'k': unknown value type 13"});
    refused("bool.gguf", G().header(3, 0, 1).str("k").u32(7).u8(2), STK_E_CORRUPT, {"offset 37", "bool byte 2"});
    // Array counts bounded by the bytes left (an allocation sized by a hostile count).
    refused("arrcount.gguf", G().header(3, 0, 1).str("k").u32(9).u32(6).u64(uint64_t(1) << 62).zeros(8), STK_E_TRUNCATED,
            {"offset 37", "key 'k': array of 4611686018427387904 f32 elements"});
    refused("arrcount2.gguf", G().header(3, 0, 1).str("k").u32(9).u32(8).u64(~uint64_t(0)).zeros(8), STK_E_TRUNCATED,
            {"array of 18446744073709551615 string elements"});
    refused("arrtype.gguf", G().header(3, 0, 1).str("k").u32(9).u32(77).u64(1).zeros(8), STK_E_CORRUPT,
            {"offset 37", "array of unknown value type 77"});
    // Nesting deeper than 16 levels (recursion on a stack sized by the input otherwise).
    G deep;
    deep.header(3, 0, 1).str("k").u32(9);
    for (int i = 0; i < 40; i++) deep.u32(9).u64(1);
    refused("deep.gguf", deep, STK_E_CORRUPT, {"key 'k': arrays nested deeper than 16 levels"});
    // general.alignment: a u32 power of two (llama.cpp #26318: an INT32 alignment hit an assertion).
    refused("align_i32.gguf", G().header(3, 0, 1).str("general.alignment").u32(5).u32(64), STK_E_CORRUPT,
            {"offset 53", "general.alignment is a i32, not a u32"});
    refused("align_0.gguf", G().header(3, 0, 1).kv_u32("general.alignment", 0), STK_E_CORRUPT, {"alignment 0 is not a power"});
    refused("align_48.gguf", G().header(3, 0, 1).kv_u32("general.alignment", 48), STK_E_CORRUPT, {"alignment 48 is not a power"});
}

static void tensor_refusals(void **) {
    // n_dims above ggml's 4.
    refused("ndims.gguf", G().header(3, 1, 0).str("t").u32(5).zeros(64), STK_E_BAD_RANK,
            {"offset 33", "tensor 't': n_dims 5 is more than ggml's 4"});
    // ne product overflow (llama.cpp #27203: ne = (INT64_MAX, 2) passed as a negative count).
    refused("neprod.gguf", G().header(3, 1, 0).tensor("t", {uint64_t(INT64_MAX), 2}, 24, 0), STK_E_DIMS_OVERFLOW,
            {"offset 33", "tensor 't': the product of its dimensions overflows"});
    refused("negdim.gguf", G().header(3, 1, 0).tensor("t", {~uint64_t(0)}, 0, 0), STK_E_CORRUPT,
            {"offset 37", "dimension 0 is -1"});
    // A dimension that makes bytes wrap (llama.cpp #18674: 2^42+1 rows of a Q8_0 row; stride x
    // rows wrapped to 0): the product is fine, the bytes run off the file.
    G wrap;
    wrap.header(3, 1, 0).tensor("token_embd.weight", {1152, (uint64_t(1) << 42) + 1}, 8, 0).pad().zeros(64);
    refused("wrap.gguf", wrap, STK_E_TRUNCATED, {"tensor 'token_embd.weight'", "run past the end"});
    refused("type.gguf", G().header(3, 1, 0).tensor("t", {4}, 4, 0), STK_E_UNSUPPORTED, {"offset 45", "unknown ggml type 4"});
    refused("block.gguf", G().header(3, 1, 0).tensor("t", {30}, 2, 0), STK_E_SIZE_MISMATCH,
            {"tensor 't': its first dimension 30 is not a multiple of Q4_0's block of 32"});
    refused("dupname.gguf", G().header(3, 2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32), STK_E_CORRUPT,
            {"offset 57", "duplicate tensor name 't'"});
    refused("misaligned.gguf", G().header(3, 1, 0).tensor("t", {8}, 0, 4).pad().zeros(64), STK_E_MISALIGNED,
            {"offset 49", "data offset 4 is not a multiple of the alignment 32"});
    // Overlap and hole between tensors; the offset+size past the end; offsets near 2^64.
    G ov;
    ov.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad().zeros(128);
    refused("overlap.gguf", ov, STK_E_CORRUPT, {"tensor 'b': data offset 32 overlaps the previous tensor, which ends at 64"});
    G hole;
    hole.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 64).pad().zeros(128);
    refused("hole.gguf", hole, STK_E_CORRUPT, {"tensor 'b': data offset 64 leaves a hole"});
    G end;
    end.header(3, 1, 0).tensor("a", {64}, 0, 0).pad().zeros(100);
    refused("end.gguf", end, STK_E_TRUNCATED, {"tensor 'a': 256 bytes at data offset 0", "run past the end"});
    G huge;
    huge.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, ~uint64_t(31)).pad().zeros(64);
    refused("hugeoff.gguf", huge, STK_E_CORRUPT, {"tensor 'b': data offset 18446744073709551584 leaves a hole"});
    // A zero dimension (llama.cpp #24263: INT64_MAX / 0 there) is refused before any arithmetic.
    refused("zero.gguf", G().header(3, 1, 0).tensor("z", {4, 0}, 0, 0), STK_E_CORRUPT,
            {"offset 45", "tensor 'z': dimension 1 is 0"});
    // A type outside the dequantised list: the parser reads it, the checkpoint refuses it.
    G iq;
    iq.header(3, 1, 0).tensor("blk.0.ffn_up.weight", {256}, 16, 0).pad().zeros(66);
    std::string p = write("iq2.gguf", iq);
    assert_int_equal(GgufFile(p).tensors()[0].n_bytes, 66);
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { open_checkpoint(p); });
    assert_contains(msg, "tensor 'blk.0.ffn_up.weight': ggml type IQ2_XXS is not supported");
    assert_contains(msg, "offset 24");
}

static void split_refusals(void **) {
    // split.count without the set's name pattern, and a set whose split.no disagrees.
    G one;
    one.header(3, 0, 2).str("split.count").u32(2).u8(2).u8(0).str("split.no").u32(2).u8(0).u8(0);
    std::string p = write("alone.gguf", one);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { GgufFile f(p); }),
                    p + ": split.count is 2, but the file name is not PREFIX-NNNNN-of-MMMMM.gguf");
    // Named as a set, the second file missing.
    std::string first = write("s-00001-of-00002.gguf", one);
    assert_contains(test::expect_error(STK_E_NOT_FOUND, [&] { GgufFile f(first); }),
                    g_dir + "/s-00002-of-00002.gguf: file 2 of the split set is missing");
    // The second file present but claiming split.no 0.
    write("s-00002-of-00002.gguf", one);
    assert_contains(test::expect_error(STK_E_CORRUPT, [&] { GgufFile f(first); }),
                    "s-00002-of-00002.gguf: offset 69: split.no is 0, but this is file 2 of the set (expected 1)");
    assert_true(gguf_split_name("/a/b/m-00002-of-00003.gguf", nullptr, nullptr, nullptr));
    std::string prefix;
    uint32_t no = 0, count = 0;
    assert_true(gguf_split_name("x-y-00001-of-00012.gguf", &prefix, &no, &count));
    assert_string_equal(prefix.c_str(), "x-y");
    assert_int_equal(no, 1);
    assert_int_equal(count, 12);
    assert_false(gguf_split_name("m-00004-of-00003.gguf", nullptr, nullptr, nullptr));
    assert_false(gguf_split_name("m-0001-of-00003.gguf", nullptr, nullptr, nullptr));
    assert_false(gguf_split_name("m-00000-of-00003.gguf", nullptr, nullptr, nullptr));
}

// Every Highway target gives the reference's bytes, on random blocks with finite scales.
static void dequant_targets_match_reference(void **) {
    static const uint32_t kTypes[] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 30, 34, 35};
    uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    for (uint32_t t : kTypes) {
        assert_true(ggml::ggml_dequant_supported(t));
        const uint32_t block = ggml::ggml_dequant_block(t), bytes = ggml::ggml_dequant_block_bytes(t);
        const uint64_t n_blocks = 4096 / block + 3;
        std::vector<uint8_t> src(n_blocks * bytes);
        for (auto &c : src) c = uint8_t(next());
        if (block > 1)  // keep every f16 field finite: clear bit 14 of each byte pair's high byte
            for (size_t i = 1; i < src.size(); i += 2) src[i] &= 0xBF;
        std::vector<float> ref(n_blocks * block), got(n_blocks * block);
        assert_true(ggml::ggml_dequantize_reference(t, src.data(), n_blocks, ref.data()));
        for (int64_t target : ggml::ggml_dequant_targets()) {
            hwy::SetSupportedTargetsForTest(target);
            std::fill(got.begin(), got.end(), -7.0f);
            assert_true(ggml::ggml_dequantize(t, src.data(), n_blocks, got.data()));
            if (std::memcmp(got.data(), ref.data(), got.size() * 4) != 0)
                fail_msg("type %u on %s differs from the reference", t, hwy::TargetName(target));
        }
        hwy::SetSupportedTargetsForTest(0);
    }
    assert_false(ggml::ggml_dequant_supported(16));
    float out = 5.0f;
    uint8_t blk[66] = {};
    assert_false(ggml::ggml_dequantize(16, blk, 1, &out));
    assert_true(out == 5.0f);
}

int main() {
    g_dir = test::make_temp_dir("gguf");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_file_reads), cmocka_unit_test(header_refusals), cmocka_unit_test(metadata_refusals),
        cmocka_unit_test(tensor_refusals),  cmocka_unit_test(split_refusals),  cmocka_unit_test(dequant_targets_match_reference),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
