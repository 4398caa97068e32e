// Test-only: a conversion job built by hand (as job_open does) for running the tokenizer stage
// alone, writing into a fresh temporary output directory.
#pragma once

#include <memory>
#include <new>
#include <string>

#include "stages/job.h"
#include "stages/stages.h"
#include "test_util.h"
#include "tokenizer/plan.h"

namespace stk::test {

struct TestJob {
    std::unique_ptr<uint8_t[]> mem;
    Job *job = nullptr;
    std::string in, out;
    TestJob(const std::string &in_dir, uint32_t flags, uint64_t tokenizer_bytes, uint32_t l_tok = 8) : in(in_dir) {
        out = make_temp_dir("tok") + "/out";
        stk_job_params p{};
        p.struct_size = sizeof p;
        p.in_dir = in.c_str();
        p.out_dir = out.c_str();
        p.flags = flags;
        p.l_tok = l_tok;
        // A job built by hand, as job_open does, without parse_tensors' sizing (it reads
        // config.json: ingestion's business, not this test's).
        p = normalize_params(p);
        ArenaSizer z;
        tokenizer_stage_size(JobInputs{p, nullptr}, z);  // the stage's own estimate from the files in in_dir
        size_t n = (64 << 10) + sizeof(Job) + kMaxArrays * sizeof(WrittenArray) + z.total() +
                   (tokenizer_bytes ? tokenizer_arena_bytes(tokenizer_bytes, l_tok) : 0);
        mem.reset(new uint8_t[n]);
        Arena a(mem.get(), n);
        job = new (a.alloc(sizeof(Job), alignof(Job))) Job();
        job->arena = a;
        job->params = p;
        job->in_dir = in.c_str();
        job->out_dir = out.c_str();
        job->arrays = job->arena.alloc_array<WrittenArray>(kMaxArrays);
    }
    std::string array(const char *name) const { return out + "/arrays/" + name; }
};

}  // namespace stk::test
