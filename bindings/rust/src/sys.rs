//! Raw declarations of `include/stk/stk.h`, one for one.  Names, types and values follow the
//! header exactly (C enums as `c_uint`, as bindgen spells them for non-negative enums with GCC
//! and Clang); `tests/header.rs` parses the header and checks every constant here against it, and
//! the layout assertions below pin the structs on 64-bit targets.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_int, c_uint, c_void};

pub const STK_VERSION_MAJOR: u32 = 0;
pub const STK_VERSION_MINOR: u32 = 1;
pub const STK_VERSION_PATCH: u32 = 0;
pub const STK_VERSION_NUMBER: u32 = STK_VERSION_MAJOR * 10000 + STK_VERSION_MINOR * 100 + STK_VERSION_PATCH;
pub const STK_VERSION_STRING: &str = "0.1.0";

pub type stk_status = c_uint;
pub const STK_OK: stk_status = 0;
pub const STK_E_INVALID_ARGUMENT: stk_status = 1;
pub const STK_E_STRUCT_SIZE: stk_status = 2;
pub const STK_E_ARENA_TOO_SMALL: stk_status = 3;
pub const STK_E_NOT_IMPLEMENTED: stk_status = 4;
pub const STK_E_STAGE_ORDER: stk_status = 5;
pub const STK_E_CANCELLED: stk_status = 6;
pub const STK_E_IO: stk_status = 10;
pub const STK_E_NOT_FOUND: stk_status = 11;
pub const STK_E_OUTPUT_EXISTS: stk_status = 12;
pub const STK_E_TRUNCATED: stk_status = 20;
pub const STK_E_BAD_MAGIC: stk_status = 21;
pub const STK_E_BAD_DTYPE: stk_status = 22;
pub const STK_E_BAD_RANK: stk_status = 23;
pub const STK_E_DIMS_OVERFLOW: stk_status = 24;
pub const STK_E_SIZE_MISMATCH: stk_status = 25;
pub const STK_E_MISALIGNED: stk_status = 26;
pub const STK_E_CHECKSUM: stk_status = 27;
pub const STK_E_MISSING_ARRAY: stk_status = 28;
pub const STK_E_SCHEMA: stk_status = 29;
pub const STK_E_BAD_HEADER: stk_status = 30;
pub const STK_E_CORRUPT: stk_status = 31;
pub const STK_E_UNSUPPORTED: stk_status = 40;
pub const STK_E_UNSAFE_PICKLE: stk_status = 41;
pub const STK_E_LFS_POINTER: stk_status = 42;
pub const STK_E_UNKNOWN_MODEL: stk_status = 43;
pub const STK_E_BAD_JSON: stk_status = 44;
pub const STK_E_NONFINITE: stk_status = 45;
pub const STK_E_PARAM_COUNT: stk_status = 46;
pub const STK_E_SP_REJECTED: stk_status = 60;
pub const STK_E_MPHF_EXHAUSTED: stk_status = 61;
pub const STK_E_TABLE_FULL: stk_status = 62;
pub const STK_E_KEY_NOT_FOUND: stk_status = 63;
pub const STK_E_NOMEM: stk_status = 90;
pub const STK_E_INTERNAL: stk_status = 99;

pub type stk_stage = c_uint;
pub const STK_STAGE_PARSE_TENSORS: stk_stage = 1;
pub const STK_STAGE_TOKENIZER: stk_stage = 2;
pub const STK_STAGE_PRF: stk_stage = 3;
pub const STK_STAGE_OVERLAYS: stk_stage = 4;
pub const STK_STAGE_FFN_COLLAPSE: stk_stage = 5;
pub const STK_STAGE_MPHF_CUCKOO: stk_stage = 6;
pub const STK_STAGE_MEMORY_FIT: stk_stage = 7;
pub const STK_STAGE_BRIDGE_INIT: stk_stage = 8;
pub const STK_STAGE_MANIFEST_EMIT: stk_stage = 9;
pub const STK_STAGE_CHECK: stk_stage = 10;
pub const STK_STAGE_COUNT: u32 = 10;

pub const STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER: u32 = 0x1;
pub const STK_JOB_ALLOW_NONFINITE: u32 = 0x2;
pub const STK_JOB_PUBLISH_ROOT: u32 = 0x4;
pub const STK_JOB_MEMORY_FIT_LSQ: u32 = 0x8;
pub const STK_JOB_PROFILE_FAITHFUL: u32 = 0x10;
pub const STK_JOB_FAITHFUL_FFN_INT8: u32 = 0x20;
pub const STK_JOB_FAITHFUL_FFN_Q4_0: u32 = 0x40;
pub const STK_JOB_FAITHFUL_FFN_Q8_0: u32 = 0x80;
/// The faithful profile's FFN kept bf16 (without an FFN flag it writes Q8_0, issue 37).
pub const STK_JOB_FAITHFUL_FFN_BF16: u32 = 0x100;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct stk_job_params {
    pub struct_size: usize,
    pub in_dir: *const c_char,
    pub out_dir: *const c_char,
    pub r: u32,
    pub rv: u32,
    pub l_tok: u32,
    pub top_l: u32,
    pub threads: u32,
    pub flags: u32,
    /// Appended: a calibration statistics file, or null.
    pub calibration: *const c_char,
    /// Appended: the faithful profile's sinks and window (0: its defaults; 0 outside it).
    pub sinks: u32,
    pub window: u32,
    /// Appended (issue 37): the faithful profile's retention policy (STK_SEQ_POLICY_*) and h2o's
    /// recent count (0 outside it).
    pub policy: u32,
    pub recent: u32,
}

/// Opaque: lives inside the caller's arena; never constructed or moved from Rust.
#[repr(C)]
pub struct stk_job {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_verify_report {
    pub struct_size: usize,
    pub arrays_checked: u32,
    pub bytes_checked: u64,
    pub failed_file: [c_char; 256],
    pub failed_offset: u64,
}

/// One published array of an open generation (`stk_generation_array_at`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_array_view {
    pub struct_size: usize,
    pub name: [c_char; 64],
    pub stage: u32,
    pub dtype: u32,
    pub rank: u32,
    pub flags: u32,
    pub dims: [u64; 5],
    pub byte_len: u64,
    pub data: *const c_void,
}

/// Opaque handle of a mapped, verified generation.
#[repr(C)]
pub struct stk_generation {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type stk_lookup_kind = c_uint;
pub const STK_LOOKUP_TOKEN_ID: stk_lookup_kind = 1;
pub const STK_LOOKUP_TOKEN_BYTES: stk_lookup_kind = 2;
pub const STK_LOOKUP_LINEAR: stk_lookup_kind = 3;
pub const STK_LOOKUP_HUB: stk_lookup_kind = 4;

/// Element types of .lwt tensors (stk_lwt_dtype).
pub type stk_lwt_dtype = c_uint;
pub const STK_LWT_F32: stk_lwt_dtype = 1;
pub const STK_LWT_F16: stk_lwt_dtype = 2;
pub const STK_LWT_BF16: stk_lwt_dtype = 3;
pub const STK_LWT_I8: stk_lwt_dtype = 4;
pub const STK_LWT_U8: stk_lwt_dtype = 5;
pub const STK_LWT_I4: stk_lwt_dtype = 6;
pub const STK_LWT_U4: stk_lwt_dtype = 7;
pub const STK_LWT_FP4: stk_lwt_dtype = 8;
pub const STK_LWT_I2: stk_lwt_dtype = 9;
pub const STK_LWT_U2: stk_lwt_dtype = 10;
pub const STK_LWT_TERNARY: stk_lwt_dtype = 11;
pub const STK_LWT_BINARY: stk_lwt_dtype = 12;
pub const STK_LWT_Q4_0: stk_lwt_dtype = 13;
pub const STK_LWT_Q8_0: stk_lwt_dtype = 14;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_export_params {
    pub struct_size: usize,
    pub in_dir: *const c_char,
    pub out_path: *const c_char,
    pub dtype: u32,
    pub reserved: u32,
    pub threads: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_export_report {
    pub struct_size: usize,
    pub tensors: u64,
    pub parameters: u64,
    pub file_bytes: u64,
    pub data_crc32: u32,
    pub tied_lm_head: u32,
}

/// Opaque handle of a mapped, validated .lwt file.
#[repr(C)]
pub struct stk_lwt {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_lwt_tensor {
    pub struct_size: usize,
    pub name: [c_char; 128],
    pub dtype: u32,
    pub ndim: u32,
    pub shape: [u64; 8],
    pub n_elements: u64,
    pub size_bytes: u64,
    pub scale: f32,
    pub zero_point: u32,
    pub data: *const c_void,
    pub offset: u64,
}

// The experimental tier of stk.h (`#ifdef STK_EXPERIMENTAL`): may change in any release; the
// version check (lib.rs) keeps this crate and the library in step.

/// stk_tokenizer_mode.
pub type stk_tokenizer_mode = c_uint;
pub const STK_TOKENIZER_NOT_RUN: stk_tokenizer_mode = 0;
pub const STK_TOKENIZER_ABSENT: stk_tokenizer_mode = 1;
pub const STK_TOKENIZER_FST: stk_tokenizer_mode = 2;
pub const STK_TOKENIZER_FST_UNCERTIFIED: stk_tokenizer_mode = 3;
pub const STK_TOKENIZER_EXT: stk_tokenizer_mode = 4;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_job_info {
    pub struct_size: usize,
    pub tokenizer_mode: u32,
    pub tokenizer_certified_run: u32,
    pub vocab_size: u32,
    pub l_tok: u32,
    pub tokenizer_reason: [c_char; 512],
}

/// stk_stage_state.
pub type stk_stage_state = c_uint;
pub const STK_STAGE_STATE_PENDING: stk_stage_state = 0;
pub const STK_STAGE_STATE_DONE: stk_stage_state = 1;
pub const STK_STAGE_STATE_DISABLED: stk_stage_state = 2;
pub const STK_STAGE_STATE_NOT_IMPLEMENTED: stk_stage_state = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_stage_info {
    pub struct_size: usize,
    pub state: u32,
    pub crc32c: u32,
    pub sha256_low64: u64,
    pub reason: [c_char; 128],
}

// What the stk command reads (experimental): the plan, manifests, generations roots.

/// stk_plan_presence.
pub type stk_plan_presence = c_uint;
pub const STK_PLAN_WRITTEN: stk_plan_presence = 0;
pub const STK_PLAN_OPTIONAL: stk_plan_presence = 1;
pub const STK_PLAN_DISABLED: stk_plan_presence = 2;

/// stk_manifest_stage_state.
pub type stk_manifest_stage_state = c_uint;
pub const STK_MANIFEST_STAGE_PENDING: stk_manifest_stage_state = 0;
pub const STK_MANIFEST_STAGE_RAN: stk_manifest_stage_state = 1;
pub const STK_MANIFEST_STAGE_NOT_IMPLEMENTED: stk_manifest_stage_state = 2;
pub const STK_MANIFEST_STAGE_DISABLED: stk_manifest_stage_state = 3;
pub const STK_MANIFEST_STAGE_FAILED: stk_manifest_stage_state = 4;

/// stk_record_kind.
pub type stk_record_kind = c_uint;
pub const STK_RECORD_FEATURE_DISABLED: stk_record_kind = 1;
pub const STK_RECORD_INVARIANT_PASS: stk_record_kind = 2;
pub const STK_RECORD_INVARIANT_FAIL: stk_record_kind = 3;
pub const STK_RECORD_NOTE: stk_record_kind = 4;

pub const STK_REMOVE_FORCE: u32 = 0x1;
pub const STK_ARRAY_HEADER_BYTES: u32 = 128;

#[repr(C)]
pub struct stk_plan {
    _private: [u8; 0],
}
#[repr(C)]
pub struct stk_manifest {
    _private: [u8; 0],
}
#[repr(C)]
pub struct stk_generation_list {
    _private: [u8; 0],
}
#[repr(C)]
pub struct stk_gc_result {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_plan_info {
    pub struct_size: usize,
    pub r: u32,
    pub rv: u32,
    pub l_tok: u32,
    pub top_l: u32,
    pub threads: u32,
    pub n_layers: u32,
    pub n_tensors: u32,
    pub array_count: u32,
    pub n_params: u64,
    pub checkpoint_bytes: u64,
    pub arena_bytes: u64,
    pub largest_unit_f32_bytes: u64,
    pub expected_peak_bytes: u64,
    pub arrays_written: u64,
    pub arrays_optional: u64,
    pub arrays_disabled: u64,
    pub payload_exact_bytes: u64,
    pub payload_bound_bytes: u64,
    pub file_bytes: u64,
    pub model_type: [c_char; 32],
    pub format: [c_char; 32],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_plan_array {
    pub struct_size: usize,
    pub name: [c_char; 64],
    pub stage: u32,
    pub dtype: u32,
    pub rank: u32,
    pub exact: u32,
    pub presence: u32,
    pub reserved: u32,
    pub dims: [u64; 5],
    pub payload_bytes: u64,
    pub file_bytes: u64,
    pub reason: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_plan_stage {
    pub struct_size: usize,
    pub implemented: u32,
    pub arrays: u32,
    pub arena_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_manifest_info {
    pub struct_size: usize,
    pub curr_hash: [u8; 32],
    pub prev_hash: [u8; 32],
    pub schema_sha256: [u8; 32],
    pub array_count: u32,
    pub record_count: u32,
    pub pgen_count: u32,
    pub abi_flags: u32,
    pub payload_bytes: u64,
    pub tokenizer_mode: u32,
    pub tokenizer_l_tok: u32,
    pub tokenizer_s_norm: u32,
    pub tokenizer_l_norm: u32,
    pub tokenizer_vocab_size: u32,
    pub tokenizer_unicode_policy: u32,
    pub tokenizer_sp_cert_digest: [u8; 32],
    pub prf_r: u32,
    pub overlays_rv: u32,
    pub dir: *const c_char,
    pub manifest_path: *const c_char,
    pub published: u32,
    pub first: u32,
    /// Appended: 0 default profile, 1 faithful; its sinks, window, FFN dtype (9 bf16, 5 int8).
    pub profile: u32,
    pub runtime_sinks: u32,
    pub runtime_window: u32,
    pub runtime_ffn_dtype: u32,
    /// Appended (issue 37): the runtime block's retention policy and h2o's recent count.
    pub runtime_policy: u32,
    pub runtime_recent: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_manifest_array {
    pub struct_size: usize,
    pub name: [c_char; 64],
    pub stage: u32,
    pub dtype: u32,
    pub rank: u32,
    pub flags: u32,
    pub dims: [u64; 5],
    pub byte_len: u64,
    pub sha256_low64: u64,
    pub crc32c: u32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_manifest_stage {
    pub struct_size: usize,
    pub state: u32,
    pub crc32c: u32,
    pub sha256_low64: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_manifest_record {
    pub struct_size: usize,
    pub stage: u32,
    pub kind: u32,
    pub feature: u32,
    pub status: u32,
    pub value: f64,
    pub bound: f64,
    pub text: [c_char; 128],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_root_info {
    pub struct_size: usize,
    pub is_root: u32,
    pub needs_repair: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_generation_entry {
    pub struct_size: usize,
    pub name: [c_char; 64],
    pub seq: u64,
    pub readable: u32,
    pub current: u32,
    pub on_chain: u32,
    pub reserved: u32,
    pub curr_hash: [u8; 32],
    pub prev_hash: [u8; 32],
    pub arrays: u64,
    pub bytes: u64,
    pub error: *const c_char,
}

// What `stk inspect`, `tokenize`, `replay`, `export` and `--list-models` read (experimental tier).

/// stk_path_kind.
pub type stk_path_kind = c_uint;
pub const STK_PATH_OTHER: stk_path_kind = 0;
pub const STK_PATH_GENERATION: stk_path_kind = 1;
pub const STK_PATH_ROOT: stk_path_kind = 2;
pub const STK_PATH_LWT: stk_path_kind = 3;
pub const STK_PATH_ARRAY: stk_path_kind = 4;
pub const STK_PATH_GGUF: stk_path_kind = 5;

/// Opaque handle of a model description.
#[repr(C)]
pub struct stk_model {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_model_info {
    pub struct_size: usize,
    pub model_type: *const c_char,
    pub family: *const c_char,
    pub format: *const c_char,
    pub checkpoint_bytes: u64,
    pub n_layers: u32,
    pub d_model: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub rotary_dim: u32,
    pub vocab_size: u64,
    pub ffn_dim: u64,
    pub ffn_kind: *const c_char,
    pub activation: *const c_char,
    pub norm: *const c_char,
    pub norm_eps: f64,
    pub positions: *const c_char,
    pub rope: u32,
    pub tied_embeddings: u32,
    pub rope_theta: f64,
    pub rope_scaling: *const c_char,
    pub rope_scaling_factor: f64,
    pub max_positions: u64,
    pub n_experts: u32,
    pub top_k: u32,
    pub moe_ffn_dim: u64,
    pub shared_expert_ffn_dim: u64,
    pub router: *const c_char,
    pub parallel_attn: u32,
    pub n_tensors: u32,
    pub qkv_layout: *const c_char,
    pub n_params: u64,
    pub n_params_expected: u64,
    pub n_source_tensors: u32,
    pub n_buffers: u32,
    pub n_unmapped: u32,
    pub max_layer_f32_bytes: u64,
}

pub const STK_NO_LAYER: i32 = -1;
pub const STK_NO_EXPERT: i32 = -1;
pub const STK_SHARED_EXPERT: i32 = -2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_model_tensor {
    pub struct_size: usize,
    pub name: *const c_char,
    pub role: *const c_char,
    pub norm_slot: *const c_char,
    pub fused: *const c_char,
    pub dtype: *const c_char,
    pub layer: i32,
    pub expert: i32,
    pub rank: u32,
    pub source_rank: u32,
    pub shape: *const u64,
    pub source_shape: *const u64,
    pub parameter: u32,
    pub buffer: u32,
    pub transposed: u32,
    pub tied: u32,
    pub composed: u32,
    pub read_as: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_family_info {
    pub struct_size: usize,
    pub name: *const c_char,
    pub model_types: *const *const c_char,
    pub architectures: *const *const c_char,
    pub gguf_architectures: *const *const c_char,
    pub summary: *const c_char,
    pub fixture: *const c_char,
    pub roles: *const *const c_char,
}

/// stk_tokenize_kind.
pub type stk_tokenize_kind = c_uint;
pub const STK_TOKENIZE_BPE: stk_tokenize_kind = 1;
pub const STK_TOKENIZE_GREEDY: stk_tokenize_kind = 2;
pub const STK_TOKENIZE_ADD_SPECIAL: u32 = 0x1;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_tokenizer_params {
    pub struct_size: usize,
    pub path: *const c_char,
    pub kind: u32,
    pub l_tok: u32,
}

/// Opaque handle of a tokenizer.
#[repr(C)]
pub struct stk_tokenizer {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_tokenizer_info {
    pub struct_size: usize,
    pub source: *const c_char,
    pub kind: u32,
    pub vocab_size: u32,
    pub longest_piece: u32,
    pub l_tok: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_replay_params {
    pub struct_size: usize,
    pub prompt: *const c_char,
    pub prompt_len: usize,
    pub model_dir: *const c_char,
}

/// Opaque handle of a replay.
#[repr(C)]
pub struct stk_replay {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_replay_info {
    pub struct_size: usize,
    pub mode: *const c_char,
    pub n_tokens: u64,
    pub n_modules: u32,
    pub lookup_mismatches: u32,
    pub state_digest: *const c_char,
}

/// stk_replay_module_id.
pub type stk_replay_module_id = c_uint;
pub const STK_REPLAY_TOKEN: stk_replay_module_id = 0;
pub const STK_REPLAY_LINEAR: stk_replay_module_id = 1;
pub const STK_REPLAY_PRF: stk_replay_module_id = 2;
pub const STK_REPLAY_OVERLAYS: stk_replay_module_id = 3;
pub const STK_REPLAY_MEMORY: stk_replay_module_id = 4;
pub const STK_REPLAY_BRIDGE: stk_replay_module_id = 5;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_replay_module {
    pub struct_size: usize,
    pub name: *const c_char,
    pub enabled: u32,
    pub detail: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_replay_token {
    pub struct_size: usize,
    pub id: u32,
    pub round_trip: u32,
    pub bytes: *const c_char,
    pub bytes_len: usize,
    pub line: *const c_char,
    pub lin_unit: u32,
    pub lin_input: u32,
    pub lin_sign: u32,
    pub lin_base: u32,
    pub lin_delta: u32,
    pub lin_zero: u32,
    pub lin_probes: u32,
    pub prf_floored: u32,
    pub lin_norm: f64,
    pub prf_den0: f64,
    pub prf_feature_sum: f64,
    pub overlays_delta_norm: f64,
    pub mem_u: f64,
    pub mem_y: f64,
    pub hub_context: u32,
    pub hub_bits: u32,
    pub hub_outside: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_array_file_info {
    pub struct_size: usize,
    pub dtype: u32,
    pub rank: u32,
    pub dims: [u64; 5],
    pub byte_len: u64,
    pub header_bytes: u64,
    pub crc32c: u32,
    pub flags: u32,
    pub sha256_low64: u64,
}

pub const STK_LWT_OPEN_NO_CRC: u32 = 0x1;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct stk_lwt_header {
    pub struct_size: usize,
    pub version: u32,
    pub entry_bytes: u32,
    pub old_layout: u32,
    pub tied_lm_head: u32,
    pub model_type: *const c_char,
    pub dtype: *const c_char,
    pub tensor_count: u64,
    pub parameter_count: u64,
    pub data_bytes: u64,
    pub data_offset: u64,
    pub file_bytes: u64,
    pub data_crc32: u32,
    pub crc32_computed: u32,
    pub n_config: u32,
}

/// The reference runtime's shapes and buffer sizes (stk_refrun_get_info).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct stk_refrun_info {
    pub struct_size: usize,
    pub n_layers: u32,
    pub d_model: u32,
    pub d_v: u32,
    pub r: u32,
    pub r_v: u32,
    pub has_prf: u32,
    pub has_overlays: u32,
    pub has_linear: u32,
    pub has_linear_bias: u32,
    pub has_memory: u32,
    pub n_ffn_units: u32,
    pub memory_sections: u32,
    pub tau: f64,
    pub beta_floor: f64,
    pub whitening_eps: f64,
    pub prf_state_bytes: usize,
    pub prf_state_bytes_memory: usize,
    pub scratch_bytes: usize,
    pub ffn_index_bytes: usize,
    pub memory_state_bytes: usize,
    pub ffn_entries: u64,
}

pub const STK_PRF_MEMORY: u32 = 0x1;

// The LM runtime (experimental tier): weights, and sequences over sinks + a window ring.
pub const STK_LM_WEIGHTS_F32: u32 = 0;
pub const STK_LM_WEIGHTS_BF16: u32 = 1;

/// Opaque handle of the weights of the LM runtime (stk_lm_open).
#[repr(C)]
pub struct stk_lm {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque handle of one sequence's state inside the caller's arena (stk_seq_open).
#[repr(C)]
pub struct stk_seq {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct stk_seq_params {
    pub struct_size: usize,
    pub sinks: u32,
    pub window: u32,
    pub threads: u32,
    pub max_batch: u32,
    pub policy: u32,
    pub recent: u32,
}

/// What a probe callback receives (stk.h `stk_probe_data`, experimental tier).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct stk_probe_data {
    pub struct_size: usize,
    pub layer: u32,
    pub point: u32,
    pub position: u64,
    pub n_tokens: u64,
    pub width: u64,
    pub data: *mut f32,
    pub writable: u32,
    pub flags: u32,
    pub heads: u32,
    pub head_width: u32,
    pub rot_offset: u32,
    pub rot_pairs: u32,
}

/// stk.h `stk_probe_fn`.
pub type stk_probe_fn = Option<unsafe extern "C" fn(user: *mut c_void, d: *const stk_probe_data) -> c_int>;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct stk_lm_info {
    pub struct_size: usize,
    pub vocab_size: u64,
    pub n_layers: u32,
    pub d_model: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub model_type: [c_char; 32],
    /// Appended (issue 37): 1 for a faithful generation, whose runtime block gives sinks, window,
    /// policy and recent (0 for a checkpoint); the FFN matrices' dtype code.
    pub generation: u32,
    pub sinks: u32,
    pub window: u32,
    pub policy: u32,
    pub recent: u32,
    pub ffn_dtype: u32,
}

extern "C" {
    pub fn stk_status_str(status: stk_status) -> *const c_char;
    pub fn stk_last_error() -> *const c_char;
    pub fn stk_version_number() -> u32;
    pub fn stk_version_string() -> *const c_char;

    pub fn stk_stage_name(stage: stk_stage) -> *const c_char;
    pub fn stk_job_arena_size(params: *const stk_job_params, out_bytes: *mut usize) -> stk_status;
    pub fn stk_open(
        params: *const stk_job_params,
        arena: *mut c_void,
        arena_bytes: usize,
        out_job: *mut *mut stk_job,
    ) -> stk_status;
    pub fn stk_stage_run(job: *mut stk_job, stage: stk_stage) -> stk_status;
    pub fn stk_stage_digest(
        job: *const stk_job,
        stage: stk_stage,
        out_crc32c: *mut u32,
        out_sha256_low64: *mut u64,
    ) -> stk_status;
    pub fn stk_close(job: *mut stk_job);
    pub fn stk_job_cancel(job: *mut stk_job);
    pub fn stk_job_generation_dir(job: *const stk_job, out_dir: *mut *const c_char) -> stk_status;
    pub fn stk_generation_remove(root: *const c_char, name: *const c_char) -> stk_status;

    pub fn stk_verify(out_dir: *const c_char, report: *mut stk_verify_report) -> stk_status;

    pub fn stk_generation_open(out_dir: *const c_char, out_gen: *mut *mut stk_generation) -> stk_status;
    pub fn stk_generation_close(gen: *mut stk_generation);
    pub fn stk_generation_dir(gen: *const stk_generation, out_dir: *mut *const c_char) -> stk_status;
    pub fn stk_generation_array_count(gen: *const stk_generation, out_count: *mut u32) -> stk_status;
    pub fn stk_generation_array_at(gen: *const stk_generation, index: u32, out: *mut stk_array_view) -> stk_status;
    pub fn stk_generation_array_find(
        gen: *const stk_generation,
        name: *const c_char,
        out: *mut stk_array_view,
    ) -> stk_status;
    pub fn stk_lookup(
        gen: *const stk_generation,
        kind: stk_lookup_kind,
        key: *const c_void,
        key_len: usize,
        value: *mut c_void,
        value_cap: usize,
        value_len: *mut usize,
    ) -> stk_status;
    pub fn stk_export_lwt(params: *const stk_export_params, report: *mut stk_export_report) -> stk_status;
    pub fn stk_lwt_open(path: *const c_char, out_lwt: *mut *mut stk_lwt) -> stk_status;
    pub fn stk_lwt_close(lwt: *mut stk_lwt);
    pub fn stk_lwt_info(
        lwt: *const stk_lwt,
        out_tensor_count: *mut u32,
        out_header_json: *mut *const c_char,
        out_header_len: *mut usize,
    ) -> stk_status;
    pub fn stk_lwt_tensor_at(lwt: *const stk_lwt, index: u32, out: *mut stk_lwt_tensor) -> stk_status;
    pub fn stk_lwt_find(lwt: *const stk_lwt, name: *const c_char, out: *mut stk_lwt_tensor) -> stk_status;
    pub fn stk_lwt_read_f32(lwt: *const stk_lwt, name: *const c_char, out: *mut f32, out_count: usize) -> stk_status;
    // Experimental tier.
    pub fn stk_job_get_info(job: *const stk_job, out: *mut stk_job_info) -> stk_status;
    pub fn stk_stage_get_info(job: *const stk_job, stage: stk_stage, out: *mut stk_stage_info) -> stk_status;
    pub fn stk_job_progress(
        job: *const stk_job,
        out_done: *mut u64,
        out_total: *mut u64,
        out_unit: *mut *const c_char,
    ) -> stk_status;
    pub fn stk_job_warning_count(job: *const stk_job, out_count: *mut u32) -> stk_status;
    pub fn stk_job_warning_at(
        job: *const stk_job,
        index: u32,
        out: *mut c_char,
        out_cap: usize,
        out_len: *mut usize,
    ) -> stk_status;
    // Experimental tier: what the stk command reads.
    pub fn stk_dtype_name(dtype: u32) -> *const c_char;
    pub fn stk_model_gguf_path(path: *const c_char, out: *mut c_char, out_cap: usize, out_len: *mut usize) -> stk_status;
    pub fn stk_plan_open(params: *const stk_job_params, out_plan: *mut *mut stk_plan) -> stk_status;
    pub fn stk_plan_close(plan: *mut stk_plan);
    pub fn stk_plan_get_info(plan: *const stk_plan, out: *mut stk_plan_info) -> stk_status;
    pub fn stk_plan_array_at(plan: *const stk_plan, index: u32, out: *mut stk_plan_array) -> stk_status;
    pub fn stk_plan_stage_info(plan: *const stk_plan, stage: stk_stage, out: *mut stk_plan_stage) -> stk_status;
    pub fn stk_manifest_open(path: *const c_char, out_manifest: *mut *mut stk_manifest) -> stk_status;
    pub fn stk_manifest_close(manifest: *mut stk_manifest);
    pub fn stk_manifest_get_info(manifest: *const stk_manifest, out: *mut stk_manifest_info) -> stk_status;
    pub fn stk_manifest_array_at(manifest: *const stk_manifest, index: u32, out: *mut stk_manifest_array) -> stk_status;
    pub fn stk_manifest_record_at(manifest: *const stk_manifest, index: u32, out: *mut stk_manifest_record) -> stk_status;
    pub fn stk_manifest_stage_at(manifest: *const stk_manifest, stage: stk_stage, out: *mut stk_manifest_stage) -> stk_status;
    pub fn stk_root_probe(path: *const c_char, out: *mut stk_root_info) -> stk_status;
    pub fn stk_root_list(root: *const c_char, out_list: *mut *mut stk_generation_list) -> stk_status;
    pub fn stk_root_chain(root: *const c_char, out_list: *mut *mut stk_generation_list) -> stk_status;
    pub fn stk_generation_list_count(list: *const stk_generation_list, out_count: *mut u32) -> stk_status;
    pub fn stk_generation_list_at(list: *const stk_generation_list, index: u32, out: *mut stk_generation_entry) -> stk_status;
    pub fn stk_generation_list_close(list: *mut stk_generation_list);
    pub fn stk_root_gc(root: *const c_char, keep: u32, out_result: *mut *mut stk_gc_result) -> stk_status;
    pub fn stk_root_remove(
        root: *const c_char,
        name: *const c_char,
        flags: u32,
        out_result: *mut *mut stk_gc_result,
    ) -> stk_status;
    pub fn stk_gc_result_counts(
        result: *const stk_gc_result,
        out_removed: *mut u32,
        out_in_use: *mut u32,
        out_leftovers: *mut u32,
    ) -> stk_status;
    pub fn stk_gc_result_removed(result: *const stk_gc_result, index: u32) -> *const c_char;
    pub fn stk_gc_result_in_use(result: *const stk_gc_result, index: u32) -> *const c_char;
    pub fn stk_gc_result_close(result: *mut stk_gc_result);
    pub fn stk_locate_damage(
        root: *const c_char,
        file: *const c_char,
        out_offset: *mut u64,
        witness: *mut c_char,
        witness_cap: usize,
    ) -> stk_status;
    pub fn stk_path_kind_of(path: *const c_char, out_kind: *mut u32) -> stk_status;
    pub fn stk_lwt_dtype_name(lwt_dtype: u32) -> *const c_char;
    pub fn stk_lwt_dtype_is_float(lwt_dtype: u32) -> c_int;
    pub fn stk_lwt_dtype_parse(name: *const c_char, out_lwt_dtype: *mut u32) -> stk_status;
    pub fn stk_crc32c(crc: u32, data: *const c_void, len: usize) -> u32;
    pub fn stk_moment_gram(a: *const f32, rows: usize, n: usize, acc: *mut f64, threads: u32) -> stk_status;
    pub fn stk_moment_cross(a: *const f32, b: *const f32, rows: usize, n: usize, m: usize, acc: *mut f64, threads: u32) -> stk_status;
    pub fn stk_moment_causal_pairs(
        x: *const f32,
        q: *const f32,
        k: *const f32,
        rows: usize,
        d: usize,
        dq: usize,
        scale: f64,
        weights: *const f64,
        acc_m: *mut f64,
        acc_b: *mut f64,
        acc_l: *mut f64,
        threads: u32,
    ) -> stk_status;
    pub fn stk_model_open(path: *const c_char, out_model: *mut *mut stk_model) -> stk_status;
    pub fn stk_model_close(model: *mut stk_model);
    pub fn stk_model_get_info(model: *const stk_model, out: *mut stk_model_info) -> stk_status;
    pub fn stk_model_tensor_at(model: *const stk_model, index: u32, out: *mut stk_model_tensor) -> stk_status;
    pub fn stk_family_count() -> u32;
    pub fn stk_family_at(index: u32, out: *mut stk_family_info) -> stk_status;
    pub fn stk_tokenizer_open(params: *const stk_tokenizer_params, out_tok: *mut *mut stk_tokenizer) -> stk_status;
    pub fn stk_tokenizer_close(tok: *mut stk_tokenizer);
    pub fn stk_tokenizer_get_info(tok: *const stk_tokenizer, out: *mut stk_tokenizer_info) -> stk_status;
    pub fn stk_tokenizer_encode(
        tok: *mut stk_tokenizer,
        text: *const c_char,
        len: usize,
        flags: u32,
        out_ids: *mut *const u32,
        out_count: *mut usize,
    ) -> stk_status;
    pub fn stk_tokenizer_decode(
        tok: *mut stk_tokenizer,
        ids: *const u32,
        count: usize,
        out_text: *mut *const c_char,
        out_len: *mut usize,
    ) -> stk_status;
    pub fn stk_tokenizer_piece(
        tok: *const stk_tokenizer,
        id: u32,
        out_bytes: *mut *const c_char,
        out_len: *mut usize,
    ) -> stk_status;
    pub fn stk_replay_run(
        gen: *const stk_generation,
        params: *const stk_replay_params,
        out_replay: *mut *mut stk_replay,
    ) -> stk_status;
    pub fn stk_replay_close(replay: *mut stk_replay);
    pub fn stk_replay_get_info(replay: *const stk_replay, out: *mut stk_replay_info) -> stk_status;
    pub fn stk_replay_module_at(replay: *const stk_replay, index: u32, out: *mut stk_replay_module) -> stk_status;
    pub fn stk_replay_token_at(replay: *const stk_replay, index: u64, out: *mut stk_replay_token) -> stk_status;
    pub fn stk_array_file_verify(path: *const c_char, out: *mut stk_array_file_info) -> stk_status;
    pub fn stk_lwt_open_flags(path: *const c_char, flags: u32, out_lwt: *mut *mut stk_lwt) -> stk_status;
    pub fn stk_lwt_get_header(lwt: *const stk_lwt, out: *mut stk_lwt_header) -> stk_status;
    pub fn stk_lwt_config_at(
        lwt: *const stk_lwt,
        index: u32,
        out_key: *mut *const c_char,
        out_value: *mut u64,
    ) -> stk_status;
    pub fn stk_refrun_get_info(gen: *const stk_generation, out: *mut stk_refrun_info) -> stk_status;
    pub fn stk_prf_reset(gen: *const stk_generation, layer: u32, flags: u32, state: *mut c_void, state_bytes: usize)
        -> stk_status;
    pub fn stk_prf_add_key(
        gen: *const stk_generation,
        layer: u32,
        state: *mut c_void,
        state_bytes: usize,
        x_key: *const f32,
        v: *const f32,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_prf_read(
        gen: *const stk_generation,
        layer: u32,
        state: *const c_void,
        state_bytes: usize,
        x_query: *const f32,
        out: *mut f32,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_prf_read_parts(
        gen: *const stk_generation,
        layer: u32,
        state: *const c_void,
        state_bytes: usize,
        x_query: *const f32,
        out: *mut f32,
        out_log_den: *mut f64,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_prf_run(
        gen: *const stk_generation,
        layer: u32,
        state: *mut c_void,
        state_bytes: usize,
        n_tokens: u64,
        x: *const f32,
        v: *const f32,
        out: *mut f32,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_overlay_delta(
        gen: *const stk_generation,
        layer: u32,
        x_query: *const f32,
        out: *mut f32,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_overlay_run(
        gen: *const stk_generation,
        layer: u32,
        n_tokens: u64,
        x_query: *const f32,
        out: *mut f32,
        scratch: *mut c_void,
        scratch_bytes: usize,
    ) -> stk_status;
    pub fn stk_ffn_index_bytes(gen: *const stk_generation, out_bytes: *mut usize) -> stk_status;
    pub fn stk_ffn_index_build(gen: *const stk_generation, index: *mut c_void, index_bytes: usize) -> stk_status;
    pub fn stk_ffn_apply(
        gen: *const stk_generation,
        index: *const c_void,
        index_bytes: usize,
        unit: u32,
        x: *const f32,
        y: *mut f32,
    ) -> stk_status;
    pub fn stk_ffn_apply_batch(
        gen: *const stk_generation,
        index: *const c_void,
        index_bytes: usize,
        unit: u32,
        n_tokens: u64,
        x: *const f32,
        y: *mut f32,
    ) -> stk_status;
    pub fn stk_ffn_bias(gen: *const stk_generation, out: *mut f32, n: usize) -> stk_status;
    pub fn stk_memory_reset(gen: *const stk_generation, state: *mut c_void, state_bytes: usize) -> stk_status;
    pub fn stk_memory_step(gen: *const stk_generation, state: *mut c_void, state_bytes: usize, u: f32, y: *mut f32)
        -> stk_status;
    pub fn stk_lm_open(path: *const c_char, flags: u32, out: *mut *mut stk_lm) -> stk_status;
    pub fn stk_lm_close(lm: *mut stk_lm);
    pub fn stk_lm_get_info(lm: *const stk_lm, out: *mut stk_lm_info) -> stk_status;
    pub fn stk_seq_arena_size(lm: *const stk_lm, params: *const stk_seq_params, out_bytes: *mut usize) -> stk_status;
    pub fn stk_seq_open(
        lm: *const stk_lm,
        params: *const stk_seq_params,
        arena: *mut c_void,
        arena_bytes: usize,
        out: *mut *mut stk_seq,
    ) -> stk_status;
    pub fn stk_seq_feed(seq: *mut stk_seq, tokens: *const i32, n: usize, all_logits: *mut f32) -> stk_status;
    pub fn stk_seq_logits(seq: *const stk_seq, out: *mut *const f32, out_vocab: *mut usize, out_position: *mut u64)
        -> stk_status;
    pub fn stk_seq_reset(seq: *mut stk_seq) -> stk_status;
    pub fn stk_seq_kept(
        seq: *const stk_seq,
        layer: u32,
        kv_head: u32,
        positions: *mut u64,
        capacity: usize,
        out_n: *mut usize,
    ) -> stk_status;
    pub fn stk_seq_close(seq: *mut stk_seq);
    pub fn stk_seq_set_probe(seq: *mut stk_seq, points: u32, f: stk_probe_fn, user: *mut c_void) -> stk_status;
    pub fn stk_seq_attn_project(seq: *mut stk_seq, layer: u32, x: *const f32, n: u64, y: *mut f32) -> stk_status;
}

// The C sizes on LP64 targets (x86_64, aarch64 Linux): a mismatch fails the build.  Field
// offsets are compared with the C compiler's in tests/header.rs.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<stk_job_params>() == 72);
    assert!(std::mem::size_of::<stk_verify_report>() == 288);
    assert!(std::mem::size_of::<stk_export_params>() == 40);
    assert!(std::mem::size_of::<stk_export_report>() == 40);
    assert!(std::mem::size_of::<stk_lwt_tensor>() == 248);
    assert!(std::mem::size_of::<stk_job_info>() == 536);
    assert!(std::mem::size_of::<stk_stage_info>() == 152);
    assert!(std::mem::size_of::<stk_model_info>() == 248);
    assert!(std::mem::size_of::<stk_model_tensor>() == 112);
    assert!(std::mem::size_of::<stk_family_info>() == 64);
    assert!(std::mem::size_of::<stk_tokenizer_params>() == 24);
    assert!(std::mem::size_of::<stk_tokenizer_info>() == 32);
    assert!(std::mem::size_of::<stk_replay_params>() == 32);
    assert!(std::mem::size_of::<stk_replay_info>() == 40);
    assert!(std::mem::size_of::<stk_replay_module>() == 32);
    assert!(std::mem::size_of::<stk_replay_token>() == 136);
    assert!(std::mem::size_of::<stk_array_file_info>() == 88);
    assert!(std::mem::size_of::<stk_lwt_header>() == 96);
    assert!(std::mem::size_of::<stk_refrun_info>() == 128);
    assert!(std::mem::size_of::<stk_seq_params>() == 32);
    assert!(std::mem::size_of::<stk_lm_info>() == 96);
};
