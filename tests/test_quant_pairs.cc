// Hostile pairings of quantised safetensors weights with their scales (ingest/checkpoint.h
// attach_fp8_scales, ingest/mxfp4.h wrap_mxfp4): each refused with its status and a message that
// names the file, the tensor and the offset (the block size: config.json's weight_block_size,
// refused unless two integers in [1, 2^20]); and the accepted edge cases (a BF16 scale, a scale in
// another shard, NaN / inf scales) dequantised as transformers computes them in float32.  The
// values against transformers' own output are in test_safetensors (fp8_block_scaled_exact) and
// test_mxfp4; fuzz/quant_pairs.cc fuzzes the same paths.
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/float16.h"
#include "ingest/checkpoint.h"
#include "ingest/config.h"
#include "ingest/dtype_convert.h"
#include "ingest/mxfp4.h"

#include "test_util.h"

using namespace stk;

namespace {

std::string g_dir;

struct T {
    std::string name, dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
};

// A safetensors file of these tensors, in this order, as the crate writes one.
std::string write_st(const std::string &file, const std::vector<T> &ts) {
    std::string h = "{";
    uint64_t off = 0;
    for (const T &t : ts) {
        std::string shape;
        for (uint64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
        h += (h.size() > 1 ? "," : "") +
             ("\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(off) + "," + std::to_string(off + t.bytes.size()) + "]}");
        off += t.bytes.size();
    }
    h += "}";
    while (h.size() % 8) h += ' ';
    const uint64_t n = h.size();
    std::vector<uint8_t> b(8 + n);
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, h.data(), n);
    for (const T &t : ts) b.insert(b.end(), t.bytes.begin(), t.bytes.end());
    const std::string p = g_dir + "/" + file;
    test::write_bytes(p, b);
    return p;
}

std::vector<uint8_t> f32s(const std::vector<float> &v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

std::vector<uint8_t> ramp(size_t n, uint8_t start = 0x30) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; i++) b[i] = uint8_t(start + i);
    return b;
}

// Offset of a tensor's first byte in a file write_st made (the reader's own number).
uint64_t offset_of(const std::string &path, const char *name) {
    auto ck = open_checkpoint(path);
    const TensorRef *t = ck->find(name);
    assert_non_null(t);
    return t->file_offset;
}

std::string fp8_fails(stk_status st, const std::string &path, uint32_t br = 4, uint32_t bc = 4) {
    return test::expect_error(st, [&] {
        auto ck = open_checkpoint(path);
        attach_fp8_scales(*ck, br, bc);
    });
}

std::string mxfp4_fails(stk_status st, const std::string &path) {
    return test::expect_error(st, [&] { wrap_mxfp4(open_checkpoint(path)); });
}

void write_text(const std::string &p, const std::string &s) { test::write_bytes(p, std::vector<uint8_t>(s.begin(), s.end())); }

void assert_has(const std::string &msg, const std::string &needle) {
    if (msg.find(needle) == std::string::npos) fail_msg("'%s' not in: %s", needle.c_str(), msg.c_str());
}

const std::vector<float> kScale6 = {0.5f, 2.0f, 0.25f, 1.5f, 3.0f, 0.125f};  // a [2, 3] grid

void fp8_refusals(void **) {
    // [6, 10] in 4 x 4 blocks: a [2, 3] grid.
    const T w{"m.weight", "F8_E4M3", {6, 10}, ramp(60)};
    const T s{"m.weight_scale_inv", "F32", {2, 3}, f32s(kScale6)};

    std::string p = write_st("fp8_missing.safetensors", {w});
    std::string m = fp8_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'm.weight' (offset " + std::to_string(offset_of(p, "m.weight")) +
                      ") is F8_E4M3 without a 'm.weight_scale_inv'");

    p = write_st("fp8_shape.safetensors", {w, {"m.weight_scale_inv", "F32", {3, 2}, f32s(kScale6)}});
    m = fp8_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'm.weight_scale_inv' (offset " + std::to_string(offset_of(p, "m.weight_scale_inv")) + ")");
    assert_has(m, "F32 scale of shape [3, 2], but weight 'm.weight' [6, 10] in 4 x 4 blocks needs F32 [2, 3]");

    // Too short for the grid: a [2, 2] scale (the reader already holds its length to its shape).
    p = write_st("fp8_short.safetensors", {w, {"m.weight_scale_inv", "F32", {2, 2}, f32s({1, 1, 1, 1})}});
    assert_has(fp8_fails(STK_E_CORRUPT, p), "F32 scale of shape [2, 2], but weight 'm.weight' [6, 10]");

    p = write_st("fp8_dtype.safetensors", {w, {"m.weight_scale_inv", "F16", {2, 3}, ramp(12)}});
    m = fp8_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'm.weight_scale_inv'");
    assert_has(m, "F16 scale of shape [2, 3]");

    p = write_st("fp8_orphan.safetensors", {s});
    m = fp8_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'm.weight_scale_inv' (offset " + std::to_string(offset_of(p, "m.weight_scale_inv")) +
                      "): an F8 block scale without its weight 'm.weight'");

    p = write_st("fp8_notf8.safetensors", {{"m.weight", "BF16", {6, 10}, ramp(120)}, s});
    m = fp8_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'm.weight' (offset " + std::to_string(offset_of(p, "m.weight")) +
                      ") has a block scale 'm.weight_scale_inv' (offset " + std::to_string(offset_of(p, "m.weight_scale_inv")) +
                      ") but is BF16 of rank 2");

    p = write_st("fp8_rank1.safetensors", {{"m.weight", "F8_E5M2", {60}, ramp(60)}, s});
    assert_has(fp8_fails(STK_E_CORRUPT, p), "but is F8_E5M2 of rank 1, not a contiguous 2-D F8 matrix");

    // A zero dimension leaves the other unbounded by the file: rows + block - 1 used to wrap
    // to a grid of 0 rows, so an empty [0, 0] scale was accepted for 2^64 - 1 rows.
    p = write_st("fp8_huge.safetensors", {{"m.weight", "F8_E4M3", {~0ull, 0}, {}}, {"m.weight_scale_inv", "F32", {0, 0}, {}}});
    assert_has(fp8_fails(STK_E_CORRUPT, p, 128, 128),
               "weight 'm.weight' [18446744073709551615, 0] in 128 x 128 blocks needs F32 [144115188075855872, 0]");

    p = write_st("fp8_ok.safetensors", {w, s});
    m = fp8_fails(STK_E_INVALID_ARGUMENT, p, 0, 128);
    assert_has(m, "F8 block size 0 x 128: quantization_config weight_block_size needs two sizes >= 1");
    // The block size must give the stored grid (4 x 8 blocks: [2, 2]).
    assert_has(fp8_fails(STK_E_CORRUPT, p, 4, 8), "in 4 x 8 blocks needs F32 [2, 2]");
}

// The block size comes from config.json's quantization_config weight_block_size: two integers in
// [1, 2^20], else refused before any tensor is read.
void block_size_from_config(void **) {
    const std::string base = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "intermediate_size": 8, "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
            "quant_method": "fp8", "weight_block_size": BS}})";
    auto with = [&](const char *bs) {
        std::string t = base;
        return t.replace(t.find("BS"), 2, bs);
    };
    ModelConfig c = parse_model_config(with("[1048576, 1]"), "q/config.json").config;
    assert_int_equal(c.fp8_block[0], 1u << 20);
    assert_int_equal(c.fp8_block[1], 1);
    for (const char *bad : {"[0, 128]", "[128]", "[128, 128, 128]", "[1048577, 128]", "[-128, 128]", "[128.5, 128]", "[]"}) {
        std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { parse_model_config(with(bad), "q/config.json"); });
        assert_has(msg,
                   "q/config.json: \"quantization_config\" fp8 with activation_scheme 'dynamic', fmt 'e4m3' and no valid "
                   "weight_block_size");
    }
    assert_has(test::expect_error(STK_E_BAD_JSON, [&] { parse_model_config(with("\"128\""), "q/config.json"); }),
               "q/config.json: \"weight_block_size\" must be a list or null");
    // A number past 64 bits is not JSON simdjson reads.
    assert_has(
        test::expect_error(STK_E_BAD_JSON, [&] { parse_model_config(with("[18446744073709551616, 1]"), "q/config.json"); }),
        "q/config.json: not valid JSON");
}

// f32(w) x f32(scale), once rounded, per element (transformers' _dequantize_fp8_weight in float32).
std::vector<float> fp8_want(const std::vector<uint8_t> &w, uint64_t cols, const std::vector<float> &grid, uint64_t gc,
                            uint32_t br, uint32_t bc) {
    std::vector<float> out(w.size());
    for (size_t e = 0; e < w.size(); e++) out[e] = f8e4m3_to_f32(w[e]) * grid[(e / cols / br) * gc + (e % cols) / bc];
    return out;
}

std::vector<float> convert_all(const Checkpoint &ck, const char *name) {
    const TensorRef *t = ck.find(name);
    assert_non_null(t);
    std::vector<uint8_t> scratch;
    std::vector<float> v(t->n_elements);
    convert_to_f32(*t, ck.tensor_bytes(*t, scratch), 0, v.size(), v.data());
    return v;
}

void fp8_accepted_edges(void **) {
    const std::vector<uint8_t> wb = ramp(60);
    // A BF16 scale grid (transformers multiplies in float32 after the upcast).
    std::vector<uint8_t> bf(12);
    for (size_t i = 0; i < 6; i++) {
        uint32_t b;
        std::memcpy(&b, &kScale6[i], 4);
        bf[2 * i] = uint8_t(b >> 16), bf[2 * i + 1] = uint8_t(b >> 24);
    }
    std::string p =
        write_st("fp8_bf16.safetensors", {{"m.weight", "F8_E4M3", {6, 10}, wb}, {"m.weight_scale_inv", "BF16", {2, 3}, bf}});
    auto ck = open_checkpoint(p);
    attach_fp8_scales(*ck, 4, 4);
    std::vector<float> want = fp8_want(wb, 10, kScale6, 3, 4, 4), got = convert_all(*ck, "m.weight");
    assert_memory_equal(got.data(), want.data(), want.size() * 4);

    // A block larger than the tensor: one block, a [1, 1] grid.
    p = write_st("fp8_bigblock.safetensors",
                 {{"m.weight", "F8_E4M3", {6, 10}, wb}, {"m.weight_scale_inv", "F32", {1, 1}, f32s({0.75f})}});
    ck = open_checkpoint(p);
    attach_fp8_scales(*ck, 1u << 20, 1u << 20);
    want = fp8_want(wb, 10, {0.75f}, 1, 1u << 20, 1u << 20);
    got = convert_all(*ck, "m.weight");
    assert_memory_equal(got.data(), want.data(), want.size() * 4);

    // The scale in the other shard of a sharded checkpoint.
    const std::string d = g_dir + "/fp8dir";
    mkdir(d.c_str(), 0755);
    (void)write_st("fp8dir/w.safetensors", {{"m.weight", "F8_E4M3", {6, 10}, wb}});
    (void)write_st("fp8dir/s.safetensors", {{"m.weight_scale_inv", "F32", {2, 3}, f32s(kScale6)}});
    write_text(d + "/model.safetensors.index.json",
               R"({"weight_map":{"m.weight":"w.safetensors","m.weight_scale_inv":"s.safetensors"}})");
    ck = open_checkpoint(d);
    attach_fp8_scales(*ck, 4, 4);
    want = fp8_want(wb, 10, kScale6, 3, 4, 4);
    got = convert_all(*ck, "m.weight");
    assert_memory_equal(got.data(), want.data(), want.size() * 4);

    // NaN and inf scales are values, as in transformers: NaN x w is NaN, inf x w is +-inf (0 x inf
    // NaN) in their blocks only; the conversion policy then refuses or records them
    // (parse_tensors, STK_E_NONFINITE).
    const float nan = std::nanf(""), inf = INFINITY;
    std::vector<uint8_t> w0 = wb;
    w0[48] = 0;  // +0 in the inf block (row 4, col 8): 0 x inf
    p = write_st("fp8_nan.safetensors",
                 {{"m.weight", "F8_E4M3", {6, 10}, w0}, {"m.weight_scale_inv", "F32", {2, 3}, f32s({nan, 1, 1, 1, 1, inf})}});
    ck = open_checkpoint(p);
    attach_fp8_scales(*ck, 4, 4);
    got = convert_all(*ck, "m.weight");
    uint64_t nans = 0, infs = 0;
    for (uint64_t e = 0; e < 60; e++) {
        const uint64_t r = e / 10, c = e % 10, block = (r / 4) * 3 + c / 4;
        const float wv = f8e4m3_to_f32(w0[e]);
        if (block == 0) assert_true(std::isnan(got[e]));
        else if (block == 5 && wv == 0) assert_true(std::isnan(got[e]));
        else if (block == 5) assert_true(std::isinf(got[e]) && std::signbit(got[e]) == std::signbit(wv));
        else assert_true(got[e] == wv);
        nans += std::isnan(got[e]), infs += std::isinf(got[e]);
    }
    assert_int_equal(nans, 16 + 1);  // block (0, 0): rows 0-3, cols 0-3; and 0 x inf
    assert_int_equal(infs, 3);       // block (1, 2): rows 4-5, cols 8-9, but the 0
}

const std::vector<uint8_t> kBlocks = ramp(2 * 3 * 16, 0x11);  // [2, 3, 16]: 2 rows of 3 groups
const std::vector<uint8_t> kScales = {120, 127, 130, 0, 254, 255};

void mxfp4_refusals(void **) {
    std::string p =
        write_st("mx_blocks_dtype.safetensors", {{"x_blocks", "I8", {2, 3, 16}, kBlocks}, {"x_scales", "U8", {2, 3}, kScales}});
    std::string m = mxfp4_fails(STK_E_CORRUPT, p);
    assert_has(m, p + ": tensor 'x_blocks' (offset " + std::to_string(offset_of(p, "x_blocks")) + ", I8 [2, 3, 16])");
    assert_has(m, "MXFP4 blocks and scales must be U8; the blocks are I8, 'x_scales' (offset " +
                      std::to_string(offset_of(p, "x_scales")) + ") is U8");

    p = write_st("mx_scales_dtype.safetensors", {{"x_blocks", "U8", {2, 3, 16}, kBlocks}, {"x_scales", "F16", {2, 3}, ramp(12)}});
    assert_has(mxfp4_fails(STK_E_CORRUPT, p),
               "the blocks are U8, 'x_scales' (offset " + std::to_string(offset_of(p, "x_scales")) + ") is F16");

    p = write_st("mx_rank.safetensors", {{"x_blocks", "U8", {6, 16}, kBlocks}, {"x_scales", "U8", {6}, kScales}});
    assert_has(mxfp4_fails(STK_E_CORRUPT, p), "'x_blocks' (offset " + std::to_string(offset_of(p, "x_blocks")) +
                                                  ", U8 [6, 16]): MXFP4 blocks must be [..., rows, groups, 16]");

    // Scales one group short (the reader holds their length to their shape).
    p = write_st("mx_short.safetensors", {{"x_blocks", "U8", {2, 3, 16}, kBlocks}, {"x_scales", "U8", {2, 2}, {1, 2, 3, 4}}});
    assert_has(mxfp4_fails(STK_E_CORRUPT, p), "need scales of shape [..., rows, groups]; 'x_scales' (" + p + ", offset " +
                                                  std::to_string(offset_of(p, "x_scales")) + ") is [2, 2]");

    // 2^59 groups of 0 rows hold no bytes, but 2^59 x 32 values wrapped to a [0, 0] tensor.
    p = write_st("mx_huge.safetensors", {{"x_blocks", "U8", {0, 1ull << 59, 16}, {}}, {"x_scales", "U8", {0, 1ull << 59}, {}}});
    assert_has(mxfp4_fails(STK_E_DIMS_OVERFLOW, p),
               p + ": tensor 'x_blocks' (offset " + std::to_string(offset_of(p, "x_blocks")) +
                   ", [0, 576460752303423488, 16]): MXFP4 blocks: 576460752303423488 groups x 32 values overflows 64 bits");

    // Blocks and scales in two shards: refused (stk dequantises the pair from one mapping).
    const std::string dir = g_dir + "/mxdir";
    mkdir(dir.c_str(), 0755);
    const std::string bp = write_st("mxdir/b.safetensors", {{"x_blocks", "U8", {2, 3, 16}, kBlocks}});
    const std::string sp = write_st("mxdir/s.safetensors", {{"x_scales", "U8", {2, 3}, kScales}});
    write_text(dir + "/model.safetensors.index.json",
               R"({"weight_map":{"x_blocks":"b.safetensors","x_scales":"s.safetensors"}})");
    m = mxfp4_fails(STK_E_UNSUPPORTED, dir);
    assert_has(m, bp + ": tensor 'x_blocks' (offset " + std::to_string(offset_of(bp, "x_blocks")) +
                      "): its MXFP4 scales 'x_scales' are in another file (" + sp + ", offset " +
                      std::to_string(offset_of(sp, "x_scales")) + ")");
}

void mxfp4_accepted_values(void **) {
    // FP4_VALUES[code] x 2^(scale - 127), computed here from the bytes (transformers'
    // convert_moe_packed_tensors; test_mxfp4 checks the same against its output bit for bit).
    const std::string p =
        write_st("mx_ok.safetensors", {{"x_blocks", "U8", {2, 3, 16}, kBlocks}, {"x_scales", "U8", {2, 3}, kScales}});
    auto ck = wrap_mxfp4(open_checkpoint(p));
    assert_int_equal(ck->tensors().size(), 1);
    const TensorRef &t = ck->tensors()[0];
    assert_true((t.shape == std::vector<uint64_t>{2, 96}));
    std::vector<float> got = convert_all(*ck, "x_blocks");
    for (uint64_t k = 0; k < 192; k++) {
        const uint8_t b = kBlocks[k / 2], code = (k & 1) ? b >> 4 : b & 0xF;
        const float want = std::ldexp(kFp4Values[code], int(kScales[k / 32]) - 127);
        if (std::memcmp(&want, &got[k], 4) != 0) fail_msg("value %llu: %a, want %a", (unsigned long long)k, got[k], want);
    }
}

}  // namespace

int main() {
    g_dir = test::make_temp_dir("quant_pairs");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_refusals),   cmocka_unit_test(block_size_from_config), cmocka_unit_test(fp8_accepted_edges),
        cmocka_unit_test(mxfp4_refusals), cmocka_unit_test(mxfp4_accepted_values),
    };
    return cmocka_run_group_tests_name("quant_pairs", tests, nullptr, nullptr);
}
