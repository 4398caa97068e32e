// The faithful profile's writer (stages/faithful.h; docs/format.md "Faithful profile").
//
// parse_tensors' plan lists every streamed tensor with its role, layer and expert in a fixed order
// (layers in order; in a layer roles, then norm slots, then experts), so the tensors of one array
// (one kind in one layer; a kind's routed experts stacked) are consecutive.  Each tensor is
// materialised in f32 (materialize_f32: transposes and fused-QKV parts as the roles present them),
// encoded, appended to its array's streaming writer, and dropped: the resident set is one tensor
// in f32 plus its encoding, and the bytes do not depend on the thread count (one writer, in plan
// order).
#include "stages/faithful.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/output_file.h"
#include "format/lowbit.h"
#include "ingest/faithful_names.h"
#include "ingest/model.h"
#include "stages/attn_common.h"
#include "stages/outputs.h"
#include "stages/plan.h"

namespace stk {

namespace {

bool is_ffn_matrix(const PlanTensor &t) {
    return t.rank == 2 && (t.role == Role::FFN_W1 || t.role == Role::FFN_W2 || t.role == Role::FFN_W3);
}

// The FFN matrices' element type the job asks for: Q8_0 (the default, issue 37: docs/fidelity.md's
// defaults table), BF16, I8 or Q4_0.
DType ffn_dtype_of(const stk_job_params &p) {
    if (p.flags & STK_JOB_FAITHFUL_FFN_BF16) return DType::BF16;
    if (p.flags & STK_JOB_FAITHFUL_FFN_INT8) return DType::I8;
    if (p.flags & STK_JOB_FAITHFUL_FFN_Q4_0) return DType::Q4_0;
    return DType::Q8_0;
}

// Matrices are bf16 (or the job's FFN type for the FFN's: int8, Q4_0, Q8_0), except the router's
// and the shared expert's gate (f32: routing decisions flip on small differences, and they are
// small); vectors (norms, biases, sink logits) f32.
DType element_type(const PlanTensor &t, DType ffn) {
    if (t.rank != 2 || t.role == Role::ROUTER_GATE || t.role == Role::SHARED_GATE) return DType::F32;
    if (is_ffn_matrix(t)) return ffn;
    return DType::BF16;
}

}  // namespace

const char *faithful_kind(const PlanTensor &t) {
    // A stored rotary_emb.inv_freq (ROPE_ALPHA) is a buffer transformers recomputes from the
    // config and never loads: rope_inv_freq.bin holds the frequencies, computed the same way.
    // A buffer (a mask, a stored copy of a tied head) is no weight either.
    if (t.tied || t.composed || t.buffer || t.role == Role::ROPE_ALPHA) return nullptr;
    const NormSlot slot = (t.role == Role::LN_G || t.role == Role::LN_B) ? t.slot : NormSlot::None;
    if (const FaithfulKind *k = faithful_kind_of(t.role, slot, expert_class(t.expert))) return k->name;
    throw_error(STK_E_NOT_IMPLEMENTED, "faithful profile: tensor '%s' (role %s, layer %d) has no array in this profile",
                t.name, role_name(t.role), int(t.layer));
}

std::string faithful_array_name(const PlanTensor &t) {
    const char *k = faithful_kind(t);
    return k ? faithful_file_name(*faithful_kind_named(k), t.layer) : std::string();
}

namespace {

uint64_t largest_tensor(const ModelPlan &p) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < p.n_streamed; i++) n = std::max(n, p.tensors[i].n_elements);
    return n;
}

struct FaithfulBuffers {
    float *values, *rows;
    uint8_t *encoded;
};
FaithfulBuffers faithful_buffers(const ModelPlan &p, Buffers &b) {
    const uint64_t n = largest_tensor(p);
    FaithfulBuffers o{};
    o.values = b.array<float>(n);
    o.rows = b.array<float>(p.max_row_floats ? p.max_row_floats : 1);
    o.encoded = static_cast<uint8_t *>(b.bytes(checked_mul(n, 2, "faithful encode buffer")));
    return o;
}

void set_str(uint8_t out[32], const char *s) {
    std::memset(out, 0, 32);
    const size_t n = strnlen(s, 31);
    for (size_t i = 0; i < n; i++) out[i] = (s[i] >= 0x20 && s[i] <= 0x7e) ? uint8_t(s[i]) : uint8_t('?');
}

// The rotary frequencies of each table (row 0 the global base with the config's scaling, row 1
// Gemma 3's local base, unscaled, as transformers builds rotary_emb_local), as rope_angles does for
// memory_fit: one definition of the angles.
std::vector<std::vector<double>> rope_tables(const ModelConfig &c, std::string *note) {
    ModelConfig g = c;
    if (c.mla) g.rotary_dim = c.qk_rope_dim;
    std::vector<std::vector<double>> t(1);
    rope_angles(g, t[0], note);
    if (c.rope_local_theta > 0) {
        ModelConfig l = g;
        l.rope_theta = c.rope_local_theta;
        l.rope_scaling_type[0] = 0;
        t.emplace_back();
        rope_angles(l, t[1], nullptr);
    }
    return t;
}

void fill_runtime(const Job &job, const ModelConfig &c, uint32_t rope_pairs, ManifestDraft &d) {
    ManifestRuntime &r = d.runtime;
    r = ManifestRuntime();
    r.profile = kRuntimeProfileFaithful;
    r.sinks = job.params.sinks;
    r.window = job.params.window;
    r.kv_dtype = uint32_t(DType::F32);
    r.weight_dtype = uint32_t(DType::BF16);
    r.ffn_dtype = uint32_t(ffn_dtype_of(job.params));
    r.policy = job.params.policy;
    r.recent = job.params.recent;
    set_str(r.model_type, c.model_type);
    r.n_layers = c.n_layers, r.d_model = c.d_model, r.n_heads = c.n_heads, r.n_kv_heads = c.n_kv_heads;
    r.head_dim = c.head_dim, r.vocab_size = c.vocab_size, r.ffn_dim = c.ffn_dim;
    r.ffn_kind = uint32_t(c.ffn_kind);
    set_str(r.activation, c.activation);
    r.norm_kind = uint32_t(c.norm), r.norms_per_layer = c.norms_per_layer, r.post_norms = c.post_norms;
    r.qk_norm = uint32_t(c.qk_norm), r.norm_bias = c.norm_bias;
    r.norm_eps = c.norm_eps, r.norm_offset = c.norm_offset;
    r.emb_multiplier = c.emb_multiplier, r.residual_multiplier = c.residual_multiplier, r.logit_scale = c.logit_scale;
    const double qk_dim = c.mla ? double(c.qk_nope_dim + c.qk_rope_dim) : double(c.head_dim);
    r.score_scale = c.attn_scale > 0 ? c.attn_scale : (qk_dim > 0 ? 1 / std::sqrt(qk_dim) : 0);
    r.attn_softcap = c.attn_softcap, r.final_softcap = c.final_softcap;
    r.positions = uint32_t(c.positions);
    r.rotary_dim = c.mla ? c.qk_rope_dim : (c.rotary_dim ? c.rotary_dim : (c.positions == PosKind::Rope ? c.head_dim : 0));
    r.rope_pairs = rope_pairs, r.rope_interleaved = c.rope_interleaved;
    r.rope_theta = c.rope_theta, r.rope_local_theta = c.rope_local_theta, r.rope_attn_factor = c.rope_attn_factor;
    r.alibi_scale = c.alibi_scale;
    set_str(r.rope_scaling_type, c.rope_scaling_type);
    r.rope_scaling_factor = c.rope_scaling_factor, r.rope_low_freq_factor = c.rope_low_freq_factor;
    r.rope_high_freq_factor = c.rope_high_freq_factor, r.rope_beta_fast = c.rope_beta_fast, r.rope_beta_slow = c.rope_beta_slow;
    r.rope_original_max = c.rope_original_max, r.max_positions = c.max_positions, r.rope_yarn_truncate = c.rope_yarn_truncate;
    r.pos_offset = c.pos_offset, r.sliding_window = c.sliding_window, r.parallel_attn = c.parallel_attn;
    r.tied_embeddings = c.tied_embeddings, r.emb_norm = c.emb_norm;
    r.qkv_bias = c.qkv_bias, r.o_bias = c.o_bias, r.mlp_bias = c.mlp_bias, r.lm_head_bias = c.lm_head_bias;
    r.attn_sinks = c.attn_sinks;
    r.n_experts = c.n_experts, r.top_k = c.top_k, r.moe_ffn_dim = c.moe_ffn_dim, r.shared_expert_ffn_dim = c.shared_expert_ffn_dim;
    r.shared_expert_gate = c.shared_expert_gate, r.norm_topk_prob = c.norm_topk_prob;
    set_str(r.router, c.router);
    r.first_moe_layer = c.first_moe_layer, r.moe_layer_step = c.moe_layer_step, r.n_group = c.n_group;
    r.topk_group = c.topk_group, r.expert_bias = c.expert_bias, r.router_bias = c.router_bias;
    r.routed_scaling = c.routed_scaling, r.swiglu_limit = c.swiglu_limit, r.gated_up_offset = c.gated_up_offset;
    r.mla = c.mla, r.mla_rope_interleaved = c.mla_rope_interleaved, r.q_lora_rank = c.q_lora_rank;
    r.kv_lora_rank = c.kv_lora_rank, r.qk_nope_dim = c.qk_nope_dim, r.qk_rope_dim = c.qk_rope_dim, r.v_head_dim = c.v_head_dim;
    r.mla_rope_gain = c.mla_rope_gain;
    if (c.n_layers > kRuntimeMaxLayers) throw_error(STK_E_UNSUPPORTED, "faithful profile: %u layers, at most %u", c.n_layers, kRuntimeMaxLayers);
    for (uint32_t l = 0; l < c.n_layers; l++) {
        RuntimeLayer &e = d.runtime_layers[l];
        const bool sliding = c.sliding_window && c.layer_is_sliding(l);
        e.kind = sliding ? 1 : 0;
        e.model_window = sliding ? c.sliding_window : 0;
        e.moe = c.n_experts && c.layer_is_moe(l) ? 1 : 0;
        e.rope_table = sliding && c.rope_local_theta > 0 ? 1 : 0;
    }
    d.has_runtime = true;
}

}  // namespace

void faithful_size(const JobInputs &in, ArenaSizer &s) {
    if (!job_is_faithful(in.params)) return;
    Buffers b(s);
    faithful_buffers(in.model->plan, b);
}

namespace {

// One weight array of the profile: consecutive plan tensors (one kind in one layer; a kind's
// routed experts stacked) and the spec they are written under.
struct FaithfulArray {
    ArraySpec spec;
    uint32_t first = 0, count = 0;
    bool scaled = false;  // int8: its "<stem>.scale.bin" follows
};

ArraySpec scale_spec(const FaithfulArray &a) {
    return ArraySpec(a.spec.name.substr(0, a.spec.name.size() - 4) + ".scale.bin", DType::F32, {uint64_t(a.count)});
}

// The weight arrays in plan order (the writer's order), with their specs: what faithful_write
// writes and faithful_plan lists, from one computation.
std::vector<FaithfulArray> faithful_layout(const ModelPlan &plan, DType ffn) {
    std::vector<FaithfulArray> out;
    for (uint32_t i = 0; i < plan.n_streamed; i++) {
        std::string name = faithful_array_name(plan.tensors[i]);
        if (name.empty()) continue;
        if (!out.empty() && out.back().spec.name == name && out.back().first + out.back().count == i) {
            out.back().count++;
            continue;
        }
        for (const FaithfulArray &a : out)
            if (a.spec.name == name)
                throw_error(STK_E_INTERNAL, "faithful profile: array %s's tensors are not consecutive in the plan", name.c_str());
        FaithfulArray a;
        a.spec.name = std::move(name);
        a.first = i, a.count = 1;
        out.push_back(std::move(a));
    }
    for (FaithfulArray &a : out) {
        const PlanTensor &t0 = plan.tensors[a.first];
        const bool stacked = t0.expert >= 0;
        if (!stacked && a.count != 1)
            throw_error(STK_E_INTERNAL, "faithful profile: %u tensors for array %s", a.count, a.spec.name.c_str());
        for (uint32_t k = 0; k < a.count; k++) {
            const PlanTensor &t = plan.tensors[a.first + k];
            if (t.rank != t0.rank || t.dims[0] != t0.dims[0] || (t.rank == 2 && t.dims[1] != t0.dims[1]) ||
                (stacked && t.expert != int32_t(k)))
                throw_error(STK_E_PARAM_COUNT, "faithful profile: tensor '%s' (expert %d) does not stack with '%s' in %s", t.name,
                            int(t.expert), t0.name, a.spec.name.c_str());
        }
        a.spec.dtype = element_type(t0, ffn);
        // A block type's rows ([out, in]: `in` values each) are whole blocks of 32; a matrix whose
        // rows are not (the mixtral fixture's 48-wide experts) is written bf16 instead: its dtype
        // in the array table says so, and stk convert warns naming it (job_warnings).
        if (dtype_is_block(uint16_t(a.spec.dtype)) && t0.dims[1] % kBlockQElems) a.spec.dtype = DType::BF16;
        a.spec.rank = 0;
        if (stacked) a.spec.dims[a.spec.rank++] = a.count;
        a.spec.dims[a.spec.rank++] = t0.dims[0];
        if (t0.rank == 2) a.spec.dims[a.spec.rank++] = t0.dims[1];
        a.scaled = a.spec.dtype == DType::I8;
    }
    return out;
}

// The rotary table's spec (none without RoPE): one f64 row per table (docs/format.md).
bool rope_spec(const ModelConfig &c, ArraySpec &spec, std::vector<std::vector<double>> *tables, std::string *note) {
    if (c.positions != PosKind::Rope) return false;
    std::vector<std::vector<double>> t = rope_tables(c, note);
    spec = ArraySpec("rope_inv_freq.bin", DType::F64, {uint64_t(t.size()), uint64_t(t[0].size())});
    if (tables) *tables = std::move(t);
    return true;
}

}  // namespace

void faithful_plan(const JobInputs &in, ArrayPlan &out) {
    if (!job_is_faithful(in.params)) return;
    const ModelPlan &plan = in.model->plan;
    for (const FaithfulArray &a : faithful_layout(plan, ffn_dtype_of(in.params))) {
        out.add(STK_STAGE_PARSE_TENSORS, a.spec);
        if (a.scaled) out.add(STK_STAGE_PARSE_TENSORS, scale_spec(a));
    }
    ArraySpec rope;
    if (rope_spec(plan.config, rope, nullptr, nullptr)) out.add(STK_STAGE_PARSE_TENSORS, rope);
}

void faithful_write(Job &job, const ModelPlan &plan, StageDigest &digest) {
    const ModelConfig &c = plan.config;
    const DType ffn = ffn_dtype_of(job.params);
    Buffers alloc(job.arena);
    FaithfulBuffers buf = faithful_buffers(plan, alloc);
    const Checkpoint &ckpt = *job.source->checkpoint;
    const std::vector<TensorRef> &refs = ckpt.tensors();
    std::vector<uint8_t> inflate_scratch;
    const std::string dir = std::string(job.out_dir) + "/" + kArraysDirName;
    make_dirs(dir);

    const std::vector<FaithfulArray> arrays = faithful_layout(plan, ffn);
    job_work_begin(job, arrays.size(), "arrays");
    for (const FaithfulArray &a : arrays) {
        const DType dt = a.spec.dtype;
        ArrayWriter w(dir, a.spec);
        std::vector<float> scales;
        for (uint32_t k = 0; k < a.count; k++) {
            const PlanTensor &t = plan.tensors[a.first + k];
            const TensorRef &src = refs[t.source];
            const uint8_t *bytes = ckpt.tensor_bytes(src, inflate_scratch);
            materialize_f32(t, src, bytes, buf.values, buf.rows);
            ckpt.release(src);
            const uint64_t n = t.n_elements;  // finite: parse_tensors refused NaN/Inf unless --allow-nonfinite
            if (dt == DType::F32) {
                w.append(buf.values, size_t(n * 4));
            } else if (dt == DType::BF16) {
                for (uint64_t i = 0; i < n; i++) store_le<uint16_t>(buf.encoded + 2 * i, f32_to_bf16_rne(buf.values[i]));
                w.append(buf.encoded, size_t(n * 2));
            } else if (dtype_is_block(uint16_t(dt))) {
                // ggml's blocks of 32 along each row (gguf-py's quantize of the f32 rows); the rows
                // are whole blocks (faithful_layout), so the tensor's blocks are its rows' in order.
                const BlockQType bt = dt == DType::Q4_0 ? BlockQType::Q4_0 : BlockQType::Q8_0;
                uint64_t nb = 0;
                if (!blockq_bytes(bt, n, &nb)) throw_error(STK_E_INTERNAL, "faithful profile: %s: %llu values", t.name, (unsigned long long)n);
                blockq_quantize(bt, buf.values, n, buf.encoded);
                w.append(buf.encoded, size_t(nb));
            } else {
                const LwtQuant q = lwt_choose_quant(LwtDType::I8, buf.values, n);
                lwt_pack(LwtDType::I8, buf.values, n, q, buf.encoded);
                w.append(buf.encoded, size_t(n));
                scales.push_back(q.scale);
            }
        }
        job_record_array(job, STK_STAGE_PARSE_TENSORS, digest, a.spec.name.c_str(), w.finish());
        if (a.scaled) {
            // One f32 scale per matrix (per expert when stacked): value = code * scale.
            ArrayWriter sw(dir, scale_spec(a));
            sw.append(scales.data(), scales.size() * 4);
            job_record_array(job, STK_STAGE_PARSE_TENSORS, digest, scale_spec(a).name.c_str(), sw.finish());
        }
        job_work_add(job, 1);
    }

    // Rotary frequencies, one row per table (docs/format.md): f64, so a reader may compute its
    // angles in f64 or round them to f32 as transformers does.
    uint32_t pairs = 0;
    std::string note;
    std::vector<std::vector<double>> tables;
    ArraySpec rope;
    if (rope_spec(c, rope, &tables, &note)) {
        pairs = uint32_t(rope.dims[1]);
        if (!note.empty())
            draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_OK, 0, 0, "faithful: %s",
                             note.c_str());
        ArrayWriter w(dir, rope);
        for (const auto &row : tables) w.append(row.data(), row.size() * 8);
        job_record_array(job, STK_STAGE_PARSE_TENSORS, digest, rope.name.c_str(), w.finish());
    }
    fill_runtime(job, c, pairs, job.manifest);
}

}  // namespace stk
