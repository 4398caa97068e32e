// mphf_cuckoo (seed 7.4-7.5, 12.4, 18.1): the linear dictionary over ffn_collapse's entries.
//   linear_mphf.bin     the MPHF over the base keys (src/hash/mphf.h bytes, dtype u8)
//   linear_keys.bin     [C, 8] u8: the base keys (u64 LE) at their MPHF index (audit + guard)
//   linear_weights.bin  [C] f32: the base values at their MPHF index
//   cuckoo_delta.bin    the bounded cuckoo table of the delta entries (src/hash/cuckoo.h bytes)
// An exhausted MPHF seed search (18.1) multiplies M by 1.05 and rebuilds only the MPHF; the
// cuckoo table, built first from the same entries, and every other stage's arrays are unchanged.
// The 12.4 checks run here: every base key maps to its own index and value, every delta key is
// found with its value in at most d*b + S + 1 probes, at most one emergency slot.
// Stage digest: the four arrays' names and headers, in the order above.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/prng.h"
#include "hash/cuckoo.h"
#include "hash/mphf.h"
#include "ingest/model.h"
#include "stages/ffn_collapse.h"
#include "stages/outputs.h"
#include "stages/policy.h"
#include "stages/plan.h"
#include "stages/stages.h"

namespace stk {

uint32_t g_linear_test_pilot_cap = 0;
uint32_t g_linear_test_pilot_cap_attempts = 0;

namespace {

constexpr uint64_t kLinearSaltMaster = 0x4C494E4541523031ull;  // "LINEAR01"
constexpr uint32_t kLinearModule = 5;                          // seed 10.4 module id of this stage
constexpr uint32_t kMaxMphfRetries = kMphfMaxRetries;
constexpr uint32_t kMaxCuckooRetries = 4;  // sizing load 0.90, 0.85, ... 0.70
constexpr double kAcceptMape = 0.005;      // 16.2 / 12.4 bound

MphfParams mphf_params(uint32_t attempt) { return mphf_params_at(stream_seed(kLinearSaltMaster, kLinearModule, 0), attempt); }

CuckooParams cuckoo_params(uint32_t attempt) {
    CuckooParams p;  // d 2, b 4, stash 4, kick cap 8 (seed 7.5's L_cuckoo)
    p.salt = stream_seed(kLinearSaltMaster, kLinearModule, 1);
    p.load = 0.90 - 0.05 * attempt;
    return p;
}

// The arrays the stage publishes, in write order (the writer and the planner use these dims).
struct LinearArrays {
    ArraySpec mphf, keys, weights, delta;
};
LinearArrays linear_arrays(uint64_t mphf_bytes, uint64_t n_base, uint64_t delta_bytes) {
    return {{"linear_mphf.bin", DType::U8, {mphf_bytes}},
            {"linear_keys.bin", DType::U8, {n_base, 8}},
            {"linear_weights.bin", DType::F32, {n_base}},
            {"cuckoo_delta.bin", DType::U8, {delta_bytes}}};
}

// The stage's buffers, declared once: sized in mphf_cuckoo_size over the most entries
// ffn_collapse can hand on, allocated in mphf_cuckoo_run over those it did.  The two builders
// allocate inside their own region, at the size of their largest retry (the lowest cuckoo sizing
// load, the MPHF's last 18.1 growth); a failed attempt's memory is reused by the next.
struct LinearSizes {
    uint64_t n_base, n_delta;
};
struct LinearBuffers {
    Arena cuckoo, mphf;               // cuckoo_build / mphf_build_u64: structures and scratch
    uint8_t *delta_blob, *mphf_blob;  // their serialized forms (cuckoo_delta.bin, linear_mphf.bin)
    uint64_t delta_cap, mphf_cap;     // the bytes those hold
    uint8_t *keys, *seen;             // linear_keys.bin; which MPHF indices are taken (12.4)
    float *weights;                   // linear_weights.bin
};
LinearBuffers linear_buffers(const LinearSizes &z, Buffers &b) {
    const CuckooParams last_cuckoo = cuckoo_params(kMaxCuckooRetries - 1);
    const MphfParams last_mphf = mphf_params(kMaxMphfRetries);
    const uint64_t c = z.n_base ? z.n_base : 1;
    LinearBuffers o;
    o.cuckoo = b.region(cuckoo_build_arena_size(z.n_delta, last_cuckoo));
    o.delta_cap = cuckoo_serialized_size_for(z.n_delta, last_cuckoo);
    o.delta_blob = b.array<uint8_t>(o.delta_cap ? o.delta_cap : 1);
    o.mphf = b.region(mphf_build_arena_size(z.n_base, last_mphf));
    o.mphf_cap = mphf_serialized_size_bound(z.n_base, last_mphf);
    o.mphf_blob = b.array<uint8_t>(o.mphf_cap ? o.mphf_cap : 1);
    o.keys = b.array<uint8_t>(checked_mul(c, 8, "linear keys"));
    o.weights = b.array<float>(c);
    o.seen = b.array<uint8_t>(c);
    return o;
}

}  // namespace

void mphf_cuckoo_plan(const JobInputs &in, ArrayPlan &plan) {
    const LinearOutline o = linear_outline(in.model->plan, in.params.top_l);
    // The largest blobs the retries can reach: the MPHF at its last 18.1 growth, the cuckoo
    // table at its lowest sizing load over the most delta entries.
    const LinearArrays a = linear_arrays(mphf_serialized_size_bound(o.n_base, mphf_params(kMaxMphfRetries)), o.n_base,
                                         cuckoo_serialized_size_for(o.max_delta, cuckoo_params(kMaxCuckooRetries - 1)));
    plan.add(STK_STAGE_MPHF_CUCKOO, a.mphf, false, "MPHF size depends on the keys: bound at the last 18.1 retry (M x 1.05^8)");
    plan.add(STK_STAGE_MPHF_CUCKOO, a.keys);
    plan.add(STK_STAGE_MPHF_CUCKOO, a.weights);
    plan.add(STK_STAGE_MPHF_CUCKOO, a.delta, false,
             "delta entries depend on the weights: bound at " + std::to_string(kLinearDeltaCap) + " per column (" +
                 std::to_string(o.max_delta) + " entries) and the lowest sizing load");
    if (o.n_units == 0)
        plan.disable_stage(STK_STAGE_MPHF_CUCKOO,
                           "linear disabled: the model has no FFN tensors (ffn_collapse and mphf_cuckoo "
                           "are not implemented for it; publishing needs --partial)");
}

void mphf_cuckoo_size(const JobInputs &in, ArenaSizer &s) {
    uint64_t max_base = 0, max_delta = 0;
    linear_capacity(in.model->plan, in.params.top_l, &max_base, &max_delta);
    Buffers b(s);
    linear_buffers({max_base, max_delta}, b);
}

void mphf_cuckoo_run(Job &job) {
    // ffn_collapse did not produce entries: not implemented for this model (no FFN, no plan) ->
    // the same here.  (A disabled ffn_collapse never gets here: job_run_stage disables this
    // stage as its dependent, seed 1.4.)
    if (!job.linear) {
        if (job.stages[STK_STAGE_FFN_COLLAPSE].not_implemented)
            throw_error(STK_E_NOT_IMPLEMENTED, "mphf_cuckoo: ffn_collapse produced no entries: no linear dictionary");
        throw_error(STK_E_STAGE_ORDER, "mphf_cuckoo: ffn_collapse handed nothing on");
    }
    const LinearHandoff &h = *job.linear;
    ManifestDraft &m = job.manifest;
    Buffers alloc(job.arena);
    LinearBuffers buf = linear_buffers({h.n_base, h.n_delta}, alloc);

    // The delta table first: it does not depend on the MPHF (18.1 leaves it byte-identical).
    CuckooTable table;
    CuckooReport rep;
    CuckooParams cp;
    uint32_t cuckoo_attempts = 0;
    for (;; cuckoo_attempts++) {
        cp = cuckoo_params(cuckoo_attempts);
        buf.cuckoo.reset(0);
        try {
            table = cuckoo_build(h.delta_keys, h.delta_vals, size_t(h.n_delta), cp, buf.cuckoo, &rep);
            break;
        } catch (const Error &e) {
            if (e.status() != STK_E_TABLE_FULL || cuckoo_attempts + 1 >= kMaxCuckooRetries) throw;
        }
    }
    const size_t delta_bytes = table.serialized_size();
    if (delta_bytes > buf.delta_cap)
        throw_error(STK_E_INTERNAL, "mphf_cuckoo: the delta table takes %zu bytes, over its bound %llu", delta_bytes,
                    (unsigned long long)buf.delta_cap);
    uint8_t *delta_blob = buf.delta_blob;
    table.serialize(delta_blob);

    // The MPHF, with seed 18.1 on an exhausted search.
    Mphf f;
    uint32_t retries = 0;
    for (;; retries++) {
        MphfParams mp = mphf_params(retries);
        if (g_linear_test_pilot_cap && retries < g_linear_test_pilot_cap_attempts) mp.pilot_cap = g_linear_test_pilot_cap;
        buf.mphf.reset(0);
        try {
            f = mphf_build_u64(h.base_keys, size_t(h.n_base), mp, buf.mphf);
            break;
        } catch (const Error &e) {
            if (e.status() != STK_E_MPHF_EXHAUSTED || retries >= kMaxMphfRetries) throw;
        }
    }
    const size_t mphf_bytes = f.serialized_size();
    if (mphf_bytes > buf.mphf_cap)
        throw_error(STK_E_INTERNAL, "mphf_cuckoo: the MPHF takes %zu bytes, over its bound %llu", mphf_bytes,
                    (unsigned long long)buf.mphf_cap);
    uint8_t *mphf_blob = buf.mphf_blob;
    f.serialize(mphf_blob);

    // Base arrays at the MPHF index; 12.4: the function is a bijection on the keys.
    const uint64_t C = h.n_base;
    uint8_t *keys = buf.keys, *seen = buf.seen;
    float *weights = buf.weights;
    for (uint64_t e = 0; e < C; e++) {
        uint64_t idx = f.index_u64(h.base_keys[e]);
        if (idx >= C || seen[idx])
            throw_breach(STK_E_INTERNAL, "12.4 MPHF bijective", double(idx), double(C),
                         "mphf_cuckoo: 12.4 check failed: key %016llx maps to index %llu (taken or out of range)",
                         (unsigned long long)h.base_keys[e], (unsigned long long)idx);
        seen[idx] = 1;
        store_le<uint64_t>(keys + 8 * idx, h.base_keys[e]);
        weights[idx] = h.base_vals[e];
    }
    // 12.4 on the serialized forms, as a reader sees them: read-only lookups, split over the
    // workers in contiguous ranges (each prefetching a few keys ahead); a failure is reported for
    // the lowest failing entry, as one pass in order would.
    Mphf fl = Mphf::load(mphf_blob, mphf_bytes, "linear_mphf.bin");
    CuckooTable tl = CuckooTable::load(delta_blob, delta_bytes, "cuckoo_delta.bin");
    const uint32_t probe_bound = cp.d * cp.b + cp.stash + 1;
    const unsigned workers = unsigned(std::max<uint64_t>(1, std::min<uint64_t>(job.params.threads, (C + h.n_delta) / 4096 + 1)));
    std::vector<uint64_t> bad_base(workers, C), bad_delta(workers, h.n_delta);
    std::vector<uint32_t> probes_max(workers, 0);
    run_workers(workers, [&](unsigned w) {
        constexpr uint64_t kAhead = 16;
        for (uint64_t e = C * w / workers, e1 = C * (w + 1) / workers; e < e1; e++) {
            uint64_t idx = fl.index_u64(h.base_keys[e]);
            if (idx >= C || load_le<uint64_t>(keys + 8 * idx) != h.base_keys[e] ||
                std::memcmp(&weights[idx], &h.base_vals[e], 4) != 0) {
                bad_base[w] = e;
                break;
            }
        }
        uint32_t mp = 0;
        for (uint64_t e = h.n_delta * w / workers, e1 = h.n_delta * (w + 1) / workers; e < e1; e++) {
            if (e + kAhead < e1) tl.prefetch(h.delta_keys[e + kAhead]);
            uint32_t v = 0, probes = 0;
            bool found = tl.find(h.delta_keys[e], &v, &probes);
            if (probes > mp) mp = probes;
            if (!found || v != h.delta_vals[e] || probes > probe_bound) {
                bad_delta[w] = e;
                break;
            }
        }
        probes_max[w] = mp;
    });
    for (unsigned w = 0; w < workers; w++)
        if (bad_base[w] < C) {
            const uint64_t e = bad_base[w];
            throw_breach(STK_E_INTERNAL, "12.4 base keys read back", double(e), double(C),
                         "mphf_cuckoo: 12.4 check failed: base key %016llx does not read back",
                         (unsigned long long)h.base_keys[e]);
        }
    uint32_t max_probes = 0;
    for (unsigned w = 0; w < workers; w++) {
        max_probes = std::max(max_probes, probes_max[w]);
        if (bad_delta[w] < h.n_delta) {
            const uint64_t e = bad_delta[w];
            uint32_t v = 0, probes = 0;
            bool found = tl.find(h.delta_keys[e], &v, &probes);
            throw_breach(STK_E_INTERNAL, "12.4 delta probes <= d*b+S+1", double(probes), double(probe_bound),
                         "mphf_cuckoo: 12.4 check failed: delta key %016llx (%s, %u probes, bound %u)",
                         (unsigned long long)h.delta_keys[e], found ? "wrong value" : "not found", probes, probe_bound);
        }
    }
    if (rep.emergency_used > 1)
        throw_breach(STK_E_TABLE_FULL, "12.4 emergency slots per shard", rep.emergency_used, 1,
                     "mphf_cuckoo: %u emergency slots in one shard", rep.emergency_used);

    StageDigest digest;
    const LinearArrays out = linear_arrays(mphf_bytes, C, delta_bytes);
    job_write_array(job, STK_STAGE_MPHF_CUCKOO, digest, out.mphf, mphf_blob);
    job_write_array(job, STK_STAGE_MPHF_CUCKOO, digest, out.keys, keys);
    job_write_array(job, STK_STAGE_MPHF_CUCKOO, digest, out.weights, weights);
    job_write_array(job, STK_STAGE_MPHF_CUCKOO, digest, out.delta, delta_blob);
    digest.finish(job.stages[STK_STAGE_MPHF_CUCKOO]);

    auto &lin = m.fields.linear;
    lin.c = C;
    lin.d = cp.d;
    lin.b = cp.b;
    lin.s = cp.stash;
    lin.l_cuckoo = cp.kick_cap;
    lin.q = rep.ring_capacity;
    lin.tau_low = h.tau_low;
    lin.tau_high = h.tau_high;

    const stk_stage st = STK_STAGE_MPHF_CUCKOO;
    if (retries)
        draft_add_record(m, st, kRecordNote, kFeatureMphfCuckoo, STK_E_MPHF_EXHAUSTED, double(retries), kMaxMphfRetries,
                         "18.1: MPHF seed search exhausted %u time(s); M grown by 5 %% each (m_scale %.4f)", retries,
                         mphf_params(retries).m_scale);
    if (cuckoo_attempts)
        draft_add_record(m, st, kRecordNote, kFeatureMphfCuckoo, STK_E_TABLE_FULL, double(cuckoo_attempts), kMaxCuckooRetries,
                         "cuckoo table full at load %.2f: rebuilt at load %.2f", cuckoo_params(0).load, cp.load);
    draft_add_record(m, st, kRecordInvariantPass, kFeatureMphfCuckoo, STK_OK, double(max_probes), double(probe_bound),
                     "12.4: %llu base keys via the MPHF, %llu delta keys read back; max probes (value) <= d*b+S+1",
                     (unsigned long long)C, (unsigned long long)h.n_delta);
    draft_add_record(m, st, kRecordNote, kFeatureMphfCuckoo, STK_OK, rep.load(), cp.load,
                     "cuckoo: load (value), stash %u/%u, ring %u/%u, emergency %u/1, max chain %u", rep.stash_used, cp.stash,
                     rep.ring_used, rep.ring_capacity, rep.emergency_used, rep.max_chain);
    // 12.4 "base + delta reconstruct e_j within 0.5 %": the dictionary returns every stored entry
    // bit-exactly (checked above), so its error is the truncation's.
    const bool ok = h.trunc_col_max <= kAcceptMape;
    draft_add_record(m, st, ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureLinear, ok ? STK_OK : STK_E_INTERNAL,
                     h.trunc_col_max, kAcceptMape,
                     "12.4: base+delta vs exact collapse: worst column rel L2 (value); entries read back bit-exact");
}

}  // namespace stk
