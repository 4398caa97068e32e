// Test-only: convert a model through the public C API, every stage of the DAG (each must
// succeed, as `stk convert` runs them), and keep the stage digests and a copy of what
// ffn_collapse handed to mphf_cuckoo.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "stages/ffn_collapse.h"
#include "stages/job.h"
#include "stk/stk.h"
#include "test_util.h"

namespace stk::test {

struct Converted {
    std::string out;
    std::vector<uint64_t> base_keys, delta_keys;
    std::vector<float> base_vals;
    std::vector<uint32_t> delta_vals;
    LinearHandoff h;  // scalars only (pointers are dangling after the job closes)
    uint32_t crc[STK_STAGE_COUNT + 1] = {};
    uint64_t sha[STK_STAGE_COUNT + 1] = {};
};

// `model`: tests/data/models/<model>, or a directory path (one that contains '/').
inline Converted convert_model(const std::string &model, unsigned threads, uint32_t top_l = 0, const char *tag = "lin",
                               uint32_t flags = 0) {
    Converted c;
    c.out = make_temp_dir(tag) + "/out";
    std::string in = model.find('/') == std::string::npos ? test_data("models/" + model) : model;
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_dir = c.out.c_str();
    p.threads = threads;
    p.top_l = top_l;
    p.flags = flags;
    size_t bytes = 0;
    assert_int_equal(stk_job_arena_size(&p, &bytes), STK_OK);
    void *arena = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    stk_job *job = nullptr;
    assert_int_equal(stk_open(&p, arena, bytes, &job), STK_OK);
    for (int s = 1; s <= STK_STAGE_COUNT; s++) {
        stk_status st = stk_stage_run(job, stk_stage(s));
        if (st != STK_OK) print_error("%s: stage %d: %s\n", model.c_str(), s, stk_last_error());
        assert_int_equal(st, STK_OK);
        stk_stage_digest(job, stk_stage(s), &c.crc[s], &c.sha[s]);
        if (s == STK_STAGE_MPHF_CUCKOO && reinterpret_cast<Job *>(job)->linear) {
            const LinearHandoff &h = *reinterpret_cast<Job *>(job)->linear;
            c.h = h;
            c.base_keys.assign(h.base_keys, h.base_keys + h.n_base);
            c.base_vals.assign(h.base_vals, h.base_vals + h.n_base);
            c.delta_keys.assign(h.delta_keys, h.delta_keys + h.n_delta);
            c.delta_vals.assign(h.delta_vals, h.delta_vals + h.n_delta);
        }
    }
    if (flags & STK_JOB_PUBLISH_ROOT) {  // out is the root: hand back the generation it published
        const char *gen = nullptr;
        assert_int_equal(stk_job_generation_dir(job, &gen), STK_OK);
        c.out = gen;
    }
    stk_close(job);
    std::free(arena);
    return c;
}

inline const char *const kLinearModels[] = {"gpt2", "llama", "mixtral", "qwen2_moe"};

}  // namespace stk::test
