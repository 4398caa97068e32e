// The experimental calls behind `stk convert --dry-run`, `stk check` and `stk generations`
// (issue 21: the stk command reads only the public API): the plan against the job it plans, a
// root's listing, chain, manifest, damage location, gc and removal, and the acceptance runner's C
// surface, with their refusals (NULL, struct_size, unknown index or stage).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

#include "stk/stk.h"
#include "stk/stk_acceptance.h"

using namespace stk;

namespace {

std::string tiny_gpt2() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

stk_job_params params_for(const std::string &in, const std::string &out, uint32_t top_l = 0, uint32_t flags = 0) {
    stk_job_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();
    p.top_l = top_l;
    p.flags = flags;
    return p;
}

// One whole conversion of tiny-gpt2 into root; returns the generation's name.
std::string publish(const std::string &root, uint32_t top_l) {
    const std::string in = tiny_gpt2();
    stk_job_params p = params_for(in, root, top_l, STK_JOB_PUBLISH_ROOT | STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER);
    size_t need = 0;
    if (stk_job_arena_size(&p, &need) != STK_OK) fail_msg("%s", stk_last_error());
    std::vector<uint8_t> arena(need);
    stk_job *job = nullptr;
    if (stk_open(&p, arena.data(), need, &job) != STK_OK) fail_msg("stk_open: %s", stk_last_error());
    for (int i = 1; i <= STK_STAGE_COUNT; i++) {
        stk_status s = stk_stage_run(job, stk_stage(i));
        if (s != STK_OK && s != STK_E_NOT_IMPLEMENTED) fail_msg("stage %d: %s", i, stk_last_error());
    }
    const char *dir = nullptr;
    assert_int_equal(stk_job_generation_dir(job, &dir), STK_OK);
    std::string d = dir;
    stk_close(job);
    return d.substr(d.rfind('/') + 1);
}

template <class T>
T sized() {
    T v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    return v;
}

std::vector<stk_generation_entry> entries(stk_generation_list *list) {
    uint32_t n = 0;
    assert_int_equal(stk_generation_list_count(list, &n), STK_OK);
    std::vector<stk_generation_entry> out;
    for (uint32_t i = 0; i < n; i++) {
        stk_generation_entry e = sized<stk_generation_entry>();
        assert_int_equal(stk_generation_list_at(list, i, &e), STK_OK);
        out.push_back(e);
    }
    stk_generation_entry e = sized<stk_generation_entry>();
    assert_int_equal(stk_generation_list_at(list, n, &e), STK_E_KEY_NOT_FOUND);
    return out;
}

// The plan agrees with the job it plans: the arena, the options, the arrays and their totals.
void plan_matches_job(void **) {
    const std::string in = tiny_gpt2(), out = test::make_temp_dir("cli_api_plan") + "/root";
    stk_job_params p = params_for(in, out, 0, STK_JOB_PUBLISH_ROOT);
    size_t arena = 0;
    assert_int_equal(stk_job_arena_size(&p, &arena), STK_OK);
    stk_plan *plan = nullptr;
    assert_int_equal(stk_plan_open(&p, &plan), STK_OK);
    stk_plan_info info = sized<stk_plan_info>();
    assert_int_equal(stk_plan_get_info(plan, &info), STK_OK);
    assert_int_equal(info.arena_bytes, arena);
    assert_int_equal(info.r, 512);
    assert_int_equal(info.top_l, 12);
    assert_int_equal(info.threads, 1);
    assert_string_equal(info.model_type, "gpt2");
    assert_string_equal(info.format, "safetensors");
    assert_int_equal(info.expected_peak_bytes, info.arena_bytes + info.largest_unit_f32_bytes);
    assert_true(info.array_count > 0 && info.n_params > 0 && info.n_tensors > 0);
    uint64_t written = 0, optional = 0, disabled = 0, exact = 0, bound = 0, files = 0;
    for (uint32_t i = 0; i < info.array_count; i++) {
        stk_plan_array a = sized<stk_plan_array>();
        assert_int_equal(stk_plan_array_at(plan, i, &a), STK_OK);
        assert_true(a.stage >= 1 && a.stage <= STK_STAGE_COUNT && a.name[0] && a.reason);
        if (a.presence == STK_PLAN_DISABLED) {
            disabled++;
            continue;
        }
        (a.presence == STK_PLAN_OPTIONAL ? optional : written)++;
        (a.exact ? exact : bound) += a.payload_bytes;
        assert_int_equal(a.file_bytes, a.payload_bytes + STK_ARRAY_HEADER_BYTES);
        files += a.file_bytes;
    }
    assert_int_equal(written, info.arrays_written);
    assert_int_equal(optional, info.arrays_optional);
    assert_int_equal(disabled, info.arrays_disabled);
    assert_int_equal(exact, info.payload_exact_bytes);
    assert_int_equal(bound, info.payload_bound_bytes);
    assert_int_equal(files, info.file_bytes);
    uint64_t stage_arrays = 0, stage_arena = 0;
    for (int s = 1; s <= STK_STAGE_COUNT; s++) {
        stk_plan_stage st = sized<stk_plan_stage>();
        assert_int_equal(stk_plan_stage_info(plan, stk_stage(s), &st), STK_OK);
        stage_arrays += st.arrays;
        stage_arena += st.arena_bytes;
    }
    assert_int_equal(stage_arrays, info.arrays_written + info.arrays_optional);
    assert_true(stage_arena > 0 && stage_arena < info.arena_bytes);
    // Refusals: past the end, an unknown stage, a struct older than the first version.
    stk_plan_array a = sized<stk_plan_array>();
    assert_int_equal(stk_plan_array_at(plan, info.array_count, &a), STK_E_KEY_NOT_FOUND);
    stk_plan_stage st = sized<stk_plan_stage>();
    assert_int_equal(stk_plan_stage_info(plan, stk_stage(0), &st), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_plan_stage_info(plan, stk_stage(STK_STAGE_COUNT + 1), &st), STK_E_INVALID_ARGUMENT);
    stk_plan_info old = sized<stk_plan_info>();
    old.struct_size = offsetof(stk_plan_info, r);
    assert_int_equal(stk_plan_get_info(plan, &old), STK_E_STRUCT_SIZE);
    // An older caller's smaller struct: filled up to its size, not a byte beyond.
    std::vector<uint8_t> small(sizeof(stk_plan_info) + 8, 0xAB);
    stk_plan_info *s = reinterpret_cast<stk_plan_info *>(small.data());
    s->struct_size = offsetof(stk_plan_info, format) + sizeof s->format;
    assert_int_equal(stk_plan_get_info(plan, s), STK_OK);
    assert_int_equal(s->arena_bytes, arena);
    assert_int_equal(small[sizeof(stk_plan_info) + 7], 0xAB);
    stk_plan_close(plan);
    // No out_dir: refused as stk_job_arena_size refuses it.
    p.out_dir = nullptr;
    assert_int_equal(stk_plan_open(&p, &plan), STK_E_INVALID_ARGUMENT);
    assert_null(plan);
    assert_int_equal(stk_plan_open(nullptr, &plan), STK_E_INVALID_ARGUMENT);
}

// The manifest of `root`'s current generation, opened three ways, says the same.
void check_manifest(const std::string &root, const stk_generation_entry &cur) {
    const std::string gen = root + "/" STK_GENERATIONS_DIR_NAME "/" + cur.name;
    for (const std::string &path : {root, gen, gen + "/" STK_MANIFEST_FILE_NAME}) {
        stk_manifest *m = nullptr;
        assert_int_equal(stk_manifest_open(path.c_str(), &m), STK_OK);
        stk_manifest_info mi = sized<stk_manifest_info>();
        assert_int_equal(stk_manifest_get_info(m, &mi), STK_OK);
        assert_memory_equal(mi.curr_hash, cur.curr_hash, 32);
        assert_memory_equal(mi.prev_hash, cur.prev_hash, 32);
        assert_int_equal(mi.array_count, cur.arrays);
        assert_int_equal(mi.payload_bytes, cur.bytes);
        assert_int_equal(mi.prf_r, 512);
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < mi.array_count; i++) {
            stk_manifest_array a = sized<stk_manifest_array>();
            assert_int_equal(stk_manifest_array_at(m, i, &a), STK_OK);
            bytes += a.byte_len;
        }
        assert_int_equal(bytes, mi.payload_bytes);
        stk_manifest_array a = sized<stk_manifest_array>();
        assert_int_equal(stk_manifest_array_at(m, mi.array_count, &a), STK_E_KEY_NOT_FOUND);
        stk_manifest_stage st = sized<stk_manifest_stage>();
        assert_int_equal(stk_manifest_stage_at(m, STK_STAGE_PARSE_TENSORS, &st), STK_OK);
        assert_int_equal(st.state, STK_MANIFEST_STAGE_RAN);
        assert_int_equal(stk_manifest_stage_at(m, STK_STAGE_CHECK, &st), STK_OK);
        assert_int_equal(st.state, STK_MANIFEST_STAGE_PENDING);
        assert_int_equal(stk_manifest_stage_at(m, stk_stage(11), &st), STK_E_INVALID_ARGUMENT);
        stk_manifest_record r = sized<stk_manifest_record>();
        assert_int_equal(stk_manifest_record_at(m, mi.record_count, &r), STK_E_KEY_NOT_FOUND);
        if (mi.record_count) {
            assert_int_equal(stk_manifest_record_at(m, 0, &r), STK_OK);
            assert_true(r.kind >= STK_RECORD_FEATURE_DISABLED && r.kind <= STK_RECORD_NOTE);
        }
        stk_manifest_close(m);
    }
}

// An array both generations hold with the same digests: one byte of the current one's copy
// flipped is found at its offset, with the other generation as the witness.
void check_damage(const std::string &root, const stk_generation_entry &old, const stk_generation_entry &cur) {
    stk_manifest *a = nullptr, *b = nullptr;
    const std::string gens = root + "/" STK_GENERATIONS_DIR_NAME "/";
    assert_int_equal(stk_manifest_open((gens + old.name).c_str(), &a), STK_OK);
    assert_int_equal(stk_manifest_open((gens + cur.name).c_str(), &b), STK_OK);
    std::string same;
    for (uint32_t i = 0; same.empty() && i < cur.arrays; i++) {
        stk_manifest_array x = sized<stk_manifest_array>(), y = sized<stk_manifest_array>();
        assert_int_equal(stk_manifest_array_at(b, i, &x), STK_OK);
        for (uint32_t k = 0; k < old.arrays; k++)
            if (stk_manifest_array_at(a, k, &y) == STK_OK && !std::strcmp(x.name, y.name) && x.sha256_low64 == y.sha256_low64 &&
                x.byte_len > 200)
                same = x.name;
    }
    stk_manifest_close(a);
    stk_manifest_close(b);
    assert_false(same.empty());
    const std::string rel = std::string(STK_GENERATIONS_DIR_NAME "/") + cur.name + "/" STK_ARRAYS_DIR_NAME "/" + same;
    uint64_t at = 0;
    char witness[64];
    assert_int_equal(stk_locate_damage(root.c_str(), rel.c_str(), &at, witness, sizeof witness), STK_E_KEY_NOT_FOUND);
    std::vector<uint8_t> bytes = test::read_bytes(root + "/" + rel);
    bytes[STK_ARRAY_HEADER_BYTES + 77] ^= 0x10;
    test::write_bytes(root + "/" + rel, bytes);
    assert_int_equal(stk_locate_damage(root.c_str(), rel.c_str(), &at, witness, sizeof witness), STK_OK);
    assert_int_equal(at, STK_ARRAY_HEADER_BYTES + 77);
    assert_string_equal(witness, old.name);
    assert_int_equal(stk_locate_damage(root.c_str(), rel.c_str(), &at, witness, 4), STK_E_INVALID_ARGUMENT);
    bytes[STK_ARRAY_HEADER_BYTES + 77] ^= 0x10;
    test::write_bytes(root + "/" + rel, bytes);
}

// Two generations: probe, list, chain, manifest, damage, then removal refused and gc.
void root_calls(void **) {
    const std::string root = test::make_temp_dir("cli_api_root") + "/root";
    const std::string first = publish(root, 12), second = publish(root, 8);
    stk_root_info ri = sized<stk_root_info>();
    assert_int_equal(stk_root_probe(root.c_str(), &ri), STK_OK);
    assert_int_equal(ri.is_root, 1);
    assert_int_equal(ri.needs_repair, 0);
    stk_generation_list *list = nullptr;
    assert_int_equal(stk_root_list(root.c_str(), &list), STK_OK);
    std::vector<stk_generation_entry> gens = entries(list);
    assert_int_equal(gens.size(), 2);
    assert_string_equal(gens[0].name, first.c_str());
    assert_string_equal(gens[1].name, second.c_str());
    assert_int_equal(gens[0].seq, 1);
    assert_int_equal(gens[1].seq, 2);
    assert_true(gens[1].current && !gens[0].current && gens[0].on_chain && gens[1].on_chain);
    assert_true(gens[0].readable && gens[1].readable && !gens[0].error[0]);
    assert_memory_equal(gens[1].prev_hash, gens[0].curr_hash, 32);
    stk_generation_list *chain = nullptr;
    assert_int_equal(stk_root_chain(root.c_str(), &chain), STK_OK);
    std::vector<stk_generation_entry> links = entries(chain);
    assert_int_equal(links.size(), 2);
    assert_string_equal(links[0].name, second.c_str());  // newest first
    assert_string_equal(links[1].name, first.c_str());
    check_manifest(root, gens[1]);
    check_damage(root, gens[0], gens[1]);
    stk_generation_list_close(chain);
    stk_generation_list_close(list);

    stk_gc_result *res = nullptr;
    assert_int_equal(stk_root_remove(root.c_str(), second.c_str(), 0, &res), STK_E_INVALID_ARGUMENT);  // the current one
    assert_null(res);
    assert_int_equal(stk_root_gc(root.c_str(), 1, &res), STK_OK);
    uint32_t removed = 9, in_use = 9, leftovers = 9;
    assert_int_equal(stk_gc_result_counts(res, &removed, &in_use, &leftovers), STK_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(in_use, 0);
    assert_int_equal(leftovers, 0);
    assert_string_equal(stk_gc_result_removed(res, 0), first.c_str());
    assert_null(stk_gc_result_removed(res, 1));
    assert_null(stk_gc_result_in_use(res, 0));
    stk_gc_result_close(res);
    assert_int_equal(stk_root_list(root.c_str(), &list), STK_OK);
    assert_int_equal(entries(list).size(), 1);
    stk_generation_list_close(list);
    // A generation directory is no root; a missing one is no error.
    assert_int_equal(stk_root_probe((root + "/" STK_GENERATIONS_DIR_NAME "/" + second).c_str(), &ri), STK_OK);
    assert_int_equal(ri.is_root, 0);
    assert_int_equal(stk_root_list((root + "/nonexistent").c_str(), &list), STK_E_NOT_FOUND);

    // The acceptance runner's C surface, on the current generation without the model.
    stk_acceptance_params ap = sized<stk_acceptance_params>();
    const std::string gen = root + "/" STK_GENERATIONS_DIR_NAME "/" + second;
    ap.generation_dir = gen.c_str();
    assert_int_equal(stk_acceptance_check_model(&ap), STK_OK);
    stk_acceptance *acc = nullptr;
    assert_int_equal(stk_acceptance_run(&ap, &acc), STK_OK);
    uint32_t rows = 0, passed = 9;
    assert_int_equal(stk_acceptance_summary(acc, &rows, &passed), STK_OK);
    assert_true(rows > 0 && passed <= 1);
    stk_acceptance_row row = sized<stk_acceptance_row>();
    assert_int_equal(stk_acceptance_row_at(acc, 0, &row), STK_OK);
    const char *table = nullptr, *json = nullptr;
    assert_int_equal(stk_acceptance_table(acc, &table), STK_OK);
    assert_int_equal(stk_acceptance_json(acc, &json), STK_OK);
    assert_non_null(std::strstr(table, row.test));
    assert_int_equal(std::strncmp(json, passed ? "{\"passed\": true" : "{\"passed\": false", passed ? 15 : 16), 0);
    assert_int_equal(stk_acceptance_row_at(acc, rows, &row), STK_E_KEY_NOT_FOUND);
    stk_acceptance_close(acc);
    // Progress (issue 32 item 10): each suite as it starts, in order, with the rows so far; the
    // same rows as without the callback.
    struct Step {
        std::string step;
        uint32_t suite, suites, rows;
    };
    std::vector<Step> steps;
    ap.progress = [](void *user, const char *step, uint32_t suite, uint32_t suites, uint32_t rows_so_far) {
        static_cast<std::vector<Step> *>(user)->push_back({step, suite, suites, rows_so_far});
    };
    ap.progress_user = &steps;
    assert_int_equal(stk_acceptance_run(&ap, &acc), STK_OK);
    uint32_t rows2 = 0;
    assert_int_equal(stk_acceptance_summary(acc, &rows2, &passed), STK_OK);
    assert_int_equal(rows2, rows);
    const char *names[] = {"16.1 prf", "16.2 linear", "16.3 memory", "16.4 bridge", "16.5 determinism"};
    assert_int_equal(steps.size(), 5);  // without --model: no layer or conversion steps
    for (uint32_t i = 0; i < 5; i++) {
        assert_string_equal(steps[i].step.c_str(), names[i]);
        assert_int_equal(steps[i].suite, i + 1);
        assert_int_equal(steps[i].suites, 5);
        if (i) assert_true(steps[i].rows >= steps[i - 1].rows);
    }
    assert_int_equal(steps[0].rows, 0);
    stk_acceptance_close(acc);
    ap.progress = nullptr;
    // The wrong model is refused before any row runs.
    const std::string other = test::test_data("models/llama");
    ap.model_dir = other.c_str();
    assert_int_equal(stk_acceptance_check_model(&ap), STK_E_INVALID_ARGUMENT);
}

// NULL arguments and a struct_size below the first version, for every call that takes them.
void refusals(void **) {
    stk_manifest *m = nullptr;
    assert_int_equal(stk_manifest_open(nullptr, &m), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_root_probe(nullptr, nullptr), STK_E_INVALID_ARGUMENT);
    stk_root_info ri = sized<stk_root_info>();
    ri.struct_size = 8;
    assert_int_equal(stk_root_probe("/", &ri), STK_E_STRUCT_SIZE);
    stk_acceptance_params ap = sized<stk_acceptance_params>();
    assert_int_equal(stk_acceptance_check_model(&ap), STK_E_INVALID_ARGUMENT);  // no generation_dir
    ap.struct_size = 4;
    ap.generation_dir = "/";
    assert_int_equal(stk_acceptance_check_model(&ap), STK_E_STRUCT_SIZE);
    stk_acceptance *acc = nullptr;
    assert_int_equal(stk_acceptance_run(nullptr, &acc), STK_E_INVALID_ARGUMENT);
    assert_null(acc);
    char buf[8];
    size_t len = 0;
    const std::string empty = test::make_temp_dir("cli_api_gguf");
    assert_int_equal(stk_model_gguf_path(empty.c_str(), buf, sizeof buf, &len), STK_OK);  // a directory without a GGUF
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    const std::string gguf = empty + "/m.gguf";
    test::write_bytes(gguf, {'G', 'G', 'U', 'F', 3, 0, 0, 0});
    assert_int_equal(stk_model_gguf_path(gguf.c_str(), buf, sizeof buf, &len), STK_E_INVALID_ARGUMENT);  // too small
    assert_int_equal(len, gguf.size());
    std::vector<char> big(len + 1);
    assert_int_equal(stk_model_gguf_path(gguf.c_str(), big.data(), big.size(), &len), STK_OK);
    assert_string_equal(big.data(), gguf.c_str());
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_matches_job),
        cmocka_unit_test(root_calls),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
