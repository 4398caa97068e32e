// Stage 1 of the DAG (seed 15.2): parse_tensors.
//
// Sizing (stk_job_arena_size) reads config.json and the checkpoint's headers, never the weights,
// and reserves: the ModelPlan, a buffer for the largest tensor that cannot be read in place
// (Conv1D weights stored [in, out], parts of fused QKV tensors, router gates), one chunk of
// scratch per worker, and the per-expert norms.  Running visits the plan's tensors in the fixed
// stream order; each tensor is cut into fixed chunks of 64 Ki logical elements that the workers
// convert to f32 in cache, check for NaN/Inf and hash, each chunk on its own; then the tensor's
// source pages go back to the kernel, so the resident set stays near one tensor.
//
// The stage digest (docs/format.md, "parse_tensors digest") is a two-level tree: per chunk, a
// SHA-256 of a canonical encoding of its f32 values (the shortest of bf16 / f16 / f32 that holds
// every value exactly); per stage, crc32c + SHA-256 over each tensor's canonical record and its
// chunk digests, in stream order.  It names the model's content, independent of the file format,
// the source dtype encoding of equal values, the tensor names and the thread count, and it lets a
// BF16 checkpoint be hashed straight from its mapped bytes (no conversion, half the bytes).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/parallel.h"
#include "format/ggml_dequant.h"
#include "ingest/model.h"
#include "ingest/mxfp4.h"
#include "kernels/elementwise.h"
#include "stages/outputs.h"
#include "stages/calib_job.h"
#include "stages/faithful.h"
#include "stages/stages.h"

namespace stk {

// Test hook: called with 0 just before the per-tensor conversion loop and with 1 just after it
// (tests/test_parse_tensors.cc counts heap allocations between the two).
void (*g_parse_tensors_loop_hook)(int phase) = nullptr;

namespace {

constexpr char kDigestMagic[] = "stk.parse_tensors.v2";
constexpr uint64_t kChunkElements = 64 * 1024;  // part of the digest's definition: never change

uint64_t chunk_count(uint64_t n) { return (n + kChunkElements - 1) / kChunkElements; }

// A tensor whose logical f32 stream is a plain conversion of its stored elements (no transpose,
// no fused-part gather) is read chunk by chunk in place; the others are materialised first.
// Router gates are materialised too: their rows' norms order the experts.
// The stored bytes a plan tensor reads, for the progress display (issue 32: it counted the f32
// size): a ggml type's whole blocks, MXFP4's packed nibbles and scales (17 bytes per 32 values),
// else elements times the stored element size.  A part of a fused tensor or one expert of a stack
// counts its own share, so the shares add up to the stored tensor.  A tied head reads nothing of
// its own: 0.
uint64_t progress_bytes(const PlanTensor &t, const TensorRef &src) {
    if (t.tied) return 0;
    const uint64_t n = t.n_elements;
    if (src.ggml_type == kGgmlMxfp4 || (!src.ggml_type && src.dtype == SrcDType::MXFP4))
        return checked_mul((n + 31) / 32, 17, "stored bytes");
    if (src.ggml_type) {
        const uint64_t block = ggml::ggml_dequant_block(src.ggml_type);
        if (block) return checked_mul((n + block - 1) / block, ggml::ggml_dequant_block_bytes(src.ggml_type), "stored bytes");
    }
    return checked_mul(n, src_dtype_size(src.dtype), "stored bytes");
}

bool read_in_place(const PlanTensor &t) {
    return !t.transpose && t.layout == QkvLayout::Separate && t.src_offset == 0 && t.role != Role::ROUTER_GATE;
}

// What one worker owns: a chunk in f32 and its canonical encoding (its SHA-256 context is
// ChunkWorkers').
struct WorkerScratch {
    float *f32;
    uint16_t *half;
};

struct ChunkResult {
    uint8_t digest[32];
    uint32_t first_bad;  // offset in the chunk of the first NaN/Inf, or kChunkElements if none
    uint32_t bad_count;
};

// Everything the stage adds to the arena beyond the plan itself.
struct WorkSizes {
    uint64_t materialize_floats = 0;  // largest tensor that is not read in place
    uint64_t max_chunks = 1;          // most chunks of one tensor
};
WorkSizes work_sizes(const ModelPlan &p) {
    WorkSizes w;
    for (uint32_t i = 0; i < p.n_streamed; i++) {
        const PlanTensor &t = p.tensors[i];
        if (!read_in_place(t)) w.materialize_floats = std::max(w.materialize_floats, t.n_elements);
        w.max_chunks = std::max(w.max_chunks, chunk_count(t.n_elements));
    }
    return w;
}

// The stage's buffers beyond the plan, declared once: sized in parse_tensors_size, allocated in
// parse_tensors_run.
struct WorkBuffers {
    float *tensor_buf, *row_buf;
    ChunkResult *results;
    WorkerScratch scratch;  // every worker's chunk: worker w's starts at w * kChunkElements
    double *expert_norm;
};
WorkBuffers work_buffers(const ModelPlan &p, uint32_t workers, Buffers &b) {
    const WorkSizes w = work_sizes(p);
    WorkBuffers o{};
    o.tensor_buf = static_cast<float *>(b.bytes((w.materialize_floats ? w.materialize_floats : 1) * 4));
    o.row_buf = b.array<float>(p.max_row_floats ? p.max_row_floats : 1);
    o.results = b.array<ChunkResult>(w.max_chunks);
    o.scratch.f32 = b.array<float>(workers * kChunkElements);
    o.scratch.half = b.array<uint16_t>(workers * kChunkElements);
    o.expert_norm = p.config.n_experts ? b.array<double>(p.config.n_experts) : nullptr;
    return o;
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

[[noreturn]] void refuse_nonfinite(const PlanTensor &t, const TensorRef &src, uint64_t idx, float v) {
    uint64_t r = t.rank == 2 ? idx / t.dims[1] : idx, c = t.rank == 2 ? idx % t.dims[1] : 0;
    // Byte offset of the element in the source file (exact for untransformed tensors).
    uint64_t src_elem = t.transpose ? c * t.src_cols + r : t.src_offset + idx;
    uint64_t off = stored_byte_offset(src, src_elem);
    throw_error(STK_E_NONFINITE,
                "%s: tensor '%s' (%s%s%s) element [%llu, %llu] is %s (near byte offset %llu); refused by the conversion "
                "policy (STK_JOB_ALLOW_NONFINITE / stk convert --allow-nonfinite records it instead)",
                src.file.c_str(), t.name, role_name(t.role), t.layer >= 0 ? ", layer " : "",
                t.layer >= 0 ? std::to_string(t.layer).c_str() : "", (unsigned long long)r, (unsigned long long)c,
                std::isnan(v) ? "NaN" : "Inf", (unsigned long long)off);
}

}  // namespace

namespace {

// One tensor's work, shared by the workers: chunk c covers logical elements
// [c * kChunkElements, min(n, (c + 1) * kChunkElements)).
struct TensorWork {
    const PlanTensor *t = nullptr;
    const TensorRef *src = nullptr;
    const uint8_t *bytes = nullptr;  // stored bytes (in-place tensors)
    const float *values = nullptr;   // the materialised f32 stream (other tensors)
    ChunkResult *results = nullptr;
};

void scan_nonfinite_f32(const float *v, uint64_t n, ChunkResult &r) {
    uint64_t first = kernels::first_nonfinite_f32(v, size_t(n));
    r.first_bad = uint32_t(first < n ? first : kChunkElements);
    r.bad_count = 0;
    for (uint64_t i = first; i < n; i++) r.bad_count += !std::isfinite(v[i]);
}

void hash_chunk(const TensorWork &w, uint64_t c, WorkerScratch &ws, Sha256 &sha) {
    const PlanTensor &t = *w.t;
    const uint64_t first = c * kChunkElements;
    const uint64_t n = std::min<uint64_t>(kChunkElements, t.n_elements - first);
    ChunkResult &r = w.results[c];
    sha.reset();
    const bool raw_ok = !w.values && w.src->strides.empty();
    if (raw_ok && w.src->dtype == SrcDType::BF16) {
        // bf16 -> f32 only appends zero bits: every value is bf16-exact, and the canonical 'B'
        // payload is the stored bytes themselves.
        const uint8_t *raw = w.bytes + first * 2;
        uint32_t bad = 0;
        for (uint64_t i = 0; i < n; i++) bad |= uint32_t((load_le<uint16_t>(raw + 2 * i) & 0x7F80u) == 0x7F80u);
        r.first_bad = uint32_t(kChunkElements);
        r.bad_count = 0;
        if (bad) {
            for (uint64_t i = 0; i < n; i++)
                if ((load_le<uint16_t>(raw + 2 * i) & 0x7F80u) == 0x7F80u) {
                    if (r.first_bad == kChunkElements) r.first_bad = uint32_t(i);
                    r.bad_count++;
                }
        }
        const uint8_t tag = 'B';
        sha.update(&tag, 1);
        sha.update(raw, size_t(n * 2));
        std::memcpy(r.digest, sha.finish().bytes, 32);
        return;
    }
    const float *v = w.values ? w.values + first : ws.f32;
    if (!w.values) convert_to_f32(*w.src, w.bytes, first, n, ws.f32);
    scan_nonfinite_f32(v, n, r);
    // 'B': every value bf16-exact (low 16 bits zero).
    const uint32_t low = kernels::or_low16_f32(v, size_t(n));
    uint8_t tag;
    const void *payload;
    size_t payload_bytes;
    if (low == 0) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t b;
            std::memcpy(&b, v + i, 4);
            ws.half[i] = uint16_t(b >> 16);
        }
        tag = 'B', payload = ws.half, payload_bytes = size_t(n * 2);
    } else if (raw_ok && w.src->dtype == SrcDType::F16 && r.bad_count == 0) {
        // A finite binary16 value is its own exact encoding: the stored bytes are the payload.
        tag = 'H', payload = w.bytes + first * 2, payload_bytes = size_t(n * 2);
    } else {
        uint64_t i = 0;
        for (uint32_t b; i < n; i++) {
            std::memcpy(&b, v + i, 4);
            if (!f16_exact(b, &ws.half[i])) break;
        }
        if (i == n) tag = 'H', payload = ws.half, payload_bytes = size_t(n * 2);
        else tag = 'F', payload = v, payload_bytes = size_t(n * 4);
    }
    sha.update(&tag, 1);
    sha.update(payload, payload_bytes);
    std::memcpy(r.digest, sha.finish().bytes, 32);
}

// The workers (core/parallel.h's pool: `threads - 1` threads beside the caller, started once
// before the tensor loop).  run() hands out the chunks of one tensor by an atomic counter and
// returns when all are hashed; each chunk's result lands in its own slot, so the digest does not
// depend on who hashed what.  A worker's error is rethrown by the pool once all have finished.
class ChunkWorkers {
public:
    ChunkWorkers(const WorkerScratch &scratch, uint32_t workers)
        : scratch_(scratch), sha_(new Sha256[workers]), pool_(workers), drain_([this](unsigned w) { drain(w); }) {}
    void run(const TensorWork &w, uint64_t chunks) {
        work_ = &w;
        chunks_ = chunks;
        next_.store(0, std::memory_order_relaxed);
        if (chunks > 1) pool_.run(drain_);
        else drain(0);
    }

private:
    void drain(unsigned id) {
        WorkerScratch mine{scratch_.f32 + id * kChunkElements, scratch_.half + id * kChunkElements};
        for (uint64_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks_;) hash_chunk(*work_, c, mine, sha_[id]);
    }
    const WorkerScratch scratch_;
    const std::unique_ptr<Sha256[]> sha_;  // one context per worker, allocated before the tensor loop
    WorkerPool pool_;
    const std::function<void(unsigned)> drain_;  // built once: the loop allocates nothing
    const TensorWork *work_ = nullptr;
    uint64_t chunks_ = 0;
    std::atomic<uint64_t> next_{0};
};

}  // namespace

void parse_tensors_size(const JobInputs &in, ArenaSizer &s) {
    const ModelDescription &d = *in.model;
    plan_arena_size(d, s);
    Buffers b(s);
    work_buffers(d.plan, in.params.threads, b);  // normalize_params: 1..1024
    faithful_size(in, s);                         // the faithful profile's writer (nothing otherwise)
}

void parse_tensors_run(Job &job) {
    // Before the loop: place the plan (described once, at stk_open) and the buffers in the
    // arena, start the workers.  This part allocates (threads, SHA-256 contexts).
    const ModelDescription *d = job.source;
    Arena &arena = job.arena;
    ModelPlan *plan = copy_plan_to_arena(*d, arena);
    size_t scratch_mark = arena.mark();
    const uint32_t n_workers = job.params.threads;
    Buffers alloc(arena);
    WorkBuffers buf = work_buffers(*plan, n_workers, alloc);
    float *tensor_buf = buf.tensor_buf, *row_buf = buf.row_buf;
    ChunkResult *results = buf.results;
    double *expert_norm = buf.expert_norm;
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
    ChunkWorkers workers(buf.scratch, n_workers);

    uint64_t work_bytes = 0;
    for (uint32_t i = 0; i < plan->n_streamed; i++)
        work_bytes = checked_add(work_bytes, progress_bytes(plan->tensors[i], refs[plan->tensors[i].source]), "stored bytes");
    job_work_begin(job, work_bytes, "B");
    if (g_parse_tensors_loop_hook) g_parse_tensors_loop_hook(0);
    // The per-tensor loop: no heap allocation from here to the hook below (a test counts them).
    for (uint32_t u = 0; u < plan->n_units; u++) {
        const PlanUnit &unit = plan->units[u];
        for (uint32_t k = 0; k < unit.count; k++) {
            uint32_t ti = unit.first + k;
            const PlanTensor &t = plan->tensors[ti];
            const TensorRef &src = refs[t.source];
            const uint8_t *bytes = ckpt.tensor_bytes(src, inflate_scratch);
            TensorWork work;
            work.t = &t;
            work.src = &src;
            work.bytes = bytes;
            work.results = results;
            if (!read_in_place(t)) {
                materialize_f32(t, src, bytes, tensor_buf, row_buf);
                work.values = tensor_buf;
            }
            const uint64_t chunks = chunk_count(t.n_elements);
            workers.run(work, chunks);
            plan->streamed_elements += t.n_elements;
            job_work_add(job, progress_bytes(t, src));

            if (!t.tied) {  // a tied head repeats the embedding, already checked
                uint64_t first = t.n_elements, count = 0;
                for (uint64_t c = 0; c < chunks; c++) {
                    if (first == t.n_elements && results[c].first_bad != kChunkElements)
                        first = c * kChunkElements + results[c].first_bad;
                    count += results[c].bad_count;
                }
                if (count) {
                    if (!allow_nonfinite) {
                        float v;
                        if (work.values) v = work.values[first];
                        else convert_to_f32(src, bytes, first, 1, &v);
                        refuse_nonfinite(t, src, first, v);
                    }
                    if (plan->nonfinite_tensors < kMaxNonfiniteRecords)
                        plan->nonfinite[plan->nonfinite_tensors] = NonfiniteRecord{ti, first, count};
                    plan->nonfinite_tensors++;
                    plan->nonfinite_values += count;
                }
            }
            if (t.role == Role::ROUTER_GATE && t.rank == 2 && t.dims[0] == n_experts && t.layer >= 0) {
                order_experts_by_router_norm(work.values, n_experts, t.dims[1], expert_norm,
                                             plan->expert_order + uint64_t(t.layer) * n_experts);
            }
            // Done with the stored bytes (a fused tensor is read once per part; its last part
            // releases it, and a tied head re-reads the embedding's pages).
            bool last_view = t.layout == QkvLayout::Separate || t.part == 2;
            if (last_view) ckpt.release(src);

            uint8_t record[48];
            tensor_record(t, record);
            store_le<uint64_t>(record + 40, chunks);
            digest.add(record, sizeof record);
            for (uint64_t c = 0; c < chunks; c++) digest.add(results[c].digest, 32);
        }
    }
    if (g_parse_tensors_loop_hook) g_parse_tensors_loop_hook(1);
    // The faithful profile: the model's own weights, after the hash tree (so the stage digest is
    // the default profile's tree followed by these arrays' headers).
    if (job_is_faithful(job.params)) faithful_write(job, *plan, digest);

    digest.finish(job.stages[STK_STAGE_PARSE_TENSORS]);
    calib_check_model(job);  // --calibration: statistics of another model are refused here
    job.model = plan;
    // Seed 1.4: what the policy let through is recorded, not hidden.
    if (plan->nonfinite_values) {
        draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_E_NONFINITE,
                         double(plan->nonfinite_values), 0, "%llu NaN/Inf weights in %u tensors accepted (--allow-nonfinite)",
                         (unsigned long long)plan->nonfinite_values, plan->nonfinite_tensors);
        for (uint32_t i = 0; i < plan->nonfinite_tensors && i < kMaxNonfiniteRecords; i++) {
            const NonfiniteRecord &r = plan->nonfinite[i];
            draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_E_NONFINITE, double(r.count),
                             0, "%s: %llu non-finite, first at element %llu", plan->tensors[r.tensor].name,
                             (unsigned long long)r.count, (unsigned long long)r.element);
        }
    }
    // What the family does that the arrays cannot represent: recorded, never silent (issue 20).
    // Not in the faithful profile: its runtime block carries every one of these facts (windows,
    // local bases, q/k norms, scales, softcaps), and the numeric arrays they concern are not written.
    const std::vector<std::string> approx =
        job_is_faithful(job.params) ? std::vector<std::string>() : model_approximations(plan->config);
    for (const std::string &a : approx) {
        Feature f = a.find("RoPE") != std::string::npos                                               ? kFeatureMemory
                    : a.find("head") != std::string::npos || a.find("embedding") != std::string::npos ? kFeatureBridge
                                                                                                      : kFeaturePrf;
        draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, f, STK_OK, 0, 0, "%s", a.c_str());
    }
    // The unit buffer is scratch: later stages reuse that space.
    arena.reset(scratch_mark);
}

}  // namespace stk
