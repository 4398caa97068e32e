// Stage 1 of the DAG (seed 15.2): parse_tensors.
//
// Sizing (stk_job_arena_size) reads config.json and the checkpoint's headers, never the weights,
// and reserves: the ModelPlan, one stream unit's tensors in f32 (the largest of: the embedding
// unit, any layer, the final norm, the head - seed 1.3's max(layer_bytes)), one source row of
// scratch for transposed (Conv1D) tensors, and the per-expert norms.  Running visits the plan's
// tensors unit by unit in the fixed order, converts each to f32 in the unit buffer, checks that
// every value is finite, feeds the stage digest, and hands the source pages back to the kernel
// as soon as a tensor is converted, so the resident set stays near one unit.
//
// The stage digest (docs/format.md, "parse_tensors digest") is over a canonical record per
// streamed tensor (role, norm slot, layer, expert, logical shape) followed by its f32 bytes, in
// stream order: it names the model's content, independent of the file format, the source dtype
// encoding of equal values, the tensor names and the thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "ingest/model.h"
#include "stages/outputs.h"
#include "stages/stages.h"

namespace stk {

// Test hook: called with 0 just before the per-tensor conversion loop and with 1 just after it
// (tests/test_parse_tensors.cc counts heap allocations between the two).
void (*g_parse_tensors_loop_hook)(int phase) = nullptr;

namespace {

constexpr char kDigestMagic[] = "stk.parse_tensors.v1";

// Everything the stage adds to the arena beyond the plan itself.
void work_arena_size(const ModelPlan &p, ArenaSizer &s) {
    s.add(size_t(p.max_unit_f32_bytes), 64);
    s.add_array<float>(size_t(p.max_row_floats ? p.max_row_floats : 1));
    if (p.config.n_experts) s.add_array<double>(p.config.n_experts);
}

// The canonical per-tensor record of the digest: 40 bytes, little-endian.
void tensor_record(const PlanTensor &t, uint8_t rec[40]) {
    std::memset(rec, 0, 40);
    rec[0] = uint8_t(t.role);
    rec[1] = uint8_t(t.slot);
    rec[2] = uint8_t(t.rank);
    rec[3] = t.tied ? 1 : 0;
    store_le<int32_t>(rec + 4, t.layer);
    store_le<int32_t>(rec + 8, t.expert);
    store_le<uint64_t>(rec + 16, t.dims[0]);
    store_le<uint64_t>(rec + 24, t.rank == 2 ? t.dims[1] : 1);
    store_le<uint64_t>(rec + 32, t.n_elements);
}

// first_nonfinite() with a branch-free pass over blocks first (the compiler vectorises the OR
// reduction; the early-exit scan runs only on a block that holds a NaN/Inf).
uint64_t find_nonfinite(const float *v, uint64_t n) {
    constexpr uint64_t kBlock = 4096;
    for (uint64_t i0 = 0; i0 < n; i0 += kBlock) {
        const uint64_t m = n - i0 < kBlock ? n - i0 : kBlock;
        uint32_t bad = 0;
        for (uint64_t k = 0; k < m; k++) {
            uint32_t b;
            std::memcpy(&b, v + i0 + k, 4);
            bad |= uint32_t((b & 0x7F800000u) == 0x7F800000u);
        }
        if (bad) return i0 + first_nonfinite(v + i0, m);
    }
    return n;
}

[[noreturn]] void refuse_nonfinite(const PlanTensor &t, const TensorRef &src, uint64_t idx, float v) {
    uint64_t r = t.rank == 2 ? idx / t.dims[1] : idx, c = t.rank == 2 ? idx % t.dims[1] : 0;
    // Byte offset of the element in the source file (exact for untransformed tensors).
    uint64_t src_elem = t.transpose ? c * t.src_cols + r : idx;
    uint64_t off = src.file_offset + src_elem * src_dtype_size(src.dtype);
    throw_error(STK_E_NONFINITE,
                "%s: tensor '%s' (%s%s%s) element [%llu, %llu] is %s (near byte offset %llu); refused by the conversion "
                "policy (STK_JOB_ALLOW_NONFINITE / stk convert --allow-nonfinite records it instead)",
                src.file.c_str(), t.name, role_name(t.role), t.layer >= 0 ? ", layer " : "",
                t.layer >= 0 ? std::to_string(t.layer).c_str() : "", (unsigned long long)r, (unsigned long long)c,
                std::isnan(v) ? "NaN" : "Inf", (unsigned long long)off);
}

}  // namespace

// One streamed tensor handed to the hasher: its canonical record and its f32 values.
struct HashItem {
    const float *values;
    uint64_t n;
    uint8_t record[40];
};

void parse_tensors_size(const JobInputs &in, ArenaSizer &s) {
    const ModelDescription &d = *in.model;
    plan_arena_size(d, s);
    work_arena_size(d.plan, s);
    s.add_array<HashItem>(d.plan.n_streamed ? d.plan.n_streamed : 1);
}

namespace {

// With threads > 1 the digest (SHA-256 dominates the stage's CPU time) runs on a second thread,
// one tensor behind the conversion, in the same order: the bytes hashed are the same, so is the
// digest.  The converter waits for the hasher before reusing the unit buffer.
class Hasher {
public:
    Hasher(StageDigest &digest, HashItem *items, bool threaded) : digest_(digest), items_(items) {
        if (threaded) thread_ = std::thread([this] { loop(); });
    }
    ~Hasher() { stop(); }

    void push(uint32_t i) {
        if (!thread_.joinable()) {
            hash(items_[i]);
            return;
        }
        produced_.store(i + 1, std::memory_order_release);
        produced_.notify_one();
    }
    // Every pushed item hashed (before the unit buffer is overwritten, and at the end).
    void drain() {
        if (!thread_.joinable()) return;
        uint32_t want = produced_.load(std::memory_order_relaxed);
        for (uint32_t c = consumed_.load(std::memory_order_acquire); c < want; c = consumed_.load(std::memory_order_acquire))
            consumed_.wait(c, std::memory_order_acquire);
    }
    void stop() {
        if (!thread_.joinable()) return;
        produced_.store(kStop, std::memory_order_release);
        produced_.notify_one();
        thread_.join();
    }

private:
    static constexpr uint32_t kStop = 0xFFFFFFFFu;
    void hash(const HashItem &it) {
        digest_.add(it.record, sizeof it.record);
        digest_.add(it.values, size_t(it.n * 4));
    }
    void loop() {
        for (uint32_t i = 0;; i++) {
            uint32_t p = produced_.load(std::memory_order_acquire);
            while (p <= i) {
                produced_.wait(p, std::memory_order_acquire);
                p = produced_.load(std::memory_order_acquire);
            }
            if (p == kStop) return;  // stop() after drain(), or an error in the converter
            hash(items_[i]);
            consumed_.store(i + 1, std::memory_order_release);
            consumed_.notify_one();
        }
    }
    StageDigest &digest_;
    HashItem *items_;
    std::thread thread_;
    std::atomic<uint32_t> produced_{0}, consumed_{0};
};

}  // namespace

void parse_tensors_run(Job &job) {
    // Before the loop: place the plan (described once, at stk_open) and the buffers in the
    // arena.  This part allocates (the hasher thread).
    const ModelDescription *d = job.source;
    Arena &arena = job.arena;
    ModelPlan *plan = copy_plan_to_arena(*d, arena);
    size_t scratch_mark = arena.mark();
    float *unit_buf = static_cast<float *>(arena.alloc(size_t(plan->max_unit_f32_bytes ? plan->max_unit_f32_bytes : 64), 64));
    float *row_buf = arena.alloc_array<float>(size_t(plan->max_row_floats ? plan->max_row_floats : 1));
    double *expert_norm = plan->config.n_experts ? arena.alloc_array<double>(plan->config.n_experts) : nullptr;
    HashItem *items = arena.alloc_array<HashItem>(plan->n_streamed ? plan->n_streamed : 1);
    const Checkpoint &ckpt = *d->checkpoint;
    const std::vector<TensorRef> &refs = ckpt.tensors();
    const bool allow_nonfinite = (job.params.flags & STK_JOB_ALLOW_NONFINITE) != 0;
    const uint32_t n_experts = plan->config.n_experts;
    for (uint64_t i = 0; i < uint64_t(plan->config.n_layers) * n_experts; i++) plan->expert_order[i] = uint32_t(i % n_experts);

    StageDigest digest;
    uint8_t head[sizeof kDigestMagic + 8];
    std::memcpy(head, kDigestMagic, sizeof kDigestMagic);
    store_le<uint64_t>(head + sizeof kDigestMagic, plan->n_streamed);
    digest.add(head, sizeof head);
    std::vector<uint8_t> inflate_scratch;  // only compressed zip entries use it
    Hasher hasher(digest, items, job.params.threads > 1);

    if (g_parse_tensors_loop_hook) g_parse_tensors_loop_hook(0);
    // The per-tensor loop: no heap allocation from here to the hook below (a test counts them).
    for (uint32_t u = 0; u < plan->n_units; u++) {
        const PlanUnit &unit = plan->units[u];
        hasher.drain();  // the previous unit's values are hashed: the buffer may be reused
        uint64_t offset = 0;
        for (uint32_t k = 0; k < unit.count; k++) {
            uint32_t ti = unit.first + k;
            const PlanTensor &t = plan->tensors[ti];
            const TensorRef &src = refs[t.source];
            float *out = unit_buf + offset / 4;
            offset += align_up(t.n_elements * 4, 64);
            const uint8_t *bytes = ckpt.tensor_bytes(src, inflate_scratch);
            materialize_f32(t, src, bytes, out, row_buf);
            // Done with the stored bytes (a fused tensor is read once per part; its last part
            // releases it, and a tied head re-reads the embedding's pages).
            bool last_view = t.layout == QkvLayout::Separate || t.part == 2;
            if (last_view) ckpt.release(src);
            plan->streamed_elements += t.n_elements;

            if (!t.tied) {  // a tied head repeats the embedding, already checked
                uint64_t first = find_nonfinite(out, t.n_elements);
                if (first < t.n_elements) {
                    if (!allow_nonfinite) refuse_nonfinite(t, src, first, out[first]);
                    uint64_t count = 0;
                    for (uint64_t e = first; e < t.n_elements; e++) count += !std::isfinite(out[e]);
                    if (plan->nonfinite_tensors < kMaxNonfiniteRecords)
                        plan->nonfinite[plan->nonfinite_tensors] = NonfiniteRecord{ti, first, count};
                    plan->nonfinite_tensors++;
                    plan->nonfinite_values += count;
                }
            }
            if (t.role == Role::ROUTER_GATE && t.rank == 2 && t.dims[0] == n_experts && t.layer >= 0) {
                // Seed 3.3 / 9.1: experts enumerated by the L2 norm of their router row,
                // largest first, ties by index; the sum runs in a fixed order in double.
                for (uint32_t e = 0; e < n_experts; e++) {
                    double sum = 0;
                    const float *row = out + uint64_t(e) * t.dims[1];
                    for (uint64_t j = 0; j < t.dims[1]; j++) sum += double(row[j]) * double(row[j]);
                    expert_norm[e] = std::sqrt(sum);
                }
                uint32_t *order = plan->expert_order + uint64_t(t.layer) * n_experts;
                std::sort(order, order + n_experts, [&](uint32_t a, uint32_t b) {
                    if (expert_norm[a] != expert_norm[b]) return expert_norm[a] > expert_norm[b];
                    return a < b;
                });
            }
            HashItem &item = items[ti];
            item.values = out;
            item.n = t.n_elements;
            tensor_record(t, item.record);
            hasher.push(ti);
        }
    }
    hasher.drain();
    hasher.stop();
    if (g_parse_tensors_loop_hook) g_parse_tensors_loop_hook(1);

    digest.finish(job.stages[STK_STAGE_PARSE_TENSORS]);
    job.model = plan;
    // Seed 1.4: what the policy let through is recorded, not hidden.
    if (plan->nonfinite_values) {
        draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_E_NONFINITE,
                         double(plan->nonfinite_values), 0, "%llu NaN/Inf weights in %u tensors accepted (--allow-nonfinite)",
                         (unsigned long long)plan->nonfinite_values, plan->nonfinite_tensors);
        for (uint32_t i = 0; i < plan->nonfinite_tensors && i < kMaxNonfiniteRecords; i++) {
            const NonfiniteRecord &r = plan->nonfinite[i];
            draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_E_NONFINITE,
                             double(r.count), 0, "%s: %llu non-finite, first at element %llu",
                             plan->tensors[r.tensor].name, (unsigned long long)r.count,
                             (unsigned long long)r.element);
        }
    }
    // The unit buffer is scratch: later stages reuse that space.
    arena.reset(scratch_mark);
}

}  // namespace stk
