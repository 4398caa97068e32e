// The linear dictionary as a reader sees it: stk_lookup(STK_LOOKUP_LINEAR) returns every stored
// entry's exact value within the probe bound, refuses non-keys and malformed keys; a bit flip or
// a truncation of linear_mphf.bin / cuckoo_delta.bin is caught by stk_verify and `stk check`;
// acceptance 16.2 (acceptance_linear) passes its gating rows and reports the rest.
#include <cmath>
#include <cstring>

#include "acceptance/acceptance.h"
#include "core/bytes.h"
#include "runtime/generation.h"
#include "linear_job.h"

using namespace stk;
using namespace stk::test;

static void every_key_found(void **) {
    for (const char *model : kLinearModels) {
        Converted c = convert_model(model, 1);
        stk_generation *g = nullptr;
        assert_int_equal(stk_generation_open(c.out.c_str(), &g), STK_OK);
        assert_true(g->has_linear);
        assert_int_equal(g->linear_count, c.base_keys.size());
        const uint32_t bound = 1 + 2 * 4 + 4 + 1;  // MPHF slot + d*b + S + 1
        auto expect = [&](uint64_t key, uint32_t bits) {
            uint8_t k[8], v[8];
            store_le<uint64_t>(k, key);
            size_t len = 0;
            assert_int_equal(stk_lookup(g, STK_LOOKUP_LINEAR, k, 8, v, sizeof v, &len), STK_OK);
            assert_int_equal(len, 4);
            assert_int_equal(load_le<uint32_t>(v), bits);
            float f;
            uint32_t probes = 0;
            assert_true(linear_find(*g, key, &f, &probes));
            assert_true(probes <= bound);
        };
        for (size_t e = 0; e < c.base_keys.size(); e++) {
            uint32_t bits;
            std::memcpy(&bits, &c.base_vals[e], 4);
            expect(c.base_keys[e], bits);
        }
        for (size_t e = 0; e < c.delta_keys.size(); e++) expect(c.delta_keys[e], c.delta_vals[e]);
        // Non-keys: an output index past d, a unit past the last; a wrong key length; a small buffer.
        uint8_t k[8], v[4];
        size_t len = 0;
        const uint64_t d = c.h.d;
        for (uint64_t bad :
             {linear_key(0, 0, d, 0), linear_key(1, c.h.n_units, 0, 0), uint64_t(~0ull), uint64_t(0x123456789ull << 24)}) {
            store_le<uint64_t>(k, bad);
            float f;
            uint32_t probes = 0;
            assert_int_equal(stk_lookup(g, STK_LOOKUP_LINEAR, k, 8, v, sizeof v, &len), STK_E_KEY_NOT_FOUND);
            assert_false(linear_find(*g, bad, &f, &probes));
            assert_true(probes <= bound);
        }
        store_le<uint64_t>(k, c.base_keys[0]);
        assert_int_equal(stk_lookup(g, STK_LOOKUP_LINEAR, k, 4, v, sizeof v, &len), STK_E_INVALID_ARGUMENT);
        assert_int_equal(stk_lookup(g, STK_LOOKUP_LINEAR, k, 8, v, 2, &len), STK_E_INVALID_ARGUMENT);
        assert_int_equal(len, 4);
        stk_generation_close(g);
    }
}

static void flip(const std::string &path, uint64_t offset) {
    std::vector<uint8_t> b = read_bytes(path);
    assert_true(offset < b.size());
    b[offset] ^= 0x10;
    write_bytes(path, b);
}

static int run_check(const std::string &out) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) return -1;
    std::string cmd = std::string(bin) + " check --out '" + out + "' >/dev/null 2>&1";
    int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void corruption_is_caught(void **) {
    for (const char *arr : {"linear_mphf.bin", "cuckoo_delta.bin", "linear_keys.bin", "linear_weights.bin"}) {
        for (int mode = 0; mode < 3; mode++) {  // payload bit flip, header bit flip, truncation
            Converted c = convert_model("llama", 1, 0, "lincorrupt");
            assert_int_equal(run_check(c.out), 0);
            std::string p = c.out + "/arrays/" + arr;
            if (mode == 0) flip(p, 128 + 17);
            if (mode == 1) flip(p, 9);
            if (mode == 2) {
                std::vector<uint8_t> b = read_bytes(p);
                b.resize(b.size() - 5);
                write_bytes(p, b);
            }
            stk_verify_report rep{};
            rep.struct_size = sizeof rep;
            stk_status st = stk_verify(c.out.c_str(), &rep);
            assert_int_not_equal(st, STK_OK);
            if (mode == 0) assert_int_equal(st, STK_E_CHECKSUM);
            assert_string_equal(rep.failed_file, (std::string("arrays/") + arr).c_str());
            assert_int_not_equal(run_check(c.out), 0);
            stk_generation *g = nullptr;
            assert_int_not_equal(stk_generation_open(c.out.c_str(), &g), STK_OK);
            assert_null(g);
        }
    }
}

static void acceptance_16_2(void **) {
    for (const char *model : kLinearModels) {
        Converted c = convert_model(model, 1);
        AcceptanceContext ctx;
        ctx.out_dir = c.out;
        ctx.model_dir = test_data(std::string("models/") + model);
        std::vector<AcceptanceRow> rows;
        acceptance_linear(ctx, rows);
        assert_int_equal(rows.size(), 5);
        int gating = 0;
        for (const AcceptanceRow &r : rows) {
            assert_true(std::isfinite(r.value) && r.value >= 0);
            if (r.gating) {
                gating++;
                if (!r.pass)
                    print_error("%s: %s = %g > %g (%s)\n", model, r.test.c_str(), r.value, r.threshold, r.definition.c_str());
                assert_true(r.pass);
            }
        }
        assert_int_equal(gating, 2);
        // The dictionary reproduces the exact collapse (truncation eps 1e-6 of each column's energy).
        assert_true(rows[0].value < 2e-3);
        // Reported, not gating: the true FFN is far from any linear map on several active inputs
        // (d = 32/64 gives one active feature at density 0.01: error from the activation alone).
        assert_false(rows[2].gating);
        assert_true(rows[2].value > 0);
        // The base alone (top-8 <= top-12) leaves most of the column out.
        assert_true(rows[3].value >= rows[4].value);
        assert_true(rows[4].value > rows[0].value);
    }
    // A generation built at top-L 8 (seed 14.3's other choice): the same gates hold - the delta
    // takes what the base does not - and the base is 8 entries per column.
    {
        Converted c8 = convert_model("llama", 1, 8, "lin8");
        assert_int_equal(c8.base_keys.size(), 2ull * 64 * 2 * 8);
        AcceptanceContext ctx;
        ctx.out_dir = c8.out;
        ctx.model_dir = test_data("models/llama");
        std::vector<AcceptanceRow> rows;
        acceptance_linear(ctx, rows);
        assert_int_equal(rows.size(), 5);
        assert_true(rows[0].gating && rows[0].pass && rows[1].gating && rows[1].pass);
    }
    // Without the checkpoint: one reported row saying it was skipped.
    Converted c = convert_model("gpt2", 1);
    AcceptanceContext ctx;
    ctx.out_dir = c.out;
    std::vector<AcceptanceRow> rows;
    acceptance_linear(ctx, rows);
    assert_int_equal(rows.size(), 1);
    assert_false(rows[0].gating);
    assert_contains(rows[0].note, "skipped");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_key_found),
        cmocka_unit_test(corruption_is_caught),
        cmocka_unit_test(acceptance_16_2),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
