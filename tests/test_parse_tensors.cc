// The parse_tensors stage through the public C API: arena sizing (one byte short fails), the
// stage digest (pinned; equal across runs, thread counts, and a bf16-sharded vs f32-single-file
// copy of the same values), the NaN/Inf policy, the MoE expert order, and a heap-allocation
// counter around the per-tensor conversion loop (zero allocations inside it).
#include <malloc.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ingest/model.h"
#include "stages/job.h"
#include "stages/stages.h"
#include "stk/stk.h"

#include "test_util.h"

using namespace stk;

// ---------------------------------------------------------------------------------------------
// Allocation counter: the C allocator entry points (operator new, OpenSSL, RE2 and simdjson all
// end up here) forward to glibc's implementations and count while g_counting is set.
// Sanitizer builds intercept malloc themselves: there the counter is not installed and the
// allocation test is skipped (the plain build runs it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define STK_NO_MALLOC_COUNTER 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#    define STK_NO_MALLOC_COUNTER 1
#  endif
#endif

static std::atomic<bool> g_counting{false};
static std::atomic<uint64_t> g_allocs{0};

#ifndef STK_NO_MALLOC_COUNTER
extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);
}
static inline void count() {
    if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
extern "C" {
void *malloc(size_t n) {
    count();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    count();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    count();
    return __libc_realloc(p, n);
}
void *memalign(size_t al, size_t n) {
    count();
    return __libc_memalign(al, n);
}
void *aligned_alloc(size_t al, size_t n) {
    count();
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n) {
    count();
    void *p = __libc_memalign(al, n);
    if (!p) return 12;  // ENOMEM
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }
}
#endif

namespace stk {
extern void (*g_parse_tensors_loop_hook)(int phase);
}

static uint64_t g_loop_allocs = ~0ull;
static void loop_hook(int phase) {
    if (phase == 0) {
        g_allocs = 0;
        g_counting = true;
    } else {
        g_counting = false;
        g_loop_allocs = g_allocs;
    }
}

// ---------------------------------------------------------------------------------------------

struct Run {
    stk_status status;
    std::string message;
    uint32_t crc = 0;
    uint64_t sha = 0;
    ModelPlan plan{};  // a copy of the job's plan (pointers into the arena cleared)
    std::vector<uint32_t> expert_order;
    std::vector<std::string> records;  // texts of the manifest records the stage added
    size_t arena_bytes = 0;
    uint64_t work_done = 0, work_total = 0;  // the stage's progress counters when it returned
};

// model: a fixture under tests/data/models, or an absolute path.
static Run run_stage(const std::string &model, uint32_t threads = 1, uint32_t flags = 0, long arena_delta = 0) {
    std::string in = model[0] == '/' ? model : test::test_data("models/" + model);
    std::string out = test::make_temp_dir("parse") + "/out";
    stk_job_params p{};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_dir = out.c_str();
    p.threads = threads;
    p.flags = flags;
    Run r;
    size_t need = 0;
    stk_status s = stk_job_arena_size(&p, &need);
    if (s != STK_OK) {
        r.status = s;
        r.message = stk_last_error();
        return r;
    }
    r.arena_bytes = need;
    size_t have = size_t(long(need) + arena_delta);
    std::vector<unsigned char> arena(have);
    stk_job *job = nullptr;
    s = stk_open(&p, arena.data(), arena.size(), &job);
    if (s == STK_OK) {
        s = stk_stage_run(job, STK_STAGE_PARSE_TENSORS);
        r.message = stk_last_error();
        if (s == STK_OK) {
            assert_int_equal(stk_stage_digest(job, STK_STAGE_PARSE_TENSORS, &r.crc, &r.sha), STK_OK);
            const Job *j = reinterpret_cast<const Job *>(job);
            assert_non_null(j->model);
            r.work_done = j->work_done.load();
            r.work_total = j->work_total.load();
            r.plan = *j->model;
            for (uint32_t i = 0; i < j->manifest.n_records; i++) r.records.push_back(j->manifest.records[i].text);
            if (j->model->expert_order)
                r.expert_order.assign(j->model->expert_order,
                                      j->model->expert_order + j->model->config.n_layers * j->model->config.n_experts);
            r.plan.tensors = nullptr;
            r.plan.units = nullptr;
            r.plan.expert_order = nullptr;
        }
        stk_close(job);
    } else {
        r.message = stk_last_error();
    }
    r.status = s;
    return r;
}

// The llama fixture's parse_tensors digest (docs/format.md, "parse_tensors digest").
static const uint32_t kLlamaCrc = 0x975b5e2du;
static const uint64_t kLlamaSha = 0xa678e4ee2ed614faull;

static void digest_is_pinned_and_stable(void **) {
    Run a = run_stage("llama");
    if (a.status != STK_OK) print_error("%s\n", a.message.c_str());
    assert_int_equal(a.status, STK_OK);
    Run b = run_stage("llama");
    Run c = run_stage("llama", 2);
    // The same values stored as F32 in one unsharded file: same canonical digest.
    Run f = run_stage("llama_f32");
    assert_int_equal(f.status, STK_OK);
    print_message("llama digest crc32c %08x sha256_low64 %016llx\n", a.crc, (unsigned long long)a.sha);
    assert_int_equal(a.crc, b.crc);
    assert_true(a.sha == b.sha);
    assert_int_equal(a.crc, c.crc);
    assert_true(a.sha == c.sha);
    assert_int_equal(a.crc, f.crc);
    assert_true(a.sha == f.sha);
    // Pinned: the canonical record or the stream order changing must be a deliberate decision.
    assert_int_equal(a.crc, kLlamaCrc);
    assert_true(a.sha == kLlamaSha);
    // Stream: embedding, 2 layers x 10 tensors (9 parameters + the ROPE_ALPHA inv_freq buffer),
    // final norm, head; every element once.
    assert_int_equal(a.plan.n_streamed, 23);
    assert_int_equal(a.plan.n_units, 5);
    assert_true(a.plan.streamed_elements == 86336 + 2 * 8);
    assert_int_equal(a.plan.nonfinite_values, 0);
    // Progress (stk convert's display): every stored byte of the 23 streamed tensors, counted
    // once each (86336 + 16 BF16 values), and all of it done when the stage returns.
    assert_true(a.work_total == (86336 + 16) * 2);
    assert_true(a.work_done == a.work_total);
    assert_true(c.work_done == c.work_total);
}

static void every_fixture_streams(void **) {
    const char *models[] = {"gpt2", "mixtral", "gpt_neox", "bloom", "qwen2_moe"};
    for (const char *m : models) {
        Run a = run_stage(m), b = run_stage(m, 2);
        if (a.status != STK_OK) print_error("%s: %s\n", m, a.message.c_str());
        assert_int_equal(a.status, STK_OK);
        assert_int_equal(b.status, STK_OK);
        assert_int_equal(a.crc, b.crc);
        assert_true(a.sha == b.sha);
        assert_int_equal(a.plan.n_units, a.plan.config.n_layers + 3);
        print_message("%s: %u tensors streamed, %llu elements, digest %08x/%016llx, arena %zu bytes\n", m, a.plan.n_streamed,
                      (unsigned long long)a.plan.streamed_elements, a.crc, (unsigned long long)a.sha, a.arena_bytes);
    }
}

// A one-layer llama whose tied embedding (107520 x 64 bf16, 13 MiB, written here) has 105 chunks
// of 64 Ki elements: enough for 100 workers at once.
static std::string wide_model() {
    const std::string dir = test::make_temp_dir("parse-wide");
    const uint64_t v = 107520, d = 64, kv = 32, ffn = 128;
    struct T {
        std::string name;
        uint64_t rows, cols;  // cols 0: a vector
    };
    const std::vector<T> tensors = {
        {"model.embed_tokens.weight", v, d},
        {"model.layers.0.input_layernorm.weight", d, 0},
        {"model.layers.0.self_attn.q_proj.weight", d, d},
        {"model.layers.0.self_attn.k_proj.weight", kv, d},
        {"model.layers.0.self_attn.v_proj.weight", kv, d},
        {"model.layers.0.self_attn.o_proj.weight", d, d},
        {"model.layers.0.post_attention_layernorm.weight", d, 0},
        {"model.layers.0.mlp.gate_proj.weight", ffn, d},
        {"model.layers.0.mlp.up_proj.weight", ffn, d},
        {"model.layers.0.mlp.down_proj.weight", d, ffn},
        {"model.norm.weight", d, 0},
    };
    std::string header = "{";
    uint64_t off = 0;
    for (const T &t : tensors) {
        const uint64_t n = t.rows * (t.cols ? t.cols : 1);
        header += (off ? ",\"" : "\"") + t.name + "\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(t.rows) +
                  (t.cols ? "," + std::to_string(t.cols) : "") + "],\"data_offsets\":[" + std::to_string(off) + "," +
                  std::to_string(off + 2 * n) + "]}";
        off += 2 * n;
    }
    header += "}";
    std::vector<uint8_t> file(8);
    for (int i = 0; i < 8; i++) file[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
    file.insert(file.end(), header.begin(), header.end());
    // bf16 values in [-1, 1), every chunk different: the upper half of a float.
    for (uint64_t i = 0; i < off / 2; i++) {
        const float f = float(int64_t((i * 2654435761u) % 2048) - 1024) / 1024.0f;
        uint32_t b;
        std::memcpy(&b, &f, 4);
        file.push_back(uint8_t(b >> 16));
        file.push_back(uint8_t(b >> 24));
    }
    test::write_bytes(dir + "/model.safetensors", file);
    const std::string config = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
 "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 128, "num_attention_heads": 4,
 "num_hidden_layers": 1, "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 107520})";
    test::write_bytes(dir + "/config.json", std::vector<uint8_t>(config.begin(), config.end()));
    return dir;
}

// The digest does not depend on the thread count, up to more workers than the old fixed limit of
// 64; each worker's scratch (a chunk in f32 and in 16 bits) is sized from the normalised thread
// count (parse_tensors applies no cap of its own).
static void digest_equal_at_1_2_and_100_threads(void **) {
    const std::string m = wide_model();
    Run a = run_stage(m, 1), b = run_stage(m, 2), c = run_stage(m, 100);
    if (a.status != STK_OK) print_error("%s\n", a.message.c_str());
    for (const Run *r : {&a, &b, &c}) {
        assert_int_equal(r->status, STK_OK);
        assert_int_equal(r->crc, a.crc);
        assert_true(r->sha == a.sha);
    }
    assert_true(a.plan.streamed_elements == 2 * 107520 * 64 + 3 * 64 + 64 * (2 * 64 + 2 * 32 + 3 * 128));  // the tied head again
    // The stage's own declared size (parse_tensors_size) grows by one chunk of scratch per worker.
    const std::unique_ptr<ModelDescription> model = describe_model(m);
    auto stage_size = [&](uint32_t threads) {
        stk_job_params p{};
        p.struct_size = sizeof p;
        p.threads = threads;
        ArenaSizer sizer;
        parse_tensors_size(JobInputs{p, model.get()}, sizer);
        return sizer.total();
    };
    const size_t per_worker = 64 * 1024 * (4 + 2), one = stage_size(1);
    assert_true(stage_size(2) == one + per_worker);
    assert_true(stage_size(100) == one + 99 * per_worker);
    assert_true(stage_size(1024) == one + 1023 * per_worker);
    print_message(
        "wide model: digest %08x/%016llx at 1, 2 and 100 threads; parse_tensors declares %zu bytes at "
        "1 thread, %zu at 100\n",
        a.crc, (unsigned long long)a.sha, one, stage_size(100));
    // A model whose tensors have one or two chunks: 98 workers or more find nothing to do.
    Run f = run_stage("llama", 100);
    assert_int_equal(f.status, STK_OK);
    assert_int_equal(f.crc, kLlamaCrc);
    assert_true(f.sha == kLlamaSha);
}

static void arena_one_byte_short_fails(void **) {
    Run r = run_stage("gpt2", 1, 0, -1);
    assert_int_equal(r.status, STK_E_ARENA_TOO_SMALL);
    assert_contains(r.message, "stk_job_arena_size");
}

static void nonfinite_refused_then_recorded(void **) {
    // The refusal stops the hasher thread cleanly too (threads = 2).
    Run r2 = run_stage("nonfinite", 2);
    assert_int_equal(r2.status, STK_E_NONFINITE);
    Run r = run_stage("nonfinite");
    assert_int_equal(r.status, STK_E_NONFINITE);
    assert_contains(r.message, "model.layers.1.mlp.down_proj.weight");
    assert_contains(r.message, "FFN_W2, layer 1");
    assert_contains(r.message, "element [3, 4] is NaN");
    assert_contains(r.message, "model.safetensors");
    assert_contains(r.message, "STK_JOB_ALLOW_NONFINITE");
    Run a = run_stage("nonfinite", 1, STK_JOB_ALLOW_NONFINITE);
    assert_int_equal(a.status, STK_OK);
    assert_int_equal(a.plan.nonfinite_values, 2);
    assert_int_equal(a.plan.nonfinite_tensors, 1);
    assert_int_equal(a.plan.nonfinite[0].element, 3 * 32 + 4);
    assert_int_equal(a.plan.nonfinite[0].count, 2);
    // Seed 1.4: what the policy let through is recorded in the manifest, with the tensor.
    assert_int_equal(a.records.size(), 2);
    assert_contains(a.records[0], "2 NaN/Inf weights in 1 tensors accepted");
    assert_contains(a.records[1], "first at element 100");
}

static void experts_ordered_by_router_norm(void **) {
    Run r = run_stage("mixtral");
    assert_int_equal(r.status, STK_OK);
    // expected.json: per layer, experts by router-row L2 norm descending (computed by PyTorch).
    // Layer 0 scales rows by [0.5, 2, 1, 3] -> 3, 1, 2, 0; layer 1 by [2, 1, 3, 0.5] -> 2, 0, 1, 3.
    const uint32_t want[8] = {3, 1, 2, 0, 2, 0, 1, 3};
    assert_int_equal(r.expert_order.size(), 8);
    for (int i = 0; i < 8; i++) assert_int_equal(r.expert_order[size_t(i)], want[i]);
}

static void no_allocation_in_the_conversion_loop(void **) {
#ifdef STK_NO_MALLOC_COUNTER
    print_message("sanitizer build: allocation counter not installed\n");
    skip();
#endif
    g_parse_tensors_loop_hook = loop_hook;
    const char *models[] = {"llama", "gpt2", "gpt_neox", "mixtral"};
    for (const char *m : models)
        for (uint32_t threads = 1; threads <= 2; threads++) {  // 2: the hasher thread runs too
            g_loop_allocs = ~0ull;
            Run r = run_stage(m, threads);
            assert_int_equal(r.status, STK_OK);
            print_message("%s, %u thread(s): %llu heap allocations inside the per-tensor loop (%u tensors)\n", m, threads,
                          (unsigned long long)g_loop_allocs, r.plan.n_streamed);
            assert_true(r.plan.n_streamed > 20);
            assert_int_equal(g_loop_allocs, 0);
        }
    // The counter itself works: an allocation between the markers is seen.
    loop_hook(0);
    void *volatile p = malloc(16);
    loop_hook(1);
    free(p);
    assert_int_equal(g_loop_allocs, 1);
    g_parse_tensors_loop_hook = nullptr;
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(digest_is_pinned_and_stable),         cmocka_unit_test(every_fixture_streams),
        cmocka_unit_test(arena_one_byte_short_fails),          cmocka_unit_test(nonfinite_refused_then_recorded),
        cmocka_unit_test(experts_ordered_by_router_norm),      cmocka_unit_test(no_allocation_in_the_conversion_loop),
        cmocka_unit_test(digest_equal_at_1_2_and_100_threads),
    };
    return cmocka_run_group_tests_name("parse_tensors", tests, nullptr, nullptr);
}
