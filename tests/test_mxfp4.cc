// MXFP4 (ingest/mxfp4.h) against transformers' own convert_moe_packed_tensors: the blocks and
// scales of tests/fixtures/mxfp4/packed.safetensors, dequantised by stk and transposed as
// transformers returns them, equal reference.safetensors (what that function returned, written
// by tests/fixtures/mxfp4/generate.py) bit for bit; hostile pairs refused naming file and tensor.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/float16.h"
#include "ingest/checkpoint.h"
#include "ingest/mxfp4.h"

#include "test_util.h"

using namespace stk;

namespace {

std::string fixture(const char *name) { return test::test_data(std::string("../fixtures/mxfp4/") + name); }

void dequantised_as_transformers(void **) {
    std::unique_ptr<Checkpoint> packed = wrap_mxfp4(open_checkpoint(fixture("packed.safetensors")));
    std::unique_ptr<Checkpoint> ref = open_checkpoint(fixture("reference.safetensors"));
    assert_int_equal(packed->tensors().size(), 2);  // the scales folded into their blocks
    uint64_t compared = 0, infinite = 0;
    for (const TensorRef &t : packed->tensors()) {
        assert_int_equal(int(t.dtype), int(SrcDType::MXFP4));
        const std::string stem = t.name.substr(0, t.name.size() - std::strlen("_blocks"));
        const TensorRef *r = ref->find(stem);
        assert_non_null(r);
        assert_int_equal(int(r->dtype), int(SrcDType::BF16));
        // stk: [E, rows, K] (the blocks' layout); transformers: [E, K, rows].
        const uint64_t E = t.shape[0], R = t.shape[1], K = t.shape[2];
        assert_true(r->shape == (std::vector<uint64_t>{E, K, R}));
        std::vector<uint8_t> s1, s2;
        std::vector<float> got(t.n_elements);
        convert_to_f32(t, packed->tensor_bytes(t, s1), 0, t.n_elements, got.data());
        const uint8_t *want = ref->tensor_bytes(*r, s2);
        for (uint64_t e = 0; e < E; e++)
            for (uint64_t row = 0; row < R; row++)
                for (uint64_t k = 0; k < K; k++) {
                    const float g = got[(e * R + row) * K + k];
                    const uint16_t wb = uint16_t(want[2 * ((e * K + k) * R + row)] | want[2 * ((e * K + k) * R + row) + 1] << 8);
                    const float w = bf16_to_f32(wb);
                    if (std::memcmp(&g, &w, 4) != 0)
                        fail_msg("%s [%llu, %llu, %llu]: stk %a, transformers %a", t.name.c_str(), (unsigned long long)e,
                                 (unsigned long long)row, (unsigned long long)k, double(g), double(w));
                    infinite += std::isinf(w) ? 1 : 0;
                    compared++;
                }
        // A slice converted alone (an expert's view starts mid-tensor) gives the same values.
        std::vector<float> part(40);
        convert_to_f32(t, packed->tensor_bytes(t, s1), 7, part.size(), part.data());
        assert_memory_equal(part.data(), got.data() + 7, part.size() * 4);
    }
    print_message("%llu values equal to transformers' bit for bit (%llu of them inf)\n", (unsigned long long)compared,
                  (unsigned long long)infinite);
    assert_int_equal(compared, 2 * 6 * 64 + 3 * 5 * 32);
    assert_true(infinite > 0);  // the scale 254 / 255 blocks overflow as in transformers
}

void hostile_pairs_refused(void **) {
    struct Case {
        const char *file, *needle;
        stk_status status;
    } cases[] = {
        {"hostile_no_scales.safetensors", "without their scales 'x.down_proj_scales'", STK_E_CORRUPT},
        {"hostile_no_blocks.safetensors", "MXFP4 scales without 'x.down_proj_blocks'", STK_E_CORRUPT},
        {"hostile_shape.safetensors", "is [1, 3, 1]", STK_E_CORRUPT},
        {"hostile_width.safetensors", "must be [..., rows, groups, 16]", STK_E_CORRUPT},
    };
    for (const Case &c : cases) {
        const std::string path = fixture(c.file);
        std::string msg = test::expect_error(c.status, [&] { wrap_mxfp4(open_checkpoint(path)); });
        assert_contains(msg, path);
        assert_contains(msg, "x.down_proj_");
        assert_contains(msg, c.needle);
    }
}

// Where a refusal says an element lives: its nibble's byte for MXFP4 (two values per byte, the
// blocks' layout), its block's first byte for ggml types (Q8_0: 32 values in 34 bytes; Q4_K: 256
// in 144), its own bytes otherwise.
void stored_byte_offsets(void **) {
    std::unique_ptr<Checkpoint> packed = wrap_mxfp4(open_checkpoint(fixture("packed.safetensors")));
    const TensorRef &t = packed->tensors()[0];
    assert_int_equal(stored_byte_offset(t, 0), t.file_offset);
    assert_int_equal(stored_byte_offset(t, 33), t.file_offset + 16);
    assert_int_equal(stored_byte_offset(t, t.n_elements - 1), t.file_offset + t.n_elements / 2 - 1);
    TensorRef g;
    g.dtype = SrcDType::F32;
    g.file_offset = 1000;
    g.ggml_type = 8;  // Q8_0
    assert_int_equal(stored_byte_offset(g, 70), 1000 + 2 * 34);
    g.ggml_type = 12;  // Q4_K
    assert_int_equal(stored_byte_offset(g, 300), 1000 + 144);
    g.ggml_type = 0;
    g.dtype = SrcDType::BF16;
    assert_int_equal(stored_byte_offset(g, 70), 1000 + 140);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dequantised_as_transformers),
        cmocka_unit_test(hostile_pairs_refused),
        cmocka_unit_test(stored_byte_offsets),
    };
    return cmocka_run_group_tests_name("mxfp4", tests, nullptr, nullptr);
}
