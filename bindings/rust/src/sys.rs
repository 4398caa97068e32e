//! Raw declarations of `include/stk/stk.h`, one for one.  Names, types and values follow the
//! header exactly (C enums as `c_uint`, as bindgen spells them for non-negative enums with GCC
//! and Clang); `tests/header.rs` parses the header and checks every constant here against it, and
//! the layout assertions below pin the structs on 64-bit targets.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_uint, c_void};

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
}

// The C sizes on LP64 targets (x86_64, aarch64 Linux): a mismatch fails the build.  Field
// offsets are compared with the C compiler's in tests/header.rs.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<stk_job_params>() == 48);
    assert!(std::mem::size_of::<stk_verify_report>() == 288);
    assert!(std::mem::size_of::<stk_export_params>() == 40);
    assert!(std::mem::size_of::<stk_export_report>() == 40);
    assert!(std::mem::size_of::<stk_lwt_tensor>() == 240);
    assert!(std::mem::size_of::<stk_job_info>() == 536);
    assert!(std::mem::size_of::<stk_stage_info>() == 152);
};
