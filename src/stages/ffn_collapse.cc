// ffn_collapse (seed 7.1-7.3, 7.6): per FFN unit, streamed one unit at a time from the
// checkpoint's mapping, the influence bound S = |W2| |W1| and the exact ReLU collapse M+ / M-
// through kernels/abs_gemm (transforms applied while packing), then the top-L base entries and
// the delta entries of every column (ffn_collapse.h), and the global bias of 7.6.  The result
// stays in the arena for mphf_cuckoo; the stage publishes linear_bias.bin when the model has FFN
// biases.  Stage digest: "stk.ffn_collapse.v1" NUL, u64 n_base, n_delta, then the base keys
// (u64 LE) and values (f32 LE), the delta keys and values, then linear_bias.bin's name and header.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/parallel.h"
#include "format/calib_stats.h"
#include "ingest/model.h"
#include "kernels/abs_gemm.h"
#include "kernels/elementwise.h"
#include "stages/calib_fit.h"
#include "stages/ffn_collapse.h"
#include "stages/ffn_select.h"
#include "stages/outputs.h"
#include "stages/policy.h"
#include "stages/plan.h"
#include "stages/stages.h"

namespace stk {

uint64_t ffn_units_max(const ModelPlan &plan) {
    return uint64_t(plan.config.n_layers) * (uint64_t(plan.config.n_experts) + 2) + 1;
}

namespace {

bool is_ffn_role(Role r) {
    return r == Role::FFN_W1 || r == Role::FFN_W2 || r == Role::FFN_W3 || r == Role::FFN_B1 || r == Role::FFN_B2;
}

// Slot of an expert inside its layer's row of the scratch table: routed 0..E-1, shared E, dense E+1.
uint64_t expert_slot(int32_t expert, uint32_t n_experts) {
    if (expert >= 0) return uint64_t(expert);
    return expert == kSharedExpert ? n_experts : uint64_t(n_experts) + 1;
}

[[noreturn]] void bad_shape(const PlanTensor &t, const char *want) {
    throw_error(STK_E_PARAM_COUNT, "ffn_collapse: tensor '%s' (layer %d, expert %d) has shape [%llu, %llu]; expected %s", t.name,
                t.layer, t.expert, (unsigned long long)t.dims[0], (unsigned long long)(t.rank == 2 ? t.dims[1] : 1), want);
}

}  // namespace

uint32_t ffn_units(const ModelPlan &plan, FfnUnit *out) {
    const uint32_t E = plan.config.n_experts;
    const uint64_t per_layer = uint64_t(E) + 2;
    const uint64_t d = plan.config.d_model;
    // Pass 1: fill the table in place, at index layer * per_layer + slot (out has room for it).
    const uint64_t cells = uint64_t(plan.config.n_layers) * per_layer;
    for (uint64_t c = 0; c < cells; c++) out[c] = FfnUnit{};
    for (uint32_t ti = 0; ti < plan.n_streamed; ti++) {
        const PlanTensor &t = plan.tensors[ti];
        if (!is_ffn_role(t.role) || t.layer < 0 || uint32_t(t.layer) >= plan.config.n_layers) continue;
        if (t.expert >= int32_t(E) || (t.expert < 0 && t.expert != kNoExpert && t.expert != kSharedExpert)) continue;
        FfnUnit &u = out[uint64_t(t.layer) * per_layer + expert_slot(t.expert, E)];
        u.layer = t.layer;
        u.expert = t.expert;
        uint32_t *slot = t.role == Role::FFN_W1   ? &u.w1
                         : t.role == Role::FFN_W2 ? &u.w2
                         : t.role == Role::FFN_W3 ? &u.w3
                         : t.role == Role::FFN_B1 ? &u.b1
                                                  : &u.b2;
        if (*slot != kNoTensor)
            throw_error(STK_E_PARAM_COUNT, "ffn_collapse: layer %d expert %d has two %s tensors ('%s', '%s')", t.layer, t.expert,
                        role_name(t.role), plan.tensors[*slot].name, t.name);
        *slot = ti;
    }
    // Pass 2: compact in key order, check shapes.
    uint32_t n = 0;
    for (uint32_t L = 0; L < plan.config.n_layers; L++) {
        // The row is read in router order while compacted units are written before it: copy it.
        FfnUnit row[kMaxExperts + 2];
        std::memcpy(row, out + uint64_t(L) * per_layer, sizeof(FfnUnit) * per_layer);
        uint64_t order[kMaxExperts + 2];
        uint32_t k = 0;
        order[k++] = uint64_t(E) + 1;  // dense
        for (uint32_t r = 0; r < E && r < kMaxExperts; r++)
            order[k++] = plan.expert_order ? plan.expert_order[uint64_t(L) * E + r] : r;
        order[k++] = E;  // shared
        for (uint32_t q = 0; q < k; q++) {
            FfnUnit u = row[order[q]];
            if (u.layer < 0) continue;
            if (u.w1 == kNoTensor || u.w2 == kNoTensor)
                throw_error(STK_E_UNSUPPORTED, "ffn_collapse: layer %d expert %d has no %s tensor: cannot collapse it", u.layer,
                            u.expert, u.w1 == kNoTensor ? "FFN_W1" : "FFN_W2");
            const PlanTensor &w1 = plan.tensors[u.w1], &w2 = plan.tensors[u.w2];
            if (w1.rank != 2 || w1.dims[1] != d) bad_shape(w1, "[h, d_model]");
            u.hidden = w1.dims[0];
            if (w2.rank != 2 || w2.dims[0] != d || w2.dims[1] != u.hidden) bad_shape(w2, "[d_model, h] matching FFN_W1");
            if (u.w3 != kNoTensor) {
                const PlanTensor &w3 = plan.tensors[u.w3];
                if (w3.rank != 2 || w3.dims[0] != u.hidden || w3.dims[1] != d) bad_shape(w3, "[h, d_model] like FFN_W1");
            }
            if (u.b1 != kNoTensor && plan.tensors[u.b1].n_elements != u.hidden) bad_shape(plan.tensors[u.b1], "[h]");
            if (u.b2 != kNoTensor && plan.tensors[u.b2].n_elements != d) bad_shape(plan.tensors[u.b2], "[d_model]");
            u.id = n;
            // Writing behind the read position is safe: n <= index of the cell being read.
            out[n++] = u;
        }
    }
    if (n > kLinearMaxUnits)
        throw_error(STK_E_UNSUPPORTED, "ffn_collapse: %u FFN units; the key holds at most %u", n, kLinearMaxUnits);
    return n;
}

void linear_counts(uint64_t units, uint64_t d, uint32_t top_l, uint64_t *n_base, uint64_t *max_delta) {
    // Every unit has d columns and two signs; a column keeps min(L, d) base entries and at most
    // min(cap, d - L) delta entries.
    const uint64_t l = std::min<uint64_t>(top_l, d);
    const uint64_t cap = std::min<uint64_t>(kLinearDeltaCap, d - l);
    const uint64_t cols = checked_mul(checked_mul(units, d, "linear columns"), 2, "linear columns");
    *n_base = checked_mul(cols, l, "linear base entries");
    *max_delta = checked_mul(cols, cap, "linear delta entries");
}

void linear_capacity(const ModelPlan &plan, uint32_t top_l, uint64_t *max_base, uint64_t *max_delta) {
    // MoE: routed + shared, and room for a dense FFN beside them in one layer (E + 2).
    const uint64_t E = plan.config.n_experts;
    const uint64_t units = uint64_t(plan.config.n_layers) * (E ? E + 2 : 1);
    linear_counts(units, plan.config.d_model, top_l, max_base, max_delta);
}

LinearOutline linear_outline(const ModelPlan &plan, uint32_t top_l) {
    LinearOutline o;
    o.d = plan.config.d_model;
    std::vector<FfnUnit> units(size_t(ffn_units_max(plan)));
    o.n_units = ffn_units(plan, units.data());
    for (uint32_t i = 0; i < o.n_units; i++)
        if (units[i].expert == kNoExpert && (units[i].b1 != kNoTensor || units[i].b2 != kNoTensor)) o.bias = true;
    linear_counts(o.n_units, o.d, top_l, &o.n_base, &o.max_delta);
    return o;
}

// The one array the stage publishes (the writer and the planner use these dims).
static ArraySpec linear_bias_spec(uint64_t d) { return {"linear_bias.bin", DType::F32, {d}}; }

void ffn_collapse_plan(const JobInputs &in, ArrayPlan &plan) {
    const LinearOutline o = linear_outline(in.model->plan, in.params.top_l);
    if (o.bias) plan.add(STK_STAGE_FFN_COLLAPSE, linear_bias_spec(o.d));
}

namespace {

constexpr char kDigestMagic[] = "stk.ffn_collapse.v1";

struct Sizes {
    uint64_t d = 0, h_max = 0, units_max = 0, max_base = 0, max_delta = 0, row_floats = 0;
    bool gated = false, biases = false;
    bool calib = false;  // --calibration: the least-squares refit's scratch too
    uint64_t n_layers = 0, max_unit_entries_per_col = 0;
};

Sizes sizes_of(const ModelPlan &plan, uint32_t top_l, bool calib) {
    Sizes z;
    z.calib = calib;
    z.d = plan.config.d_model;
    z.units_max = ffn_units_max(plan);
    for (uint32_t ti = 0; ti < plan.n_streamed; ti++) {
        const PlanTensor &t = plan.tensors[ti];
        if (t.role == Role::FFN_W1 && t.rank == 2) z.h_max = std::max(z.h_max, t.dims[0]);
        if (t.role == Role::FFN_W3) z.gated = true;
        if (t.role == Role::FFN_B1 || t.role == Role::FFN_B2) z.biases = true;
    }
    linear_capacity(plan, top_l, &z.max_base, &z.max_delta);
    z.n_layers = plan.config.n_layers;
    {
        const uint64_t l = std::min<uint64_t>(top_l, z.d);
        z.max_unit_entries_per_col = l + std::min<uint64_t>(kLinearDeltaCap, z.d - l);
    }
    z.row_floats = plan.max_row_floats ? plan.max_row_floats : 1;
    return z;
}

// The stage's buffers, declared once: sized in ffn_collapse_size, allocated in ffn_collapse_run.
// What the stage hands to mphf_cuckoo stays in the arena; the scratch is released at its end.
struct FfnKept {
    LinearHandoff *h;
    uint64_t *base_keys, *delta_keys;
    float *base_vals, *bias_out;
    uint32_t *delta_vals;
};
FfnKept ffn_kept(const Sizes &z, Buffers &b) {
    FfnKept o;
    o.h = b.array<LinearHandoff>(1);
    o.base_keys = b.array<uint64_t>(z.max_base ? z.max_base : 1);
    o.base_vals = b.array<float>(z.max_base ? z.max_base : 1);
    o.delta_keys = b.array<uint64_t>(z.max_delta ? z.max_delta : 1);
    o.delta_vals = b.array<uint32_t>(z.max_delta ? z.max_delta : 1);
    o.bias_out = b.array<float>(z.d ? z.d : 1);  // bias
    return o;
}
struct FfnScratch {
    FfnUnit *units;
    float *w1, *w3, *w2, *b1, *b2, *S, *Mp, *Mm, *gemm_scratch, *row_scratch;
    double *bias, *relu_b1;
    uint32_t *order, *rest;
    uint64_t *keys;
    uint8_t *in_top;
    double *energy, *dropped;
    uint32_t *n_delta, *delta_vals;
    uint64_t *delta_keys;
    // --calibration (null without): one unit's entries grouped by output i (CSR: off[i] ..
    // off[i + 1] into ent_z / ent_loc), per worker the (2d)^2 system and its two value vectors,
    // per output the moments' errors, per layer the fitted and data-free rel L2.
    uint32_t *ent_z;
    uint64_t *ent_loc, *off, *cur;
    double *work, *m, *m0, *err_fit, *err_free, *layer_fit, *layer_free;
};
// The column selection's workers: the normalised thread count (normalize_params: 1..1024), at most
// one per column.
unsigned selection_workers(unsigned threads, uint64_t d) { return unsigned(std::max<uint64_t>(1, std::min<uint64_t>(threads, d))); }

// d x d in place: a[i][j] <-> a[j][i], by tiles (the tile pairs dealt round-robin to the workers),
// so that the selection reads a column of a map as a contiguous row.
void transpose_square(float *a, uint64_t d, unsigned threads) {
    constexpr uint64_t kTile = 64;
    const uint64_t nt = (d + kTile - 1) / kTile, pairs = nt * (nt + 1) / 2;
    const unsigned n = unsigned(std::min<uint64_t>(threads ? threads : 1, pairs));
    run_workers(n, [&](unsigned w) {
        uint64_t k = 0;
        for (uint64_t bi = 0; bi < nt; bi++)
            for (uint64_t bj = bi; bj < nt; bj++, k++) {
                if (k % n != w) continue;
                const uint64_t i1 = std::min(d, (bi + 1) * kTile), j1 = std::min(d, (bj + 1) * kTile);
                for (uint64_t i = bi * kTile; i < i1; i++)
                    for (uint64_t j = bi == bj ? i + 1 : bj * kTile; j < j1; j++) std::swap(a[i * d + j], a[j * d + i]);
            }
    });
}
FfnScratch ffn_scratch(const Sizes &z, unsigned threads, Buffers &b) {
    FfnScratch o;
    o.units = b.array<FfnUnit>(z.units_max);
    const uint64_t hd = checked_mul(z.h_max, z.d, "ffn_collapse buffer");
    o.w1 = b.array<float>(hd);                      // W1 (gate)
    o.w3 = z.gated ? b.array<float>(hd) : nullptr;  // W3 (up)
    o.w2 = b.array<float>(hd);                      // W2
    o.b1 = b.array<float>(z.h_max + 1);             // b1
    o.b2 = b.array<float>(z.d + 1);                 // b2
    o.bias = b.array<double>(z.d + 1);              // bias accumulator
    o.relu_b1 = b.array<double>(z.h_max + 1);       // relu(b1) in double
    const uint64_t dd = checked_mul(z.d, z.d, "ffn_collapse map");
    o.S = b.array<float>(dd);
    o.Mp = b.array<float>(dd);
    o.Mm = b.array<float>(dd);
    o.gemm_scratch = b.array<float>(checked_mul(abs_gemm_scratch_floats(z.d), threads, "gemm scratch"));
    o.row_scratch = b.array<float>(z.row_floats);
    // The column selection's workers: each its own order / rest / in-top scratch; per (column,
    // sign) the energies and the delta entries, merged in column order afterwards.
    const uint64_t sel = selection_workers(threads, z.d);
    o.order = b.array<uint32_t>(checked_mul(z.d + 1, sel, "ffn_collapse order"));  // column order
    o.rest = b.array<uint32_t>(checked_mul(2 * (z.d + 1), sel, "ffn_collapse order"));  // rest order, per sign
    o.in_top = b.array<uint8_t>(checked_mul(z.d + 1, sel, "ffn_collapse order"));  // in top-L
    o.keys = b.uninit_array<uint64_t>(checked_mul(z.d + 1, sel, "ffn_collapse order"));  // selection keys
    const uint64_t cols = checked_mul(z.d, 2, "ffn_collapse columns");
    o.energy = b.array<double>(cols);
    o.dropped = b.array<double>(cols);
    o.n_delta = b.array<uint32_t>(cols);
    o.delta_keys = b.array<uint64_t>(checked_mul(cols, kLinearDeltaCap, "ffn_collapse delta"));
    o.delta_vals = b.array<uint32_t>(checked_mul(cols, kLinearDeltaCap, "ffn_collapse delta"));
    o.ent_z = nullptr;
    o.ent_loc = o.off = o.cur = nullptr;
    o.work = o.m = o.m0 = o.err_fit = o.err_free = o.layer_fit = o.layer_free = nullptr;
    if (z.calib) {
        const uint64_t per_unit = checked_mul(cols, z.max_unit_entries_per_col, "ffn_collapse calibrated entries");
        o.ent_z = b.array<uint32_t>(per_unit);
        o.ent_loc = b.array<uint64_t>(per_unit);
        o.off = b.array<uint64_t>(z.d + 1);
        o.cur = b.array<uint64_t>(z.d + 1);
        o.work = b.array<double>(checked_mul(checked_mul(cols, cols, "ffn_collapse calibrated system"), sel,
                                             "ffn_collapse calibrated system"));
        o.m = b.array<double>(checked_mul(cols, sel, "ffn_collapse calibrated values"));
        o.m0 = b.array<double>(checked_mul(cols, sel, "ffn_collapse calibrated values"));
        o.err_fit = b.array<double>(z.d);
        o.err_free = b.array<double>(z.d);
        o.layer_fit = b.array<double>(z.n_layers + 1);
        o.layer_free = b.array<double>(z.n_layers + 1);
    }
    return o;
}

// One plan tensor in f32 into `out` (the checkpoint's pages are released right after).  Returns
// the index of its first NaN/Inf, or n_elements if all are finite.  A tensor in its logical
// orientation is converted and scanned by `threads` workers over contiguous row ranges (the
// same floats: each element is converted alone), the lowest bad index wins.
uint64_t load_tensor(const Checkpoint &ckpt, const PlanTensor &t, float *out, float *row_scratch, std::vector<uint8_t> &inflate,
                     unsigned threads) {
    const TensorRef &src = ckpt.tensors()[t.source];
    const uint8_t *bytes = ckpt.tensor_bytes(src, inflate);
    constexpr unsigned kMaxLoadWorkers = 16;
    const uint64_t rows = t.dims[0], cols = t.n_elements / (rows ? rows : 1);
    const unsigned n = unsigned(std::min<uint64_t>({threads, kMaxLoadWorkers, rows / 4}));
    uint64_t bad = t.n_elements;
    if (!t.transpose && n > 1) {
        uint64_t first[kMaxLoadWorkers];
        run_workers(n, [&](unsigned w) {
            const uint64_t r0 = rows * w / n, r1 = rows * (w + 1) / n;
            materialize_f32_rows(t, src, bytes, r0, r1, out);
            const uint64_t at = kernels::first_nonfinite_f32(out + r0 * cols, size_t((r1 - r0) * cols));
            first[w] = at < (r1 - r0) * cols ? r0 * cols + at : t.n_elements;
        });
        for (unsigned w = 0; w < n; w++) bad = std::min(bad, first[w]);
    } else {
        materialize_f32(t, src, bytes, out, row_scratch);
        bad = kernels::first_nonfinite_f32(out, size_t(t.n_elements));
    }
    ckpt.release(src);
    return bad;
}

}  // namespace

void ffn_collapse_size(const JobInputs &in, ArenaSizer &s) {
    const stk_job_params &params = in.params;
    const ModelDescription *d = in.model;
    Sizes z = sizes_of(d->plan, params.top_l, params.calibration != nullptr);
    Buffers b(s);
    ffn_kept(z, b);
    ffn_scratch(z, params.threads, b);
}


// The manifest's account of the refit: which layers were fitted and which not and why, and the
// rel L2 on the calibration moments (value: fitted; bound: the data-free dictionary's), per layer
// for up to kCalibLayerRecords layers, else the median and the worst.
constexpr uint32_t kCalibLayerRecords = 16;
static void ffn_calib_records(Job &job, const ModelPlan &plan, const FfnUnit *units, uint32_t n_units, const double *fit,
                              const double *free_rel, uint32_t n_layers, uint32_t fitted) {
    ManifestDraft &m = job.manifest;
    uint32_t experts = 0, missing = 0;
    for (uint32_t i = 0; i < n_units; i++) experts += units[i].expert != kNoExpert;
    for (uint32_t l = 0; l < n_layers; l++) {
        bool dense = false;
        for (uint32_t i = 0; i < n_units; i++) dense |= units[i].layer == int32_t(l) && units[i].expert == kNoExpert;
        missing += dense && fit[l] < 0;
    }
    (void)plan;
    draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, double(fitted), double(n_layers),
                     "calibrated values: %u of %u layers fitted (value); %u dense w/o moments, %u MoE units data-free",
                     fitted, n_layers, missing, experts);
    std::vector<double> f, g;
    for (uint32_t l = 0; l < n_layers; l++)
        if (fit[l] >= 0) {
            f.push_back(fit[l]);
            g.push_back(free_rel[l]);
            if (fitted <= kCalibLayerRecords)
                draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, fit[l], free_rel[l],
                                 "calibrated FFN L%u: rel L2 on the moments %.4f (value), data-free %.4f (bound)", l, fit[l],
                                 free_rel[l]);
        }
    if (f.empty()) return;
    uint32_t worst = n_layers;
    for (uint32_t l = 0; l < n_layers; l++)
        if (fit[l] >= 0 && (worst == n_layers || fit[l] > fit[worst])) worst = l;
    std::vector<double> fs = f, gs = g;
    std::sort(fs.begin(), fs.end());
    std::sort(gs.begin(), gs.end());
    draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, fs[fs.size() / 2], gs[gs.size() / 2],
                     "calibrated: median rel L2 %.4f (value), data-free %.4f (bound); worst %.4f at layer %u",
                     fs[fs.size() / 2], gs[gs.size() / 2], fit[worst], worst);
}

// --calibration: unit u's values refit by least squares on its layer's kCalibFfn moments (keys
// unchanged; calib_fit.h has the per-output system).  The entries are the unit's base (at
// base0, 2 d L of them in (column, sign) slots) and its delta (per slot in sc.delta_*, counts in
// sc.n_delta).  Outputs are dealt to `workers` in contiguous ranges; each output's entries are
// written only by its worker, and the errors are summed in output order: the same bytes at any
// thread count.  Then each slot's delta is re-sorted by the new |value| (ties by smaller i).
// Returns the rel L2 on the moments, fitted and data-free (*free).
static double ffn_refit_unit(const CalibLayer &cl, const FfnScratch &sc, LinearHandoff *h, uint64_t base0, uint64_t d, uint64_t L,
                             unsigned workers, double *free_rel) {
    const uint64_t n = 2 * d;
    auto key_z = [&](uint64_t key) { return uint32_t(linear_key_sign(key) * d + linear_key_in(key)); };
    std::fill(sc.off, sc.off + d + 1, uint64_t(0));
    for (uint64_t slot = 0; slot < n; slot++) {
        for (uint64_t r = 0; r < L; r++) sc.off[linear_key_out(h->base_keys[base0 + slot * L + r]) + 1]++;
        const uint32_t t = sc.n_delta[slot] & 0x7FFFFFFFu;
        for (uint32_t q = 0; q < t; q++) sc.off[linear_key_out(sc.delta_keys[slot * kLinearDeltaCap + q]) + 1]++;
    }
    for (uint64_t i = 0; i < d; i++) sc.off[i + 1] += sc.off[i];
    std::copy(sc.off, sc.off + d, sc.cur);
    constexpr uint64_t kDelta = uint64_t(1) << 63;
    for (uint64_t slot = 0; slot < n; slot++) {
        for (uint64_t r = 0; r < L; r++) {
            const uint64_t at = base0 + slot * L + r, key = h->base_keys[at], c = sc.cur[linear_key_out(key)]++;
            sc.ent_z[c] = key_z(key);
            sc.ent_loc[c] = at;
        }
        const uint32_t t = sc.n_delta[slot] & 0x7FFFFFFFu;
        for (uint32_t q = 0; q < t; q++) {
            const uint64_t at = slot * kLinearDeltaCap + q, key = sc.delta_keys[at], c = sc.cur[linear_key_out(key)]++;
            sc.ent_z[c] = key_z(key);
            sc.ent_loc[c] = kDelta | at;
        }
    }
    run_workers(workers, [&](unsigned w) {
        double *m = sc.m + w * n, *m0 = sc.m0 + w * n, *work = sc.work + w * n * n;
        for (uint64_t i = d * w / workers; i < d * (w + 1) / workers; i++) {
            const uint64_t o0 = sc.off[i];
            const uint32_t k = uint32_t(sc.off[i + 1] - o0);
            const uint32_t *zs = sc.ent_z + o0;
            for (uint32_t q = 0; q < k; q++) {
                const uint64_t loc = sc.ent_loc[o0 + q];
                float v;
                if (loc & kDelta) std::memcpy(&v, &sc.delta_vals[loc & ~kDelta], 4);
                else v = h->base_vals[loc];
                m0[q] = double(v);
            }
            sc.err_free[i] = calib_ffn_output_error(cl.ffn_g, n, cl.ffn_x, d, cl.ffn_yy, i, zs, k, m0);
            calib_ffn_solve(cl.ffn_g, n, cl.ffn_x, d, i, zs, k, m, work);
            for (uint32_t q = 0; q < k; q++) {
                const uint64_t loc = sc.ent_loc[o0 + q];
                const float v = float(m[q]);
                m[q] = double(v);  // the error of the values as stored
                if (loc & kDelta) std::memcpy(&sc.delta_vals[loc & ~kDelta], &v, 4);
                else h->base_vals[loc] = v;
            }
            sc.err_fit[i] = calib_ffn_output_error(cl.ffn_g, n, cl.ffn_x, d, cl.ffn_yy, i, zs, k, m);
        }
    });
    double e_fit = 0, e_free = 0, yy = 0;
    for (uint64_t i = 0; i < d; i++) {
        e_fit += sc.err_fit[i];
        e_free += sc.err_free[i];
        yy += cl.ffn_yy[i];
    }
    // The delta's order within each slot follows the new values: |value| descending, ties by
    // smaller output index (as the data-free selection orders it).
    for (uint64_t slot = 0; slot < n; slot++) {
        const uint32_t t = sc.n_delta[slot] & 0x7FFFFFFFu;
        uint64_t *dk = sc.delta_keys + slot * kLinearDeltaCap;
        uint32_t *dv = sc.delta_vals + slot * kLinearDeltaCap;
        auto mag = [&](uint32_t bits) {
            float v;
            std::memcpy(&v, &bits, 4);
            return std::fabs(v);
        };
        for (uint32_t a = 1; a < t; a++) {  // insertion sort: at most kLinearDeltaCap entries
            const uint64_t k = dk[a];
            const uint32_t v = dv[a];
            uint32_t b = a;
            while (b > 0) {
                const float pa = mag(dv[b - 1]), pv = mag(v);
                if (pa > pv || (pa == pv && linear_key_out(dk[b - 1]) < linear_key_out(k))) break;
                dk[b] = dk[b - 1];
                dv[b] = dv[b - 1];
                b--;
            }
            dk[b] = k;
            dv[b] = v;
        }
    }
    *free_rel = yy > 0 ? std::sqrt(e_free / yy) : 0.0;
    return yy > 0 ? std::sqrt(e_fit / yy) : 0.0;
}

void ffn_collapse_run(Job &job) {
    // No plan (a job whose parse_tensors produced none): nothing to collapse, feature disabled.
    if (!job.model) throw_error(STK_E_NOT_IMPLEMENTED, "ffn_collapse: no model plan from parse_tensors: nothing to collapse");
    const ModelPlan &plan = *job.model;
    const uint32_t top_l = job.params.top_l;
    const unsigned threads = job.params.threads;
    const Sizes z = sizes_of(plan, top_l, job.calib != nullptr);
    const uint64_t d = z.d;
    if (d == 0 || d >= kLinearMaxDim)
        throw_error(STK_E_UNSUPPORTED, "ffn_collapse: d_model %llu; keys hold 1..%llu", (unsigned long long)d,
                    (unsigned long long)(kLinearMaxDim - 1));
    // The checkpoint mapping the plan was made from (described once, at stk_open).
    const ModelDescription *desc = job.source;
    const bool allow_nonfinite = (job.params.flags & STK_JOB_ALLOW_NONFINITE) != 0;
    const Checkpoint &ckpt = *desc->checkpoint;
    if (desc->plan.n_streamed != plan.n_streamed)
        throw_error(STK_E_INTERNAL, "ffn_collapse: the model changed since parse_tensors");
    std::vector<uint8_t> inflate;

    Arena &arena = job.arena;
    Buffers alloc(arena);
    const FfnKept kept = ffn_kept(z, alloc);
    LinearHandoff *h = kept.h;
    h->d = uint32_t(d);
    h->top_l = uint32_t(std::min<uint64_t>(top_l, d));
    h->base_keys = kept.base_keys;
    h->base_vals = kept.base_vals;
    h->delta_keys = kept.delta_keys;
    h->delta_vals = kept.delta_vals;
    float *bias_out = kept.bias_out;
    const size_t mark = arena.mark();
    const FfnScratch sc = ffn_scratch(z, threads, alloc);
    FfnUnit *units = sc.units;
    const uint32_t n_units = ffn_units(plan, units);
    if (n_units == 0)
        throw_error(STK_E_NOT_IMPLEMENTED, "ffn_collapse: the model has no FFN tensors (FFN_W1 / FFN_W2): nothing to collapse");
    h->n_units = n_units;
    uint64_t unit_base = 0, unit_delta = 0;
    linear_counts(n_units, d, top_l, &unit_base, &unit_delta);
    if (unit_base > z.max_base)
        throw_error(STK_E_UNSUPPORTED, "ffn_collapse: %u FFN units exceed the %llu base entries sized for this model", n_units,
                    (unsigned long long)z.max_base);
    float *w1 = sc.w1, *w3 = sc.w3, *w2 = sc.w2, *b1 = sc.b1, *b2 = sc.b2, *S = sc.S, *Mp = sc.Mp, *Mm = sc.Mm;
    float *gemm_scratch = sc.gemm_scratch, *row_scratch = sc.row_scratch;
    double *bias = sc.bias, *relu_b1 = sc.relu_b1;

    const uint64_t L = h->top_l;
    const uint64_t cap = std::min<uint64_t>(kLinearDeltaCap, d - L);
    double energy_all = 0, dropped_all = 0, col_max = 0;
    bool any_bias = false, have_tau = false;
    float tau_lo = 0, tau_hi = 0;

    // A NaN/Inf weight (let through by --allow-nonfinite) would poison whole columns of the
    // maps: a bound breach (seed 1.4): the policy disables the feature and removes the outputs.
    auto nonfinite = [&](uint32_t ti, uint64_t at) {
        const PlanTensor &t = plan.tensors[ti];
        if (at >= t.n_elements) return false;
        if (!allow_nonfinite)
            throw_error(STK_E_NONFINITE, "ffn_collapse: tensor '%s' element %llu is not finite", t.name, (unsigned long long)at);
        throw_breach(STK_E_NONFINITE, "finite FFN weights", double(at), 0,
                     "ffn_collapse disabled: tensor %.40s has a NaN/Inf at element %llu", t.name, (unsigned long long)at);
    };
    uint32_t fitted_layers = 0;
    if (job.calib)
        for (uint64_t l = 0; l <= z.n_layers; l++) sc.layer_fit[l] = sc.layer_free[l] = -1;  // -1: not fitted
    job_work_begin(job, n_units, "FFNs");
    for (uint32_t ui = 0; ui < n_units; ui++, job_work_add(job, 1)) {
        const FfnUnit &u = units[ui];
        const uint64_t hid = u.hidden;
        nonfinite(u.w1, load_tensor(ckpt, plan.tensors[u.w1], w1, row_scratch, inflate, threads));
        if (u.gated()) nonfinite(u.w3, load_tensor(ckpt, plan.tensors[u.w3], w3, row_scratch, inflate, threads));
        nonfinite(u.w2, load_tensor(ckpt, plan.tensors[u.w2], w2, row_scratch, inflate, threads));
        const float *up = u.gated() ? w3 : nullptr;
        // S = |W2| (|W1| or |Wg| |Wu|); M+ and M- with W2 as stored.
        abs_gemm(d, d, hid, PackA::Abs, w2, hid, PackB::Abs, w1, up, d, S, d, gemm_scratch, threads);
        abs_gemm(d, d, hid, PackA::Copy, w2, hid, PackB::Pos, w1, up, d, Mp, d, gemm_scratch, threads);
        abs_gemm(d, d, hid, PackA::Copy, w2, hid, PackB::Neg, w1, up, d, Mm, d, gemm_scratch, threads);

        // Seed 7.6: the unit's output at x = 0 under the collapse's ReLU, W2 relu(b1) + b2, summed
        // over dense units (routed experts are weighted by a router the collapse does not model).
        if (u.expert == kNoExpert && (u.b1 != kNoTensor || u.b2 != kNoTensor)) {
            if (!any_bias) std::fill(bias, bias + d, 0.0);
            any_bias = true;
            if (u.b1 != kNoTensor) {
                if (load_tensor(ckpt, plan.tensors[u.b1], b1, row_scratch, inflate, 1) < hid)
                    throw_error(STK_E_NONFINITE, "ffn_collapse: FFN_B1 '%s' is not finite", plan.tensors[u.b1].name);
                for (uint64_t k = 0; k < hid; k++) relu_b1[k] = b1[k] > 0 ? double(b1[k]) : 0.0;
                if (u.gated()) throw_error(STK_E_UNSUPPORTED, "ffn_collapse: a gated FFN with an FFN_B1 bias is not supported");
                for (uint64_t i = 0; i < d; i++) {
                    double acc = 0;
                    for (uint64_t k = 0; k < hid; k++) acc += double(w2[i * hid + k]) * relu_b1[k];
                    bias[i] += acc;
                }
            }
            if (u.b2 != kNoTensor) {
                if (load_tensor(ckpt, plan.tensors[u.b2], b2, row_scratch, inflate, 1) < d)
                    throw_error(STK_E_NONFINITE, "ffn_collapse: FFN_B2 '%s' is not finite", plan.tensors[u.b2].name);
                for (uint64_t i = 0; i < d; i++) bias[i] += double(b2[i]);
            }
        }

        // Columns of the maps as rows, then the selection of every column: workers take
        // contiguous column ranges; the entries land in per-(column, sign) slots and are merged in
        // column order below, so the bytes do not depend on the thread count.
        transpose_square(S, d, threads);
        transpose_square(Mp, d, threads);
        transpose_square(Mm, d, threads);
        const uint64_t base0 = h->n_base;
        const unsigned sel = selection_workers(threads, d);
        std::atomic<uint64_t> dropped_entries{0};
        run_workers(sel, [&](unsigned w) {
            uint64_t nonzero_dropped = 0;
            uint32_t *order = sc.order + w * (d + 1), *rest = sc.rest + w * 2 * (d + 1);  // two signs
            uint8_t *in_top = sc.in_top + w * (d + 1);
            uint64_t *keys = sc.keys + w * (d + 1);
            for (uint64_t j = d * w / sel; j < d * (w + 1) / sel; j++) {
                // Top-L outputs of column j of S: larger S first, ties by smaller index.
                // (ffn_select.h: on packed keys; a column with a NaN through the comparator.)
                const float *Sj = S + j * d;
                if (!select_top_keys(Sj, uint32_t(d), uint32_t(L), keys, order)) select_top_ref(Sj, uint32_t(d), uint32_t(L), order);
                std::memset(in_top, 0, d);
                for (uint64_t r = 0; r < L; r++) in_top[order[r]] = 1;
                // The two signs' columns side by side: the delta's candidates (the outputs outside
                // the top-L, ascending) are the same for both, and each sign's sums run in their
                // own order in one loop with the other's (two independent add chains overlap; the
                // bits are those of one loop per sign).
                const float *Mjs[2] = {Mp + j * d, Mm + j * d};
                uint32_t *rests[2] = {rest, rest + (d + 1)};
                uint32_t nr = 0;
                for (uint32_t i = 0; i < d; i++)
                    if (!in_top[i]) rest[nr++] = i;
                std::memcpy(rests[1], rest, size_t(nr) * 4);
                double energy[2] = {0, 0}, dropped[2] = {0, 0};
                for (uint64_t i = 0; i < d; i++) {
                    energy[0] += double(Mjs[0][i]) * double(Mjs[0][i]);
                    energy[1] += double(Mjs[1][i]) * double(Mjs[1][i]);
                }
                uint64_t t[2] = {0, 0}, take_max = std::min<uint64_t>(cap, nr);
                for (uint32_t s = 0; s < 2; s++) {
                    const float *Mj = Mjs[s];
                    uint32_t *rs = rests[s];
                    const uint64_t slot = j * 2 + s;
                    double kept = 0;
                    uint64_t at = base0 + slot * L;
                    for (uint64_t r = 0; r < L; r++, at++) {
                        const uint32_t i = order[r];
                        const float v = Mj[i];
                        h->base_keys[at] = linear_key(s, u.id, i, j);
                        h->base_vals[at] = v;
                        kept += double(v) * double(v);
                    }
                    // The order past take_max is nth_element's: the dropped energy is summed in it.
                    if (!select_magnitude_keys(Mj, rs, nr, uint32_t(take_max), keys)) select_magnitude_ref(Mj, rs, nr, uint32_t(take_max));
                    double left = energy[s] - kept;  // energy outside the base
                    uint64_t n = 0;
                    uint64_t *dk = sc.delta_keys + slot * kLinearDeltaCap;
                    uint32_t *dv = sc.delta_vals + slot * kLinearDeltaCap;
                    while (n < take_max && left > kLinearEps * energy[s]) {
                        const float v = Mj[rs[n]];
                        if (v == 0.0f) break;
                        dk[n] = linear_key(s, u.id, rs[n], j);
                        dv[n] = load_le<uint32_t>(reinterpret_cast<const uint8_t *>(&v));
                        left -= double(v) * double(v);
                        n++;
                    }
                    t[s] = n;
                }
                // What is left, summed exactly (not by subtraction) for the record: each sign's
                // entries rs[t[s] .. nr) in that order, the two sums side by side.
                const uint64_t n0 = nr - t[0], n1 = nr - t[1], both = std::min(n0, n1);
                const uint32_t *r0 = rests[0] + t[0], *r1 = rests[1] + t[1];
                for (uint64_t q = 0; q < both; q++) {
                    const float v0 = Mjs[0][r0[q]], v1 = Mjs[1][r1[q]];
                    dropped[0] += double(v0) * double(v0);
                    dropped[1] += double(v1) * double(v1);
                    nonzero_dropped += uint64_t(v0 != 0.0f) + uint64_t(v1 != 0.0f);
                }
                for (uint64_t q = both; q < n0; q++) {
                    const float v = Mjs[0][r0[q]];
                    dropped[0] += double(v) * double(v);
                    nonzero_dropped += v != 0.0f;
                }
                for (uint64_t q = both; q < n1; q++) {
                    const float v = Mjs[1][r1[q]];
                    dropped[1] += double(v) * double(v);
                    nonzero_dropped += v != 0.0f;
                }
                for (uint32_t s = 0; s < 2; s++) {
                    const uint64_t slot = j * 2 + s;
                    sc.n_delta[slot] = uint32_t(t[s]);
                    sc.energy[slot] = energy[s];
                    sc.dropped[slot] = dropped[s];
                    // A capped column: its count travels in the top bit of n_delta.
                    if (t[s] == take_max && t[s] < nr && dropped[s] > kLinearEps * energy[s]) sc.n_delta[slot] |= 0x80000000u;
                }
            }
            dropped_entries += nonzero_dropped;
        });
        h->dropped += dropped_entries.load();
        // --calibration: a dense unit of a layer with FFN moments gets its values refit.
        if (job.calib && u.expert == kNoExpert) {
            const CalibLayer &cl = job.calib->layer(uint32_t(u.layer));
            if (cl.sections & kCalibFfn) {
                sc.layer_fit[u.layer] = ffn_refit_unit(cl, sc, h, base0, d, L, sel, &sc.layer_free[u.layer]);
                fitted_layers++;
            }
        }
        // The merge, in column order: the same entries and sums as one thread column by column.
        h->n_base = base0 + 2 * d * L;
        for (uint64_t slot = 0; slot < 2 * d; slot++) {
            const uint32_t t = sc.n_delta[slot] & 0x7FFFFFFFu;
            if (sc.n_delta[slot] >> 31) h->capped_columns++;
            const uint64_t *dk = sc.delta_keys + slot * kLinearDeltaCap;
            const uint32_t *dv = sc.delta_vals + slot * kLinearDeltaCap;
            for (uint32_t q = 0; q < t; q++) {
                h->delta_keys[h->n_delta] = dk[q];
                h->delta_vals[h->n_delta] = dv[q];
                h->n_delta++;
                float v;
                std::memcpy(&v, &dv[q], 4);
                const float a = std::fabs(v);
                if (!have_tau || a < tau_lo) tau_lo = a;
                if (!have_tau || a > tau_hi) tau_hi = a;
                have_tau = true;
            }
            const double energy = sc.energy[slot], dropped = sc.dropped[slot];
            energy_all += energy;
            dropped_all += dropped;
            if (energy > 0) col_max = std::max(col_max, std::sqrt(dropped / energy));
        }
    }
    h->trunc_col_max = col_max;
    h->trunc_total = energy_all > 0 ? std::sqrt(dropped_all / energy_all) : 0.0;
    h->tau_low = tau_lo;
    h->tau_high = tau_hi;

    StageDigest digest;
    uint8_t head[sizeof kDigestMagic + 16];
    std::memcpy(head, kDigestMagic, sizeof kDigestMagic);
    store_le<uint64_t>(head + sizeof kDigestMagic, h->n_base);
    store_le<uint64_t>(head + sizeof kDigestMagic + 8, h->n_delta);
    digest.add(head, sizeof head);
    // Keys and values as little-endian bytes (this library runs on little-endian hosts only).
    digest.add(h->base_keys, size_t(h->n_base * 8));
    digest.add(h->base_vals, size_t(h->n_base * 4));
    digest.add(h->delta_keys, size_t(h->n_delta * 8));
    digest.add(h->delta_vals, size_t(h->n_delta * 4));
    if (any_bias) {
        double sq = 0;
        for (uint64_t i = 0; i < d; i++) {
            bias_out[i] = float(bias[i]);
            sq += bias[i] * bias[i];
        }
        h->bias = bias_out;
        h->bias_norm = std::sqrt(sq);
        job_write_array(job, STK_STAGE_FFN_COLLAPSE, digest, linear_bias_spec(d), bias_out);
    }
    digest.finish(job.stages[STK_STAGE_FFN_COLLAPSE]);

    ManifestDraft &m = job.manifest;
    draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, h->trunc_col_max, std::sqrt(kLinearEps),
                     "truncation: worst column rel L2 (value), eps %.0e; %llu entries dropped, %llu columns at cap %u",
                     kLinearEps, (unsigned long long)h->dropped, (unsigned long long)h->capped_columns, kLinearDeltaCap);
    draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, h->trunc_total, std::sqrt(kLinearEps),
                     "truncation: rel L2 over all columns (value); %u units, top-L %u, %llu base, %llu delta entries", n_units,
                     h->top_l, (unsigned long long)h->n_base, (unsigned long long)h->n_delta);
    if (any_bias)
        draft_add_record(m, STK_STAGE_FFN_COLLAPSE, kRecordNote, kFeatureLinear, STK_OK, h->bias_norm, 0,
                         "7.6 bias: L2 norm of linear_bias.bin = sum over dense layers of W2 relu(b1) + b2");
    if (job.calib) ffn_calib_records(job, plan, units, n_units, sc.layer_fit, sc.layer_free, uint32_t(z.n_layers), fitted_layers);
    job.linear = h;
    arena.reset(mark);  // the unit buffers are scratch; the hand-off stays
}

}  // namespace stk
