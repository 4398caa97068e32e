// The safe wrapper and the raw declarations against the linked libstk (STK_LIB_DIR).
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use stk::{sys, Error, Generation, Job, JobParams, LookupKind, Stage, Status};

/// The tiny GPT-2 directory of bindings/testdata (STK_BINDINGS_FIXTURE overrides).
fn fixture() -> PathBuf {
    match std::env::var_os("STK_BINDINGS_FIXTURE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tiny-gpt2"),
    }
}

/// A fresh, empty scratch directory under the target dir (which the meson test puts in the
/// build dir), unique per test in this process.
fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = option_env!("CARGO_TARGET_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("stk-rust-{}-{}-{name}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn c_str(p: *const std::os::raw::c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

#[test]
fn version_matches_header() {
    assert_eq!(stk::HEADER_VERSION_NUMBER, 100);
    assert_eq!(stk::version_number(), 100);
    assert_eq!(stk::version_string(), "0.1.0");
    assert_eq!(stk::HEADER_VERSION_STRING, "0.1.0");
    assert_eq!(stk::check_version(), Ok(()));
}

#[test]
fn status_strings_and_values() {
    assert_eq!(Status::Ok.as_str(), "STK_OK: success");
    assert_eq!(Status::Checksum.as_str(), "STK_E_CHECKSUM: checksum mismatch");
    assert_eq!(Status::NotFound.as_str(), "STK_E_NOT_FOUND: file not found");
    assert_eq!(Status::ArenaTooSmall.to_string(), "STK_E_ARENA_TOO_SMALL: arena too small");
    assert_eq!(Status::UnsafePickle.as_str(), "STK_E_UNSAFE_PICKLE: pickle outside the allowlist");
    // Values pinned by the header.
    assert_eq!(Status::StructSize as u32, 2);
    assert_eq!(Status::ArenaTooSmall as u32, 3);
    assert_eq!(Status::NotImplemented as u32, 4);
    assert_eq!(Status::NotFound as u32, 11);
    assert_eq!(Status::KeyNotFound as u32, 63);
    assert_eq!(Status::Internal as u32, 99);
    assert_eq!(Status::from_code(27), Status::Checksum);
    assert_eq!(Status::from_code(7), Status::Unknown);
    assert_eq!(Status::from_code(u32::MAX - 1), Status::Unknown);
    // Every known status has its own name, beginning with its C identifier.
    let mut seen = std::collections::HashSet::new();
    for s in Status::ALL {
        let name = s.as_str();
        assert!(name.starts_with(if s == Status::Ok { "STK_OK: " } else { "STK_E_" }), "{name}");
        assert!(seen.insert(name), "duplicate name {name}");
    }
    assert_eq!(seen.len(), 35);
    assert_eq!(c_str(unsafe { sys::stk_status_str(12345) }), "STK_E_?: unknown status");
}

#[test]
fn stage_names() {
    let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        [
            "parse_tensors",
            "tokenizer_build_or_wrap",
            "prf_build",
            "overlays_build",
            "ffn_collapse",
            "mphf_cuckoo",
            "memory_fit",
            "bridge_init",
            "manifest_emit",
            "check"
        ]
    );
    assert!(unsafe { sys::stk_stage_name(0) }.is_null());
    assert!(unsafe { sys::stk_stage_name(11) }.is_null());
}

#[test]
fn verify_missing_dir_is_not_found_and_names_it() {
    let dir = scratch("verify").join("no-such-output");
    let err = stk::verify(&dir).unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "{err}");
    assert_eq!(err.error.code(), 11);
    let path = dir.to_str().unwrap();
    assert!(err.error.message().contains(path), "message {:?} does not name {path}", err.error.message());
    let shown = err.to_string();
    assert!(shown.starts_with("STK_E_NOT_FOUND: file not found: "), "{shown}");
    // `?` into the plain error type keeps the status.
    let plain: Error = err.into();
    assert_eq!(plain.status(), Status::NotFound);
}

#[test]
fn generation_open_missing_dir_is_not_found() {
    let dir = scratch("gen").join("no-such-output");
    let err = Generation::open(&dir).err().expect("opening a missing generation must fail");
    assert_eq!(err.status(), Status::NotFound, "{err}");
    assert!(err.message().contains(dir.to_str().unwrap()), "{err}");
}

#[test]
fn arena_size_with_struct_size_zero_is_struct_size() {
    let in_dir = CString::new(fixture().to_str().unwrap()).unwrap();
    let out_dir = CString::new(scratch("ss").join("out").to_str().unwrap()).unwrap();
    let params = sys::stk_job_params {
        struct_size: 0,
        in_dir: in_dir.as_ptr(),
        out_dir: out_dir.as_ptr(),
        r: 0,
        rv: 0,
        l_tok: 0,
        top_l: 0,
        threads: 0,
        flags: 0,
        calibration: std::ptr::null(),
        sinks: 0,
        window: 0,
        policy: 0,
        recent: 0,
    };
    let mut bytes = 12345usize;
    let st = unsafe { sys::stk_job_arena_size(&params, &mut bytes) };
    assert_eq!(st, sys::STK_E_STRUCT_SIZE);
    assert_eq!(st, 2);
    assert_eq!(bytes, 12345, "nothing written on failure");
    let msg = c_str(unsafe { sys::stk_last_error() });
    assert!(msg.contains("struct_size"), "{msg}");
    // One byte short of the first version (48 bytes: up to `flags`) is refused too.
    let short = sys::stk_job_params { struct_size: 47, ..params };
    assert_eq!(unsafe { sys::stk_job_arena_size(&short, &mut bytes) }, sys::STK_E_STRUCT_SIZE);
    // NULL out-pointer.
    let full = sys::stk_job_params { struct_size: std::mem::size_of::<sys::stk_job_params>(), ..params };
    assert_eq!(unsafe { sys::stk_job_arena_size(&full, std::ptr::null_mut()) }, sys::STK_E_INVALID_ARGUMENT);
}

#[test]
fn arena_one_byte_too_small_is_refused() {
    let params = JobParams::new(fixture(), scratch("arena").join("out"));
    let need = stk::arena_size(&params).unwrap();
    assert!(need > 0);
    assert_eq!(stk::arena_size(&params).unwrap(), need, "sizing is deterministic");

    let mut buf = vec![0u8; need - 1];
    let err = Job::open_in(&params, &mut buf[..]).err().expect("an arena one byte short must be refused");
    assert_eq!(err.status(), Status::ArenaTooSmall, "{err}");
    assert_eq!(err.code(), 3);
    assert!(err.message().contains("arena"), "{err}");

    let mut buf = vec![0u8; need];
    let job = Job::open_in(&params, &mut buf[..]).unwrap();
    assert_eq!(job.arena_bytes(), need);
    drop(job);
}

#[test]
fn out_of_range_options_are_refused() {
    let mut params = JobParams::new(fixture(), scratch("opts").join("out"));
    params.r = 5000; // the library caps r at 4096
    let err = stk::arena_size(&params).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("5000"), "{err}");
    params.r = 0;
    params.flags = 0x80;
    assert_eq!(stk::arena_size(&params).unwrap_err().status(), Status::InvalidArgument);
    params.flags = stk::ALLOW_NONFINITE | stk::ALLOW_UNCERTIFIED_TOKENIZER;
    assert!(stk::arena_size(&params).unwrap() > 0);
    // The faithful profile's window: refused without the profile, taken with it.
    params.window = 60;
    let err = stk::arena_size(&params).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("faithful"), "{err}");
    params.flags |= stk::PROFILE_FAITHFUL | stk::FAITHFUL_FFN_INT8;
    assert!(stk::arena_size(&params).unwrap() > 0);
}

#[test]
fn nul_in_a_path_is_refused_before_calling_in() {
    let params = JobParams::new("bad\0dir", "out");
    let err = stk::arena_size(&params).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("in_dir"), "{err}");
}

#[test]
fn owned_job_enforces_stage_order() {
    let out = scratch("order").join("out");
    let mut job = Job::open(&JobParams::new(fixture(), &out)).unwrap();
    assert_eq!(job.arena_bytes(), stk::arena_size(&JobParams::new(fixture(), &out)).unwrap());

    let err = job.run(Stage::Tokenizer).unwrap_err();
    assert_eq!(err.status(), Status::StageOrder, "{err}");
    assert_eq!(err.code(), 5);
    assert!(err.message().contains("parse_tensors"), "{err}");

    let err = job.digest(Stage::ParseTensors).unwrap_err();
    assert_eq!(err.status(), Status::StageOrder, "{err}");
    // The job can move (its arena is on the heap) and still works.
    let moved = std::thread::spawn(move || job.digest(Stage::Check).unwrap_err().status()).join().unwrap();
    assert_eq!(moved, Status::StageOrder);
}

#[test]
fn output_holding_a_generation_is_refused() {
    let out = scratch("exists").join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("sera_manifest.bin"), b"published").unwrap();
    let err = Job::open(&JobParams::new(fixture(), &out)).err().expect("must refuse");
    assert_eq!(err.status(), Status::OutputExists, "{err}");
    assert_eq!(err.code(), 12);
    assert!(err.message().contains(out.to_str().unwrap()), "{err}");
    assert_eq!(std::fs::read(out.join("sera_manifest.bin")).unwrap(), b"published", "left untouched");
}

/// Runs the whole DAG on the tiny model into a fresh directory and returns it.  A stage may be
/// NOT_IMPLEMENTED (it writes nothing and its feature is recorded as disabled); any other failure
/// fails.  Every byte-level BPE vocabulary is ambiguous under Sardinas-Patterson ("he" = "h" +
/// "e"), so the greedy tables are built only with ALLOW_UNCERTIFIED_TOKENIZER.
fn publish_tiny_gpt2(name: &str) -> PathBuf {
    let out = scratch(name).join("out");
    let mut params = JobParams::new(fixture(), &out);
    params.flags = stk::ALLOW_UNCERTIFIED_TOKENIZER;
    let mut job = Job::open(&params).unwrap();
    let mut ran = Vec::new();
    for stage in Stage::ALL {
        match job.run(stage) {
            Ok(()) => ran.push(stage),
            Err(e) if e.status() == Status::NotImplemented => {}
            Err(e) => panic!("stage {stage}: {e}"),
        }
    }
    for stage in [Stage::ParseTensors, Stage::Tokenizer, Stage::ManifestEmit] {
        assert!(ran.contains(&stage), "{stage} must run on a real GPT-2 directory");
    }
    // stk_job_get_info / stk_stage_get_info: what the CLI reports, through the public API.
    let info = job.info().unwrap();
    assert_eq!(info.tokenizer_mode, stk::TokenizerMode::FstUncertified);
    assert!(info.tokenizer_certified_run);
    assert_eq!(info.vocab_size, 261);
    assert!(info.tokenizer_reason.contains("Sardinas-Patterson"), "{}", info.tokenizer_reason);
    let parse = job.stage_info(Stage::ParseTensors).unwrap();
    assert_eq!(parse.state, stk::StageState::Done);
    assert_eq!(parse.digest, job.digest(Stage::ParseTensors).unwrap());
    assert_eq!(parse.reason, "");
    let (done, total, _unit) = job.progress().unwrap();
    assert!(done <= total);
    let tok = job.digest(Stage::Tokenizer).unwrap();
    assert_ne!(tok, stk::Digest { crc32c: 0, sha256_low64: 0 }, "the tokenizer stage wrote arrays");
    for stage in &ran {
        job.digest(*stage).unwrap();
    }
    out
}

#[test]
fn convert_then_verify_then_detect_a_flipped_bit() {
    let out = publish_tiny_gpt2("e2e");
    // tokenizer_fst.bin and T_1..T_8 (l_tok 8).
    let report = stk::verify(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.arrays_checked >= 9, "{report:?}");
    assert!(report.bytes_checked > 0);
    assert_eq!(report.failed_file, "");

    // One flipped payload bit: the report names the file and the payload's offset (after the
    // 128-byte array header).
    let fst = out.join("arrays/tokenizer_fst.bin");
    let mut bytes = std::fs::read(&fst).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    let mut perms = std::fs::metadata(&fst).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&fst, perms).unwrap();
    std::fs::write(&fst, &bytes).unwrap();
    let err = stk::verify(&out).unwrap_err();
    assert_eq!(err.status(), Status::Checksum, "{err}");
    assert_eq!(err.report.failed_file, "arrays/tokenizer_fst.bin");
    assert_eq!(err.report.failed_offset, 128);
    assert!(err.error.message().contains("tokenizer_fst.bin"), "{err}");
    assert!(err.to_string().ends_with("(at arrays/tokenizer_fst.bin offset 128)"), "{err}");
}

#[test]
fn token_lookups_on_a_published_generation() {
    let out = publish_tiny_gpt2("lookup");
    let gen = Generation::open(&out).unwrap_or_else(|e| panic!("{e}"));
    // bindings/testdata/generate.py: 256 byte tokens, then "Ġt" 256, "he" 257, "Ġthe" 258.
    assert_eq!(gen.token_id(b"he").unwrap(), Some(257));
    assert_eq!(gen.token_id(b" the").unwrap(), Some(258));
    assert_eq!(gen.token_id(b"A").unwrap(), Some(u32::from(b'A')));
    assert_eq!(gen.token_bytes(257).unwrap().as_deref(), Some(&b"he"[..]));
    assert_eq!(gen.token_bytes(65).unwrap().as_deref(), Some(&b"A"[..]));
    assert_eq!(gen.token_id(b"not a token").unwrap(), None);
    let mut one = [0u8; 1];
    let err = gen.lookup_into(LookupKind::TokenBytes, &257u32.to_le_bytes(), &mut one).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "a 1-byte buffer is too small for \"he\"");
    let mut two = [0u8; 2];
    assert_eq!(gen.lookup_into(LookupKind::TokenBytes, &257u32.to_le_bytes(), &mut two).unwrap(), 2);
    assert_eq!(&two, b"he");
}

#[test]
fn linear_lookups_on_a_published_generation() {
    let out = publish_tiny_gpt2("linear");
    let gen = Generation::open(&out).unwrap_or_else(|e| panic!("{e}"));
    // d_model 16, top-L 12: column 0 of unit 0 holds 12 base entries and its delta entries.
    let mut found = 0;
    for i in 0..16 {
        if let Some(v) = gen.linear_weight(stk::linear_key(false, 0, i, 0)).unwrap() {
            assert!(v.is_finite());
            found += 1;
        }
    }
    assert!(found >= 12, "{found} entries of column 0");
    // Units 0 and 1 only (two dense layers): unit 2 has no entries.
    assert_eq!(gen.linear_weight(stk::linear_key(true, 2, 0, 0)).unwrap(), None);
    let err = gen.lookup_into(LookupKind::Linear, &[0u8; 4], &mut [0u8; 4]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "a linear key is 8 bytes");
}

/// The library's mixer (one full splitmix64 step, increment included), written out plainly.
fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
fn mix64_seeded(key: u64, seed: u64) -> u64 {
    mix64(key ^ mix64(seed ^ 0xD6E8_FEB8_6659_FD93))
}
/// docs/format.md "Bridge arrays": a row of W = 2 words with the bits of two salted hashes.
fn hub_row(id: u64, salts: [u64; 2]) -> [u64; 2] {
    let mut row = [0u64; 2];
    for salt in salts {
        let bit = ((mix64_seeded(id, salt) >> 32) * 128) >> 32;
        row[(bit / 64) as usize] |= 1u64 << (bit % 64);
    }
    row
}

#[test]
fn hub_lookups_on_a_published_generation() {
    let out = publish_tiny_gpt2("hub");
    let gen = Generation::open(&out).unwrap_or_else(|e| panic!("{e}"));
    const TOK: [u64; 2] = [0x416b_6f74_2d67_7262, 0x426b_6f74_2d67_7262]; // "brg-tokA", "brg-tokB"
    const CTX: [u64; 2] = [0x4178_7463_2d67_7262, 0x4278_7463_2d67_7262]; // "brg-ctxA", "brg-ctxB"
    // 261 tokens (generate.py): 512 contexts (next power of two, at least 64).
    for (t, c) in [(0u32, 0u32), (1, 7), (260, 511), (258, 100)] {
        let words = gen.hub(t, c).unwrap().expect("in range");
        let (tr, cr) = (hub_row(u64::from(t), TOK), hub_row(u64::from(c), CTX));
        assert_eq!(words, vec![tr[0] | cr[0], tr[1] | cr[1]], "token {t} context {c}");
        let bits: u32 = words.iter().map(|w| w.count_ones()).sum();
        assert!((2..=4).contains(&bits));
    }
    assert_eq!(gen.hub(0, 0).unwrap().unwrap()[1] & 0x0000_0001_0200_0000, 0x0000_0001_0200_0000);
    assert_eq!(gen.hub(261, 0).unwrap(), None, "token id out of range");
    assert_eq!(gen.hub(0, 512).unwrap(), None, "context id out of range");
    let err = gen.lookup_into(LookupKind::Hub, &[0u8; 4], &mut [0u8; 16]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "a hub key is 8 bytes");
}

/// The reference runtime: shapes, the FFN against stk_lookup, a first PRF token reading its own
/// value, deltaC's shape, the memory bank's impulse, and a refused layer.
#[test]
fn reference_runtime_on_a_published_generation() {
    let out = publish_tiny_gpt2("refrun");
    let gen = Generation::open(&out).unwrap_or_else(|e| panic!("{e}"));
    let mut rt = gen.runtime().unwrap_or_else(|e| panic!("{e}"));
    let info = *rt.info();
    assert_eq!((info.n_layers, info.d_model, info.d_v, info.n_ffn_units), (2, 16, 16, 2));
    assert!(info.has_prf == 1 && info.has_overlays == 1 && info.has_linear == 1 && info.has_memory == 1);
    let d = info.d_model as usize;
    // x = 2 e_3: y_i = 2 M+[i, 3], M+ read through the lookup (0 for a dropped entry).
    let mut x = vec![0f32; d];
    x[3] = 2.0;
    let y = rt.ffn_apply(1, &x).unwrap();
    for i in 0..d {
        let m = gen.linear_weight(stk::linear_key(false, 1, i as u32, 3)).unwrap().unwrap_or(0.0);
        assert_eq!(y[i], (2.0f64 * m as f64) as f32, "output {i}");
    }
    // One token: the PRF output is its own value (its key is the only one in the state).
    let xq: Vec<f32> = (0..d).map(|j| (j as f32 * 0.37).sin()).collect();
    let v: Vec<f32> = (0..d).map(|j| j as f32 - 7.5).collect();
    let o = rt.prf_run(0, false, &xq, &v).unwrap();
    for j in 0..d {
        assert!((o[j] - v[j]).abs() <= 1e-5 * (1.0 + v[j].abs()), "{j}: {} vs {}", o[j], v[j]);
    }
    assert_eq!(rt.prf_run(0, true, &xq, &v).unwrap().len(), d);
    let dc = rt.overlay_delta(1, &xq).unwrap();
    assert!(dc.len() == d && dc.iter().all(|f| f.is_finite()));
    let h = rt.memory_run(&[1.0, 0.0, 0.0]).unwrap();
    assert_eq!(h.len(), 3);
    assert!(h.iter().all(|f| f.is_finite()));
    let err = rt.prf_run(2, false, &xq, &v).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("layer 2, the generation has 2 layers"), "{err}");
}
