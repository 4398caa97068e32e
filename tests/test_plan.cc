// The array plan of `stk convert --dry-run` (src/stages/plan.h) on the paths the conversions of
// tests/cli/dry_run.sh do not reach: features the inputs switch off (no positional encoding, no
// FFN, no token embedding, no tokenizer file, a vocabulary that is not byte-level BPE), each
// planned "disabled" with its reason and left out of the totals; the exact and bounded dims of
// the arrays whose sizes the model fixes; the totals' arithmetic.
#include <memory>
#include <string>

#include "test_util.h"  // after the standard headers: cmocka defines a `fail` macro
#include "ingest/model.h"
#include "stages/plan.h"
#include "stages/stages.h"

using namespace stk;

namespace {

stk_job_params params_for(const std::string &dir) {
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = dir.c_str();
    p.out_dir = "/nonexistent-plan-out";
    return normalize_params(p);
}

const PlannedArray *find(const ArrayPlan &plan, const char *name) {
    for (const PlannedArray &a : plan.arrays)
        if (a.spec.name == name) return &a;
    return nullptr;
}

size_t count_stage(const ArrayPlan &plan, stk_stage s, PlanPresence p) {
    size_t n = 0;
    for (const PlannedArray &a : plan.arrays) n += a.stage == s && a.presence == p;
    return n;
}

}  // namespace

// llama (RoPE, gated FFN, untied head): every array written; the exact dims of the model.
static void llama_exact_dims(void **) {
    const std::string dir = test::test_data("models/llama");
    auto d = describe_model(dir);
    const stk_job_params p = params_for(dir);
    const ArrayPlan plan = plan_job_arrays(JobInputs{p, d.get()});
    const uint64_t L = d->plan.config.n_layers, dm = d->plan.config.d_model;
    const PlannedArray *w = find(plan, "prf_W.bin");
    assert_non_null(w);
    assert_true(w->exact && w->presence == PlanPresence::Written && w->stage == STK_STAGE_PRF);
    assert_int_equal(w->spec.rank, 3);
    assert_int_equal(w->spec.dims[0], L);
    assert_int_equal(w->spec.dims[1], 512);
    assert_int_equal(w->spec.dims[2], dm);
    assert_int_equal(w->spec.payload_bytes(), L * 512 * dm * 4);
    assert_int_equal(w->spec.file_bytes(), L * 512 * dm * 4 + 128);
    const PlannedArray *m = find(plan, "memory_coeff.bin");  // RoPE: one AR(2) section, exact
    assert_non_null(m);
    assert_true(m->exact && m->spec.dims[0] == 1 && m->spec.dims[1] == 4 && m->spec.payload_bytes() == 32);
    const PlannedArray *delta = find(plan, "cuckoo_delta.bin");
    assert_non_null(delta);
    assert_false(delta->exact);
    assert_contains(delta->reason, "64 per column");
    const PlannedArray *keys = find(plan, "linear_keys.bin");  // 2 signs x d columns x top-L per FFN
    assert_non_null(keys);
    assert_true(keys->exact);
    assert_int_equal(keys->spec.dims[0], L * 2 * dm * 12);
    assert_null(find(plan, "linear_bias.bin"));  // llama's FFNs have no bias
    // No tokenizer file: the one placeholder, disabled, unknown size.
    const PlannedArray *fst = find(plan, "tokenizer_fst.bin");
    assert_non_null(fst);
    assert_true(fst->presence == PlanPresence::Disabled && fst->spec.payload_bytes() == 0);
    assert_contains(fst->reason, "no tokenizer file");

    const ArrayPlanTotals t = plan_totals(plan);
    assert_int_equal(t.disabled, 1);
    assert_int_equal(t.optional, 1);  // bridge_guard.bin
    assert_int_equal(t.arrays(), plan.arrays.size() - 1);
    uint64_t exact = 0, bound = 0, file = 0;
    for (const PlannedArray &a : plan.arrays) {
        if (a.presence == PlanPresence::Disabled) continue;
        (a.exact ? exact : bound) += a.spec.payload_bytes();
        file += a.spec.file_bytes();
    }
    assert_int_equal(t.payload_exact, exact);
    assert_int_equal(t.payload_bound, bound);
    assert_int_equal(t.file_bytes, file);
    assert_int_equal(t.file_bytes, t.payload() + 128 * t.arrays());
}

// bloom (ALiBi): the memory sections are a bound (at most 6), not exact.
static void alibi_sections_bound(void **) {
    const std::string dir = test::test_data("models/bloom");
    auto d = describe_model(dir);
    const stk_job_params p = params_for(dir);
    const ArrayPlan plan = plan_job_arrays(JobInputs{p, d.get()});
    const PlannedArray *m = find(plan, "memory_coeff.bin");
    assert_non_null(m);
    assert_false(m->exact);
    assert_int_equal(m->spec.dims[0], 6);
    assert_contains(m->reason, "at most 6 sections");
}

// Features the model switches off: each stage's arrays disabled with the reason.
static void disabled_features(void **) {
    const std::string dir = test::test_data("models/llama");
    const stk_job_params p = params_for(dir);
    {
        auto d = describe_model(dir);
        d->plan.config.positions = PosKind::None;
        const ArrayPlan plan = plan_job_arrays(JobInputs{p, d.get()});
        assert_int_equal(count_stage(plan, STK_STAGE_MEMORY_FIT, PlanPresence::Disabled), 2);
        assert_contains(find(plan, "memory_coeff.bin")->reason, "no positional encoding the stage fits (none)");
        assert_int_equal(count_stage(plan, STK_STAGE_PRF, PlanPresence::Written), 5);
    }
    {
        auto d = describe_model(dir);
        for (uint32_t i = 0; i < d->plan.n_tensors; i++) {
            Role &r = d->plan.tensors[i].role;
            if (r == Role::FFN_W1 || r == Role::FFN_W2 || r == Role::FFN_W3) r = Role::LN_B;
        }
        const ArrayPlan plan = plan_job_arrays(JobInputs{p, d.get()});
        assert_int_equal(count_stage(plan, STK_STAGE_MPHF_CUCKOO, PlanPresence::Disabled), 4);
        assert_int_equal(count_stage(plan, STK_STAGE_FFN_COLLAPSE, PlanPresence::Written), 0);
        assert_contains(find(plan, "linear_mphf.bin")->reason, "no FFN tensors");
        assert_int_equal(plan_totals(plan).disabled, 1 + 4);
    }
    {
        auto d = describe_model(dir);
        for (uint32_t i = 0; i < d->plan.n_tensors; i++)
            if (d->plan.tensors[i].role == Role::EMB) d->plan.tensors[i].role = Role::LN_B;
        const ArrayPlan plan = plan_job_arrays(JobInputs{p, d.get()});
        assert_int_equal(count_stage(plan, STK_STAGE_BRIDGE_INIT, PlanPresence::Disabled), 7);
        assert_contains(find(plan, "peer_scores.bin")->reason, "no token embedding");
    }
}

// The tokenizer's planner alone (it reads only the tokenizer files of in_dir).
static void tokenizer_modes(void **) {
    {  // tiny-gpt2: byte-level BPE, EXT for certain without the flag
        const std::string dir = test::test_data("../../bindings/testdata/tiny-gpt2");
        stk_job_params p = params_for(dir);
        ArrayPlan plan;
        tokenizer_stage_plan(JobInputs{p, nullptr}, plan);
        assert_int_equal(plan.arrays.size(), 1 + 8);  // tokenizer_fst.bin, T_1..T_8 (Ltok 8)
        assert_int_equal(count_stage(plan, STK_STAGE_TOKENIZER, PlanPresence::Disabled), 9);
        assert_true(plan.arrays[0].exact && plan.arrays[0].spec.payload_bytes() == 1391);
        assert_false(plan.arrays[1].exact);
        assert_contains(plan.arrays[1].reason, "--allow-uncertified-tokenizer");
        p.flags |= STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
        p.l_tok = 4;
        ArrayPlan flagged;
        tokenizer_stage_plan(JobInputs{p, nullptr}, flagged);
        assert_int_equal(flagged.arrays.size(), 1 + 4);
        assert_int_equal(count_stage(flagged, STK_STAGE_TOKENIZER, PlanPresence::Written), 5);
        assert_string_equal(flagged.arrays[4].spec.name.c_str(), "T_4.bin");
    }
    {  // a SentencePiece tokenizer.model: the EXT wrapper
        const std::string dir = test::make_temp_dir("plan-sp");
        test::write_bytes(dir + "/tokenizer.model",
                          test::read_bytes(test::third_party_data("sentencepiece/llama2.tokenizer.model")));
        const stk_job_params p = params_for(dir);
        ArrayPlan plan;
        tokenizer_stage_plan(JobInputs{p, nullptr}, plan);
        assert_int_equal(count_stage(plan, STK_STAGE_TOKENIZER, PlanPresence::Disabled), 9);
        assert_contains(plan.arrays[0].reason, "not byte-level BPE");
    }
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_exact_dims),
        cmocka_unit_test(alibi_sections_bound),
        cmocka_unit_test(disabled_features),
        cmocka_unit_test(tokenizer_modes),
    };
    return cmocka_run_group_tests_name("plan", tests, nullptr, nullptr);
}
