#include "format/manifest.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <algorithm>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "format/array.h"

namespace stk {

namespace {

// ---------------------------------------------------------------------------------------------
// The schema: one table drives the encoder, the decoder, the bounds and the canonical text.

enum class FT : uint8_t { U32, U64, F64, D32 };

struct FieldDef {
    const char *name;  // the spec's name (2.5)
    FT type;
    size_t off;        // offset inside ManifestFields
    double lo, hi;     // inclusive bounds (not for D32)
    const char *note;  // meaning of values, "" if plain
};

#define FLD(name, type, member, lo, hi, note) \
  { name, FT::type, offsetof(ManifestFields, member), lo, hi, note }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
const FieldDef kFields[] = {
    FLD("abi_flags", U32, abi_flags, 0, 3, "bit0 fma, bit1 ftz"),
    FLD("seed_digest", D32, seed_digest, 0, 0, "SHA-256 of the conversion parameters record"),
    FLD("tokenizer.mode", U32, tokenizer.mode, 0, 3, "0 disabled, 1 fst certified, 2 fst uncertified, 3 ext wrapper"),
    FLD("tokenizer.L_tok", U32, tokenizer.l_tok, 0, 64, "bytes"),
    FLD("tokenizer.S_norm", U32, tokenizer.s_norm, 0, 16777216, "pieces kept after normalisation"),
    FLD("tokenizer.L_norm", U32, tokenizer.l_norm, 0, 64, "longest kept piece, bytes"),
    FLD("tokenizer.vocab_size", U32, tokenizer.vocab_size, 0, 16777216, "token ids are below it"),
    FLD("tokenizer.unicode_policy", U32, tokenizer.unicode_policy, 0, 3, "0 none, 1 byte-level, 2 sentencepiece, 3 raw utf-8"),
    FLD("tokenizer.sp_cert_digest", D32, tokenizer.sp_cert_digest, 0, 0, "SHA-256 of the minimal Sardinas-Patterson witness"),
    FLD("prf.r", U32, prf.r, 0, 4096, ""),
    FLD("prf.tau", F64, prf.tau, 0, 1e9, ""),
    FLD("prf.whitening_eps", F64, prf.whitening_eps, 0, 1, ""),
    FLD("prf.clip_c", F64, prf.clip_c, 0, 1e9, ""),
    FLD("denominator.beta_floor", F64, denominator.beta_floor, 0, 1e9, ""),
    FLD("denominator.lambda_star_digest", D32, denominator.lambda_star_digest, 0, 0, "SHA-256 of the denominator schedule"),
    FLD("linear.C", U64, linear.c, 0, 1099511627776.0, "live keys"),
    FLD("linear.d", U32, linear.d, 0, 8, "cuckoo choices"),
    FLD("linear.b", U32, linear.b, 0, 64, "slots per bucket"),
    FLD("linear.S", U32, linear.s, 0, 16777216, "stash slots"),
    FLD("linear.L_cuckoo", U32, linear.l_cuckoo, 0, 1024, "kick cap"),
    FLD("linear.Q", U64, linear.q, 0, 1099511627776.0, "ring capacity"),
    FLD("linear.tau_low", F64, linear.tau_low, 0, 1e9, ""),
    FLD("linear.tau_high", F64, linear.tau_high, 0, 1e9, ""),
    FLD("memory.mode", U32, memory.mode, 0, 2, "0 disabled, 1 SOS, 2 ARMA"),
    FLD("memory.p", U32, memory.p, 0, 2, ""),
    FLD("memory.q", U32, memory.q, 0, 1, ""),
    FLD("memory.L", U32, memory.l, 0, 6, "SOS sections"),
    FLD("memory.T_phi", U32, memory.t_phi, 0, 1048576, ""),
    FLD("memory.K", U32, memory.k, 0, 65536, ""),
    FLD("memory.pole_radius_min", F64, memory.pole_radius_min, 0, 1, ""),
    FLD("overlays.P", U32, overlays.p, 0, 1048576, ""),
    FLD("overlays.k_max", U32, overlays.k_max, 0, 65536, ""),
    FLD("overlays.r_v", U32, overlays.r_v, 0, 64, ""),
    FLD("ccr_cert.gamma_CCR_target", F64, ccr_cert.gamma_ccr_target, 0, 1e9, ""),
    FLD("ccr_cert.m_target", F64, ccr_cert.m_target, 0, 1e9, ""),
    FLD("ccr_cert.norm_def", U32, ccr_cert.norm_def, 0, 3, "0 none, 1 l2, 2 frobenius, 3 spectral"),
    FLD("bridge.K", U32, bridge.k, 0, 64, ""),
    FLD("bridge.W", U32, bridge.w, 0, 3, "words per leg"),
    FLD("bridge.Proj_shape.rows", U32, bridge.proj_rows, 0, 16777216, ""),
    FLD("bridge.Proj_shape.cols", U32, bridge.proj_cols, 0, 16777216, ""),
    FLD("bridge.Proj_digest", D32, bridge.proj_digest, 0, 0, "SHA-256 of the projection"),
    FLD("bridge.beta_min", F64, bridge.beta_min, 0, 1e9, ""),
    FLD("bridge.beta_max", F64, bridge.beta_max, 0, 1e9, ""),
    FLD("bridge.guard.margin_policy", U32, bridge.guard_margin_policy, 0, 3, ""),
    FLD("bridge.guard.eps_row_policy", U32, bridge.guard_eps_row_policy, 0, 3, ""),
    FLD("bridge.store_limits.load_max", F64, bridge.store_load_max, 0, 1, ""),
    FLD("bridge.store_limits.stash_max", U32, bridge.store_stash_max, 0, 16777216, ""),
    FLD("bridge.store_limits.kick_max", U32, bridge.store_kick_max, 0, 1024, ""),
    FLD("search.A_max", U32, search.a_max, 0, 65536, ""),
    FLD("search.A_cap", U32, search.a_cap, 0, 65536, ""),
    FLD("search.H_sel", U32, search.h_sel, 0, 65536, ""),
    FLD("search.H_roll", U32, search.h_roll, 0, 65536, ""),
    FLD("search.c_puct", F64, search.c_puct, 0, 1e6, ""),
    FLD("search.epsilon", F64, search.epsilon, 0, 1, ""),
    FLD("search.vloss", F64, search.vloss, 0, 1e9, ""),
    FLD("capacity.lambda_hat", F64, capacity.lambda_hat, 0, 1e12, ""),
    FLD("capacity.T_rb_ms", F64, capacity.t_rb_ms, 0, 1e9, ""),
    FLD("capacity.slack", F64, capacity.slack, 0, 1e6, ""),
    FLD("capacity.margin", F64, capacity.margin, 0, 1e6, ""),
    FLD("salts.mphf_salt_digest", D32, salts.mphf_salt_digest, 0, 0, ""),
    FLD("salts.key_salt_digest", D32, salts.key_salt_digest, 0, 0, ""),
};
#undef FLD
// The runtime block of the faithful profile (ManifestRuntime), in the same table form.
#define RFLD(name, type, member, lo, hi, note) \
  { name, FT::type, offsetof(ManifestRuntime, member), lo, hi, note }
const FieldDef kRuntimeFields[] = {
    RFLD("runtime.profile", U32, profile, 1, 1, "1 faithful"),
    RFLD("runtime.sinks", U32, sinks, 0, 65536, "sink positions kept exact"),
    RFLD("runtime.window", U32, window, 1, 16777216, "most recent positions kept exact"),
    RFLD("runtime.kv_dtype", U32, kv_dtype, 2, 2, "2 f32"),
    RFLD("runtime.weight_dtype", U32, weight_dtype, 9, 9, "9 bf16"),
    RFLD("runtime.ffn_dtype", U32, ffn_dtype, 5, 11, "9 bf16, 5 i8 (.lwt int8, one f32 scale per matrix), 10 q4_0, 11 q8_0 (ggml blocks of 32)"),
    RFLD("runtime.model_type", D32, model_type, 0, 0, "ASCII, NUL-padded"),
    RFLD("runtime.n_layers", U32, n_layers, 1, 1024, ""),
    RFLD("runtime.d_model", U32, d_model, 1, 131072, ""),
    RFLD("runtime.n_heads", U32, n_heads, 0, 4096, ""),
    RFLD("runtime.n_kv_heads", U32, n_kv_heads, 0, 4096, ""),
    RFLD("runtime.head_dim", U32, head_dim, 0, 4096, ""),
    RFLD("runtime.vocab_size", U64, vocab_size, 1, 16777216, ""),
    RFLD("runtime.ffn_dim", U64, ffn_dim, 0, 1048576, "dense FFN hidden size"),
    RFLD("runtime.ffn_kind", U32, ffn_kind, 0, 1, "0 plain W2 act(W1 x), 1 gated W2 (act(W1 x) * W3 x)"),
    RFLD("runtime.activation", D32, activation, 0, 0, "as config.json names it; ASCII, NUL-padded"),
    RFLD("runtime.norm_kind", U32, norm_kind, 0, 1, "0 LayerNorm, 1 RMSNorm"),
    RFLD("runtime.norms_per_layer", U32, norms_per_layer, 1, 2, ""),
    RFLD("runtime.post_norms", U32, post_norms, 0, 1, "1: a norm on each sublayer's output too"),
    RFLD("runtime.qk_norm", U32, qk_norm, 0, 2, "0 none, 1 per head [head_dim], 2 whole [heads * head_dim]"),
    RFLD("runtime.norm_bias", U32, norm_bias, 0, 1, "1: LayerNorms carry a bias"),
    RFLD("runtime.norm_eps", F64, norm_eps, 0, 1, ""),
    RFLD("runtime.norm_offset", F64, norm_offset, -16, 16, "the gain is offset + stored weight"),
    RFLD("runtime.emb_multiplier", F64, emb_multiplier, -1e9, 1e9, "the embedding row is scaled by it"),
    RFLD("runtime.residual_multiplier", F64, residual_multiplier, -1e9, 1e9, "each sublayer's output is scaled by it"),
    RFLD("runtime.logit_scale", F64, logit_scale, -1e9, 1e9, "the output logits are scaled by it"),
    RFLD("runtime.score_scale", F64, score_scale, 0, 1e9, "the attention logits' scale"),
    RFLD("runtime.attn_softcap", F64, attn_softcap, 0, 1e9, "c tanh(x / c) on attention logits; 0 none"),
    RFLD("runtime.final_softcap", F64, final_softcap, 0, 1e9, "the same on the output logits; 0 none"),
    RFLD("runtime.positions", U32, positions, 0, 3, "0 none, 1 learned, 2 rope, 3 alibi"),
    RFLD("runtime.rotary_dim", U32, rotary_dim, 0, 4096, "rotated dims per head"),
    RFLD("runtime.rope_pairs", U32, rope_pairs, 0, 2048, "columns of rope_inv_freq.bin"),
    RFLD("runtime.rope_interleaved", U32, rope_interleaved, 0, 1, "1: pairs (2i, 2i+1); 0: (i, i + rotary_dim / 2)"),
    RFLD("runtime.rope_theta", F64, rope_theta, 0, 1e15, ""),
    RFLD("runtime.rope_local_theta", F64, rope_local_theta, 0, 1e15, "sliding layers' base; 0: rope_theta"),
    RFLD("runtime.rope_attn_factor", F64, rope_attn_factor, 0, 1e6, "cos and sin are scaled by it (yarn mscale)"),
    RFLD("runtime.alibi_scale", F64, alibi_scale, -1e9, 1e9, ""),
    RFLD("runtime.rope_scaling_type", D32, rope_scaling_type, 0, 0, "\"\" none, linear, llama3, yarn, longrope, ...; ASCII, NUL-padded"),
    RFLD("runtime.rope_scaling_factor", F64, rope_scaling_factor, 0, 1e9, ""),
    RFLD("runtime.rope_low_freq_factor", F64, rope_low_freq_factor, 0, 1e9, "llama3"),
    RFLD("runtime.rope_high_freq_factor", F64, rope_high_freq_factor, 0, 1e9, "llama3"),
    RFLD("runtime.rope_beta_fast", F64, rope_beta_fast, 0, 1e9, "yarn"),
    RFLD("runtime.rope_beta_slow", F64, rope_beta_slow, 0, 1e9, "yarn"),
    RFLD("runtime.rope_original_max", U64, rope_original_max, 0, 16777216, ""),
    RFLD("runtime.max_positions", U64, max_positions, 0, 16777216, "0: not stated"),
    RFLD("runtime.rope_yarn_truncate", U32, rope_yarn_truncate, 0, 1, ""),
    RFLD("runtime.pos_offset", U32, pos_offset, 0, 65536, "learned position rows before position 0"),
    RFLD("runtime.sliding_window", U32, sliding_window, 0, 16777216, "the model's own window; 0 none"),
    RFLD("runtime.parallel_attn", U32, parallel_attn, 0, 1, ""),
    RFLD("runtime.tied_embeddings", U32, tied_embeddings, 0, 1, "1: the head is the token embedding"),
    RFLD("runtime.emb_norm", U32, emb_norm, 0, 1, ""),
    RFLD("runtime.qkv_bias", U32, qkv_bias, 0, 1, ""),
    RFLD("runtime.o_bias", U32, o_bias, 0, 1, ""),
    RFLD("runtime.mlp_bias", U32, mlp_bias, 0, 1, ""),
    RFLD("runtime.lm_head_bias", U32, lm_head_bias, 0, 1, ""),
    RFLD("runtime.attn_sinks", U32, attn_sinks, 0, 1, "1: one learned logit per head joins each softmax"),
    RFLD("runtime.n_experts", U32, n_experts, 0, 1024, "0 dense"),
    RFLD("runtime.top_k", U32, top_k, 0, 1024, ""),
    RFLD("runtime.moe_ffn_dim", U64, moe_ffn_dim, 0, 1048576, ""),
    RFLD("runtime.shared_expert_ffn_dim", U64, shared_expert_ffn_dim, 0, 1048576, ""),
    RFLD("runtime.shared_expert_gate", U32, shared_expert_gate, 0, 1, ""),
    RFLD("runtime.norm_topk_prob", U32, norm_topk_prob, 0, 1, ""),
    RFLD("runtime.router", D32, router, 0, 0, "ASCII, NUL-padded"),
    RFLD("runtime.first_moe_layer", U32, first_moe_layer, 0, 1024, ""),
    RFLD("runtime.moe_layer_step", U32, moe_layer_step, 0, 1024, ""),
    RFLD("runtime.n_group", U32, n_group, 0, 1024, ""),
    RFLD("runtime.topk_group", U32, topk_group, 0, 1024, ""),
    RFLD("runtime.expert_bias", U32, expert_bias, 0, 1, ""),
    RFLD("runtime.router_bias", U32, router_bias, 0, 1, ""),
    RFLD("runtime.routed_scaling", F64, routed_scaling, 0, 1e9, ""),
    RFLD("runtime.swiglu_limit", F64, swiglu_limit, 0, 1e9, ""),
    RFLD("runtime.gated_up_offset", F64, gated_up_offset, -1e9, 1e9, ""),
    RFLD("runtime.mla", U32, mla, 0, 1, ""),
    RFLD("runtime.mla_rope_interleaved", U32, mla_rope_interleaved, 0, 1, ""),
    RFLD("runtime.q_lora_rank", U32, q_lora_rank, 0, 131072, ""),
    RFLD("runtime.kv_lora_rank", U32, kv_lora_rank, 0, 131072, ""),
    RFLD("runtime.qk_nope_dim", U32, qk_nope_dim, 0, 4096, ""),
    RFLD("runtime.qk_rope_dim", U32, qk_rope_dim, 0, 4096, ""),
    RFLD("runtime.v_head_dim", U32, v_head_dim, 0, 4096, ""),
    RFLD("runtime.mla_rope_gain", F64, mla_rope_gain, 0, 1e6, ""),
    RFLD("runtime.policy", U32, policy, 0, 3, "retention policy: 0 window, 1 tova, 2 h2o, 3 tova-head"),
    RFLD("runtime.recent", U32, recent, 0, 16777215, "h2o: the most recent positions never evicted, 0: window / 2, else < window; 0 for the other policies"),
};
#undef RFLD
#pragma GCC diagnostic pop

constexpr size_t kOffMagic = 0, kOffEndian = 4, kOffSchema = 8, kOffNPgen = 40, kOffNArrays = 44, kOffNStages = 48,
                 kOffNRecords = 52, kOffFields = 56;

size_t field_size(FT t) {
    switch (t) {
        case FT::U32: return 4;
        case FT::U64:
        case FT::F64: return 8;
        case FT::D32: return 32;
    }
    return 0;
}

const char *type_name(FT t) {
    switch (t) {
        case FT::U32: return "u32";
        case FT::U64: return "u64";
        case FT::F64: return "f64";
        case FT::D32: return "u8[32]";
    }
    return "?";
}

size_t compute_fixed_size() {
    size_t n = kOffFields;
    for (const FieldDef &f : kFields) n += field_size(f.type);
    return n;
}

uint64_t runtime_field_offset(const char *name) {
    uint64_t at = 0;
    for (const FieldDef &f : kRuntimeFields) {
        if (std::strcmp(f.name, name) == 0) return at;
        at += field_size(f.type);
    }
    return 0;
}

size_t compute_runtime_fixed_size() {
    size_t n = 0;
    for (const FieldDef &f : kRuntimeFields) n += field_size(f.type);
    return n;
}

std::string build_schema_text(bool runtime) {
    std::string t;
    t += "sera_manifest (magic SERM): little-endian, packed, no padding; schema_sha256 = SHA-256 of this text\n";
    t += "fixed part:\n";
    t += "@0 u32 magic = 0x5345524d\n";
    t += "@4 u32 endian = 0x01020304\n";
    t += "@8 u8[32] schema_sha256\n";
    t += format("@40 u32 tables.n_pgen 0..%u\n", kManifestMaxPgen);
    t += format("@44 u32 tables.n_arrays 0..%u\n", kManifestMaxArrays);
    t += format("@48 u32 tables.n_stages %u..%u\n", kManifestStages, kManifestStages);
    t += format("@52 u32 tables.n_records 0..%u\n", kManifestMaxRecords);
    size_t at = kOffFields;
    for (const FieldDef &f : kFields) {
        t += format("@%zu %s %s", at, type_name(f.type), f.name);
        if (f.type == FT::F64) t += format(" %.9g..%.9g finite", f.lo, f.hi);
        else if (f.type != FT::D32) t += format(" %llu..%llu", (unsigned long long)f.lo, (unsigned long long)f.hi);
        if (*f.note) t += format(" ; %s", f.note);
        t += "\n";
        at += field_size(f.type);
    }
    t += format("@%zu end of fixed part\n", at);
    t += "then, in this order:\n";
    t += "u32[n_pgen] tokenizer.P_gen ; token ids, each < tokenizer.vocab_size (none if vocab_size is 0)\n";
    t += "array[n_arrays] 136 bytes each: @0 char[64] name ([A-Za-z0-9._-]+, not . or .., NUL-padded, unique) "
         "@64 u16 stage 1..8 @66 u16 dtype 1..9 @68 u16 rank 1..5 @70 u16 zero @72 u32 flags (bit1 set, bits 0..2 only) "
         "@76 u32 crc32c @80 u64[5] dims (unused = 1) @120 u64 byte_len = prod(dims) * dtype size @128 u64 sha256_low64\n";
    t += "stage[n_stages] 16 bytes each: @0 u16 stage = index + 1 @2 u16 state 0 pending, 1 ran, 2 not implemented, "
         "3 disabled, 4 failed @4 u32 crc32c @8 u64 sha256_low64\n";
    t += "record[n_records] 128 bytes each: @0 u16 stage 1..10 @2 u16 kind 1 feature disabled, 2 invariant pass, "
         "3 invariant fail, 4 note @4 u32 feature 0..8 @8 u32 status 0..99 @12 u32 zero @16 f64 value finite "
         "@24 f64 bound finite @32 char[96] text (printable ASCII, NUL-padded)\n";
    if (runtime) {
        t += "runtime block (faithful profile), its fields packed in this order:\n";
        size_t rat = 0;
        for (const FieldDef &f : kRuntimeFields) {
            t += format("+%zu %s %s", rat, type_name(f.type), f.name);
            if (f.type == FT::F64) t += format(" %.9g..%.9g finite", f.lo, f.hi);
            else if (f.type != FT::D32) t += format(" %llu..%llu", (unsigned long long)f.lo, (unsigned long long)f.hi);
            if (*f.note) t += format(" ; %s", f.note);
            t += "\n";
            rat += field_size(f.type);
        }
        t += format("+%zu end of the runtime fields\n", rat);
        t += "runtime.layer[runtime.n_layers] 16 bytes each: @0 u32 kind 0 full, 1 sliding @4 u32 model_window "
             "(0 for full layers) @8 u32 moe 0..1 @12 u32 rope_table 0..1\n";
    }
    t += "u8[32] hashes.prev_hash ; curr_hash of the generation this one replaces, zeros for the first\n";
    t += "u8[32] hashes.curr_hash = SHA-256 of every byte before it\n";
    return t;
}

// Shared by the writer (validating its input) and the reader.  `at` is the file offset of the
// item, for messages.

template <size_t N>
void check_table(const FieldDef (&table)[N], const uint8_t *p, const std::string &file, uint64_t base) {
    uint64_t at = base;
    for (const FieldDef &d : table) {
        switch (d.type) {
            case FT::U32: {
                uint32_t v = load_u32(p + d.off);
                if (double(v) < d.lo || double(v) > d.hi)
                    throw_at(STK_E_CORRUPT, file, at, "%s = %u outside %.0f..%.0f", d.name, v, d.lo, d.hi);
                break;
            }
            case FT::U64: {
                uint64_t v = load_u64(p + d.off);
                if (double(v) < d.lo || double(v) > d.hi)
                    throw_at(STK_E_CORRUPT, file, at, "%s = %llu outside %.0f..%.0f", d.name, (unsigned long long)v, d.lo, d.hi);
                break;
            }
            case FT::F64: {
                double v = load_le<double>(p + d.off);
                if (!std::isfinite(v) || v < d.lo || v > d.hi)
                    throw_at(STK_E_CORRUPT, file, at, "%s = %g outside %g..%g", d.name, v, d.lo, d.hi);
                break;
            }
            case FT::D32: break;
        }
        at += field_size(d.type);
    }
}

void check_fields(const ManifestFields &f, const std::string &file, uint64_t base) {
    check_table(kFields, reinterpret_cast<const uint8_t *>(&f), file, base);
}

// The runtime block: its fields' bounds, its strings NUL-padded ASCII, its layer table.
void check_runtime(const ManifestRuntime &r, const RuntimeLayer *layers, const std::string &file, uint64_t base) {
    const auto *p = reinterpret_cast<const uint8_t *>(&r);
    check_table(kRuntimeFields, p, file, base);
    uint64_t at = base;
    for (const FieldDef &d : kRuntimeFields) {
        if (d.type == FT::D32) {
            const uint8_t *s = p + d.off;
            size_t len = strnlen(reinterpret_cast<const char *>(s), 32);
            if (len == 32) throw_at(STK_E_CORRUPT, file, at, "%s is not NUL-terminated", d.name);
            for (size_t i = 0; i < 32; i++)
                if (i < len ? (s[i] < 0x20 || s[i] > 0x7e) : s[i] != 0)
                    throw_at(STK_E_CORRUPT, file, at + i, "%s byte %zu is 0x%02x (ASCII, NUL-padded)", d.name, i, s[i]);
        }
        at += field_size(d.type);
    }
    if (r.n_kv_heads > r.n_heads || (r.n_kv_heads && r.n_heads % r.n_kv_heads))
        throw_at(STK_E_CORRUPT, file, base, "runtime: %u heads are not a multiple of %u kv heads", r.n_heads, r.n_kv_heads);
    if (r.top_k > r.n_experts) throw_at(STK_E_CORRUPT, file, base, "runtime: top_k %u above n_experts %u", r.top_k, r.n_experts);
    if (const std::string why = runtime_policy_problem(r.policy, r.recent, r.window); !why.empty())
        throw_at(STK_E_CORRUPT, file, base + runtime_field_offset(r.policy > kRuntimePolicyLast ? "runtime.policy" : "runtime.recent"),
                 "runtime.%s", why.c_str());
    for (uint32_t l = 0; l < r.n_layers; l++, at += kRuntimeLayerSize) {
        const RuntimeLayer &e = layers[l];
        if (e.kind > 1 || e.moe > 1 || e.rope_table > 1 || (e.kind == 0 && e.model_window) || (e.kind == 1 && !e.model_window))
            throw_at(STK_E_CORRUPT, file, at, "runtime layer %u: kind %u, model_window %u, moe %u, rope_table %u", l, e.kind,
                     e.model_window, e.moe, e.rope_table);
    }
}

void check_array_entry(const ManifestArray &a, const std::string &file, uint64_t at) {
    size_t len = strnlen(a.name, kManifestNameSize);
    if (len == kManifestNameSize) throw_at(STK_E_CORRUPT, file, at, "array name not NUL-terminated");
    for (size_t i = len; i < kManifestNameSize; i++)
        if (a.name[i]) throw_at(STK_E_CORRUPT, file, at + i, "array name padding not zero");
    if (!valid_array_name(a.name, len))
        throw_at(STK_E_CORRUPT, file, at, "array name '%.*s' is not [A-Za-z0-9._-]+", int(len), a.name);
    if (a.stage < STK_STAGE_PARSE_TENSORS || a.stage > STK_STAGE_BRIDGE_INIT)
        throw_at(STK_E_CORRUPT, file, at + 64, "array %s: stage %u not in 1..8", a.name, a.stage);
    if (!dtype_known(a.dtype))
        throw_at(STK_E_BAD_DTYPE, file, at + 66, "array %s: unknown dtype %u (1..%u)", a.name, a.dtype, kDTypeLast);
    if (a.rank < 1 || a.rank > kMaxRank) throw_at(STK_E_BAD_RANK, file, at + 68, "array %s: rank %u not in 1..5", a.name, a.rank);
    if (a.flags & ~kKnownFlags)
        throw_at(STK_E_BAD_HEADER, file, at + 72, "array %s: unknown flag bits 0x%x", a.name, a.flags & ~kKnownFlags);
    if (!(a.flags & kFlagAligned64)) throw_at(STK_E_MISALIGNED, file, at + 72, "array %s: aligned_64B flag clear", a.name);
    uint64_t n = 1;
    for (uint32_t i = 0; i < kMaxRank; i++) {
        if (i >= a.rank && a.dims[i] != 1)
            throw_at(STK_E_BAD_RANK, file, at + 80 + 8 * i, "array %s: unused dims[%u] = %llu, must be 1", a.name, i,
                     (unsigned long long)a.dims[i]);
        if (!mul_ok(n, a.dims[i], &n))
            throw_at(STK_E_DIMS_OVERFLOW, file, at + 80 + 8 * i, "array %s: product of dims overflows", a.name);
    }
    uint64_t expect = 0;
    const ArrayBytes ab = array_bytes_of(a.dtype, a.rank, a.dims, &expect);
    if (ab == ArrayBytes::Overflow)
        throw_at(STK_E_DIMS_OVERFLOW, file, at + 80, "array %s: %llu elements of %s overflow 64 bits", a.name,
                 (unsigned long long)n, dtype_name(a.dtype));
    if (ab == ArrayBytes::RowNot32)
        throw_at(STK_E_SIZE_MISMATCH, file, at + 80 + 8 * (a.rank - 1), "array %s: %s rows of %llu values are not whole blocks of 32",
                 a.name, dtype_name(a.dtype), (unsigned long long)a.dims[a.rank - 1]);
    if (a.byte_len != expect)
        throw_at(STK_E_SIZE_MISMATCH, file, at + 120, "array %s: byte_len %llu, dims x %s give %llu", a.name,
                 (unsigned long long)a.byte_len, dtype_name(a.dtype), (unsigned long long)expect);
}

void check_stage_entry(uint32_t index, const ManifestStage &s, const std::string &file, uint64_t at) {
    if (s.state > kStageFailed) throw_at(STK_E_CORRUPT, file, at + 2, "stage %u: state %u not in 0..4", index + 1, s.state);
}

void check_record(const ManifestRecord &r, const std::string &file, uint64_t at) {
    if (r.stage < 1 || r.stage > STK_STAGE_COUNT) throw_at(STK_E_CORRUPT, file, at, "record stage %u not in 1..10", r.stage);
    if (r.kind < kRecordFeatureDisabled || r.kind > kRecordNote)
        throw_at(STK_E_CORRUPT, file, at + 2, "record kind %u not in 1..4", r.kind);
    if (r.feature > kFeatureMax) throw_at(STK_E_CORRUPT, file, at + 4, "record feature %u not in 0..%u", r.feature, kFeatureMax);
    if (r.status > 99) throw_at(STK_E_CORRUPT, file, at + 8, "record status %u not in 0..99", r.status);
    if (!std::isfinite(r.value)) throw_at(STK_E_CORRUPT, file, at + 16, "record value is not finite");
    if (!std::isfinite(r.bound)) throw_at(STK_E_CORRUPT, file, at + 24, "record bound is not finite");
    size_t len = strnlen(r.text, kManifestTextSize);
    if (len == kManifestTextSize) throw_at(STK_E_CORRUPT, file, at + 32, "record text not NUL-terminated");
    for (size_t i = 0; i < len; i++)
        if (r.text[i] < 0x20 || r.text[i] > 0x7e)
            throw_at(STK_E_CORRUPT, file, at + 32 + i, "record text byte 0x%02x is not printable ASCII", uint8_t(r.text[i]));
    for (size_t i = len; i < kManifestTextSize; i++)
        if (r.text[i]) throw_at(STK_E_CORRUPT, file, at + 32 + i, "record text padding not zero");
}

void check_counts(uint64_t n_pgen, uint64_t n_arrays, uint64_t n_records, const std::string &file) {
    if (n_pgen > kManifestMaxPgen)
        throw_at(STK_E_CORRUPT, file, kOffNPgen, "n_pgen %llu above %u", (unsigned long long)n_pgen, kManifestMaxPgen);
    if (n_arrays > kManifestMaxArrays)
        throw_at(STK_E_CORRUPT, file, kOffNArrays, "n_arrays %llu above %u", (unsigned long long)n_arrays, kManifestMaxArrays);
    if (n_records > kManifestMaxRecords)
        throw_at(STK_E_CORRUPT, file, kOffNRecords, "n_records %llu above %u", (unsigned long long)n_records,
                 kManifestMaxRecords);
}

// Checks that need the whole set: P_gen ids below vocab_size, unique array names.
void check_cross(const ManifestFields &f, const uint32_t *p_gen, uint32_t n_pgen, const ManifestArray *arrays, uint32_t n_arrays,
                 const std::string &file, uint64_t pgen_at, uint64_t arrays_at) {
    for (uint32_t i = 0; i < n_pgen; i++)
        if (p_gen[i] >= f.tokenizer.vocab_size)
            throw_at(STK_E_CORRUPT, file, pgen_at + 4ull * i, "P_gen[%u] = %u, not below vocab_size %u", i, p_gen[i],
                     f.tokenizer.vocab_size);
    std::vector<std::pair<std::string_view, uint32_t>> names;
    names.reserve(n_arrays);
    for (uint32_t i = 0; i < n_arrays; i++)
        names.emplace_back(std::string_view(arrays[i].name, strnlen(arrays[i].name, kManifestNameSize)), i);
    std::sort(names.begin(), names.end());
    for (size_t i = 1; i < names.size(); i++)
        if (names[i].first == names[i - 1].first) {
            uint32_t later = std::max(names[i].second, names[i - 1].second);
            throw_at(STK_E_CORRUPT, file, arrays_at + kManifestArrayEntrySize * later, "array %s listed twice",
                     std::string(names[i].first).c_str());
        }
}

// An array belongs to a stage that ran (or ran and disabled part of its feature).
void check_array_stages(const ManifestArray *arrays, uint32_t n, const ManifestStage *stages, const std::string &file,
                        uint64_t arrays_at) {
    for (uint32_t i = 0; i < n; i++) {
        uint16_t st = stages[arrays[i].stage - 1].state;
        if (st != kStageRan && st != kStageDisabled)
            throw_at(STK_E_CORRUPT, file, arrays_at + kManifestArrayEntrySize * i + 64,
                     "array %s: written by stage %u, whose state is %u", arrays[i].name, arrays[i].stage, st);
    }
}

void encode_array_entry(const ManifestArray &a, uint8_t out[kManifestArrayEntrySize]) {
    std::memset(out, 0, kManifestArrayEntrySize);
    std::memcpy(out, a.name, kManifestNameSize);
    store_le<uint16_t>(out + 64, a.stage);
    store_le<uint16_t>(out + 66, a.dtype);
    store_le<uint16_t>(out + 68, a.rank);
    store_le<uint32_t>(out + 72, a.flags);
    store_le<uint32_t>(out + 76, a.crc32c);
    for (int i = 0; i < 5; i++) store_le<uint64_t>(out + 80 + 8 * i, a.dims[i]);
    store_le<uint64_t>(out + 120, a.byte_len);
    store_le<uint64_t>(out + 128, a.sha256_low64);
}

ManifestArray decode_array_entry(const uint8_t *p, const std::string &file, uint64_t at) {
    ManifestArray a;
    std::memcpy(a.name, p, kManifestNameSize);
    a.stage = load_u16(p + 64);
    a.dtype = load_u16(p + 66);
    a.rank = load_u16(p + 68);
    if (load_u16(p + 70)) throw_at(STK_E_CORRUPT, file, at + 70, "array entry zero field is %u", load_u16(p + 70));
    a.flags = load_u32(p + 72);
    a.crc32c = load_u32(p + 76);
    for (int i = 0; i < 5; i++) a.dims[i] = load_u64(p + 80 + 8 * i);
    a.byte_len = load_u64(p + 120);
    a.sha256_low64 = load_u64(p + 128);
    return a;
}

void encode_record(const ManifestRecord &r, uint8_t out[kManifestRecordSize]) {
    std::memset(out, 0, kManifestRecordSize);
    store_le<uint16_t>(out + 0, r.stage);
    store_le<uint16_t>(out + 2, r.kind);
    store_le<uint32_t>(out + 4, r.feature);
    store_le<uint32_t>(out + 8, r.status);
    store_le<double>(out + 16, r.value);
    store_le<double>(out + 24, r.bound);
    std::memcpy(out + 32, r.text, kManifestTextSize);
}

ManifestRecord decode_record(const uint8_t *p, const std::string &file, uint64_t at) {
    ManifestRecord r;
    r.stage = load_u16(p + 0);
    r.kind = load_u16(p + 2);
    r.feature = load_u32(p + 4);
    r.status = load_u32(p + 8);
    if (load_u32(p + 12)) throw_at(STK_E_CORRUPT, file, at + 12, "record zero field is 0x%x", load_u32(p + 12));
    r.value = load_le<double>(p + 16);
    r.bound = load_le<double>(p + 24);
    std::memcpy(r.text, p + 32, kManifestTextSize);
    return r;
}

void validate_input(const ManifestInput &in) {
    const std::string w = "manifest writer";
    if (!in.fields) throw_error(STK_E_INVALID_ARGUMENT, "manifest writer: no fields");
    if ((in.n_pgen && !in.p_gen) || (in.n_arrays && !in.arrays) || (in.n_records && !in.records))
        throw_error(STK_E_INVALID_ARGUMENT, "manifest writer: a count without its table");
    try {
        check_counts(in.n_pgen, in.n_arrays, in.n_records, w);
        uint64_t at = kOffFields;
        check_fields(*in.fields, w, at);
        at = manifest_fixed_size();
        uint64_t pgen_at = at;
        at += 4ull * in.n_pgen;
        uint64_t arrays_at = at;
        for (uint32_t i = 0; i < in.n_arrays; i++, at += kManifestArrayEntrySize) check_array_entry(in.arrays[i], w, at);
        for (uint32_t i = 0; i < kManifestStages; i++, at += kManifestStageEntrySize) check_stage_entry(i, in.stages[i], w, at);
        for (uint32_t i = 0; i < in.n_records; i++, at += kManifestRecordSize) check_record(in.records[i], w, at);
        if (in.runtime) {
            if (!in.runtime_layers) throw_error(STK_E_INVALID_ARGUMENT, "manifest writer: a runtime block without its layers");
            check_runtime(*in.runtime, in.runtime_layers, w, at);
        }
        check_cross(*in.fields, in.p_gen, in.n_pgen, in.arrays, in.n_arrays, w, pgen_at, arrays_at);
        check_array_stages(in.arrays, in.n_arrays, in.stages, w, arrays_at);
    } catch (const Error &e) {
        // The writer was handed something no reader accepts: a caller bug, not a bad file.
        throw Error(STK_E_INVALID_ARGUMENT, e.what());
    }
}

// Streams the manifest, everything but curr_hash, through put(data, len).
template <class Put>
void emit(const ManifestInput &in, Put &&put) {
    uint8_t head[kOffFields];
    store_le<uint32_t>(head + kOffMagic, kManifestMagic);
    store_le<uint32_t>(head + kOffEndian, kManifestEndian);
    std::memcpy(head + kOffSchema, manifest_schema_sha256(in.runtime != nullptr), 32);
    store_le<uint32_t>(head + kOffNPgen, in.n_pgen);
    store_le<uint32_t>(head + kOffNArrays, in.n_arrays);
    store_le<uint32_t>(head + kOffNStages, kManifestStages);
    store_le<uint32_t>(head + kOffNRecords, in.n_records);
    put(head, sizeof head);
    const auto *f = reinterpret_cast<const uint8_t *>(in.fields);
    for (const FieldDef &d : kFields) put(f + d.off, field_size(d.type));  // LE host: bytes as stored
    for (uint32_t i = 0; i < in.n_pgen; i++) {
        uint8_t b[4];
        store_le<uint32_t>(b, in.p_gen[i]);
        put(b, 4);
    }
    for (uint32_t i = 0; i < in.n_arrays; i++) {
        uint8_t b[kManifestArrayEntrySize];
        encode_array_entry(in.arrays[i], b);
        put(b, sizeof b);
    }
    for (uint32_t i = 0; i < kManifestStages; i++) {
        uint8_t b[kManifestStageEntrySize] = {};
        store_le<uint16_t>(b + 0, uint16_t(i + 1));
        store_le<uint16_t>(b + 2, in.stages[i].state);
        store_le<uint32_t>(b + 4, in.stages[i].crc32c);
        store_le<uint64_t>(b + 8, in.stages[i].sha256_low64);
        put(b, sizeof b);
    }
    for (uint32_t i = 0; i < in.n_records; i++) {
        uint8_t b[kManifestRecordSize];
        encode_record(in.records[i], b);
        put(b, sizeof b);
    }
    if (in.runtime) {
        const auto *r = reinterpret_cast<const uint8_t *>(in.runtime);
        for (const FieldDef &d : kRuntimeFields) put(r + d.off, field_size(d.type));  // LE host: bytes as stored
        for (uint32_t l = 0; l < in.runtime->n_layers; l++) {
            uint8_t b[kRuntimeLayerSize];
            const RuntimeLayer &e = in.runtime_layers[l];
            store_le<uint32_t>(b + 0, e.kind);
            store_le<uint32_t>(b + 4, e.model_window);
            store_le<uint32_t>(b + 8, e.moe);
            store_le<uint32_t>(b + 12, e.rope_table);
            put(b, sizeof b);
        }
    }
    put(in.prev_hash, 32);
}

}  // namespace

std::string runtime_policy_problem(uint32_t policy, uint32_t recent, uint32_t window) {
    if (policy > kRuntimePolicyLast)
        return format("policy = %u: not a retention policy (0 window, 1 tova, 2 h2o, 3 tova-head)", policy);
    if (recent && policy != kRuntimePolicyH2o)
        return format("recent = %u: only the h2o policy (2) keeps recent positions (policy %u)", recent, policy);
    if (recent && recent >= window) return format("recent = %u: fewer than the window (%u)", recent, window);
    return {};
}

const std::string &manifest_schema_text(bool with_runtime) {
    static const std::string text = build_schema_text(false), text_runtime = build_schema_text(true);
    return with_runtime ? text_runtime : text;
}

const uint8_t *manifest_schema_sha256(bool with_runtime) {
    static const Sha256Digest d = sha256(manifest_schema_text(false).data(), manifest_schema_text(false).size());
    static const Sha256Digest dr = sha256(manifest_schema_text(true).data(), manifest_schema_text(true).size());
    return with_runtime ? dr.bytes : d.bytes;
}

size_t manifest_fixed_size() {
    static const size_t n = compute_fixed_size();
    return n;
}

size_t manifest_runtime_fixed_size() {
    static const size_t n = compute_runtime_fixed_size();
    return n;
}

uint64_t manifest_total_size(uint64_t n_pgen, uint64_t n_arrays, uint64_t n_records, int64_t runtime_layers) {
    uint64_t t = manifest_fixed_size();
    t = checked_add(t, checked_mul(n_pgen, 4, "manifest n_pgen"), "manifest size");
    t = checked_add(t, checked_mul(n_arrays, kManifestArrayEntrySize, "manifest n_arrays"), "manifest size");
    t = checked_add(t, kManifestStages * kManifestStageEntrySize, "manifest size");
    t = checked_add(t, checked_mul(n_records, kManifestRecordSize, "manifest n_records"), "manifest size");
    if (runtime_layers >= 0)
        t = checked_add(t, manifest_runtime_fixed_size() + uint64_t(runtime_layers) * kRuntimeLayerSize, "manifest size");
    return checked_add(t, kManifestHashesSize, "manifest size");
}

bool valid_array_name(const char *name, size_t len) {
    if (len == 0 || len >= kManifestNameSize) return false;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

std::string hex32(const uint8_t d[32]) {
    static const char digits[] = "0123456789abcdef";
    std::string s(64, '0');
    for (int i = 0; i < 32; i++) {
        s[2 * i] = digits[d[i] >> 4];
        s[2 * i + 1] = digits[d[i] & 15];
    }
    return s;
}

void draft_add_record(ManifestDraft &d, stk_stage stage, RecordKind kind, Feature feature, stk_status status, double value,
                      double bound, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string text = vformat(fmt, ap);
    va_end(ap);
    uint32_t slot = d.n_records;
    if (slot >= kMaxDraftRecords) {
        // Keep the bound: the last slot turns into a count of what did not fit.
        slot = kMaxDraftRecords - 1;
        ManifestRecord &last = d.records[slot];
        double dropped =
            last.kind == kRecordNote && last.feature == kFeatureNone && last.status == STK_E_INTERNAL ? last.value + 1 : 2;
        last = ManifestRecord();
        last.stage = uint16_t(stage);
        last.kind = kRecordNote;
        last.status = STK_E_INTERNAL;
        last.value = dropped;
        std::snprintf(last.text, kManifestTextSize, "%.0f records dropped: more than %u", dropped, kMaxDraftRecords - 1);
        return;
    }
    ManifestRecord &r = d.records[slot];
    r = ManifestRecord();
    r.stage = uint16_t(stage);
    r.kind = kind;
    r.feature = feature;
    r.status = uint32_t(status);
    r.value = std::isfinite(value) ? value : 0;
    r.bound = std::isfinite(bound) ? bound : 0;
    // A text longer than the field is cut at a word boundary and marked "...": never inside a
    // number (a cut "2.51e-05" would read "2.51").
    if (text.size() > kManifestTextSize - 1) {
        size_t cut = text.find_last_of(" ;,", kManifestTextSize - 4);
        if (cut == std::string::npos || cut < kManifestTextSize / 2) cut = kManifestTextSize - 4;
        text = text.substr(0, cut) + "...";
    }
    size_t n = std::min(text.size(), kManifestTextSize - 1);
    for (size_t i = 0; i < n; i++) r.text[i] = (text[i] >= 0x20 && text[i] <= 0x7e) ? text[i] : '?';
    d.n_records++;
}

std::vector<uint8_t> encode_manifest(const ManifestInput &in) {
    validate_input(in);
    std::vector<uint8_t> out;
    out.reserve(size_t(manifest_total_size(in.n_pgen, in.n_arrays, in.n_records, in.runtime ? int64_t(in.runtime->n_layers) : -1)));
    emit(in, [&](const void *p, size_t n) {
        auto *b = static_cast<const uint8_t *>(p);
        out.insert(out.end(), b, b + n);
    });
    Sha256Digest h = sha256(out.data(), out.size());
    out.insert(out.end(), h.bytes, h.bytes + 32);
    return out;
}

void write_manifest(const std::string &path, const ManifestInput &in, uint8_t curr_hash_out[32]) {
    validate_input(in);
    OutputFile file(path);
    Sha256 sha;
    uint8_t buf[16384];
    size_t used = 0;
    auto flush = [&] {
        file.write(buf, used);
        used = 0;
    };
    emit(in, [&](const void *p, size_t n) {
        sha.update(p, n);
        auto *b = static_cast<const uint8_t *>(p);
        while (n > 0) {
            size_t k = std::min(n, sizeof buf - used);
            std::memcpy(buf + used, b, k);
            used += k;
            b += k;
            n -= k;
            if (used == sizeof buf) flush();
        }
    });
    Sha256Digest h = sha.finish();
    flush();
    file.write(h.bytes, 32);
    file.commit();
    if (curr_hash_out) std::memcpy(curr_hash_out, h.bytes, 32);
}

Manifest decode_manifest(const uint8_t *p, uint64_t size, const std::string &file) {
    if (size < kOffFields)
        throw_at(STK_E_TRUNCATED, file, size, "%llu bytes, shorter than the %zu-byte manifest head", (unsigned long long)size,
                 kOffFields);
    uint32_t magic = load_u32(p + kOffMagic);
    if (magic != kManifestMagic)
        throw_at(STK_E_BAD_MAGIC, file, kOffMagic, "magic 0x%08x is not a Sera manifest (0x%08x)", magic, kManifestMagic);
    uint32_t endian = load_u32(p + kOffEndian);
    if (endian != kManifestEndian)
        throw_at(STK_E_CORRUPT, file, kOffEndian, "endian tag 0x%08x, expected 0x%08x (little-endian)", endian, kManifestEndian);
    const bool runtime = std::memcmp(p + kOffSchema, manifest_schema_sha256(true), 32) == 0;
    if (!runtime && std::memcmp(p + kOffSchema, manifest_schema_sha256(), 32) != 0)
        throw_at(STK_E_SCHEMA, file, kOffSchema, "schema digest %s is not a schema this reader knows (%s, or %s with the runtime block)",
                 hex32(p + kOffSchema).c_str(), hex32(manifest_schema_sha256()).c_str(), hex32(manifest_schema_sha256(true)).c_str());
    uint32_t n_pgen = load_u32(p + kOffNPgen), n_arrays = load_u32(p + kOffNArrays), n_stages = load_u32(p + kOffNStages),
             n_records = load_u32(p + kOffNRecords);
    check_counts(n_pgen, n_arrays, n_records, file);
    if (n_stages != kManifestStages)
        throw_at(STK_E_CORRUPT, file, kOffNStages, "n_stages %u, the DAG has %u", n_stages, kManifestStages);
    uint64_t total = manifest_total_size(n_pgen, n_arrays, n_records, runtime ? 0 : -1);
    // The runtime block's layer count sits inside it: read it once the fixed part is known there.
    uint32_t rt_layers = 0;
    if (runtime && size >= total) {
        const uint64_t at_nl = total - kManifestHashesSize - manifest_runtime_fixed_size() + runtime_field_offset("runtime.n_layers");
        rt_layers = load_u32(p + at_nl);
        if (rt_layers < 1 || rt_layers > 1024)
            throw_at(STK_E_CORRUPT, file, at_nl, "runtime.n_layers = %u outside 1..1024", rt_layers);
        total = manifest_total_size(n_pgen, n_arrays, n_records, rt_layers);
    }
    if (size < total)
        throw_at(STK_E_TRUNCATED, file, size, "%llu bytes, the counts (%u P_gen ids, %u arrays, %u records) need %llu",
                 (unsigned long long)size, n_pgen, n_arrays, n_records, (unsigned long long)total);
    if (size > total)
        throw_at(STK_E_SIZE_MISMATCH, file, total, "%llu bytes after the end the counts give (%llu bytes)",
                 (unsigned long long)(size - total), (unsigned long long)total);
    Sha256Digest h = sha256(p, size_t(size - 32));
    if (std::memcmp(h.bytes, p + size - 32, 32) != 0)
        throw_at(STK_E_CHECKSUM, file, size - 32, "curr_hash %s, the bytes before it hash to %s", hex32(p + size - 32).c_str(),
                 hex32(h.bytes).c_str());

    Manifest m;
    std::memcpy(m.schema_sha256, p + kOffSchema, 32);
    auto *fb = reinterpret_cast<uint8_t *>(&m.fields);
    uint64_t at = kOffFields;
    for (const FieldDef &d : kFields) {
        std::memcpy(fb + d.off, p + at, field_size(d.type));
        at += field_size(d.type);
    }
    check_fields(m.fields, file, kOffFields);
    uint64_t pgen_at = at;
    m.p_gen.resize(n_pgen);
    for (uint32_t i = 0; i < n_pgen; i++, at += 4) m.p_gen[i] = load_u32(p + at);
    uint64_t arrays_at = at;
    m.arrays.resize(n_arrays);
    for (uint32_t i = 0; i < n_arrays; i++, at += kManifestArrayEntrySize) {
        m.arrays[i] = decode_array_entry(p + at, file, at);
        check_array_entry(m.arrays[i], file, at);
    }
    for (uint32_t i = 0; i < kManifestStages; i++, at += kManifestStageEntrySize) {
        uint16_t id = load_u16(p + at);
        if (id != i + 1) throw_at(STK_E_CORRUPT, file, at, "stage entry %u names stage %u", i, id);
        m.stages[i].state = load_u16(p + at + 2);
        m.stages[i].crc32c = load_u32(p + at + 4);
        m.stages[i].sha256_low64 = load_u64(p + at + 8);
        check_stage_entry(i, m.stages[i], file, at);
    }
    m.records.resize(n_records);
    for (uint32_t i = 0; i < n_records; i++, at += kManifestRecordSize) {
        m.records[i] = decode_record(p + at, file, at);
        check_record(m.records[i], file, at);
    }
    if (runtime) {
        m.has_runtime = true;
        const uint64_t rt_at = at;
        auto *rb = reinterpret_cast<uint8_t *>(&m.runtime);
        for (const FieldDef &d : kRuntimeFields) {
            std::memcpy(rb + d.off, p + at, field_size(d.type));
            at += field_size(d.type);
        }
        m.runtime_layers.resize(rt_layers);
        for (uint32_t l = 0; l < rt_layers; l++, at += kRuntimeLayerSize) {
            RuntimeLayer &e = m.runtime_layers[l];
            e.kind = load_u32(p + at), e.model_window = load_u32(p + at + 4), e.moe = load_u32(p + at + 8),
            e.rope_table = load_u32(p + at + 12);
        }
        check_runtime(m.runtime, m.runtime_layers.data(), file, rt_at);
    }
    check_cross(m.fields, m.p_gen.data(), n_pgen, m.arrays.data(), n_arrays, file, pgen_at, arrays_at);
    check_array_stages(m.arrays.data(), n_arrays, m.stages, file, arrays_at);
    std::memcpy(m.prev_hash, p + at, 32);
    std::memcpy(m.curr_hash, p + at + 32, 32);
    return m;
}

Manifest read_manifest(const std::string &path) {
    MappedFile f(path, false);  // never through a symbolic link
    return decode_manifest(f.data(), f.size(), path);
}

void check_chain(const Manifest &prev, const Manifest &next) {
    if (std::memcmp(next.prev_hash, prev.curr_hash, 32) != 0)
        throw_error(STK_E_CHECKSUM, "generation chain broken: prev_hash %s, but the replaced generation's curr_hash is %s",
                    hex32(next.prev_hash).c_str(), hex32(prev.curr_hash).c_str());
}

ManifestArray manifest_array_from_header(const char *name, uint16_t stage, const ArrayHeader &h) {
    ManifestArray a;
    size_t len = strnlen(name, kManifestNameSize);
    if (!valid_array_name(name, len)) throw_error(STK_E_INVALID_ARGUMENT, "array name '%s' is not [A-Za-z0-9._-]{1,63}", name);
    std::memcpy(a.name, name, len);
    a.stage = stage;
    a.dtype = h.dtype;
    a.rank = h.rank;
    a.flags = h.flags;
    a.crc32c = h.crc32c;
    for (uint32_t i = 0; i < kMaxRank; i++) a.dims[i] = i < h.rank ? h.dims[i] : 1;
    a.byte_len = h.byte_len;
    a.sha256_low64 = h.sha256_low64;
    return a;
}

}  // namespace stk
