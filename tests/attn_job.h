// Test-only: a conversion through the public API up to a given stage (NOT_IMPLEMENTED stages
// tolerated, as `stk convert --partial` does), and plain double references the attention-side
// tests share (written independently of src/kernels).
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "format/array.h"
#include "stages/job.h"
#include "stk/stk.h"
#include "test_util.h"

struct stk_job : stk::Job {};

namespace stk::test {

struct AttnRun {
    std::unique_ptr<uint8_t[]> mem;
    stk_job *job = nullptr;
    std::string out;
    AttnRun(const std::string &model, uint32_t r, uint32_t rv, uint32_t threads, stk_stage last, uint32_t flags = 0) {
        out = make_temp_dir("attn") + "/out";
        stk_job_params p{};
        p.struct_size = sizeof p;
        p.in_dir = model.c_str();
        p.out_dir = out.c_str();
        p.r = r;
        p.rv = rv;
        p.threads = threads;
        p.flags = flags;
        size_t n = 0;
        assert_int_equal(stk_job_arena_size(&p, &n), STK_OK);
        mem.reset(new uint8_t[n]);
        assert_int_equal(stk_open(&p, mem.get(), n, &job), STK_OK);
        for (int s = STK_STAGE_PARSE_TENSORS; s <= int(last); s++) {
            stk_status st = stk_stage_run(job, stk_stage(s));
            if (st != STK_OK && st != STK_E_NOT_IMPLEMENTED) {
                std::fprintf(stderr, "stage %d: %s\n", s, stk_last_error());
                fail();
            }
        }
    }
    ~AttnRun() { stk_close(job); }
    Job &j() { return *job; }
    std::string path(const char *name) const { return out + "/arrays/" + name; }
};

inline std::string model_dir(const char *name) { return test_data(std::string("models/") + name); }

// Plain splitmix64 and Box-Muller (seed 5.1), written out again.
inline uint64_t ref_splitmix(uint64_t &x) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// Gaussian number k of the stream (k even: cos branch of pair k/2, odd: sin branch).
inline double ref_gaussian(uint64_t seed, uint64_t k) {
    uint64_t x = seed + (k / 2) * 2 * 0x9E3779B97F4A7C15ull;
    uint64_t a = ref_splitmix(x), b = ref_splitmix(x);
    double u = double(a >> 11) * 0x1.0p-53, v = double(b >> 11) * 0x1.0p-53;
    if (u < 0x1.0p-52) u = 0x1.0p-52;
    if (u > 1 - 0x1.0p-52) u = 1 - 0x1.0p-52;
    double rad = std::sqrt(-2 * std::log(u));
    return (k & 1) ? rad * std::sin(2 * M_PI * v) : rad * std::cos(2 * M_PI * v);
}
inline uint64_t ref_output(uint64_t seed, uint64_t k) {
    uint64_t x = seed + k * 0x9E3779B97F4A7C15ull;
    return ref_splitmix(x);
}

inline std::vector<float> read_f32(const std::string &path, ArrayHeader *h = nullptr) {
    ArrayReader a(path);
    if (h) *h = a.header();
    std::vector<float> v(a.payload_size() / 4);
    std::memcpy(v.data(), a.payload(), a.payload_size());
    return v;
}
inline std::vector<double> read_f64(const std::string &path, ArrayHeader *h = nullptr) {
    ArrayReader a(path);
    if (h) *h = a.header();
    std::vector<double> v(a.payload_size() / 8);
    std::memcpy(v.data(), a.payload(), a.payload_size());
    return v;
}

}  // namespace stk::test

#include "ingest/model.h"

namespace stk::test {

// One dense tensor of a model (role, layer) in f32 through ingest's own reader.
inline std::vector<float> model_tensor(const ModelDescription &d, Role role, int32_t layer, uint64_t *rows, uint64_t *cols) {
    for (const PlanTensor &t : d.layout.tensors) {
        if (t.role != role || t.layer != layer || t.expert != kNoExpert || !t.streamed) continue;
        const TensorRef &src = d.checkpoint->tensors()[t.source];
        std::vector<uint8_t> scratch;
        const uint8_t *bytes = d.checkpoint->tensor_bytes(src, scratch);
        std::vector<float> out(t.n_elements), row(d.plan.max_row_floats + 1);
        materialize_f32(t, src, bytes, out.data(), row.data());
        *rows = t.dims[0];
        *cols = t.rank == 2 ? t.dims[1] : 1;
        return out;
    }
    fail_msg("no tensor %d in layer %d", int(role), int(layer));
    return {};
}

}  // namespace stk::test
