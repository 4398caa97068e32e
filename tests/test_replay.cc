// stk replay over every module (spec-notes 19, seed 17.3) and acceptance 16.5: the per-token
// values against plain recomputations, identical lines and digests across runs and across the
// conversion's thread count, disabled modules reported with their reason, `stk replay --json`
// one object; 16.5 passes on real conversions and fails on a doctored array.
#include <cmath>
#include <cstring>

#include "acceptance/acceptance.h"
#include "acceptance/runner.h"
#include "core/bytes.h"
#include "core/prng.h"
#include "core/test_fault.h"
#include "format/manifest.h"
#include "kernels/random.h"
#include "runtime/replay.h"
#include "stages/bridge_init.h"
#include "linear_job.h"

using namespace stk;
using namespace stk::test;

namespace {

std::string tiny_gpt2() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

// Every stage through the C API (linear_job.h), greedy token tables written.
std::string convert(const std::string &in, const char *tag, unsigned threads) {
    return convert_model(in, threads, 0, tag, STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER).out;
}

struct Replay {
    std::vector<ReplayModuleStatus> modules;
    std::vector<ReplayToken> tokens;
    std::vector<std::string> lines;
    std::string digest;
};

Replay replay(const std::string &dir, const std::string &prompt) {
    stk_generation *g = nullptr;
    assert_int_equal(stk_generation_open(dir.c_str(), &g), STK_OK);
    Replay r;
    std::string mode;
    std::vector<uint32_t> ids = replay_token_ids(*g, prompt, "", false, &mode);
    assert_string_equal(mode.c_str(), "greedy");
    {
        Replayer rp(*g);
        r.modules = rp.modules();
        for (uint32_t id : ids) {
            r.tokens.push_back(rp.step(id));
            r.lines.push_back(rp.line(r.lines.size(), r.tokens.back()));
        }
        r.digest = rp.finish_digest();
    }
    stk_generation_close(g);
    return r;
}

std::vector<uint8_t> payload(const std::string &path) {
    std::vector<uint8_t> b = read_bytes(path);
    return std::vector<uint8_t>(b.begin() + 128, b.end());
}

double f32_at(const std::vector<uint8_t> &p, size_t i) {
    float f;
    std::memcpy(&f, &p[4 * i], 4);
    return f;
}

}  // namespace

static void every_module_walked_and_checked(void **) {
    const std::string in = tiny_gpt2();
    const std::string g1 = convert(in, "rp-t1", 1), g2 = convert(in, "rp-t2", 2);
    const std::string prompt = "Hello world.";
    Replay a = replay(g1, prompt), b = replay(g1, prompt), c = replay(g2, prompt);
    // Identical across two runs and across the conversion's thread count.
    assert_true(a.lines == b.lines && a.lines == c.lines);
    assert_string_equal(a.digest.c_str(), b.digest.c_str());
    assert_string_equal(a.digest.c_str(), c.digest.c_str());
    assert_int_equal(a.digest.size(), 64);
    // Every module is enabled, the bridge too.
    assert_int_equal(a.modules.size(), kReplayModules);
    for (int m = 0; m < kReplayModules; m++) assert_true(a.modules[m].enabled);
    assert_int_equal(a.tokens.size(), prompt.size());  // byte-level tables: one token per byte here

    const Manifest man = read_manifest(g1 + "/sera_manifest.bin");
    const double floor = man.fields.denominator.beta_floor;
    for (size_t i = 0; i < a.tokens.size(); i++) {
        const ReplayToken &t = a.tokens[i];
        assert_true(t.round_trip);
        assert_true(std::string(1, prompt[i]) == t.bytes);
        // prf: the state starts at s_init = 0, so the first denominator is the floor on every
        // layer; later ones are the accumulated kernel sums (about i), above it.
        if (i == 0) {
            assert_true(t.prf_den0 == floor);
            assert_int_equal(t.prf_floored, 2);
        } else {
            assert_true(t.prf_den0 > floor && t.prf_floored == 0);
            assert_true(std::fabs(t.prf_den0 - double(i)) < 0.5 * double(i));
        }
        assert_true(std::isfinite(t.prf_feat_sum) && t.prf_feat_sum > 0);
        assert_true(std::isfinite(t.ov_norm) && t.ov_norm > 0);
        assert_contains(a.lines[i], " | linear u");
        assert_contains(a.lines[i], " | prf den0 ");
        assert_contains(a.lines[i], " | overlays |dC| ");
        assert_contains(a.lines[i], " | memory u ");
        // bridge: the context is the hash bucket of the two previous ids; HUB(token, context) =
        // token row | context row, two bits each (fewer on a collision).
        const uint32_t p1 = i >= 1 ? a.tokens[i - 1].id : kBridgeNoToken, p2 = i >= 2 ? a.tokens[i - 2].id : kBridgeNoToken;
        assert_int_equal(t.hub_context, bridge_context_id(p1, p2, bridge_context_count(man.fields.tokenizer.vocab_size)));
        assert_false(t.hub_outside);
        assert_true(t.hub_bits >= 1 && t.hub_bits <= 4);
        assert_contains(a.lines[i], " | bridge ctx ");
    }
    // linear: the column the token reads, recomputed through stk_lookup.
    stk_generation *g = nullptr;
    assert_int_equal(stk_generation_open(g1.c_str(), &g), STK_OK);
    for (const ReplayToken &t : a.tokens) {
        double sq = 0;
        uint32_t found = 0;
        for (uint64_t i = 0; i < 16; i++) {  // d_model 16
            uint64_t key = (uint64_t(t.lin_sign) << 63) | (uint64_t(t.lin_unit) << 48) | (i << 24) | t.lin_input;
            uint8_t k[8], v[4];
            store_le<uint64_t>(k, key);
            size_t len = 0;
            if (stk_lookup(g, STK_LOOKUP_LINEAR, k, 8, v, 4, &len) == STK_OK) {
                found++;
                double x = f32_at(std::vector<uint8_t>(v, v + 4), 0);
                sq += x * x;
            }
        }
        assert_int_equal(t.lin_unit, t.id % 2);
        assert_int_equal(t.lin_input, t.id % 16);
        assert_int_equal(t.lin_base + t.lin_delta, found);
        assert_int_equal(t.lin_base, 12);  // top-L 12 of each column
        assert_true(std::fabs(t.lin_norm - std::sqrt(sq)) <= 1e-12 * (1 + std::sqrt(sq)));
        assert_true(t.lin_probes <= 14);
    }
    stk_generation_close(g);
    // memory: u_t is Gaussian 0 of the token's stream; from zero state the first output is
    // sum_k b0_k u (rounded to f32 once).
    std::vector<uint8_t> coeff = payload(g1 + "/arrays/memory_coeff.bin");
    double b0 = 0;
    for (size_t k = 0; k + 32 <= coeff.size(); k += 32) {
        double v;
        std::memcpy(&v, &coeff[k], 8);
        b0 += v;
    }
    double u0 = 0;
    kernels::gaussians(stream_seed(0, kernels::kStreamReplay, a.tokens[0].id), 0, 1, &u0);
    assert_true(a.tokens[0].mem_u == u0);
    assert_true(std::fabs(double(a.tokens[0].mem_y) - b0 * u0) <= 1e-6 * (1 + std::fabs(b0 * u0)));
    // A different prompt changes the digest.
    assert_string_not_equal(replay(g1, "Hello world!").digest.c_str(), a.digest.c_str());
}

// Modules whose arrays are absent are reported disabled with the reason the manifest records
// (17.3), their values are left out of the lines, and the digest differs from a full replay.
static void disabled_modules_reported(void **) {
    const std::string in = tiny_gpt2();
    const std::string full = convert(in, "rp-full", 1);
    set_test_fault("breach:prf_build");
    const std::string noprf = convert(in, "rp-noprf", 1);
    set_test_fault("breach:mphf_cuckoo");
    const std::string nolin = convert(in, "rp-nolin", 1);
    set_test_fault("");
    Replay f = replay(full, "abc"), p = replay(noprf, "abc"), l = replay(nolin, "abc");
    assert_false(p.modules[kReplayPrf].enabled);
    assert_contains(p.modules[kReplayPrf].detail, "prf_build disabled: test fault");
    assert_false(p.modules[kReplayOverlays].enabled);
    assert_contains(p.modules[kReplayOverlays].detail, "it needs prf_build");
    assert_true(p.modules[kReplayLinear].enabled && p.modules[kReplayMemory].enabled);
    assert_false(l.modules[kReplayLinear].enabled);
    assert_contains(l.modules[kReplayLinear].detail, "mphf_cuckoo disabled");
    for (const std::string &s : p.lines) {
        assert_true(s.find(" | prf") == std::string::npos && s.find(" | overlays") == std::string::npos);
        assert_contains(s, " | linear u");
    }
    // The modules that stayed give the same values as in the full generation.
    for (size_t i = 0; i < f.tokens.size(); i++) {
        assert_true(p.tokens[i].lin_norm == f.tokens[i].lin_norm);
        assert_true(l.tokens[i].prf_den0 == f.tokens[i].prf_den0);
        assert_true(p.tokens[i].mem_y == f.tokens[i].mem_y);
    }
    assert_string_not_equal(p.digest.c_str(), f.digest.c_str());
    assert_string_not_equal(l.digest.c_str(), f.digest.c_str());
}

// `stk replay --json`: one object with every module (state, detail), per-token module values,
// and no "modules_not_replayed".
static void replay_json(void **) {
    const char *bin = std::getenv("STK_BIN");
    assert_non_null(bin);
    const std::string g = convert(tiny_gpt2(), "rp-json", 1);
    std::string cmd = std::string(bin) + " replay '" + g + "' --prompt 'Hi.' --json";
    FILE *fp = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) out.append(buf, n);
    assert_int_equal(pclose(fp), 0);
    assert_contains(out, "\"modules\": [{\"name\": \"token\", \"state\": \"enabled\"");
    assert_contains(out, "{\"name\": \"bridge\", \"state\": \"enabled\", \"detail\": \"hub bitset");
    assert_contains(out, "\"linear\": {\"unit\": ");
    assert_contains(out, "\"prf\": {\"den_layer0\": ");
    assert_contains(out, "\"bridge\": {\"context\": ");
    assert_contains(out, "\"disabled_modules\": []");
    assert_true(out.find("modules_not_replayed") == std::string::npos);
    // Text mode: the same digest.
    std::string t = std::string(bin) + " replay '" + g + "' --prompt 'Hi.'";
    fp = popen(t.c_str(), "r");
    std::string text;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) text.append(buf, n);
    assert_int_equal(pclose(fp), 0);
    size_t at = text.find("state digest ");
    assert_true(at != std::string::npos);
    assert_contains(out, "\"state_digest\": \"" + text.substr(at + 13, 64) + "\"");
}

// 16.5 in the acceptance runner: passes on a real conversion (threads 1 vs 2, and the published
// generation against a rerun with its recovered parameters); fails on a doctored array.
static void acceptance_16_5(void **) {
    const std::string in = test_data("models/llama");
    const std::string pub = convert(in, "rp-acc", 2);
    AcceptanceContext ctx;
    ctx.out_dir = pub;
    ctx.model_dir = in;
    std::vector<AcceptanceRow> rows;
    acceptance_determinism(ctx, rows);
    const Manifest m = read_manifest(pub + "/sera_manifest.bin");
    assert_int_equal(rows.size(), 8);
    int gating = 0;
    for (const AcceptanceRow &r : rows) {
        if (r.gating) {
            gating++;
            if (!r.pass) print_error("%s: %g (%s)\n", r.test.c_str(), r.value, r.note.c_str());
            assert_true(r.pass && r.value == 0);
        } else {
            assert_true(r.value == double(m.arrays.size()));  // every array compared
        }
    }
    assert_int_equal(gating, 6);
    assert_contains(rows[4].test, "published/rerun");
    // A doctored array in one of two otherwise identical generations: named, and the replay of a
    // generation that does not verify fails too.
    const std::string other = convert(in, "rp-acc2", 1);
    std::string victim = other + "/arrays/overlays_U.bin";
    std::vector<uint8_t> b = read_bytes(victim);
    b[128 + 5] ^= 0x01;
    write_bytes(victim, b);
    std::vector<AcceptanceRow> bad;
    acceptance_compare_generations(pub, other, in, "doctored", bad);
    assert_int_equal(bad.size(), 4);
    assert_false(bad[0].pass);
    assert_true(bad[0].value == 1.0);
    assert_contains(bad[0].note, "overlays_U.bin");
    assert_true(bad[2].pass);  // the manifests still agree (the file alone was changed)
    assert_false(bad[3].pass);
    assert_contains(bad[3].note, "replay failed");
    assert_false(acceptance_passed(bad));
    // Without --model: one reported row, skipped.
    AcceptanceContext none;
    none.out_dir = pub;
    std::vector<AcceptanceRow> skipped;
    acceptance_determinism(none, skipped);
    assert_int_equal(skipped.size(), 1);
    assert_false(skipped[0].gating);
    assert_contains(skipped[0].note, "skipped");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_module_walked_and_checked),
        cmocka_unit_test(disabled_modules_reported),
        cmocka_unit_test(replay_json),
        cmocka_unit_test(acceptance_16_5),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
