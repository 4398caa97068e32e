// The .lwt format (seed 001) and native low-bit packing (seed 002): conversions, every code of
// every dtype, bit orders, the quantisation rules, the byte-exact test vector of docs/format.md,
// every refusal of the reader, and the round trips (load -> save, quantise -> save -> load ->
// save) byte for byte.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "format/lowbit.h"
#include "format/lwt.h"
#include "ingest/dtype_convert.h"
#include "format/lowbit_kernels.h"
#include "test_util.h"

#include <hwy/targets.h>

using namespace stk;
using namespace stk::test;

namespace {

float bits_f(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
uint64_t dbl_bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
}

uint32_t f_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

const LwtDType kAll[] = {LwtDType::F32, LwtDType::F16, LwtDType::BF16, LwtDType::I8, LwtDType::U8,      LwtDType::I4,
                         LwtDType::U4,  LwtDType::FP4, LwtDType::I2,   LwtDType::U2, LwtDType::TERNARY, LwtDType::BINARY};

// Values shaped like trained weights: a decaying scale over rows, a heavy tail, a few outliers.
std::vector<float> weight_like(uint64_t n, uint64_t seed) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = double(s >> 11) * 0x1p-53 - 0.5;
        double x = u * 0.08 / (1.0 + double(i % 97) / 20.0);
        if (s % 211 == 0) x = u * 40.0;                 // outlier
        if (s % 17 == 0) x = std::tan(u * 3.0) * 0.02;  // heavy tail
        v[i] = float(x);
    }
    return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
static void test_crc32(void **) {
    assert_int_equal(lwt_crc32("123456789", 9), 0xCBF43926u);
    assert_int_equal(lwt_crc32("", 0), 0u);
}

static void test_dtype_names(void **) {
    static const char *const names[] = {"float32", "float16", "bfloat16", "int8",    "uint8",  "int4", "uint4",
                                        "fp4",     "int2",    "uint2",    "ternary", "binary", "q4_0", "q8_0"};
    static const unsigned bits[] = {32, 16, 16, 8, 8, 4, 4, 4, 2, 2, 2, 1, 0, 0};
    assert_int_equal(kLwtDTypeLast, 14);
    for (uint32_t c = 1; c <= 14; c++) {
        LwtDType t;
        assert_string_equal(lwt_dtype_name(LwtDType(c)), names[c - 1]);
        assert_true(parse_lwt_dtype(names[c - 1], &t));
        assert_int_equal(uint32_t(t), c);
        assert_int_equal(lwt_dtype_bits(t), bits[c - 1]);
    }
    LwtDType t;
    assert_false(parse_lwt_dtype("float64", &t));
    assert_false(lwt_dtype_valid(0));
    assert_false(lwt_dtype_valid(15));
    assert_true(lwt_dtype_is_blocked(LwtDType::Q4_0) && lwt_dtype_is_blocked(LwtDType::Q8_0));
    assert_false(lwt_dtype_has_scale(LwtDType::Q4_0) || lwt_dtype_has_scale(LwtDType::BF16));
    assert_true(lwt_dtype_has_scale(LwtDType::BINARY));
    uint64_t b;
    assert_true(lwt_packed_bytes(LwtDType::Q4_0, 64, &b)), assert_int_equal(b, 36);
    assert_true(lwt_packed_bytes(LwtDType::Q8_0, 32, &b)), assert_int_equal(b, 34);
    assert_false(lwt_packed_bytes(LwtDType::Q4_0, 33, &b));
    assert_false(lwt_packed_bytes(LwtDType::Q8_0, UINT64_MAX / 32 * 32, &b));
    assert_true(lwt_packed_bytes(LwtDType::I4, 3, &b)), assert_int_equal(b, 2);
    assert_true(lwt_packed_bytes(LwtDType::I2, 5, &b)), assert_int_equal(b, 2);
    assert_true(lwt_packed_bytes(LwtDType::BINARY, 9, &b)), assert_int_equal(b, 2);
    assert_true(lwt_packed_bytes(LwtDType::BF16, 3, &b)), assert_int_equal(b, 6);
    assert_false(lwt_packed_bytes(LwtDType::F32, 1ull << 62, &b));
}

// f16 / bf16: every 16-bit pattern decodes and re-encodes to itself (NaNs: once quiet, stable);
// rounding of halfway cases and overflow as IEEE says.
static void test_half_conversions(void **) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lwt_decode(LwtDType::F16, h, {});
        uint32_t back = f32_to_f16_rne(f);
        bool nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
        if (nan) assert_int_equal(back, h | 0x200u);
        else assert_int_equal(back, h);
        float g = lwt_decode(LwtDType::BF16, h, {});
        uint32_t gb = f32_to_bf16_rne(g);
        bool gnan = (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu);
        if (gnan) assert_int_equal(gb, h | 0x40u);
        else assert_int_equal(gb, h);
    }
    assert_int_equal(f32_to_f16_rne(1.0f + 0x1p-11f), 0x3C00);      // tie -> even
    assert_int_equal(f32_to_f16_rne(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie -> even (up)
    assert_int_equal(f32_to_f16_rne(65504.0f), 0x7BFF);
    assert_int_equal(f32_to_f16_rne(65519.0f), 0x7BFF);
    assert_int_equal(f32_to_f16_rne(65520.0f), 0x7C00);  // rounds past the largest finite
    assert_int_equal(f32_to_f16_rne(-1e9f), 0xFC00);
    assert_int_equal(f32_to_f16_rne(0x1p-24f), 0x0001);  // smallest subnormal
    assert_int_equal(f32_to_f16_rne(0x1p-25f), 0x0000);  // tie -> even (zero)
    assert_int_equal(f32_to_f16_rne(0x1.8p-25f), 0x0001);
    assert_int_equal(f32_to_f16_rne(0x1p-14f), 0x0400);
    assert_int_equal(f32_to_f16_rne(-0.0f), 0x8000);
    assert_int_equal(f32_to_bf16_rne(bits_f(0x3F808000u)), 0x3F80);  // tie -> even
    assert_int_equal(f32_to_bf16_rne(bits_f(0x3F818000u)), 0x3F82);
    assert_int_equal(f32_to_bf16_rne(bits_f(0x7F7FFFFFu)), 0x7F80);  // overflow -> inf
    assert_int_equal(f32_to_bf16_rne(bits_f(0x7F800001u)), 0x7FC0);  // sNaN -> quiet
}

// Every field of every integer dtype: the value the documented formula gives (computed here
// plainly), and encode(decode(field)) == field, over several scales and every zero point.
static void test_every_code(void **) {
    const float scales[] = {1.0f, 0.02f, 3.0e-5f, 7.5f, 0x1p-100f, 1.0e30f};
    static const float fp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (LwtDType t : kAll) {
        if (lwt_dtype_is_float(t)) continue;
        unsigned b = lwt_dtype_bits(t);
        uint32_t umax = lwt_unsigned_max(t);
        for (float s : scales) {
            for (uint32_t zp = 0; zp <= umax; zp++) {
                LwtQuant q{s, zp};
                for (uint32_t f = 0; f < (1u << b); f++) {
                    if (!lwt_field_valid(t, f)) {
                        assert_true(t == LwtDType::TERNARY && f == 2);
                        continue;
                    }
                    float want;
                    switch (t) {
                        case LwtDType::I8: want = float(int8_t(uint8_t(f))) * s; break;
                        case LwtDType::I4: want = float(f >= 8 ? int(f) - 16 : int(f)) * s; break;
                        case LwtDType::I2:
                        case LwtDType::TERNARY: want = float(f >= 2 ? int(f) - 4 : int(f)) * s; break;
                        case LwtDType::U8:
                        case LwtDType::U4:
                        case LwtDType::U2: want = float(int(f) - int(zp)) * s; break;
                        case LwtDType::FP4: want = (f & 8) ? -(fp4[f & 7] * s) : fp4[f & 7] * s; break;
                        case LwtDType::BINARY: want = f ? s : -s; break;
                        default: want = 0; fail();
                    }
                    float got = lwt_decode(t, f, q);
                    if (f_bits(got) != f_bits(want)) {
                        print_error("%s field %u scale %g zp %u: %a, want %a\n", lwt_dtype_name(t), f, double(s), zp, double(got),
                                    double(want));
                        fail();
                    }
                    uint32_t back = lwt_encode(t, got, q);
                    if (back != f) {
                        print_error("%s field %u scale %g zp %u: decodes to %a, which encodes to %u\n", lwt_dtype_name(t), f,
                                    double(s), zp, double(got), back);
                        fail();
                    }
                }
                if (!umax) break;
            }
        }
    }
}

// The bit orders of seed 002: high nibble for the even index, shift 6 - 2*(i%4), MSB first.
static void test_bit_orders(void **) {
    LwtQuant one{1.0f, 0};
    {
        const float v[] = {1, -2, 3};
        uint8_t out[2] = {0xAA, 0xAA};
        lwt_pack(LwtDType::I4, v, 3, one, out);
        assert_int_equal(out[0], 0x1E);
        assert_int_equal(out[1], 0x30);
    }
    {
        const float v[] = {1, -1, 0, -2, 1};
        uint8_t out[2] = {0xAA, 0xAA};
        lwt_pack(LwtDType::I2, v, 5, one, out);
        assert_int_equal(out[0], 0x72);  // 01 11 00 10
        assert_int_equal(out[1], 0x40);
    }
    {
        const float v[] = {1, -1, 0, 1, 1};
        uint8_t out[2] = {0xAA, 0xAA};
        lwt_pack(LwtDType::TERNARY, v, 5, one, out);
        assert_int_equal(out[0], 0x71);  // 01 11 00 01
        assert_int_equal(out[1], 0x40);
    }
    {
        const float v[] = {0.3f, -1, 0, 2, 5, 7, -3, 9, 1};  // v > 0 -> 1
        uint8_t out[2] = {0xAA, 0xAA};
        lwt_pack(LwtDType::BINARY, v, 9, one, out);
        assert_int_equal(out[0], 0x9D);  // 1 0 0 1 1 1 0 1
        assert_int_equal(out[1], 0x80);
    }
    {
        const float v[] = {0, 15, 7};
        uint8_t out[2];
        lwt_pack(LwtDType::U4, v, 3, LwtQuant{1.0f, 0}, out);
        assert_int_equal(out[0], 0x0F);
        assert_int_equal(out[1], 0x70);
    }
    {
        const float v[] = {6, -0.5f, 0.25f, -0.0f};
        uint8_t out[2];
        lwt_pack(LwtDType::FP4, v, 4, one, out);
        assert_int_equal(out[0], 0x79);  // 0 111, 1 001
        assert_int_equal(out[1], 0x08);  // +0 (tie to even), -0
    }
    {
        const float v[] = {-1.0f, 2.0f};
        uint8_t out[4];
        lwt_pack(LwtDType::BF16, v, 2, one, out);
        const uint8_t want[] = {0x80, 0xBF, 0x00, 0x40};
        assert_memory_equal(out, want, 4);
        lwt_pack(LwtDType::F16, v, 2, one, out);
        const uint8_t want16[] = {0x00, 0xBC, 0x00, 0x40};
        assert_memory_equal(out, want16, 4);
    }
}

// The quantisation rules (docs/format.md): scales chosen, round half to even, clamping.
static void test_quant_rules(void **) {
    LwtQuant one{1.0f, 0};
    assert_int_equal(lwt_encode(LwtDType::I8, 2.5f, one), 2);
    assert_int_equal(lwt_encode(LwtDType::I8, 3.5f, one), 4);
    assert_int_equal(lwt_encode(LwtDType::I8, -2.5f, one), uint8_t(-2));
    assert_int_equal(lwt_encode(LwtDType::I8, 200.0f, one), 127);
    assert_int_equal(lwt_encode(LwtDType::I8, -200.0f, one), 0x80);
    assert_int_equal(lwt_encode(LwtDType::I4, 0.5f, one), 0);
    assert_int_equal(lwt_encode(LwtDType::I4, -9.0f, one), 0x8);
    assert_int_equal(lwt_encode(LwtDType::TERNARY, 0.5f, one), 0);
    assert_int_equal(lwt_encode(LwtDType::TERNARY, 0.51f, one), 1);
    assert_int_equal(lwt_encode(LwtDType::TERNARY, -7.0f, one), 3);
    assert_int_equal(lwt_encode(LwtDType::BINARY, 0.0f, one), 0);  // seed: v > 0 -> 1, else 0
    assert_int_equal(lwt_encode(LwtDType::FP4, 0.75f, one), 2);    // tie 0.5/1.0 -> even mantissa
    assert_int_equal(lwt_encode(LwtDType::FP4, 5.0f, one), 6);     // tie 4 (index 6) / 6 (index 7) -> even index
    assert_int_equal(lwt_encode(LwtDType::FP4, 100.0f, one), 7);   // clamp to 6
    assert_int_equal(lwt_encode(LwtDType::U8, -3.0f, LwtQuant{1.0f, 10}), 7);
    assert_int_equal(lwt_encode(LwtDType::U8, 300.0f, LwtQuant{1.0f, 10}), 255);
    assert_int_equal(lwt_encode(LwtDType::U8, -30.0f, LwtQuant{1.0f, 10}), 0);

    const float v[] = {-1.27f, 0.5f, 2.54f, -0.01f};
    LwtQuant q = lwt_choose_quant(LwtDType::I8, v, 4);
    assert_int_equal(f_bits(q.scale), f_bits(float(2.54 / 127.0)));
    assert_int_equal(q.zero_point, 0);
    q = lwt_choose_quant(LwtDType::I4, v, 4);
    assert_int_equal(f_bits(q.scale), f_bits(float(double(2.54f) / 7.0)));
    q = lwt_choose_quant(LwtDType::FP4, v, 4);
    assert_int_equal(f_bits(q.scale), f_bits(float(double(2.54f) / 6.0)));
    q = lwt_choose_quant(LwtDType::U8, v, 4);  // range [-1.27, 2.54]
    assert_int_equal(f_bits(q.scale), f_bits(float((double(2.54f) - double(-1.27f)) / 255.0)));
    assert_int_equal(q.zero_point, uint32_t(std::nearbyint(1.27f / q.scale)));
    assert_int_equal(q.zero_point, 85);
    q = lwt_choose_quant(LwtDType::TERNARY, v, 4);
    double mean = (double(1.27f) + double(0.5f) + double(2.54f) + double(0.01f)) / 4.0;
    assert_int_equal(f_bits(q.scale), f_bits(float(mean)));
    q = lwt_choose_quant(LwtDType::BINARY, v, 4);
    assert_int_equal(f_bits(q.scale), f_bits(float(mean)));
    const float pos[] = {1.0f, 2.0f};  // all positive: the range still includes 0
    q = lwt_choose_quant(LwtDType::U2, pos, 2);
    assert_int_equal(f_bits(q.scale), f_bits(float(2.0 / 3.0)));
    assert_int_equal(q.zero_point, 0);
    const float zeros[] = {0.0f, 0.0f, 0.0f};
    for (LwtDType t : kAll) {
        q = lwt_choose_quant(t, zeros, 3);
        assert_true(q.scale == 1.0f);
        assert_int_equal(q.zero_point, 0);
    }
}

// Unpack refuses ternary's unused field and nonzero padding bits.
static void test_unpack_refusals(void **) {
    float out[8];
    const uint8_t tern[] = {0x18};  // 00 01 10 00: element 2 is 0b10
    assert_int_equal(lwt_unpack(LwtDType::TERNARY, tern, 4, {1.0f, 0}, out), 2);
    const uint8_t pad4[] = {0x12};  // one int4 element, low nibble must be 0
    assert_int_equal(lwt_unpack(LwtDType::I4, pad4, 1, {1.0f, 0}, out), 2);
    const uint8_t pad1[] = {0x81};
    assert_int_equal(lwt_unpack(LwtDType::BINARY, pad1, 7, {1.0f, 0}, out), 8);
    const uint8_t ok1[] = {0x80};
    assert_int_equal(lwt_unpack(LwtDType::BINARY, ok1, 1, {2.0f, 0}, out), 1);
    assert_true(out[0] == 2.0f);
}

// ---------------------------------------------------------------------------------------------
// The test vector of docs/format.md.

static LwtModel vector_model() {
    LwtModel m;
    m.header.model_type = "tiny";
    m.header.config = {{"n_embd", 2}};
    m.header.dtype = "int4";
    LwtModelTensor a;
    a.name = "a";
    a.shape = {2};
    a.values = {1.0f, -2.0f};
    LwtModelTensor b;
    b.name = "b";
    b.shape = {1, 3};
    b.dtype = LwtDType::I4;
    b.values = {0.5f, -1.0f, 7.0f};
    m.tensors = {a, b};
    return m;
}

// 16 bytes per line, as in docs/format.md.
static const char kVectorHex[] =
#include "lwt_vector.inc"
    ;

static std::vector<uint8_t> unhex(const char *s) {
    std::vector<uint8_t> v;
    int hi = -1;
    for (; *s; s++) {
        int d = (*s >= '0' && *s <= '9') ? *s - '0' : (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10 : -1;
        if (d < 0) continue;
        if (hi < 0) hi = d;
        else v.push_back(uint8_t(hi << 4 | d)), hi = -1;
    }
    return v;
}

static std::vector<uint8_t> write_vector() {
    std::string dir = make_temp_dir("lwt_vector");
    save_lwt(vector_model(), dir + "/v.lwt");
    return read_bytes(dir + "/v.lwt");
}

static void test_vector_bytes(void **) {
    std::vector<uint8_t> got = write_vector();
    std::vector<uint8_t> want = unhex(kVectorHex);
    if (got != want) {
        print_error("test vector differs (%zu vs %zu bytes); got:\n", got.size(), want.size());
        for (size_t i = 0; i < got.size(); i++) print_error("%02x%s", got[i], i % 16 == 15 ? "\n" : " ");
        fail();
    }
    assert_int_equal(got.size(), 832);
    LwtFile f(got.data(), got.size(), "vector");
    assert_int_equal(f.header().version, 2);  // an int4 tensor: the extended entries
    assert_int_equal(f.header().entry_bytes, 224);
    assert_int_equal(f.tensors().size(), 2);
    assert_int_equal(f.data_offset(), 704);
    assert_int_equal(f.header().total_bytes, 128);
    assert_int_equal(f.header().parameter_count, 5);
    const LwtTensor *b = f.find("b");
    assert_non_null(b);
    assert_int_equal(b->offset, 64);
    assert_int_equal(b->size_bytes, 2);
    assert_int_equal(f_bits(b->quant.scale), f_bits(1.0f));  // absmax 7 / 7
    float out[3];
    f.read_f32(*b, out);
    assert_true(out[0] == 0.0f && out[1] == -1.0f && out[2] == 7.0f);  // 0.5 -> 0 (half to even)
}

// A file of float32 tensors only is version 1: seed 001's TensorIndexEntry exactly as a C compiler
// lays it out (216 bytes: name[128], ndim, 4 bytes of padding, shape[8], offset, size_bytes).
// The files stk wrote before version 2 existed (version 1 with 224-byte entries, any dtype)
// still read, with the same tensors.
static void test_version1_layout(void **) {
    LwtModel m = vector_model();
    m.header.dtype = "float32";
    m.tensors[1].dtype = LwtDType::F32;
    std::string dir = make_temp_dir("lwt_v1");
    save_lwt(m, dir + "/v1.lwt");
    std::vector<uint8_t> b = read_bytes(dir + "/v1.lwt");
    uint64_t n;
    std::memcpy(&n, &b[8], 8);
    std::string json(reinterpret_cast<const char *>(&b[16]), size_t(n));
    assert_true(json.rfind("{\"version\":1,", 0) == 0);
    const size_t e0 = size_t(16 + n), e1 = e0 + 216;
    assert_int_equal(b[e0], 'a');
    assert_int_equal(b[e1], 'b');
    auto u32 = [&](size_t at) {
        uint32_t v;
        std::memcpy(&v, &b[at], 4);
        return v;
    };
    auto u64 = [&](size_t at) {
        uint64_t v;
        std::memcpy(&v, &b[at], 8);
        return v;
    };
    assert_int_equal(u32(e1 + 128), 2);  // ndim
    assert_int_equal(u32(e1 + 132), 0);  // C padding, zero
    assert_int_equal(u64(e1 + 136), 1);  // shape
    assert_int_equal(u64(e1 + 144), 3);
    assert_int_equal(u64(e1 + 200), 64);  // offset
    assert_int_equal(u64(e1 + 208), 12);  // size_bytes
    const size_t data = (e1 + 216 + 63) / 64 * 64;
    assert_int_equal(b.size(), data + 128);
    float v;
    std::memcpy(&v, &b[data + 64 + 8], 4);
    assert_true(v == 7.0f);
    LwtFile f(b.data(), b.size(), "v1");
    assert_int_equal(f.header().version, 1);
    assert_int_equal(f.header().entry_bytes, 216);
    assert_int_equal(f.data_offset(), data);
    // The padding is the compiler's: a writer may leave anything there.
    std::vector<uint8_t> g = b;
    std::memset(&g[e1 + 132], 0xAB, 4);
    LwtFile fg(g.data(), g.size(), "v1");
    assert_int_equal(int(fg.find("b")->dtype), int(LwtDType::F32));
    // load -> save is byte-identical.
    save_lwt(load_lwt(dir + "/v1.lwt"), dir + "/again.lwt");
    assert_true(read_bytes(dir + "/again.lwt") == b);

    // The old layout of the same file: version 1, 224-byte entries (dtype code 1, scale 1.0,
    // zero point 0), the data section after them.  Its CRC is the same: only the index moves.
    std::vector<uint8_t> old(b.begin(), b.begin() + long(e0));
    for (size_t i = 0; i < 2; i++) {
        std::vector<uint8_t> e(b.begin() + long(e0 + 216 * i), b.begin() + long(e0 + 216 * (i + 1)));
        uint32_t code = 1;
        std::memcpy(&e[132], &code, 4);
        float one = 1.0f;
        uint32_t zp = 0;
        e.insert(e.end(), reinterpret_cast<uint8_t *>(&one), reinterpret_cast<uint8_t *>(&one) + 4);
        e.insert(e.end(), reinterpret_cast<uint8_t *>(&zp), reinterpret_cast<uint8_t *>(&zp) + 4);
        old.insert(old.end(), e.begin(), e.end());
    }
    old.resize((old.size() + 63) / 64 * 64, 0);
    old.insert(old.end(), b.begin() + long(data), b.end());
    LwtFile fo(old.data(), old.size(), "old");
    assert_int_equal(fo.header().version, 1);
    assert_int_equal(fo.header().entry_bytes, 224);
    assert_int_equal(fo.tensors().size(), 2);
    float out[3];
    fo.read_f32(*fo.find("b"), out);
    assert_true(out[0] == 0.5f && out[1] == -1.0f && out[2] == 7.0f);
    // The old layout with a low-bit tensor (the int4 vector relabelled version 1) reads too.
    std::vector<uint8_t> v2 = unhex(kVectorHex);
    const char *p = static_cast<const char *>(memmem(v2.data(), v2.size(), "\"version\":2", 11));
    assert_non_null(p);
    v2[size_t(p - reinterpret_cast<const char *>(v2.data())) + 10] = '1';
    LwtFile fv(v2.data(), v2.size(), "old-int4");
    assert_int_equal(fv.header().entry_bytes, 224);
    assert_int_equal(int(fv.find("b")->dtype), int(LwtDType::I4));
    // A broken version-1 file reports the version-1 error, not the old layout's.
    std::vector<uint8_t> t = b;
    std::memcpy(&t[e1 + 208], "\x0d", 1);  // size_bytes 13
    std::string msg = expect_error(STK_E_SIZE_MISMATCH, [&] { LwtFile x(t.data(), t.size(), "bad.lwt"); });
    assert_contains(msg, std::to_string(e1 + 208));
}

// Every refusal: distinct status, the file named, the tensor named, the offset given.
static void test_reader_refusals(void **) {
    const std::vector<uint8_t> good = unhex(kVectorHex);
    auto open = [](const std::vector<uint8_t> &b) { LwtFile f(b.data(), b.size(), "bad.lwt"); };
    auto find = [&](const char *needle) {
        const char *p = static_cast<const char *>(memmem(good.data(), good.size(), needle, std::strlen(needle)));
        assert_non_null(p);
        return size_t(p - reinterpret_cast<const char *>(good.data()));
    };
    // Truncated anywhere.
    for (size_t cut : {size_t(0), size_t(8), size_t(15), size_t(100), size_t(300), size_t(700), size_t(800), good.size() - 1}) {
        std::vector<uint8_t> b(good.begin(), good.begin() + long(cut));
        std::string m = expect_error(STK_E_TRUNCATED, [&] { open(b); });
        assert_contains(m, "bad.lwt");
        assert_contains(m, "offset");
    }
    std::vector<uint8_t> b = good;
    b[3] = 'X';
    expect_error(STK_E_BAD_MAGIC, [&] { open(b); });
    b = good;
    b[16] = '[';
    expect_error(STK_E_BAD_JSON, [&] { open(b); });
    b = good;
    std::memcpy(&b[find("\"byte_order\"")], "\"byte_ordeX\"", 12);
    assert_contains(expect_error(STK_E_BAD_JSON, [&] { open(b); }), "byte_ordeX");
    b = good;
    std::memcpy(&b[find("\"total_bytes\":128")], "\"total_bytes\":192", 17);  // header lies
    expect_error(STK_E_TRUNCATED, [&] { open(b); });
    b = good;
    std::memcpy(&b[find("\"total_bytes\":128")], "\"total_bytes\":064", 17);
    expect_error(STK_E_BAD_JSON, [&] { open(b); });  // leading zero: not JSON
    b = good;
    std::memcpy(&b[find("\"parameter_count\":5")], "\"parameter_count\":6", 19);
    assert_contains(expect_error(STK_E_BAD_HEADER, [&] { open(b); }), "parameter_count");
    b = good;
    std::memcpy(&b[find("\"version\":2")], "\"version\":3", 11);
    expect_error(STK_E_UNSUPPORTED, [&] { open(b); });
    b = good;
    b.push_back(0);
    expect_error(STK_E_BAD_HEADER, [&] { open(b); });  // trailing byte after the data section

    uint64_t json_len;
    std::memcpy(&json_len, &good[8], 8);
    const size_t e0 = size_t(16 + json_len), e1 = e0 + 224;  // index entries of "a" and "b"
    assert_int_equal(good[e0], 'a');
    assert_int_equal(good[e1], 'b');
    auto set64 = [](std::vector<uint8_t> &v, size_t at, uint64_t x) { std::memcpy(&v[at], &x, 8); };
    auto set32 = [](std::vector<uint8_t> &v, size_t at, uint32_t x) { std::memcpy(&v[at], &x, 4); };
    b = good;
    set64(b, e1 + 200, 128);  // offset past the end of the data section
    std::string m = expect_error(STK_E_MISALIGNED, [&] {
        set64(b, e1 + 200, 65);
        open(b);
    });
    assert_contains(m, "tensor 'b'");
    b = good;
    set64(b, e1 + 200, 128);
    m = expect_error(STK_E_CORRUPT, [&] { open(b); });
    assert_contains(m, "tensor 'b'");
    b = good;
    set32(b, e1 + 132, 15);
    m = expect_error(STK_E_BAD_DTYPE, [&] { open(b); });
    assert_contains(m, "tensor 'b'");
    assert_contains(m, std::to_string(e1 + 132));
    b = good;
    set32(b, e1 + 132, 13);  // q4_0 over 3 values: not whole blocks
    m = expect_error(STK_E_CORRUPT, [&] { open(b); });
    assert_contains(m, "tensor 'b'");
    assert_contains(m, "whole 32-value blocks");
    b = good;
    set64(b, e1 + 208, 3);  // packed length disagrees with the shape
    assert_contains(expect_error(STK_E_SIZE_MISMATCH, [&] { open(b); }), "tensor 'b'");
    b = good;
    set64(b, e1 + 136, 1ull << 40);
    set64(b, e1 + 144, 1ull << 40);
    expect_error(STK_E_DIMS_OVERFLOW, [&] { open(b); });
    b = good;
    set32(b, e0 + 128, 9);
    expect_error(STK_E_BAD_RANK, [&] { open(b); });
    b = good;
    set64(b, e0 + 136 + 8, 1);  // shape[1] beyond ndim 1
    expect_error(STK_E_BAD_RANK, [&] { open(b); });
    b = good;
    std::memset(&b[e0], 'x', 128);  // name without NUL
    expect_error(STK_E_CORRUPT, [&] { open(b); });
    b = good;
    b[e1] = 'a';  // duplicate name
    expect_error(STK_E_CORRUPT, [&] { open(b); });
    b = good;
    float bad_scale = -1.0f;
    std::memcpy(&b[e1 + 216], &bad_scale, 4);
    expect_error(STK_E_CORRUPT, [&] { open(b); });
    b = good;
    b[704 + 8] = 1;  // padding inside the data section (CRC would also fail)
    expect_error(STK_E_BAD_HEADER, [&] { open(b); });
    b = good;
    b[704] ^= 1;  // a data byte: CRC
    m = expect_error(STK_E_CHECKSUM, [&] { open(b); });
    assert_contains(m, "offset 704");
    {
        LwtFile nocrc(b.data(), b.size(), "bad.lwt", false);
        assert_true(nocrc.computed_crc32() != nocrc.header().data_crc32);
    }
    b = good;
    b[704 + 65] = 0x71;  // int4 padding nibble set: structure fine, CRC recomputed -> read refuses
    uint32_t crc = lwt_crc32(&b[704], 128);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", crc);
    std::memcpy(&b[find("\"data_crc32\":\"") + 14], hex, 8);
    LwtFile f(b.data(), b.size(), "bad.lwt");
    std::vector<float> out(3);
    assert_contains(expect_error(STK_E_CORRUPT, [&] { f.read_f32(*f.find("b"), out.data()); }), "padding");
}

// ---------------------------------------------------------------------------------------------
// Round trips for every dtype.

static void test_round_trips(void **) {
    std::string dir = make_temp_dir("lwt_roundtrip");
    for (LwtDType t : kAll) {
        LwtModel m;
        m.header.model_type = "synthetic";
        m.header.config = {{"rows", 37}, {"cols", 29}};
        m.header.dtype = lwt_dtype_name(t);
        LwtModelTensor w;
        w.name = "w";
        w.shape = {37, 29};  // 1073 elements: the last byte of every packing is partial
        w.dtype = t;
        w.values = weight_like(37 * 29, uint64_t(t));
        LwtModelTensor v;
        v.name = "v";
        v.shape = {29};
        v.values = weight_like(29, 100 + uint64_t(t));
        v.dtype = t;
        m.tensors = {w, v};
        std::string a = dir + "/" + lwt_dtype_name(t) + ".a.lwt", b = dir + "/" + lwt_dtype_name(t) + ".b.lwt",
                    c = dir + "/" + lwt_dtype_name(t) + ".c.lwt";
        save_lwt(m, a);             // quantise -> save
        LwtModel l = load_lwt(a);   // load
        save_lwt(l, b);             // save
        LwtModel l2 = load_lwt(b);  // load -> save again
        save_lwt(l2, c);
        std::vector<uint8_t> ba = read_bytes(a), bb = read_bytes(b), bc = read_bytes(c);
        if (ba != bb || bb != bc) {
            print_error("%s: round trip not byte-identical\n", lwt_dtype_name(t));
            fail();
        }
        // The loaded values are what the formula defines for the stored codes, and within the
        // quantisation step of the originals.
        LwtFile f(a);
        for (size_t k = 0; k < 2; k++) {
            const LwtTensor &lt = f.tensors()[k];
            const std::vector<float> &orig = m.tensors[k].values;
            for (uint64_t i = 0; i < lt.n_elements; i++) {
                float want = lwt_decode(t, lwt_field_at(t, f.tensor_data(lt), i), lt.quant);
                assert_int_equal(f_bits(l.tensors[k].values[i]), f_bits(want));
                if (t == LwtDType::F32) assert_int_equal(f_bits(want), f_bits(orig[i]));
                if (t == LwtDType::I8 || t == LwtDType::U8) {
                    double err = std::fabs(double(want) - double(orig[i]));
                    assert_true(err <= 0.5001 * double(lt.quant.scale) + 1e-30);
                }
                if (t == LwtDType::BF16) assert_true(std::fabs(double(want) - orig[i]) <= std::fabs(double(orig[i])) * 0x1p-8);
                if (t == LwtDType::F16 && std::fabs(orig[i]) > 1e-4)
                    assert_true(std::fabs(double(want) - orig[i]) <= std::fabs(double(orig[i])) * 0x1p-11);
            }
        }
    }
}

// Block-scaled types (q4_0, q8_0): the packed bytes are blockq_quantize's (which tests/python
// compares with gguf-py), the loaded values its dequantisation; quantise -> save -> load -> save is
// byte-identical; blocks another writer made (codes that do not reach the rule's extreme, every
// code, scales of every magnitude and sign) load and save to the same bytes; the refusals name
// the tensor, block and offset.
static void test_block_types(void **) {
    std::string dir = make_temp_dir("lwt_blocks");
    for (LwtDType t : {LwtDType::Q4_0, LwtDType::Q8_0}) {
        const BlockQType bt = lwt_blockq(t);
        const uint64_t bb = blockq_block_bytes(bt);
        LwtModel m;
        m.header.model_type = "synthetic";
        m.header.dtype = lwt_dtype_name(t);
        LwtModelTensor w;
        w.name = "w";
        w.shape = {37, 96};
        w.dtype = t;
        w.values = weight_like(37 * 96, 7 + uint64_t(t));
        LwtModelTensor v;
        v.name = "v";
        v.shape = {3, 2, 32};
        v.dtype = t;
        v.values = weight_like(192, 9);
        std::fill(v.values.begin(), v.values.begin() + 32, 0.0f);  // an all-zero block: d = 0
        m.tensors = {w, v};
        const std::string a = dir + "/" + lwt_dtype_name(t) + ".a.lwt", b = dir + "/" + lwt_dtype_name(t) + ".b.lwt",
                          c = dir + "/" + lwt_dtype_name(t) + ".c.lwt";
        save_lwt(m, a);
        LwtModel l = load_lwt(a);
        save_lwt(l, b);
        save_lwt(load_lwt(b), c);
        assert_true(read_bytes(a) == read_bytes(b) && read_bytes(b) == read_bytes(c));
        LwtFile f(a);
        assert_int_equal(f.header().version, 2);
        for (size_t k = 0; k < 2; k++) {
            const LwtTensor &lt = f.tensors()[k];
            assert_int_equal(uint32_t(lt.dtype), uint32_t(t));
            assert_int_equal(lt.size_bytes, lt.n_elements / 32 * bb);
            assert_int_equal(f_bits(lt.quant.scale), f_bits(1.0f));
            std::vector<uint8_t> want(size_t(lt.size_bytes));
            blockq_quantize(bt, m.tensors[k].values.data(), lt.n_elements, want.data());
            assert_memory_equal(want.data(), f.tensor_data(lt), want.size());
            std::vector<float> deq(size_t(lt.n_elements));
            blockq_dequantize(bt, want.data(), lt.n_elements, deq.data());
            for (uint64_t i = 0; i < lt.n_elements; i++) assert_int_equal(f_bits(l.tensors[k].values[i]), f_bits(deq[i]));
            assert_int_equal(l.tensors[k].block_scales.size(), lt.n_elements / 32);
        }

        // Another writer's blocks: every code under scales of both signs and every magnitude
        // (subnormal f16 to near its top), codes that never reach the rule's extreme.
        const uint16_t scales[] = {0x0001, 0x03ff, 0x0400, 0x1234, 0x3c00, 0xbc00, 0x5bff, 0x7bff, 0xfbff, 0x8001};
        const uint64_t codes = t == LwtDType::Q4_0 ? 16 : 256, blocks = codes / 16 * std::size(scales);
        std::vector<uint8_t> raw(size_t(blocks * bb));
        for (uint64_t blk = 0; blk < blocks; blk++) {
            uint8_t *o = raw.data() + blk * bb;
            const uint16_t d = scales[blk % std::size(scales)];
            o[0] = uint8_t(d), o[1] = uint8_t(d >> 8);
            for (uint64_t j = 0; j < 32; j++) {
                const uint64_t code = (blk / std::size(scales) * 16 + j % 16) % codes;  // each code, twice a block
                if (t == LwtDType::Q4_0) o[2 + j % 16] = uint8_t(j < 16 ? code : (o[2 + j % 16] | (code << 4)));
                else o[2 + j] = uint8_t(code);
            }
        }
        const std::string r = dir + "/" + lwt_dtype_name(t) + ".foreign.lwt", r2 = r + ".resaved";
        {
            LwtWriter wr(r, m.header, {{"x", t, {blocks, 32}}});
            wr.write_tensor(0, raw.data(), raw.size(), LwtQuant{});
            wr.commit();
        }
        save_lwt(load_lwt(r), r2);
        if (read_bytes(r) != read_bytes(r2)) fail_msg("%s: another writer's blocks do not load and save to the same bytes",
                                                       lwt_dtype_name(t));

        // Refusals: a block scale that is infinite or NaN (read), values beyond f16's range
        // (write), rows that are not whole blocks (write and read), a per-tensor scale (read).
        for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0xfe00)}) {
            std::vector<uint8_t> rb = raw;
            rb[3 * bb] = uint8_t(bad), rb[3 * bb + 1] = uint8_t(bad >> 8);
            const std::string p = dir + "/" + lwt_dtype_name(t) + ".bad" + std::to_string(bad) + ".lwt";
            LwtWriter wr(p, m.header, {{"x", t, {blocks, 32}}});
            wr.write_tensor(0, rb.data(), rb.size(), LwtQuant{});
            wr.commit();
            LwtFile bf(p);
            std::vector<float> out(size_t(blocks * 32));
            const std::string msg = expect_error(STK_E_CORRUPT, [&] { bf.read_f32(bf.tensors()[0], out.data()); });
            assert_contains(msg, "tensor 'x'");
            assert_contains(msg, "block 3 ");
            assert_contains(msg, "offset " + std::to_string(bf.data_offset() + 3 * bb));
        }
        LwtModel big = m;
        big.tensors[0].values[100] = t == LwtDType::Q4_0 ? 6e5f : 9e6f;  // d = 75000 / 70866: beyond f16
        std::string msg = expect_error(STK_E_UNSUPPORTED, [&] { save_lwt(big, dir + "/big.lwt"); });
        assert_contains(msg, "tensor 'w'");
        assert_contains(msg, "elements 96..127");
        assert_false(file_exists(dir + "/big.lwt"));
        big.tensors[0].values[100] = NAN;
        expect_error(STK_E_NONFINITE, [&] { save_lwt(big, dir + "/big.lwt"); });
        msg = expect_error(STK_E_INVALID_ARGUMENT, [&] { LwtWriter wr(dir + "/odd.lwt", m.header, {{"odd", t, {3, 48}}}); });
        assert_contains(msg, "last dimension is 48");
        std::vector<uint8_t> fb = read_bytes(a);
        uint64_t json_len;
        std::memcpy(&json_len, &fb[8], 8);
        const size_t e0 = size_t(16 + json_len);
        const float two = 2.0f;
        std::memcpy(&fb[e0 + 216], &two, 4);
        msg = expect_error(STK_E_CORRUPT, [&] { LwtFile bad(fb.data(), fb.size(), "scaled.lwt"); });
        assert_contains(msg, "scale 1 and zero point 0");
    }
}

// Write-once: an existing file is refused and left alone; a failed write leaves nothing.
static void test_writer_refusals(void **) {
    std::string dir = make_temp_dir("lwt_writer");
    std::string p = dir + "/x.lwt";
    write_bytes(p, {1, 2, 3});
    expect_error(STK_E_OUTPUT_EXISTS, [&] { save_lwt(vector_model(), p); });
    assert_int_equal(read_bytes(p).size(), 3);
    LwtModel m = vector_model();
    m.tensors[1].values = {1.0f, NAN, 2.0f};
    std::string q = dir + "/nan.lwt";
    assert_contains(expect_error(STK_E_NONFINITE, [&] { save_lwt(m, q); }), "tensor 'b': element 1");
    assert_false(file_exists(q));
    m = vector_model();
    m.tensors[1].name = "a";
    expect_error(STK_E_INVALID_ARGUMENT, [&] { save_lwt(m, q); });
    m = vector_model();
    m.tensors[0].name = std::string(128, 'n');
    expect_error(STK_E_INVALID_ARGUMENT, [&] { save_lwt(m, q); });
    m = vector_model();
    m.tensors[0].shape = {3};
    expect_error(STK_E_SIZE_MISMATCH, [&] { save_lwt(m, q); });
    assert_false(file_exists(q));
    // Only x.lwt in the directory: no temporary left behind.
    std::string cmd = "test $(ls -A '" + dir + "' | wc -l) -eq 1";
    assert_int_equal(std::system(cmd.c_str()), 0);
}

// ---------------------------------------------------------------------------------------------
// The Highway kernels against the scalar reference, on every target this CPU runs (pinned one at
// a time): pack bytes and unpacked bits identical for every code of every dtype, for the ties
// between codes, for values beyond the range, for every byte value, and at lengths around the
// vector widths (the kernels do a multiple of 8 lanes, the reference the tail).

namespace {

// Values that probe dtype t under q: each code's value, the midpoints between adjacent codes
// (ties), values just beside them, out-of-range and signed zeros; float dtypes: every f16/bf16
// value, the halfway points between neighbours and the f32 specials.
std::vector<float> probe_values(LwtDType t, LwtQuant q) {
    std::vector<float> v = {0.0f, -0.0f, 1e30f, -1e30f, q.scale * 1000.0f, -q.scale * 1000.0f};
    if (lwt_dtype_is_float(t)) {
        for (uint32_t h = 0; h < 65536; h++) {
            uint32_t base = t == LwtDType::F16 ? f_bits(lwt_decode(LwtDType::F16, h, q)) : h << 16;
            uint32_t next =
                t == LwtDType::F16 ? f_bits(lwt_decode(LwtDType::F16, (h + 1) & 0xFFFF, q)) : ((h + 1) & 0xFFFF) << 16;
            float a = bits_f(base), b = bits_f(next);
            v.push_back(a);
            if (std::isfinite(a) && std::isfinite(b) && (a < 0) == (b < 0)) {
                float mid = float((double(a) + double(b)) / 2);  // exact tie for bf16; f16 ties too
                v.push_back(mid);
                v.push_back(std::nextafter(mid, 0.0f));
                v.push_back(std::nextafter(mid, a > 0 ? 1e38f : -1e38f));
            }
        }
        for (uint32_t b : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, 0x00000001u, 0x80400000u,
                           0x477FF000u, 0x477FEFFFu, 0x477FFFFFu, 0x33000000u, 0x33000001u, 0x387FC000u, 0x7F7FFFFFu})
            v.push_back(bits_f(b));
        return v;
    }
    const unsigned b = lwt_dtype_bits(t);
    std::vector<float> codes;
    for (uint32_t f = 0; f < (1u << b); f++)
        if (lwt_field_valid(t, f)) codes.push_back(lwt_decode(t, f, q));
    std::sort(codes.begin(), codes.end());
    for (size_t i = 0; i < codes.size(); i++) {
        v.push_back(codes[i]);
        v.push_back(std::nextafter(codes[i], 1e38f));
        v.push_back(std::nextafter(codes[i], -1e38f));
        if (i + 1 < codes.size()) {
            float mid = float((double(codes[i]) + double(codes[i + 1])) / 2);
            v.push_back(mid);
            v.push_back(std::nextafter(mid, 1e38f));
            v.push_back(std::nextafter(mid, -1e38f));
        }
    }
    return v;
}

// Pack v[0..n) with the kernels (lwt_pack) and with the reference; compare; the same for
// unpacking the reference's bytes.  Returns false (with a message) on the first difference.
bool same_as_reference(LwtDType t, LwtQuant q, const float *v, uint64_t n, const char *what) {
    uint64_t nb = 0;
    lwt_packed_bytes(t, n, &nb);
    std::vector<uint8_t> got(nb + 1, 0xAA), want(nb + 1, 0xAA);
    lwt_pack(t, v, n, q, got.data());
    lwt_pack_scalar(t, v, n, q, want.data());
    for (uint64_t i = 0; i <= nb; i++)
        if (got[i] != want[i]) {
            print_error("%s %s (%s, n=%llu): packed byte %llu is %02x, reference %02x\n", kernels::lowbit_target_name().c_str(),
                        lwt_dtype_name(t), what, (unsigned long long)n, (unsigned long long)i, got[i], want[i]);
            return false;
        }
    std::vector<float> a(n + 1, 7.0f), b(n + 1, 7.0f);
    uint64_t ra = lwt_unpack(t, want.data(), n, q, a.data()), rb = lwt_unpack_scalar(t, want.data(), n, q, b.data());
    if (ra != rb || std::memcmp(a.data(), b.data(), (n + 1) * 4) != 0) {
        print_error("%s %s (%s, n=%llu): unpack differs from the reference (returns %llu / %llu)\n",
                    kernels::lowbit_target_name().c_str(), lwt_dtype_name(t), what, (unsigned long long)n, (unsigned long long)ra,
                    (unsigned long long)rb);
        return false;
    }
    return true;
}

}  // namespace

static void test_kernels_every_target(void **) {
    std::vector<int64_t> targets = kernels::lowbit_targets();
    assert_true(targets.size() >= 2);  // at least one vector target and the scalar fallback on x86-64
    const std::vector<float> w = weight_like(5000, 3);
    uint64_t tested = 0;
    for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        assert_string_equal(kernels::lowbit_target_name().c_str(), hwy::TargetName(target));
        for (LwtDType t : kAll) {
            const uint32_t umax = lwt_unsigned_max(t);
            for (float scale : {1.0f, 0.0173f, 0x1p-100f}) {
                LwtQuant q{lwt_dtype_is_float(t) ? 1.0f : scale, umax ? (umax + 1) / 2 - 1 : 0};
                std::vector<float> v = probe_values(t, q);
                assert_true(same_as_reference(t, q, v.data(), v.size(), "every code and tie"));
                if (lwt_dtype_is_float(t)) break;
            }
            // Every length up to 3 vectors of 16 lanes at every 4-byte misalignment, then longer.
            LwtQuant q = lwt_choose_quant(t, w.data(), w.size());
            for (uint64_t off = 0; off < 4; off++)
                for (uint64_t n = 0; n <= 200; n++) assert_true(same_as_reference(t, q, w.data() + off, n, "short lengths"));
            for (uint64_t n : {255u, 256u, 257u, 1023u, 4096u, 4999u})
                assert_true(same_as_reference(t, q, w.data(), n, "weights"));
            // Every byte value as packed input (ternary's invalid field included: the same first
            // invalid index is reported), at lengths that end inside a byte.
            if (lwt_dtype_bits(t) <= 8) {
                std::vector<uint8_t> bytes(4096);
                for (size_t i = 0; i < bytes.size(); i++) bytes[i] = uint8_t(i * 167 + i / 256);
                unsigned per = 8 / lwt_dtype_bits(t);
                for (uint64_t n : {uint64_t(4096 * per), uint64_t(4096 * per - 1), uint64_t(1000 * per + 1)}) {
                    std::vector<float> a(n), b(n);
                    uint64_t ra = lwt_unpack(t, bytes.data(), n, q, a.data()),
                             rb = lwt_unpack_scalar(t, bytes.data(), n, q, b.data());
                    assert_int_equal(ra, rb);
                    if (ra == n) assert_memory_equal(a.data(), b.data(), n * 4);
                }
                if (t == LwtDType::TERNARY) {            // the first invalid field found past the vector bulk
                    std::vector<uint8_t> ok(512, 0x45);  // fields 1, 0, 1, 1
                    ok[300] = 0x48;                      // fields 1, 0, 2, 0: element 1202 is invalid
                    std::vector<float> a(2048);
                    assert_int_equal(lwt_unpack(t, ok.data(), 2048, q, a.data()), 1202);
                }
            }
            // Statistics: chunked in odd sizes equals the whole (what streaming export relies on).
            LwtQuantStats st;
            for (uint64_t at = 0; at < w.size(); at += 333)
                assert_true(lwt_stats_add(t, &st, w.data() + at, std::min<uint64_t>(333, w.size() - at)));
            LwtQuant qs = lwt_quant_from_stats(t, st);
            assert_int_equal(f_bits(qs.scale), f_bits(q.scale));
            assert_int_equal(qs.zero_point, q.zero_point);
            // Statistics of three parts in other orders, merged (threaded export): the same numbers.
            {
                const uint64_t cut1 = w.size() / 3 + 7, cut2 = 2 * w.size() / 3 + 1;
                LwtQuantStats p0, p1, p2;
                assert_true(lwt_stats_add(t, &p2, w.data() + cut2, w.size() - cut2));
                assert_true(lwt_stats_add(t, &p0, w.data(), cut1));
                assert_true(lwt_stats_add(t, &p1, w.data() + cut1, cut2 - cut1));
                assert_true(lwt_stats_merge(&p2, p0));
                assert_true(lwt_stats_merge(&p2, p1));
                assert_int_equal(p2.n, st.n);
                assert_int_equal(f_bits(p2.absmax), f_bits(st.absmax));
                assert_true(p2.lo == st.lo && p2.hi == st.hi);
                uint64_t c2[LwtQuantStats::kExpBins], cs[LwtQuantStats::kExpBins];  // the same number
                assert_int_equal(dbl_bits(lwt_stats_abs_total(p2, c2)), dbl_bits(lwt_stats_abs_total(st, cs)));
                assert_memory_equal(c2, cs, sizeof cs);
                LwtQuant qm = lwt_quant_from_stats(t, p2);
                assert_int_equal(f_bits(qm.scale), f_bits(q.scale));
                assert_int_equal(qm.zero_point, q.zero_point);
                LwtQuantStats big = p0, before = p1;  // past the carry point: refused, unchanged
                big.n = LwtQuantStats::kCarryEvery - p1.n;
                assert_false(lwt_stats_merge(&p1, big));
                assert_memory_equal(&p1, &before, sizeof p1);
            }
            std::vector<float> bad(w.begin(), w.begin() + 100);
            bad[77] = std::nanf("");
            LwtQuantStats sb;
            assert_false(lwt_stats_add(t, &sb, bad.data(), bad.size()));
            bad[77] = -INFINITY;
            assert_false(lwt_stats_add(t, &sb, bad.data(), bad.size()));
        }
        // Ternary, int2 and fp4 encode by comparing |v| with boundaries computed from the scale
        // (no division): the floats at and next to every rounding boundary, both signs, at
        // scales of every shape of significand and across the exponent range.
        for (LwtDType t : {LwtDType::TERNARY, LwtDType::I2, LwtDType::FP4, LwtDType::I4}) {
            uint64_t st = 12345;
            for (int k = 0; k < 300; k++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                float scale = std::ldexp(1.0f + float(st >> 41) * 0x1p-23f, int(st % 201) - 100);  // [2^-100, 2^101)
                if (k < 4) scale = (const float[]){0x1p-100f, 0x1p100f, 1.0f, 0x1.fffffep-1f}[k];
                if (scale > kLwtMaxScale) scale = kLwtMaxScale;
                std::vector<float> v;
                for (float c : {0.25f, 0.5f, 0.75f, 1.25f, 1.5f, 1.75f, 2.5f, 3.5f, 5.0f, 6.5f, 7.5f}) {
                    float at = float(double(c) * double(scale));
                    for (int u = 0; u < 4; u++) at = std::nextafter(at, 0.0f);
                    for (int u = 0; u < 9; u++, at = std::nextafter(at, 1e38f)) {
                        v.push_back(at);
                        v.push_back(-at);
                    }
                }
                assert_true(same_as_reference(t, LwtQuant{scale, 0}, v.data(), v.size(), "boundaries"));
            }
        }
        // The statistics of f32 values (min/max and ternary/binary's exact |v| sum, one vector
        // read): the same absmax, lo, hi and the same number as adding each value's significand
        // to its exponent's entry one at a time, on trained-like weights, on values spread over
        // every exponent (zeros, subnormals, the largest floats among them), on zeros and
        // subnormals alone, on a long trained-like tensor with outliers far above its bulk and a
        // tail far below (values outside the kernel's 16-exponent window), and on full
        // significands at both ends of the window (block sums near 2^50 units: exact in binary64).
        {
            std::vector<float> spread(4099);
            uint64_t st = 99;
            for (size_t i = 0; i < spread.size(); i++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                uint32_t b = uint32_t(st >> 20);
                if ((b & 0x7F800000u) == 0x7F800000u) b &= 0xBFFFFFFFu;  // finite
                spread[i] = i % 7 == 0 ? 0.0f : bits_f(b);
            }
            std::vector<float> tiny = {0.0f, -0.0f, 0x1p-149f, -0x1p-140f, 0x1.fffffcp-127f};
            tiny.resize(300, 0x1p-130f);
            std::vector<float> outliers(100003), ends(70001);
            for (size_t i = 0; i < outliers.size(); i++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                uint32_t e = 118 + uint32_t(st >> 59) % 6;          // a bulk of 2^-9 .. 2^-4
                if (i % 97 == 5) e = 130 + uint32_t(st >> 60) % 4;  // outliers at 2^3 .. 2^6
                if (i % 89 == 7) e = 87 + uint32_t(st >> 58) % 11;  // a tail at 2^-40 .. 2^-30
                outliers[i] = bits_f(uint32_t(st & 0x80000000u) | e << 23 | (uint32_t(st >> 20) & 0x7FFFFFu));
            }
            for (size_t i = 0; i < ends.size(); i++) ends[i] = i % 2 ? 0x1.fffffep15f : -0x1.fffffep0f;
            // The window chosen from the first 1024 values, then moved: a head far below the rest.
            std::vector<float> moved(outliers.size());
            for (size_t i = 0; i < moved.size(); i++) moved[i] = i < 1500 ? std::ldexp(outliers[i], -40) : outliers[i];
            for (const std::vector<float> *data :
                 {&w, (const std::vector<float> *)&spread, (const std::vector<float> *)&tiny,
                  (const std::vector<float> *)&outliers, (const std::vector<float> *)&ends, (const std::vector<float> *)&moved}) {
                LwtQuantStats want, got;
                for (float f : *data) {
                    const uint32_t x = f_bits(f) & 0x7FFFFFFFu, e = x >> 23, m = x & 0x7FFFFFu;
                    want.abs_sum[e ? e : 1] += e ? (m | 0x800000u) : m;
                    want.absmax = std::max(want.absmax, std::fabs(f));
                    want.lo = std::min(want.lo, f);
                    want.hi = std::max(want.hi, f);
                }
                assert_true(lwt_stats_add(LwtDType::TERNARY, &got, data->data(), data->size()));
                uint64_t cw[LwtQuantStats::kExpBins], cg[LwtQuantStats::kExpBins];
                assert_int_equal(dbl_bits(lwt_stats_abs_total(got, cg)), dbl_bits(lwt_stats_abs_total(want, cw)));
                assert_memory_equal(cg, cw, sizeof cw);
                assert_int_equal(f_bits(got.absmax), f_bits(want.absmax));
                assert_int_equal(f_bits(got.lo), f_bits(want.lo));
                assert_int_equal(f_bits(got.hi), f_bits(want.hi));
                if (data == &ends)
                    assert_true(lwt_stats_abs_total(got, nullptr) == 35000.0 * (0x1.fffffep15 + 0x1.fffffep0) + 0x1.fffffep0);
            }
        }
        // Statistics straight from bf16 bits (export's first pass over a bf16 checkpoint) equal
        // those of the converted values: every quantised dtype, odd lengths, both alignments,
        // subnormals and zeros among the values; NaN and infinities are refused.
        {
            std::vector<uint8_t> raw(2 * 70001 + 2);
            uint64_t st = 4242;
            for (size_t i = 0; i < raw.size(); i += 2) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                uint16_t h = uint16_t(0x3C00u + (st >> 40) % 0x600u) ^ uint16_t((st >> 20) & 0x8000u);  // ~2^-7 .. 2^5
                if (i % 22 == 0) h = uint16_t((st >> 30) & 0x807Fu);                                    // zeros, subnormals
                raw[i] = uint8_t(h), raw[i + 1] = uint8_t(h >> 8);
            }
            for (uint64_t off : {0u, 1u})
                for (uint64_t n : {0u, 5u, 17u, 4096u, 70000u}) {
                    std::vector<uint8_t> at(off + 2 * n);  // the same values, at an odd address for off = 1
                    std::copy(raw.begin(), raw.begin() + 2 * n, at.begin() + off);
                    std::vector<float> f(n);
                    for (uint64_t i = 0; i < n; i++) f[i] = bf16_to_f32(uint16_t(raw[2 * i] | raw[2 * i + 1] << 8));
                    for (LwtDType t : kAll) {
                        if (lwt_dtype_is_float(t)) continue;
                        LwtQuantStats a, b;
                        assert_true(lwt_stats_add_bf16(t, &a, at.data() + off, n));
                        assert_true(lwt_stats_add(t, &b, f.data(), n));
                        assert_int_equal(f_bits(a.absmax), f_bits(b.absmax));
                        assert_int_equal(f_bits(a.lo), f_bits(b.lo));
                        assert_int_equal(f_bits(a.hi), f_bits(b.hi));
                        assert_int_equal(a.n, b.n);
                        // Packing straight from the bits: lwt_pack's bytes for the converted values.
                        const LwtQuant q = lwt_quant_from_stats(t, b);
                        uint64_t nb = 0;
                        lwt_packed_bytes(t, n, &nb);
                        std::vector<uint8_t> pa(size_t(nb) + 1, 0xA5), pb(size_t(nb) + 1, 0xA5);
                        lwt_pack_bf16(t, at.data() + off, n, q, pa.data());
                        lwt_pack(t, f.data(), n, q, pb.data());
                        assert_memory_equal(pa.data(), pb.data(), pa.size());
                        uint64_t ca[LwtQuantStats::kExpBins], cb[LwtQuantStats::kExpBins];  // the same number
                        assert_int_equal(dbl_bits(lwt_stats_abs_total(a, ca)), dbl_bits(lwt_stats_abs_total(b, cb)));
                        assert_memory_equal(ca, cb, sizeof ca);
                    }
                    // The block-scaled types from the bits (whole blocks: the lengths cut to
                    // a multiple of 32, past the 1,024-value staging buffer) are lwt_pack's bytes.
                    const uint64_t nw = n / kBlockQElems * kBlockQElems;
                    for (LwtDType t : {LwtDType::Q4_0, LwtDType::Q8_0}) {
                        uint64_t nb = 0;
                        lwt_packed_bytes(t, nw, &nb);
                        std::vector<uint8_t> pa(size_t(nb) + 1, 0xA5), pb(size_t(nb) + 1, 0xA5);
                        lwt_pack_bf16(t, at.data() + off, nw, LwtQuant{}, pa.data());
                        lwt_pack(t, f.data(), nw, LwtQuant{}, pb.data());
                        assert_memory_equal(pa.data(), pb.data(), pa.size());
                    }
                }
            // The bf16 kernel's sum of |v| is fixed point over a 16-exponent window: values
            // outside it (every finite exponent; outliers far above a trained-like bulk and a
            // tail below it) and totals spanning several bytes of the window's sum still give
            // the number the converted values give, and the exact total.
            {
                std::vector<uint16_t> spread16(50001), outliers(70001), wide(1u << 21);
                uint64_t s2 = 777;
                for (size_t i = 0; i < spread16.size(); i++) {
                    s2 ^= s2 << 13, s2 ^= s2 >> 7, s2 ^= s2 << 17;
                    uint16_t h = uint16_t(s2 >> 30);
                    if ((h & 0x7F80u) == 0x7F80u) h &= 0xBFFFu;  // finite
                    spread16[i] = h;
                }
                for (size_t i = 0; i < outliers.size(); i++) {
                    s2 ^= s2 << 13, s2 ^= s2 >> 7, s2 ^= s2 << 17;
                    // a bulk of 2^-9 .. 2^-4, one in 97 at 2^3 .. 2^6, one in 89 at 2^-40 .. 2^-30
                    uint32_t e = 118 + uint32_t(s2 >> 59) % 6;
                    if (i % 97 == 5) e = 130 + uint32_t(s2 >> 60) % 4;
                    if (i % 89 == 7) e = 87 + uint32_t(s2 >> 58) % 11;
                    outliers[i] = uint16_t((s2 & 0x8000u) | e << 7 | ((s2 >> 20) & 0x7Fu));
                }
                for (size_t i = 0; i < wide.size(); i++) wide[i] = i % 2 ? 0x3F80u : 0x4700u;  // 1 and 32768: both window ends
                std::vector<uint16_t> moved16(outliers);  // a head far below the rest: the window moves
                for (size_t i = 0; i < 1500; i++)
                    moved16[i] = uint16_t(moved16[i] - (40u << 7) * ((moved16[i] & 0x7F80u) > (40u << 7)));
                for (const std::vector<uint16_t> *h16 : {&spread16, &outliers, &wide, &moved16}) {
                    std::vector<float> f(h16->size());
                    for (size_t i = 0; i < f.size(); i++) f[i] = bf16_to_f32((*h16)[i]);
                    for (LwtDType t : {LwtDType::TERNARY, LwtDType::BINARY}) {
                        LwtQuantStats a, b;
                        assert_true(lwt_stats_add_bf16(t, &a, reinterpret_cast<const uint8_t *>(h16->data()), h16->size()));
                        assert_true(lwt_stats_add(t, &b, f.data(), f.size()));
                        uint64_t ca[LwtQuantStats::kExpBins], cb[LwtQuantStats::kExpBins];
                        const double ta = lwt_stats_abs_total(a, ca);
                        assert_int_equal(dbl_bits(ta), dbl_bits(lwt_stats_abs_total(b, cb)));
                        assert_memory_equal(ca, cb, sizeof ca);
                        assert_int_equal(f_bits(a.absmax), f_bits(b.absmax));
                        if (h16 == &wide) assert_true(ta == double(wide.size() / 2) * 32769.0);
                    }
                }
            }
            // lwt_stats_abs_total rounds the exact number once: ties to even, a sticky bit far
            // below the rounding point breaks a tie, and one number held two ways is one double.
            {
                LwtQuantStats a, b, c, d;
                a.abs_sum[150] = (1ull << 53) + 1;                          // 2^53 + 1: a tie, to even
                b.abs_sum[150] = (1ull << 53) + 3;                          // 2^53 + 3: a tie, to even (up)
                c.abs_sum[151] = (1ull << 53) + 1;                          // 2^54 + 2: a tie...
                c.abs_sum[0] = 1;                                           // ...broken upward by 2^-150
                d.abs_sum[150] = 2 * ((1ull << 53) + 1), d.abs_sum[0] = 1;  // c's number, held otherwise
                assert_true(lwt_stats_abs_total(a, nullptr) == 0x1p53);
                assert_true(lwt_stats_abs_total(b, nullptr) == 0x1p53 + 4.0);
                assert_true(lwt_stats_abs_total(c, nullptr) == 0x1p54 + 4.0);
                uint64_t cc[LwtQuantStats::kExpBins], cd[LwtQuantStats::kExpBins];
                assert_int_equal(dbl_bits(lwt_stats_abs_total(c, cc)), dbl_bits(lwt_stats_abs_total(d, cd)));
                assert_memory_equal(cc, cd, sizeof cc);
            }
            for (uint16_t bad : {uint16_t(0x7FC0), uint16_t(0xFF80), uint16_t(0x7F81)})
                for (size_t at : {size_t(3), size_t(4000)}) {
                    std::vector<uint8_t> r(raw.begin(), raw.begin() + 2 * 5000);
                    r[2 * at] = uint8_t(bad), r[2 * at + 1] = uint8_t(bad >> 8);
                    LwtQuantStats s;
                    assert_false(lwt_stats_add_bf16(LwtDType::I4, &s, r.data(), 5000));
                }
        }
        // The transpose export uses for Conv1D weights: every value lands at [c][r], the
        // destination's other values (its stride's slack) stay untouched, at whole-block and
        // ragged sizes and strides wider than the block.
        for (uint64_t rows : {1u, 3u, 4u, 5u, 8u, 13u, 16u, 21u})
            for (uint64_t cols : {1u, 4u, 7u, 9u, 16u, 17u, 24u}) {
                const uint64_t ss = cols + 3, ds = rows + 2;
                std::vector<float> src(rows * ss), dst(cols * ds, -1.0f);
                for (size_t i = 0; i < src.size(); i++) src[i] = float(i) + 0.5f;
                kernels::lwt_transpose_f32(src.data(), ss, rows, cols, dst.data(), ds);
                for (uint64_t c = 0; c < cols; c++)
                    for (uint64_t r = 0; r < ds; r++)
                        assert_int_equal(f_bits(dst[c * ds + r]), f_bits(r < rows ? src[r * ss + c] : -1.0f));
            }
        tested++;
    }
    hwy::SetSupportedTargetsForTest(0);
    assert_int_equal(tested, targets.size());
}

// The writer in parts (what streaming export uses): a tensor appended in pieces of 1, 7 and the
// rest gives the bytes of write_tensor, and the misuses are refused without a file.
static void test_writer_parts(void **) {
    std::string dir = make_temp_dir("lwt_parts");
    LwtHeader h;
    h.model_type = "test";
    std::vector<uint8_t> a(100), b(3);
    for (size_t i = 0; i < a.size(); i++) a[i] = uint8_t(i * 37 + 1);
    auto specs = [] { return std::vector<LwtTensorSpec>{{"a", LwtDType::U8, {100}}, {"b", LwtDType::I4, {6}}}; };
    {
        LwtWriter w(dir + "/whole.lwt", h, specs());
        w.write_tensor(0, a.data(), a.size(), LwtQuant{0.5f, 3});
        w.write_tensor(1, b.data(), b.size(), LwtQuant{0.25f, 0});
        w.commit();
    }
    {
        LwtWriter w(dir + "/parts.lwt", h, specs());
        w.begin_tensor(0, LwtQuant{0.5f, 3});
        w.append(a.data(), 1);
        w.append(a.data() + 1, 7);
        w.append(a.data() + 8, 0);
        w.append(a.data() + 8, 92);
        w.end_tensor();
        w.begin_tensor(1, LwtQuant{0.25f, 0});
        w.append(b.data(), 3);
        w.end_tensor();
        w.commit();
    }
    assert_true(read_bytes(dir + "/whole.lwt") == read_bytes(dir + "/parts.lwt"));
    LwtFile f(dir + "/parts.lwt");
    assert_int_equal(f.computed_crc32(), f.header().data_crc32);
    {
        LwtWriter w(dir + "/bad.lwt", h, specs());
        expect_error(STK_E_INTERNAL, [&] { w.append(a.data(), 1); });  // outside a tensor
        expect_error(STK_E_INTERNAL, [&] { w.begin_tensor(1, {}); });  // out of order
        w.begin_tensor(0, LwtQuant{0.5f, 3});
        w.append(a.data(), 60);
        expect_error(STK_E_INTERNAL, [&] { w.append(a.data(), 41); });  // past size_bytes
        expect_error(STK_E_INTERNAL, [&] { w.end_tensor(); });          // 60 of 100 bytes
        expect_error(STK_E_INTERNAL, [&] { w.commit(); });              // tensor still open
    }
    assert_false(file_exists(dir + "/bad.lwt"));
    std::string cmd = "test $(ls -A '" + dir + "' | wc -l) -eq 2";  // no temporary left behind
    assert_int_equal(std::system(cmd.c_str()), 0);
}

// The ternary/binary scale is the exact mean |v|: the same bits for any order of the values
// (reversed, shuffled), within 1 ulp of a long double sum, and exact at the ends of the exponent
// range.
static void test_mean_abs_exact(void **) {
    std::vector<float> w = weight_like(100003, 9);
    for (LwtDType t : {LwtDType::TERNARY, LwtDType::BINARY}) {
        LwtQuant q = lwt_choose_quant(t, w.data(), w.size());
        std::vector<float> r(w.rbegin(), w.rend()), sh = w;
        for (size_t i = sh.size() - 1; i > 0; i--) std::swap(sh[i], sh[(i * 2654435761u) % (i + 1)]);
        assert_int_equal(f_bits(lwt_choose_quant(t, r.data(), r.size()).scale), f_bits(q.scale));
        assert_int_equal(f_bits(lwt_choose_quant(t, sh.data(), sh.size()).scale), f_bits(q.scale));
        long double sum = 0;
        for (float x : w) sum += std::fabs((long double)x);
        float want = float(sum / w.size());
        assert_true(std::fabs(double(q.scale) - double(want)) <= double(std::nextafter(want, 1.0f) - want));
    }
    // Subnormals and the largest floats land in the first and last exponent entries.
    std::vector<float> e = {0x1p-149f, -0x1p-149f, 0x1.fffffep127f, 3.0f};
    LwtQuant q = lwt_choose_quant(LwtDType::TERNARY, e.data(), e.size());
    assert_int_equal(f_bits(q.scale), f_bits(float((0x1p-148 + double(0x1.fffffep127f) + 3.0) / 4.0)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_every_code),
        cmocka_unit_test(test_bit_orders),
        cmocka_unit_test(test_quant_rules),
        cmocka_unit_test(test_unpack_refusals),
        cmocka_unit_test(test_vector_bytes),
        cmocka_unit_test(test_version1_layout),
        cmocka_unit_test(test_reader_refusals),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_block_types),
        cmocka_unit_test(test_writer_refusals),
        cmocka_unit_test(test_kernels_every_target),
        cmocka_unit_test(test_writer_parts),
        cmocka_unit_test(test_mean_abs_exact),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
