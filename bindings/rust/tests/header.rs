// sys.rs against include/stk/stk.h itself: every enum value and macro, and (when a C compiler is
// at hand) the struct layouts as the C compiler sees them.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use stk::sys;

fn header_path() -> PathBuf {
    let inc = std::env::var_os("STK_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"));
    inc.join("stk/stk.h")
}

/// NAME -> value for every `NAME = 123,` enumerator and `#define NAME 123[u]` in the header.
fn header_constants() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(header_path()).expect("read stk.h (set STK_INCLUDE_DIR)");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.split("/*").next().unwrap().trim();
        let (name, value) = if let Some(rest) = line.strip_prefix("#define ") {
            let mut it = rest.split_whitespace();
            match (it.next(), it.next(), it.next()) {
                (Some(n), Some(v), None) => (n, v),
                _ => continue,
            }
        } else if let Some((n, v)) = line.split_once(" = ") {
            (n.trim(), v.trim_end_matches(','))
        } else {
            continue;
        };
        if !name.starts_with("STK_") {
            continue;
        }
        let v = value.trim_end_matches('u');
        let parsed = match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        };
        if let Ok(n) = parsed {
            out.insert(name.to_string(), n);
        }
    }
    out
}

#[test]
fn every_header_constant_matches_sys() {
    let ours: BTreeMap<&str, u64> = [
        ("STK_VERSION_MAJOR", sys::STK_VERSION_MAJOR as u64),
        ("STK_VERSION_MINOR", sys::STK_VERSION_MINOR as u64),
        ("STK_VERSION_PATCH", sys::STK_VERSION_PATCH as u64),
        ("STK_OK", sys::STK_OK as u64),
        ("STK_E_INVALID_ARGUMENT", sys::STK_E_INVALID_ARGUMENT as u64),
        ("STK_E_STRUCT_SIZE", sys::STK_E_STRUCT_SIZE as u64),
        ("STK_E_ARENA_TOO_SMALL", sys::STK_E_ARENA_TOO_SMALL as u64),
        ("STK_E_NOT_IMPLEMENTED", sys::STK_E_NOT_IMPLEMENTED as u64),
        ("STK_E_STAGE_ORDER", sys::STK_E_STAGE_ORDER as u64),
        ("STK_E_CANCELLED", sys::STK_E_CANCELLED as u64),
        ("STK_E_IO", sys::STK_E_IO as u64),
        ("STK_E_NOT_FOUND", sys::STK_E_NOT_FOUND as u64),
        ("STK_E_OUTPUT_EXISTS", sys::STK_E_OUTPUT_EXISTS as u64),
        ("STK_E_TRUNCATED", sys::STK_E_TRUNCATED as u64),
        ("STK_E_BAD_MAGIC", sys::STK_E_BAD_MAGIC as u64),
        ("STK_E_BAD_DTYPE", sys::STK_E_BAD_DTYPE as u64),
        ("STK_E_BAD_RANK", sys::STK_E_BAD_RANK as u64),
        ("STK_E_DIMS_OVERFLOW", sys::STK_E_DIMS_OVERFLOW as u64),
        ("STK_E_SIZE_MISMATCH", sys::STK_E_SIZE_MISMATCH as u64),
        ("STK_E_MISALIGNED", sys::STK_E_MISALIGNED as u64),
        ("STK_E_CHECKSUM", sys::STK_E_CHECKSUM as u64),
        ("STK_E_MISSING_ARRAY", sys::STK_E_MISSING_ARRAY as u64),
        ("STK_E_SCHEMA", sys::STK_E_SCHEMA as u64),
        ("STK_E_BAD_HEADER", sys::STK_E_BAD_HEADER as u64),
        ("STK_E_CORRUPT", sys::STK_E_CORRUPT as u64),
        ("STK_E_UNSUPPORTED", sys::STK_E_UNSUPPORTED as u64),
        ("STK_E_UNSAFE_PICKLE", sys::STK_E_UNSAFE_PICKLE as u64),
        ("STK_E_LFS_POINTER", sys::STK_E_LFS_POINTER as u64),
        ("STK_E_UNKNOWN_MODEL", sys::STK_E_UNKNOWN_MODEL as u64),
        ("STK_E_BAD_JSON", sys::STK_E_BAD_JSON as u64),
        ("STK_E_NONFINITE", sys::STK_E_NONFINITE as u64),
        ("STK_E_PARAM_COUNT", sys::STK_E_PARAM_COUNT as u64),
        ("STK_E_SP_REJECTED", sys::STK_E_SP_REJECTED as u64),
        ("STK_E_MPHF_EXHAUSTED", sys::STK_E_MPHF_EXHAUSTED as u64),
        ("STK_E_TABLE_FULL", sys::STK_E_TABLE_FULL as u64),
        ("STK_E_KEY_NOT_FOUND", sys::STK_E_KEY_NOT_FOUND as u64),
        ("STK_E_NOMEM", sys::STK_E_NOMEM as u64),
        ("STK_E_INTERNAL", sys::STK_E_INTERNAL as u64),
        ("STK_STAGE_PARSE_TENSORS", sys::STK_STAGE_PARSE_TENSORS as u64),
        ("STK_STAGE_TOKENIZER", sys::STK_STAGE_TOKENIZER as u64),
        ("STK_STAGE_PRF", sys::STK_STAGE_PRF as u64),
        ("STK_STAGE_OVERLAYS", sys::STK_STAGE_OVERLAYS as u64),
        ("STK_STAGE_FFN_COLLAPSE", sys::STK_STAGE_FFN_COLLAPSE as u64),
        ("STK_STAGE_MPHF_CUCKOO", sys::STK_STAGE_MPHF_CUCKOO as u64),
        ("STK_STAGE_MEMORY_FIT", sys::STK_STAGE_MEMORY_FIT as u64),
        ("STK_STAGE_BRIDGE_INIT", sys::STK_STAGE_BRIDGE_INIT as u64),
        ("STK_STAGE_MANIFEST_EMIT", sys::STK_STAGE_MANIFEST_EMIT as u64),
        ("STK_STAGE_CHECK", sys::STK_STAGE_CHECK as u64),
        ("STK_STAGE_COUNT", sys::STK_STAGE_COUNT as u64),
        ("STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER", sys::STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER as u64),
        ("STK_JOB_ALLOW_NONFINITE", sys::STK_JOB_ALLOW_NONFINITE as u64),
        ("STK_JOB_PUBLISH_ROOT", sys::STK_JOB_PUBLISH_ROOT as u64),
        ("STK_JOB_MEMORY_FIT_LSQ", sys::STK_JOB_MEMORY_FIT_LSQ as u64),
        ("STK_JOB_PROFILE_FAITHFUL", sys::STK_JOB_PROFILE_FAITHFUL as u64),
        ("STK_JOB_FAITHFUL_FFN_INT8", sys::STK_JOB_FAITHFUL_FFN_INT8 as u64),
        ("STK_JOB_FAITHFUL_FFN_Q4_0", sys::STK_JOB_FAITHFUL_FFN_Q4_0 as u64),
        ("STK_JOB_FAITHFUL_FFN_Q8_0", sys::STK_JOB_FAITHFUL_FFN_Q8_0 as u64),
        ("STK_JOB_FAITHFUL_FFN_BF16", sys::STK_JOB_FAITHFUL_FFN_BF16 as u64),
        ("STK_LOOKUP_TOKEN_ID", sys::STK_LOOKUP_TOKEN_ID as u64),
        ("STK_LOOKUP_TOKEN_BYTES", sys::STK_LOOKUP_TOKEN_BYTES as u64),
        ("STK_LOOKUP_LINEAR", sys::STK_LOOKUP_LINEAR as u64),
        ("STK_LOOKUP_HUB", sys::STK_LOOKUP_HUB as u64),
        ("STK_LWT_F32", sys::STK_LWT_F32 as u64),
        ("STK_LWT_F16", sys::STK_LWT_F16 as u64),
        ("STK_LWT_BF16", sys::STK_LWT_BF16 as u64),
        ("STK_LWT_I8", sys::STK_LWT_I8 as u64),
        ("STK_LWT_U8", sys::STK_LWT_U8 as u64),
        ("STK_LWT_I4", sys::STK_LWT_I4 as u64),
        ("STK_LWT_U4", sys::STK_LWT_U4 as u64),
        ("STK_LWT_FP4", sys::STK_LWT_FP4 as u64),
        ("STK_LWT_I2", sys::STK_LWT_I2 as u64),
        ("STK_LWT_U2", sys::STK_LWT_U2 as u64),
        ("STK_LWT_TERNARY", sys::STK_LWT_TERNARY as u64),
        ("STK_LWT_BINARY", sys::STK_LWT_BINARY as u64),
        ("STK_LWT_Q4_0", sys::STK_LWT_Q4_0 as u64),
        ("STK_LWT_Q8_0", sys::STK_LWT_Q8_0 as u64),
        ("STK_TOKENIZER_NOT_RUN", sys::STK_TOKENIZER_NOT_RUN as u64),
        ("STK_TOKENIZER_ABSENT", sys::STK_TOKENIZER_ABSENT as u64),
        ("STK_TOKENIZER_FST", sys::STK_TOKENIZER_FST as u64),
        ("STK_TOKENIZER_FST_UNCERTIFIED", sys::STK_TOKENIZER_FST_UNCERTIFIED as u64),
        ("STK_TOKENIZER_EXT", sys::STK_TOKENIZER_EXT as u64),
        ("STK_STAGE_STATE_PENDING", sys::STK_STAGE_STATE_PENDING as u64),
        ("STK_STAGE_STATE_DONE", sys::STK_STAGE_STATE_DONE as u64),
        ("STK_STAGE_STATE_DISABLED", sys::STK_STAGE_STATE_DISABLED as u64),
        ("STK_STAGE_STATE_NOT_IMPLEMENTED", sys::STK_STAGE_STATE_NOT_IMPLEMENTED as u64),
        ("STK_PLAN_WRITTEN", sys::STK_PLAN_WRITTEN as u64),
        ("STK_PLAN_OPTIONAL", sys::STK_PLAN_OPTIONAL as u64),
        ("STK_PLAN_DISABLED", sys::STK_PLAN_DISABLED as u64),
        ("STK_MANIFEST_STAGE_PENDING", sys::STK_MANIFEST_STAGE_PENDING as u64),
        ("STK_MANIFEST_STAGE_RAN", sys::STK_MANIFEST_STAGE_RAN as u64),
        ("STK_MANIFEST_STAGE_NOT_IMPLEMENTED", sys::STK_MANIFEST_STAGE_NOT_IMPLEMENTED as u64),
        ("STK_MANIFEST_STAGE_DISABLED", sys::STK_MANIFEST_STAGE_DISABLED as u64),
        ("STK_MANIFEST_STAGE_FAILED", sys::STK_MANIFEST_STAGE_FAILED as u64),
        ("STK_RECORD_FEATURE_DISABLED", sys::STK_RECORD_FEATURE_DISABLED as u64),
        ("STK_RECORD_INVARIANT_PASS", sys::STK_RECORD_INVARIANT_PASS as u64),
        ("STK_RECORD_INVARIANT_FAIL", sys::STK_RECORD_INVARIANT_FAIL as u64),
        ("STK_RECORD_NOTE", sys::STK_RECORD_NOTE as u64),
        ("STK_PATH_OTHER", sys::STK_PATH_OTHER as u64),
        ("STK_PATH_GENERATION", sys::STK_PATH_GENERATION as u64),
        ("STK_PATH_ROOT", sys::STK_PATH_ROOT as u64),
        ("STK_PATH_LWT", sys::STK_PATH_LWT as u64),
        ("STK_PATH_ARRAY", sys::STK_PATH_ARRAY as u64),
        ("STK_PATH_GGUF", sys::STK_PATH_GGUF as u64),
        ("STK_TOKENIZE_BPE", sys::STK_TOKENIZE_BPE as u64),
        ("STK_TOKENIZE_GREEDY", sys::STK_TOKENIZE_GREEDY as u64),
        ("STK_REPLAY_TOKEN", sys::STK_REPLAY_TOKEN as u64),
        ("STK_REPLAY_LINEAR", sys::STK_REPLAY_LINEAR as u64),
        ("STK_REPLAY_PRF", sys::STK_REPLAY_PRF as u64),
        ("STK_REPLAY_OVERLAYS", sys::STK_REPLAY_OVERLAYS as u64),
        ("STK_REPLAY_MEMORY", sys::STK_REPLAY_MEMORY as u64),
        ("STK_REPLAY_BRIDGE", sys::STK_REPLAY_BRIDGE as u64),
    ]
    .into_iter()
    .collect();
    let theirs = header_constants();
    // Both directions: a constant added to the header must be added here too.
    let missing: Vec<&String> = theirs.keys().filter(|k| !ours.contains_key(k.as_str())).collect();
    assert!(missing.is_empty(), "stk.h has constants sys.rs lacks: {missing:?}");
    for (name, value) in &ours {
        assert_eq!(theirs.get(*name), Some(value), "{name}");
    }
    let version = theirs["STK_VERSION_MAJOR"] * 10000 + theirs["STK_VERSION_MINOR"] * 100 + theirs["STK_VERSION_PATCH"];
    assert_eq!(version, sys::STK_VERSION_NUMBER as u64);
    assert!(std::fs::read_to_string(header_path())
        .unwrap()
        .contains(&format!("#define STK_VERSION_STRING \"{}\"", sys::STK_VERSION_STRING)));
}

#[test]
fn every_header_function_is_declared() {
    let text = std::fs::read_to_string(header_path()).unwrap();
    let src = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/sys.rs")).unwrap();
    let mut n = 0;
    for part in text.split("STK_API ").skip(1) {
        let head = part.split('(').next().unwrap();
        let name = head.rsplit([' ', '*']).next().unwrap();
        if name.starts_with("stk_") {
            n += 1;
            assert!(src.contains(&format!("pub fn {name}(")), "sys.rs does not declare {name}");
        }
    }
    assert_eq!(n, 115, "functions declared in stk.h");
}

/// sizeof/offsetof as the C compiler computes them, compared with repr(C) here.  Skipped (with a
/// note) only when no C compiler is installed.
#[test]
fn struct_layout_matches_c_compiler() {
    use std::mem::size_of;
    // offset_of! needs Rust 1.77; Debian 12 ships 1.63.
    macro_rules! offset_of {
        ($t:ty, $f:ident) => {{
            let u = std::mem::MaybeUninit::<$t>::uninit();
            let base = u.as_ptr();
            // SAFETY: only the field's address is taken; nothing is read.
            unsafe { std::ptr::addr_of!((*base).$f) as usize - base as usize }
        }};
    }
    let dir = PathBuf::from(option_env!("CARGO_TARGET_TMPDIR").unwrap_or("/tmp"))
        .join(format!("layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("layout.c");
    std::fs::write(
        &c,
        r#"#include <stdio.h>
#include <stddef.h>
#include <stk/stk.h>
int main(void) {
  printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n",
    sizeof(stk_job_params), offsetof(stk_job_params, in_dir), offsetof(stk_job_params, out_dir),
    offsetof(stk_job_params, r), offsetof(stk_job_params, threads), offsetof(stk_job_params, flags),
    sizeof(stk_verify_report), offsetof(stk_verify_report, bytes_checked),
    offsetof(stk_verify_report, failed_file), offsetof(stk_verify_report, failed_offset));
  printf("%zu %zu %zu\n", sizeof(stk_status), sizeof(stk_stage), sizeof(stk_lookup_kind));
  return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("layout");
    let inc = header_path().parent().unwrap().parent().unwrap().to_path_buf();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = match Command::new(&cc).arg("-I").arg(&inc).arg(&c).arg("-o").arg(&exe).status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("note: no C compiler ({cc}: {e}); layout checked only by sys.rs's assertions");
            return;
        }
    };
    assert!(built.success(), "{cc} failed on {}", c.display());
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let nums: Vec<usize> = out.split_whitespace().map(|s| s.parse().unwrap()).collect();
    type P = sys::stk_job_params;
    type R = sys::stk_verify_report;
    assert_eq!(
        nums,
        [
            size_of::<P>(),
            offset_of!(P, in_dir),
            offset_of!(P, out_dir),
            offset_of!(P, r),
            offset_of!(P, threads),
            offset_of!(P, flags),
            size_of::<R>(),
            offset_of!(R, bytes_checked),
            offset_of!(R, failed_file),
            offset_of!(R, failed_offset),
            size_of::<sys::stk_status>(),
            size_of::<sys::stk_stage>(),
            size_of::<sys::stk_lookup_kind>(),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
