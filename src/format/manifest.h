// The Sera manifest, sera_manifest.bin (seed 2.5, 12.7; spec-notes 3).  No version field: the
// manifest stores the SHA-256 of a canonical schema text (manifest_schema_text(), reproduced in
// docs/format.md, "Manifest"), and a reader refuses any digest it does not know.
//
// Layout, little-endian, packed (docs/format.md gives every offset):
//   fixed part      magic, endian, abi_flags, table counts, then every scalar field of 2.5
//   p_gen ids       n_pgen x u32
//   array table     n_arrays x 136 bytes (name, stage, dtype, rank, flags, crc32c, dims, byte_len,
//                   sha256_low64)
//   stage table     10 x 16 bytes (stage, state, crc32c, sha256_low64)   seed 15.2
//   records         n_records x 128 bytes (invariant / diagnostic records) seed 1.4
//   hashes          prev_hash[32], curr_hash[32]; curr_hash = SHA-256 of every byte before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stk/stk.h"

namespace stk {

constexpr uint32_t kManifestMagic = 0x5345524Du;   // "SERM": bytes 4D 52 45 53
constexpr uint32_t kManifestEndian = 0x01020304u;  // bytes 04 03 02 01 in a little-endian file
constexpr const char *kManifestFileName = STK_MANIFEST_FILE_NAME;  // stk.h names the files for front ends
constexpr const char *kArraysDirName = STK_ARRAYS_DIR_NAME;

constexpr uint32_t kAbiFma = 1u << 0;  // kernels contract a*b+c into fused multiply-adds
constexpr uint32_t kAbiFtz = 1u << 1;  // flush-to-zero / denormals-are-zero was on

// Bounds of the variable parts (every count is bounded: seed 2.5 "All scalar fields are bounded").
constexpr uint32_t kManifestMaxPgen = 1u << 20;
constexpr uint32_t kManifestMaxArrays = 65536;
constexpr uint32_t kManifestMaxRecords = 4096;
constexpr uint32_t kManifestStages = STK_STAGE_COUNT;

constexpr size_t kManifestArrayEntrySize = 136;
constexpr size_t kManifestStageEntrySize = 16;
constexpr size_t kManifestRecordSize = 128;
constexpr size_t kManifestHashesSize = 64;
constexpr size_t kManifestNameSize = 64;  // array file name, NUL-padded
constexpr size_t kManifestTextSize = 96;  // record text, NUL-padded printable ASCII

// Every scalar field of seed 2.5.  Zero means "not produced": the feature is disabled and a
// record says why.  Bounds are in the schema text (and enforced by reader and writer).
struct ManifestFields {
    uint32_t abi_flags = 0;  // kAbiFma | kAbiFtz
    uint8_t seed_digest[32] = {};
    struct {
        uint32_t mode = 0;            // 0 disabled, 1 fst certified, 2 fst uncertified, 3 ext wrapper
        uint32_t l_tok = 0;           // L_tok: longest piece in bytes
        uint32_t s_norm = 0;          // S_norm: pieces kept after normalisation
        uint32_t l_norm = 0;          // L_norm: longest kept piece after normalisation, bytes
        uint32_t vocab_size = 0;      // ids are < vocab_size (P_gen ids too)
        uint32_t unicode_policy = 0;  // 0 none, 1 byte-level, 2 sentencepiece, 3 raw utf-8
        uint8_t sp_cert_digest[32] = {};
    } tokenizer;
    struct {
        uint32_t r = 0;
        double tau = 0, whitening_eps = 0, clip_c = 0;
    } prf;
    struct {
        double beta_floor = 0;
        uint8_t lambda_star_digest[32] = {};
    } denominator;
    struct {
        uint64_t c = 0;
        uint32_t d = 0, b = 0, s = 0, l_cuckoo = 0;
        uint64_t q = 0;
        double tau_low = 0, tau_high = 0;
    } linear;
    struct {
        uint32_t mode = 0;  // 0 disabled, 1 SOS, 2 ARMA
        uint32_t p = 0, q = 0, l = 0, t_phi = 0, k = 0;
        double pole_radius_min = 0;
    } memory;
    struct {
        uint32_t p = 0, k_max = 0, r_v = 0;
    } overlays;
    struct {
        double gamma_ccr_target = 0, m_target = 0;
        uint32_t norm_def = 0;  // 0 none, 1 l2, 2 frobenius, 3 spectral
    } ccr_cert;
    struct {
        uint32_t k = 0, w = 0, proj_rows = 0, proj_cols = 0;
        uint8_t proj_digest[32] = {};
        double beta_min = 0, beta_max = 0;
        uint32_t guard_margin_policy = 0, guard_eps_row_policy = 0;
        double store_load_max = 0;
        uint32_t store_stash_max = 0, store_kick_max = 0;
    } bridge;
    struct {
        uint32_t a_max = 0, a_cap = 0, h_sel = 0, h_roll = 0;
        double c_puct = 0, epsilon = 0, vloss = 0;
    } search;
    struct {
        double lambda_hat = 0, t_rb_ms = 0, slack = 0, margin = 0;
    } capacity;
    struct {
        uint8_t mphf_salt_digest[32] = {}, key_salt_digest[32] = {};
    } salts;
};

// The runtime block (docs/format.md, "Runtime block"): present only in a generation of the
// faithful profile (`stk convert --profile faithful`), which stores the second schema digest
// (manifest_schema_sha256(true)); a default-profile manifest has no block and the first digest, so
// its bytes are what they were before the block existed.  Everything a forward over the model's
// own weights needs beyond the arrays: the fixed-state attention (sinks + window), and the
// ModelConfig fields the families differ in.  Strings (model_type, activation, router) are ASCII,
// NUL-padded in 32 bytes.
struct ManifestRuntime {
    uint32_t profile = 0;  // 1 faithful
    uint32_t sinks = 0, window = 0;
    uint32_t kv_dtype = 0;      // the KV ring's element type Sera keeps (DType: 2 f32)
    uint32_t weight_dtype = 0;  // matrices other than the FFN's (9 bf16)
    uint32_t ffn_dtype = 0;     // FFN and expert matrices: 9 bf16, 5 i8 (.lwt int8, one scale per matrix)
    uint8_t model_type[32] = {};
    uint32_t n_layers = 0, d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    uint64_t vocab_size = 0, ffn_dim = 0;
    uint32_t ffn_kind = 0;  // 0 plain, 1 gated
    uint8_t activation[32] = {};
    uint32_t norm_kind = 0;  // 0 LayerNorm, 1 RMSNorm
    uint32_t norms_per_layer = 0, post_norms = 0, qk_norm = 0, norm_bias = 0;
    double norm_eps = 0, norm_offset = 0;
    double emb_multiplier = 0, residual_multiplier = 0, logit_scale = 0;
    double score_scale = 0;  // the attention logits' scale (1/sqrt(head_dim) or the model's own)
    double attn_softcap = 0, final_softcap = 0;
    uint32_t positions = 0;  // 0 none, 1 learned, 2 rope, 3 alibi
    uint32_t rotary_dim = 0, rope_pairs = 0, rope_interleaved = 0;
    double rope_theta = 0, rope_local_theta = 0, rope_attn_factor = 0, alibi_scale = 0;
    // The rope_scaling the global table applies (rope_inv_freq.bin holds the result).
    uint8_t rope_scaling_type[32] = {};
    double rope_scaling_factor = 0, rope_low_freq_factor = 0, rope_high_freq_factor = 0, rope_beta_fast = 0, rope_beta_slow = 0;
    uint64_t rope_original_max = 0, max_positions = 0;
    uint32_t rope_yarn_truncate = 0;
    uint32_t pos_offset = 0, sliding_window = 0, parallel_attn = 0, tied_embeddings = 0, emb_norm = 0;
    uint32_t qkv_bias = 0, o_bias = 0, mlp_bias = 0, lm_head_bias = 0, attn_sinks = 0;
    uint32_t n_experts = 0, top_k = 0;
    uint64_t moe_ffn_dim = 0, shared_expert_ffn_dim = 0;
    uint32_t shared_expert_gate = 0, norm_topk_prob = 0;
    uint8_t router[32] = {};
    uint32_t first_moe_layer = 0, moe_layer_step = 0, n_group = 0, topk_group = 0, expert_bias = 0, router_bias = 0;
    double routed_scaling = 0, swiglu_limit = 0, gated_up_offset = 0;
    uint32_t mla = 0, mla_rope_interleaved = 0, q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0,
             v_head_dim = 0;
    double mla_rope_gain = 0;
    // Appended (issue 37): the retention policy a sequence opened on this generation keeps by
    // default (lm::Policy: 0 window, 1 tova, 2 h2o, 3 tova-head) and H2O's protected recent
    // positions (0: window / 2; else < window; 0 for the other policies).
    uint32_t policy = 0, recent = 0;
};
constexpr uint32_t kRuntimePolicyH2o = 2, kRuntimePolicyLast = 3;  // STK_SEQ_POLICY_H2O, _TOVA_HEAD
// The retention fields' rule, one place for a job's parameters and the manifest's reader: policy
// 0..3 (STK_SEQ_POLICY_*), recent only with h2o and fewer than the window.  Empty when they hold,
// else why not.
std::string runtime_policy_problem(uint32_t policy, uint32_t recent, uint32_t window);
// One entry per layer after the runtime block's fields (16 bytes, docs/format.md).
struct RuntimeLayer {
    uint32_t kind = 0;          // 0 full attention, 1 sliding window
    uint32_t model_window = 0;  // sliding: the model's own window (0 for full layers)
    uint32_t moe = 0;           // 1: the FFN routes through experts
    uint32_t rope_table = 0;    // row of rope_inv_freq.bin this layer rotates with
};
constexpr uint32_t kRuntimeProfileFaithful = 1;
constexpr uint32_t kRuntimeMaxLayers = 1024;
constexpr size_t kRuntimeLayerSize = 16;

// One array of the generation: the file arrays/<name> and the header it must carry.
struct ManifestArray {
    char name[kManifestNameSize] = {};  // [A-Za-z0-9._-]+, NUL-padded
    uint16_t stage = 0;                 // stk_stage that wrote it (1..8)
    uint16_t dtype = 0;
    uint16_t rank = 0;
    uint32_t flags = 0;
    uint32_t crc32c = 0;
    uint64_t dims[5] = {1, 1, 1, 1, 1};
    uint64_t byte_len = 0;
    uint64_t sha256_low64 = 0;
};

enum StageState : uint16_t {
    kStagePending = 0,         // runs after the manifest is written (check)
    kStageRan = 1,             // ran, feature enabled
    kStageNotImplemented = 2,  // does not exist yet: wrote nothing, feature disabled
    kStageDisabled = 3,        // ran, disabled its feature by policy (a record says why)
    kStageFailed = 4,          // failed, feature disabled (a record says why)
};

struct ManifestStage {
    uint16_t state = kStagePending;
    uint32_t crc32c = 0;
    uint64_t sha256_low64 = 0;
};

enum RecordKind : uint16_t {
    kRecordFeatureDisabled = 1,
    kRecordInvariantPass = 2,
    kRecordInvariantFail = 3,
    kRecordNote = 4,
};

// Features a record can name (seed 17.3: a missing optional array disables its module).
enum Feature : uint32_t {
    kFeatureNone = 0,
    kFeatureTokenizerFst = 1,
    kFeaturePrf = 2,
    kFeatureOverlays = 3,
    kFeatureLinear = 4,
    kFeatureMphfCuckoo = 5,
    kFeatureMemory = 6,
    kFeatureBridge = 7,
    kFeatureO0Route = 8,
    kFeatureMax = 8,
};

struct ManifestRecord {
    uint16_t stage = 0;                 // stk_stage 1..10
    uint16_t kind = 0;                  // RecordKind
    uint32_t feature = 0;               // Feature
    uint32_t status = 0;                // the stk_status that caused it (0 for a pass)
    double value = 0;                   // measured value (finite)
    double bound = 0;                   // the bound it was held to (finite)
    char text[kManifestTextSize] = {};  // printable ASCII, NUL-padded
};

// What a writer publishes.  Pointers are borrowed for the duration of the call.
struct ManifestInput {
    const ManifestFields *fields = nullptr;
    const uint32_t *p_gen = nullptr;
    uint32_t n_pgen = 0;
    const ManifestArray *arrays = nullptr;
    uint32_t n_arrays = 0;
    ManifestStage stages[kManifestStages];
    const ManifestRecord *records = nullptr;
    uint32_t n_records = 0;
    uint8_t prev_hash[32] = {};  // curr_hash of the generation this one replaces; zeros for the first
    // The faithful profile's runtime block (null: none, the default profile) and its n_layers
    // per-layer entries.
    const ManifestRuntime *runtime = nullptr;
    const RuntimeLayer *runtime_layers = nullptr;
};

// A decoded, validated manifest.
struct Manifest {
    ManifestFields fields;
    std::vector<uint32_t> p_gen;
    std::vector<ManifestArray> arrays;
    ManifestStage stages[kManifestStages];
    std::vector<ManifestRecord> records;
    uint8_t prev_hash[32] = {};
    uint8_t curr_hash[32] = {};
    uint8_t schema_sha256[32] = {};
    bool has_runtime = false;  // the faithful profile's block (schema digest 2)
    ManifestRuntime runtime;
    std::vector<RuntimeLayer> runtime_layers;
};

// What stages fill while a job runs (lives inside the Job, so inside the arena); manifest_emit
// turns it into the manifest.  Fields not produced stay zero and their feature is recorded
// disabled.
constexpr uint32_t kMaxDraftRecords = 128;
struct ManifestDraft {
    ManifestFields fields;
    const uint32_t *p_gen = nullptr;  // P_gen ids (arena memory of the tokenizer stage)
    uint32_t n_pgen = 0;
    uint64_t master_seed = 0;    // the PRNG master seed all streams derive from (10.4)
    uint8_t prev_hash[32] = {};  // set by a publisher that replaces a generation
    ManifestRecord records[kMaxDraftRecords];
    uint32_t n_records = 0;
    bool has_runtime = false;  // the faithful profile filled the runtime block
    ManifestRuntime runtime;
    RuntimeLayer runtime_layers[kRuntimeMaxLayers];
};

// Append a record (a text over 95 printable characters is cut at a word boundary and ends in
// "...", never inside a number; beyond kMaxDraftRecords the
// last slot says how many were dropped).
void draft_add_record(ManifestDraft &d, stk_stage stage, RecordKind kind, Feature feature, stk_status status, double value,
                      double bound, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

// The canonical schema text and its SHA-256 (the value stored as schema_sha256); with_runtime:
// the schema of a manifest holding the runtime block (the first text with the block's lines
// inserted before the hashes).
const std::string &manifest_schema_text(bool with_runtime = false);
const uint8_t *manifest_schema_sha256(bool with_runtime = false);

// Byte size of the fixed part and of a whole manifest with these counts (checked arithmetic);
// runtime_layers: with a runtime block of that many layers (-1: none).
size_t manifest_fixed_size();
size_t manifest_runtime_fixed_size();
uint64_t manifest_total_size(uint64_t n_pgen, uint64_t n_arrays, uint64_t n_records, int64_t runtime_layers = -1);

// Encode to bytes (tests, fuzz seeds) / write write-once to `path` (via OutputFile, streamed).
// Both validate the input with the reader's rules first (STK_E_INVALID_ARGUMENT naming the
// field): a writer never publishes what a reader would refuse.  write_manifest returns curr_hash.
std::vector<uint8_t> encode_manifest(const ManifestInput &in);
void write_manifest(const std::string &path, const ManifestInput &in, uint8_t curr_hash_out[32]);

// Decode and validate every byte: magic, endian, schema digest (STK_E_SCHEMA), counts against
// the file length, every scalar bound, every table entry, and curr_hash (STK_E_CHECKSUM).
// Errors read "<file>: offset N: ..." (verify parses the offset).
Manifest decode_manifest(const uint8_t *data, uint64_t size, const std::string &file);
Manifest read_manifest(const std::string &path);

// A generation chain: `next` must name `prev` as the one it replaces (STK_E_CHECKSUM otherwise).
void check_chain(const Manifest &prev, const Manifest &next);

// ManifestArray from an array header (the same fields, name and stage added).
struct ArrayHeader;
ManifestArray manifest_array_from_header(const char *name, uint16_t stage, const ArrayHeader &h);

// True if `name` is a valid array file name ([A-Za-z0-9._-], 1..63 chars, not "." or "..").
bool valid_array_name(const char *name, size_t len);

std::string hex32(const uint8_t d[32]);

}  // namespace stk
