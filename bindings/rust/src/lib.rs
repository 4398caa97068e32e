//! Rust bindings for libstk, the Sera Transfer Kit.
//!
//! [`sys`] holds the raw `extern "C"` declarations of `include/stk/stk.h`; the rest of this crate
//! is a safe wrapper over them:
//!
//! * [`Status`] with the header's pinned values, [`Error`] whose `Display` is
//!   `stk_status_str` followed by the thread's `stk_last_error` message;
//! * [`Job`]: a conversion job that owns (or borrows) the arena `stk_job_arena_size` asked for,
//!   and closes the job before the arena is released;
//! * [`verify`] a published output directory;
//! * [`Generation`] for the O(1) runtime lookups.
//!
//! Every entry point first checks, once per process, that the linked library's
//! `stk_version_number()` equals the header version this crate was written for
//! ([`HEADER_VERSION_NUMBER`]); a mismatch is an [`Error`] with [`Status::Unsupported`].
//!
//! ```no_run
//! use stk::{Job, JobParams, Stage, Status};
//!
//! let mut job = Job::open(&JobParams::new("models/gpt2", "out/gpt2"))?; // owns a stk_job_arena_size arena
//! for stage in Stage::ALL {
//!     match job.run(stage) {
//!         Err(e) if e.status() == Status::NotImplemented => eprintln!("{stage}: disabled"),
//!         r => r?,
//!     }
//! }
//! drop(job); // stk_close, then the arena is freed
//! let report = stk::verify("out/gpt2")?;
//! println!("{} arrays, {} bytes verified", report.arrays_checked, report.bytes_checked);
//! # Ok::<(), stk::Error>(())
//! ```

pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

/// `STK_VERSION_NUMBER` of the header these bindings were written against.
pub const HEADER_VERSION_NUMBER: u32 = sys::STK_VERSION_NUMBER;
/// `STK_VERSION_STRING` of that header.
pub const HEADER_VERSION_STRING: &str = sys::STK_VERSION_STRING;

/// Job flag: build the greedy tokenizer even if Sardinas-Patterson rejects the vocabulary.
pub const ALLOW_UNCERTIFIED_TOKENIZER: u32 = sys::STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER;
/// Job flag: record NaN/Inf weights instead of refusing them.
pub const ALLOW_NONFINITE: u32 = sys::STK_JOB_ALLOW_NONFINITE;
/// Job flag: the faithful profile (`stk convert --profile faithful`): the model's own weights
/// and the manifest's runtime block instead of the spec's numeric arrays.
pub const PROFILE_FAITHFUL: u32 = sys::STK_JOB_PROFILE_FAITHFUL;
/// Job flag, faithful profile only: FFN and expert matrices as .lwt int8 instead of bf16.
pub const FAITHFUL_FFN_INT8: u32 = sys::STK_JOB_FAITHFUL_FFN_INT8;
/// Job flag, faithful profile only: FFN and expert matrices as ggml Q4_0 blocks (32 weights, one f16 scale).
pub const FAITHFUL_FFN_Q4_0: u32 = sys::STK_JOB_FAITHFUL_FFN_Q4_0;
/// Job flag, faithful profile only: FFN and expert matrices as ggml Q8_0 blocks.
pub const FAITHFUL_FFN_Q8_0: u32 = sys::STK_JOB_FAITHFUL_FFN_Q8_0;

/// A status code of libstk.  The discriminants are the header's pinned values.
///
/// A code this crate does not know (a newer library) is [`Status::Unknown`]; the raw value stays
/// available as [`Error::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum Status {
    Ok = sys::STK_OK,
    InvalidArgument = sys::STK_E_INVALID_ARGUMENT,
    StructSize = sys::STK_E_STRUCT_SIZE,
    ArenaTooSmall = sys::STK_E_ARENA_TOO_SMALL,
    NotImplemented = sys::STK_E_NOT_IMPLEMENTED,
    StageOrder = sys::STK_E_STAGE_ORDER,
    Cancelled = sys::STK_E_CANCELLED,
    Io = sys::STK_E_IO,
    NotFound = sys::STK_E_NOT_FOUND,
    OutputExists = sys::STK_E_OUTPUT_EXISTS,
    Truncated = sys::STK_E_TRUNCATED,
    BadMagic = sys::STK_E_BAD_MAGIC,
    BadDtype = sys::STK_E_BAD_DTYPE,
    BadRank = sys::STK_E_BAD_RANK,
    DimsOverflow = sys::STK_E_DIMS_OVERFLOW,
    SizeMismatch = sys::STK_E_SIZE_MISMATCH,
    Misaligned = sys::STK_E_MISALIGNED,
    Checksum = sys::STK_E_CHECKSUM,
    MissingArray = sys::STK_E_MISSING_ARRAY,
    Schema = sys::STK_E_SCHEMA,
    BadHeader = sys::STK_E_BAD_HEADER,
    Corrupt = sys::STK_E_CORRUPT,
    Unsupported = sys::STK_E_UNSUPPORTED,
    UnsafePickle = sys::STK_E_UNSAFE_PICKLE,
    LfsPointer = sys::STK_E_LFS_POINTER,
    UnknownModel = sys::STK_E_UNKNOWN_MODEL,
    BadJson = sys::STK_E_BAD_JSON,
    Nonfinite = sys::STK_E_NONFINITE,
    ParamCount = sys::STK_E_PARAM_COUNT,
    SpRejected = sys::STK_E_SP_REJECTED,
    MphfExhausted = sys::STK_E_MPHF_EXHAUSTED,
    TableFull = sys::STK_E_TABLE_FULL,
    KeyNotFound = sys::STK_E_KEY_NOT_FOUND,
    Nomem = sys::STK_E_NOMEM,
    Internal = sys::STK_E_INTERNAL,
    /// Not a value this crate knows (never returned by a library of the header's version).
    Unknown = u32::MAX,
}

impl Status {
    /// Every status of the header, in value order.
    pub const ALL: [Status; 35] = [
        Status::Ok,
        Status::InvalidArgument,
        Status::StructSize,
        Status::ArenaTooSmall,
        Status::NotImplemented,
        Status::StageOrder,
        Status::Cancelled,
        Status::Io,
        Status::NotFound,
        Status::OutputExists,
        Status::Truncated,
        Status::BadMagic,
        Status::BadDtype,
        Status::BadRank,
        Status::DimsOverflow,
        Status::SizeMismatch,
        Status::Misaligned,
        Status::Checksum,
        Status::MissingArray,
        Status::Schema,
        Status::BadHeader,
        Status::Corrupt,
        Status::Unsupported,
        Status::UnsafePickle,
        Status::LfsPointer,
        Status::UnknownModel,
        Status::BadJson,
        Status::Nonfinite,
        Status::ParamCount,
        Status::SpRejected,
        Status::MphfExhausted,
        Status::TableFull,
        Status::KeyNotFound,
        Status::Nomem,
        Status::Internal,
    ];

    /// The status with this raw value, or [`Status::Unknown`].
    pub fn from_code(code: u32) -> Status {
        Status::ALL.iter().copied().find(|s| *s as u32 == code).unwrap_or(Status::Unknown)
    }

    /// The pinned value (`u32::MAX` for [`Status::Unknown`]).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// `stk_status_str`: a short constant English name ("STK_E_CHECKSUM: checksum mismatch").
    pub fn as_str(self) -> &'static str {
        status_str(self as u32)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn status_str(code: u32) -> &'static str {
    // SAFETY: stk_status_str returns a pointer to a static NUL-terminated string for any value.
    unsafe { static_str(sys::stk_status_str(code)) }.unwrap_or("STK_E_?: unknown status")
}

/// A static C string of the library as `&'static str`; None for NULL or non-UTF-8.
unsafe fn static_str(p: *const std::os::raw::c_char) -> Option<&'static str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

/// A failed libstk call: the status and the message the library gave for it (which names the
/// file, tensor and byte offset involved where there is one).
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: u32,
    message: String,
}

impl Error {
    /// The status; [`Status::Unknown`] for a code this crate does not know.
    pub fn status(&self) -> Status {
        Status::from_code(self.code)
    }
    /// The raw status value as the library returned it.
    pub fn code(&self) -> u32 {
        self.code
    }
    /// `stk_last_error()` as it was right after the failing call ("" if the library gave none).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Captures the calling thread's `stk_last_error()`; must run right after the failing call.
    fn from_last(code: u32) -> Error {
        // SAFETY: stk_last_error returns a NUL-terminated thread-local string, valid until the
        // next stk_* call on this thread; it is copied before anything else is called.
        let message = unsafe {
            let p = sys::stk_last_error();
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Error { code, message }
    }

    /// An error raised by these bindings before calling in (the library was never reached).
    fn local(status: Status, message: String) -> Error {
        Error { code: status as u32, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = status_str(self.code);
        if self.message.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}: {}", self.message)
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stk::Error({self})")
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn check(code: sys::stk_status) -> Result<()> {
    if code == sys::STK_OK {
        Ok(())
    } else {
        Err(Error::from_last(code))
    }
}

/// `stk_version_number()` of the library actually linked.
pub fn version_number() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { sys::stk_version_number() }
}

/// `stk_version_string()` of the library actually linked.
pub fn version_string() -> &'static str {
    // SAFETY: returns a static string.
    unsafe { static_str(sys::stk_version_string()) }.unwrap_or("")
}

/// Checks that the linked library is the version these bindings were written for.  Run once per
/// process (every safe entry point calls it); the structs and enums of another version may not
/// match, so no call is made into a mismatched library.
pub fn check_version() -> Result<()> {
    // 0: not checked yet, 1: equal, 2: mismatch (the check is idempotent, so a race only repeats it).
    static CHECKED: AtomicU8 = AtomicU8::new(0);
    match CHECKED.load(Ordering::Relaxed) {
        1 => return Ok(()),
        0 if version_number() == HEADER_VERSION_NUMBER => {
            CHECKED.store(1, Ordering::Relaxed);
            return Ok(());
        }
        _ => CHECKED.store(2, Ordering::Relaxed),
    }
    let linked = version_number();
    Err(Error::local(
        Status::Unsupported,
        format!(
            "libstk {} (version number {linked}) is linked, but these bindings were built for \
             {HEADER_VERSION_STRING} ({HEADER_VERSION_NUMBER}); rebuild them against the installed header",
            version_string()
        ),
    ))
}

fn path_cstring(what: &str, path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::local(Status::InvalidArgument, format!("{what} {} contains a NUL byte", path.display())))
}

/// One stage of the fixed DAG (seed 15.2).  Discriminants are the header's pinned values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Stage {
    ParseTensors = sys::STK_STAGE_PARSE_TENSORS,
    Tokenizer = sys::STK_STAGE_TOKENIZER,
    Prf = sys::STK_STAGE_PRF,
    Overlays = sys::STK_STAGE_OVERLAYS,
    FfnCollapse = sys::STK_STAGE_FFN_COLLAPSE,
    MphfCuckoo = sys::STK_STAGE_MPHF_CUCKOO,
    MemoryFit = sys::STK_STAGE_MEMORY_FIT,
    BridgeInit = sys::STK_STAGE_BRIDGE_INIT,
    ManifestEmit = sys::STK_STAGE_MANIFEST_EMIT,
    Check = sys::STK_STAGE_CHECK,
}

impl Stage {
    /// The stages in DAG order.
    pub const ALL: [Stage; sys::STK_STAGE_COUNT as usize] = [
        Stage::ParseTensors,
        Stage::Tokenizer,
        Stage::Prf,
        Stage::Overlays,
        Stage::FfnCollapse,
        Stage::MphfCuckoo,
        Stage::MemoryFit,
        Stage::BridgeInit,
        Stage::ManifestEmit,
        Stage::Check,
    ];

    /// The spec's name of the stage (`stk_stage_name`, e.g. "parse_tensors").
    pub fn name(self) -> &'static str {
        // SAFETY: returns a static string or NULL.
        unsafe { static_str(sys::stk_stage_name(self as u32)) }.unwrap_or("?")
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of a conversion job (`stk_job_params`).  Zero means "the library's default".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobParams {
    /// HF model directory (config.json, weights, tokenizer files).
    pub in_dir: PathBuf,
    /// Output directory (created; must not hold a generation).
    pub out_dir: PathBuf,
    /// PRF rank (default 512).
    pub r: u32,
    /// Overlay rank (default 12).
    pub rv: u32,
    /// Longest token piece in bytes (default 8).
    pub l_tok: u32,
    /// FFN top-L (default 12).
    pub top_l: u32,
    /// Worker threads (default 1); output bytes do not depend on it.
    pub threads: u32,
    /// [`ALLOW_UNCERTIFIED_TOKENIZER`] | [`ALLOW_NONFINITE`].
    pub flags: u32,
    /// A calibration statistics file (`python -m stk calibrate`) the stages fit to; None: no data.
    pub calibration: Option<PathBuf>,
    /// Faithful profile only: sink positions kept exact (0: 4).
    pub sinks: u32,
    /// Faithful profile only: most recent positions kept exact (0: 252).
    pub window: u32,
}

impl JobParams {
    /// Parameters with every option at the library's default.
    pub fn new(in_dir: impl Into<PathBuf>, out_dir: impl Into<PathBuf>) -> JobParams {
        JobParams { in_dir: in_dir.into(), out_dir: out_dir.into(), ..JobParams::default() }
    }

    /// The C struct plus the strings it points into (kept alive together).
    fn to_c(&self) -> Result<CParams> {
        let in_dir = path_cstring("in_dir", &self.in_dir)?;
        let out_dir = path_cstring("out_dir", &self.out_dir)?;
        let calibration = match &self.calibration {
            Some(p) => Some(path_cstring("calibration", p)?),
            None => None,
        };
        let raw = sys::stk_job_params {
            struct_size: std::mem::size_of::<sys::stk_job_params>(),
            in_dir: in_dir.as_ptr(),
            out_dir: out_dir.as_ptr(),
            r: self.r,
            rv: self.rv,
            l_tok: self.l_tok,
            top_l: self.top_l,
            threads: self.threads,
            flags: self.flags,
            calibration: calibration.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            sinks: self.sinks,
            window: self.window,
            policy: 0,
            recent: 0,
        };
        Ok(CParams { raw, _in_dir: in_dir, _out_dir: out_dir, _calibration: calibration })
    }
}

struct CParams {
    raw: sys::stk_job_params,
    _in_dir: CString,
    _out_dir: CString,
    _calibration: Option<CString>,
}

/// `stk_job_arena_size`: how many arena bytes a job with these parameters needs.  Reads the
/// checkpoint's metadata, never its weights.
pub fn arena_size(params: &JobParams) -> Result<usize> {
    check_version()?;
    let c = params.to_c()?;
    let mut bytes = 0usize;
    // SAFETY: c.raw points at NUL-terminated strings owned by `c`; `bytes` is a valid out-pointer.
    check(unsafe { sys::stk_job_arena_size(&c.raw, &mut bytes) })?;
    Ok(bytes)
}

/// Memory that can hold a job: its address must not change while the job lives, even if the
/// owner value is moved (heap buffers and borrowed slices qualify; inline arrays do not).
///
/// # Safety
/// `arena_ptr` must return the same pointer, valid for `arena_len` writable bytes, for as long
/// as the value lives and is not accessed otherwise.
pub unsafe trait Arena {
    fn arena_ptr(&mut self) -> *mut u8;
    fn arena_len(&self) -> usize;
}

unsafe impl Arena for Box<[u8]> {
    fn arena_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn arena_len(&self) -> usize {
        self.len()
    }
}

unsafe impl Arena for Vec<u8> {
    fn arena_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn arena_len(&self) -> usize {
        self.len()
    }
}

unsafe impl Arena for &mut [u8] {
    fn arena_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn arena_len(&self) -> usize {
        self.len()
    }
}

/// A zeroed heap buffer from calloc-like allocation: large arenas come as untouched zero pages, so
/// only what the library writes is ever committed.  None if the allocator refuses.
fn zeroed_arena(bytes: usize) -> Option<Box<[u8]>> {
    if bytes == 0 {
        return Some(Box::default());
    }
    let layout = std::alloc::Layout::array::<u8>(bytes).ok()?;
    // SAFETY: layout has a non-zero size; a non-null result is `bytes` zeroed bytes with the
    // layout Box<[u8]> frees with (align 1, size bytes).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        if p.is_null() {
            return None;
        }
        Some(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, bytes)))
    }
}

/// The digests a finished stage recorded: crc32c and sha256_low64 over the bytes of every array
/// it wrote, in write order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest {
    pub crc32c: u32,
    pub sha256_low64: u64,
}

/// A conversion job.  The job handle lives inside the arena `A`, which the `Job` holds; dropping
/// the `Job` calls `stk_close` first and releases the arena after, so the arena always outlives
/// the job.
pub struct Job<A: Arena = Box<[u8]>> {
    raw: NonNull<sys::stk_job>,
    // Never touched while `raw` is open: the library owns these bytes.
    arena: A,
}

// SAFETY: a job is plain memory in its arena plus files it opened; libstk keeps no per-thread
// state for it (only the last error message is per thread).  Not Sync: stage runs mutate it.
unsafe impl<A: Arena + Send> Send for Job<A> {}

impl Job<Box<[u8]>> {
    /// Sizes the arena with `stk_job_arena_size`, allocates it (zeroed pages, committed only as
    /// the library touches them) and opens the job in it.
    pub fn open(params: &JobParams) -> Result<Job<Box<[u8]>>> {
        let bytes = arena_size(params)?;
        let arena = zeroed_arena(bytes).ok_or_else(|| {
            Error::local(Status::Nomem, format!("cannot allocate a {bytes}-byte arena for {}", params.in_dir.display()))
        })?;
        Job::open_in(params, arena)
    }
}

impl<A: Arena> Job<A> {
    /// Opens a job inside a caller-provided arena (at least [`arena_size`] bytes, any
    /// alignment); an arena that is too small is [`Status::ArenaTooSmall`].
    pub fn open_in(params: &JobParams, mut arena: A) -> Result<Job<A>> {
        check_version()?;
        let c = params.to_c()?;
        let mut raw: *mut sys::stk_job = std::ptr::null_mut();
        // SAFETY: the arena pointer is valid for arena_len bytes and stays put (trait contract)
        // for as long as the Job that takes ownership of it; strings live in `c` for the call
        // (stk_open copies them into the arena).
        check(unsafe { sys::stk_open(&c.raw, arena.arena_ptr().cast(), arena.arena_len(), &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::local(Status::Internal, "stk_open returned STK_OK and a NULL job".into()))?;
        Ok(Job { raw, arena })
    }

    /// `stk_stage_run`: runs one stage (in DAG order; [`Status::StageOrder`] otherwise).
    pub fn run(&mut self, stage: Stage) -> Result<()> {
        // SAFETY: raw is an open job (closed only in Drop).
        check(unsafe { sys::stk_stage_run(self.raw.as_ptr(), stage as u32) })
    }

    /// `stk_stage_digest`: what a finished stage recorded.
    pub fn digest(&self, stage: Stage) -> Result<Digest> {
        let mut d = Digest { crc32c: 0, sha256_low64: 0 };
        // SAFETY: raw is an open job; out-pointers are valid.
        check(unsafe { sys::stk_stage_digest(self.raw.as_ptr(), stage as u32, &mut d.crc32c, &mut d.sha256_low64) })?;
        Ok(d)
    }

    /// `stk_job_get_info` (experimental tier): what the job decided so far.
    pub fn info(&self) -> Result<JobInfo> {
        // SAFETY: all-zero is a valid stk_job_info (integers and a char array).
        let mut c: sys::stk_job_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::stk_job_info>();
        // SAFETY: raw is an open job; c is a valid out-struct of struct_size bytes.
        check(unsafe { sys::stk_job_get_info(self.raw.as_ptr(), &mut c) })?;
        Ok(JobInfo {
            tokenizer_mode: TokenizerMode::from_code(c.tokenizer_mode),
            tokenizer_certified_run: c.tokenizer_certified_run != 0,
            vocab_size: c.vocab_size,
            l_tok: c.l_tok,
            tokenizer_reason: c_chars(&c.tokenizer_reason),
        })
    }

    /// `stk_stage_get_info` (experimental tier): the state of one stage.
    pub fn stage_info(&self, stage: Stage) -> Result<StageInfo> {
        // SAFETY: all-zero is a valid stk_stage_info.
        let mut c: sys::stk_stage_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::stk_stage_info>();
        // SAFETY: raw is an open job; c is a valid out-struct of struct_size bytes.
        check(unsafe { sys::stk_stage_get_info(self.raw.as_ptr(), stage as u32, &mut c) })?;
        Ok(StageInfo {
            state: StageState::from_code(c.state),
            digest: Digest { crc32c: c.crc32c, sha256_low64: c.sha256_low64 },
            reason: c_chars(&c.reason),
        })
    }

    /// `stk_job_progress` (experimental tier): (done, total, unit) of the running stage.  The C
    /// call may run on another thread during a stage; `Job` is not `Sync`, so in Rust it runs
    /// between stages (through `as_raw`, a program may call it from a watcher thread).
    pub fn progress(&self) -> Result<(u64, u64, &'static str)> {
        let (mut done, mut total) = (0u64, 0u64);
        let mut unit: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: raw is an open job; out-pointers are valid; the unit is a static string.
        check(unsafe { sys::stk_job_progress(self.raw.as_ptr(), &mut done, &mut total, &mut unit) })?;
        // SAFETY: the library returns a static NUL-terminated string.
        Ok((done, total, unsafe { static_str(unit) }.unwrap_or("")))
    }

    /// Size of the arena the job lives in.
    pub fn arena_bytes(&self) -> usize {
        self.arena.arena_len()
    }

    /// The raw handle, for calls this wrapper does not cover.  Valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::stk_job {
        self.raw.as_ptr()
    }
}

impl<A: Arena> Drop for Job<A> {
    fn drop(&mut self) {
        // SAFETY: raw is open; after this the arena (dropped next, as a field) is free again.
        unsafe { sys::stk_close(self.raw.as_ptr()) }
    }
}

/// A NUL-terminated C char array as a String (up to the first NUL, bounded by the array).
fn c_chars(a: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = a.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What the tokenizer stage decided (`stk_tokenizer_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerMode {
    /// The tokenizer stage has not run.
    NotRun,
    /// No tokenizer files: the feature is disabled.
    Absent,
    /// Greedy token tables, certified uniquely decodable.
    Fst,
    /// Tables built although the certification failed (ALLOW_UNCERTIFIED_TOKENIZER).
    FstUncertified,
    /// No tables: tokenizing needs the model's own tokenizer.
    Ext,
    /// A value this crate does not know (a newer library).
    Other(u32),
}

impl TokenizerMode {
    fn from_code(c: u32) -> TokenizerMode {
        match c {
            sys::STK_TOKENIZER_NOT_RUN => TokenizerMode::NotRun,
            sys::STK_TOKENIZER_ABSENT => TokenizerMode::Absent,
            sys::STK_TOKENIZER_FST => TokenizerMode::Fst,
            sys::STK_TOKENIZER_FST_UNCERTIFIED => TokenizerMode::FstUncertified,
            sys::STK_TOKENIZER_EXT => TokenizerMode::Ext,
            other => TokenizerMode::Other(other),
        }
    }
}

/// `stk_job_get_info`: what a job decided so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub tokenizer_mode: TokenizerMode,
    /// Whether the unique-decodability test ran (byte-level BPE vocabularies).
    pub tokenizer_certified_run: bool,
    pub vocab_size: u32,
    pub l_tok: u32,
    /// Why that mode ("" if there is nothing to say).
    pub tokenizer_reason: String,
}

/// The state of one stage (`stk_stage_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageState {
    /// Not run, or it failed.
    Pending,
    /// Ran; its arrays are written.
    Done,
    /// Ran, but a bound it could not meet disabled its feature (nothing of it kept).
    Disabled,
    /// This build has no such stage.
    NotImplemented,
    /// A value this crate does not know (a newer library).
    Other(u32),
}

impl StageState {
    fn from_code(c: u32) -> StageState {
        match c {
            sys::STK_STAGE_STATE_PENDING => StageState::Pending,
            sys::STK_STAGE_STATE_DONE => StageState::Done,
            sys::STK_STAGE_STATE_DISABLED => StageState::Disabled,
            sys::STK_STAGE_STATE_NOT_IMPLEMENTED => StageState::NotImplemented,
            other => StageState::Other(other),
        }
    }
}

/// `stk_stage_get_info`: a stage's state, digest and (when disabled) the recorded reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageInfo {
    pub state: StageState,
    pub digest: Digest,
    pub reason: String,
}

/// What `stk_verify` checked, and on failure where it stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Arrays whose header and payload were verified.
    pub arrays_checked: u32,
    /// Payload bytes hashed.
    pub bytes_checked: u64,
    /// On failure: the file, relative to the output directory ("" if none).
    pub failed_file: String,
    /// On failure: the byte offset inside that file.
    pub failed_offset: u64,
}

impl VerifyReport {
    fn from_c(r: &sys::stk_verify_report) -> VerifyReport {
        // Bounded: the field is 256 bytes; take up to the first NUL.
        let bytes: Vec<u8> = r.failed_file.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        VerifyReport {
            arrays_checked: r.arrays_checked,
            bytes_checked: r.bytes_checked,
            failed_file: String::from_utf8_lossy(&bytes).into_owned(),
            failed_offset: r.failed_offset,
        }
    }
}

/// A failed verification: the error and the report (which file and offset failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    pub error: Error,
    pub report: VerifyReport,
}

impl VerifyError {
    pub fn status(&self) -> Status {
        self.error.status()
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)?;
        if !self.report.failed_file.is_empty() {
            write!(f, " (at {} offset {})", self.report.failed_file, self.report.failed_offset)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<VerifyError> for Error {
    fn from(v: VerifyError) -> Error {
        v.error
    }
}

/// `stk_verify`: checks a published output directory (manifest, hash chain, every array).
pub fn verify(out_dir: impl AsRef<Path>) -> Result<VerifyReport, VerifyError> {
    let fail = |error| VerifyError { error, report: VerifyReport::default() };
    check_version().map_err(fail)?;
    let dir = path_cstring("out_dir", out_dir.as_ref()).map_err(fail)?;
    // SAFETY: zero is a valid bit pattern for the report (integers and a char array).
    let mut raw: sys::stk_verify_report = unsafe { std::mem::zeroed() };
    raw.struct_size = std::mem::size_of::<sys::stk_verify_report>();
    // SAFETY: dir is NUL-terminated; raw is a valid report of the declared size.
    let st = unsafe { sys::stk_verify(dir.as_ptr(), &mut raw) };
    let result = check(st);
    let report = VerifyReport::from_c(&raw);
    match result {
        Ok(()) => Ok(report),
        Err(error) => Err(VerifyError { error, report }),
    }
}

/// The key of entry (output `out`, input feature `input`) of FFN unit `unit`'s collapsed map for
/// inputs of sign `negative` (docs/format.md, "Linear dictionary"): bit 63 the sign, bits 48..62
/// the unit, 24..47 the output index, 0..23 the input index.
pub fn linear_key(negative: bool, unit: u32, out: u32, input: u32) -> u64 {
    (u64::from(negative) << 63) | (u64::from(unit & 0x7FFF) << 48) | (u64::from(out & 0xFF_FFFF) << 24) | u64::from(input & 0xFF_FFFF)
}

/// The kinds of O(1) lookup over a published generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum LookupKind {
    /// key: token bytes -> value: token id (u32 LE)
    TokenId = sys::STK_LOOKUP_TOKEN_ID,
    /// key: u32 token id (LE) -> value: token bytes
    TokenBytes = sys::STK_LOOKUP_TOKEN_BYTES,
    /// key: u64 feature key (LE) -> value: f32 base weight (LE)
    Linear = sys::STK_LOOKUP_LINEAR,
    /// key: u32 token id, u32 context id (LE) -> value: hub bitset
    Hub = sys::STK_LOOKUP_HUB,
}

/// A published generation, mapped read-only and verified (`stk_generation_open`).
pub struct Generation {
    raw: NonNull<sys::stk_generation>,
}

// SAFETY: the handle is a read-only mapping with no thread affinity.  Not declared Sync: the
// header does not (yet) promise that concurrent stk_lookup calls on one handle are safe.
unsafe impl Send for Generation {}

impl Generation {
    /// Maps and verifies the generation published in `out_dir`.
    pub fn open(out_dir: impl AsRef<Path>) -> Result<Generation> {
        check_version()?;
        let dir = path_cstring("out_dir", out_dir.as_ref())?;
        let mut raw: *mut sys::stk_generation = std::ptr::null_mut();
        // SAFETY: dir is NUL-terminated; raw is a valid out-pointer.
        check(unsafe { sys::stk_generation_open(dir.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::local(Status::Internal, "stk_generation_open returned STK_OK and a NULL handle".into())
        })?;
        Ok(Generation { raw })
    }

    /// One lookup into `value`; returns the value's length.  A value longer than `value` is
    /// [`Status::InvalidArgument`]; an absent key is [`Status::KeyNotFound`].
    pub fn lookup_into(&self, kind: LookupKind, key: &[u8], value: &mut [u8]) -> Result<usize> {
        self.lookup_raw(kind, key, value).map_err(|(e, _)| e)
    }

    fn lookup_raw(&self, kind: LookupKind, key: &[u8], value: &mut [u8]) -> Result<usize, (Error, usize)> {
        let mut len = 0usize;
        // SAFETY: raw is open; key and value are valid for their lengths.
        let st = unsafe {
            sys::stk_lookup(
                self.raw.as_ptr(),
                kind as u32,
                key.as_ptr().cast(),
                key.len(),
                value.as_mut_ptr().cast(),
                value.len(),
                &mut len,
            )
        };
        match check(st) {
            Ok(()) if len <= value.len() => Ok(len),
            Ok(()) => Err((
                Error::local(
                    Status::Internal,
                    format!("stk_lookup said {len} bytes for a {}-byte buffer", value.len()),
                ),
                0,
            )),
            Err(e) => Err((e, len)),
        }
    }

    /// One lookup; `Ok(None)` if the key is absent.
    pub fn lookup(&self, kind: LookupKind, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut small = [0u8; 64];
        match self.lookup_raw(kind, key, &mut small) {
            Ok(n) => Ok(Some(small[..n].to_vec())),
            Err((e, _)) if e.status() == Status::KeyNotFound => Ok(None),
            // Too small: the library said how much it needs.
            Err((e, need)) if e.status() == Status::InvalidArgument && need > small.len() => {
                let mut big = vec![0u8; need];
                match self.lookup_raw(kind, key, &mut big) {
                    Ok(n) => {
                        big.truncate(n);
                        Ok(Some(big))
                    }
                    Err((e, _)) if e.status() == Status::KeyNotFound => Ok(None),
                    Err((e, _)) => Err(e),
                }
            }
            Err((e, _)) => Err(e),
        }
    }

    fn fixed<const N: usize>(&self, kind: LookupKind, key: &[u8]) -> Result<Option<[u8; N]>> {
        match self.lookup(kind, key)? {
            None => Ok(None),
            Some(v) => v.as_slice().try_into().map(Some).map_err(|_| {
                Error::local(Status::Corrupt, format!("{kind:?} lookup returned {} bytes, expected {N}", v.len()))
            }),
        }
    }

    /// Token bytes -> token id.
    pub fn token_id(&self, piece: &[u8]) -> Result<Option<u32>> {
        Ok(self.fixed::<4>(LookupKind::TokenId, piece)?.map(u32::from_le_bytes))
    }

    /// Token id -> token bytes.
    pub fn token_bytes(&self, id: u32) -> Result<Option<Vec<u8>>> {
        self.lookup(LookupKind::TokenBytes, &id.to_le_bytes())
    }

    /// Linear dictionary key ([`linear_key`]) -> the collapsed FFN map's entry (base or delta);
    /// `Ok(None)` for an entry the truncation dropped (its value is 0) or a key of no entry.
    pub fn linear_weight(&self, key: u64) -> Result<Option<f32>> {
        Ok(self.fixed::<4>(LookupKind::Linear, &key.to_le_bytes())?.map(f32::from_le_bytes))
    }

    /// (token id, context id) -> the hub bitset of the bridge (docs/format.md, "Bridge arrays"):
    /// W u64 words (hub h is bit h % 64 of word h / 64), the token's row OR the context's row.
    /// `Ok(None)` for a token or context id out of range; `Err` with `Status::MissingArray` when
    /// the generation has no bridge.
    pub fn hub(&self, token: u32, context: u32) -> Result<Option<Vec<u64>>> {
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&token.to_le_bytes());
        key[4..].copy_from_slice(&context.to_le_bytes());
        Ok(self.lookup(LookupKind::Hub, &key)?.map(|v| {
            v.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect()
        }))
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // SAFETY: raw is open and closed exactly once.
        unsafe { sys::stk_generation_close(self.raw.as_ptr()) }
    }
}

/// The reference runtime of a generation's arrays (docs/format.md "Reference runtime"): per
/// token, what Sera computes from each module.  Inputs are row-major `[n, width]` slices; the
/// state, scratch and FFN index are owned here, sized by `stk_refrun_get_info`.
pub struct Runtime<'g> {
    gen: &'g Generation,
    info: sys::stk_refrun_info,
    scratch: Vec<u64>,
    index: Option<Vec<u64>>,
}

impl Generation {
    /// The reference runtime over this generation (maps the arrays it reads, recovers D).
    pub fn runtime(&self) -> Result<Runtime<'_>> {
        let mut info = sys::stk_refrun_info { struct_size: std::mem::size_of::<sys::stk_refrun_info>(), ..Default::default() };
        // SAFETY: raw is open; info is a valid out-struct of its struct_size.
        check(unsafe { sys::stk_refrun_get_info(self.raw.as_ptr(), &mut info) })?;
        let scratch = vec![0u64; (info.scratch_bytes + 7) / 8];
        Ok(Runtime { gen: self, info, scratch, index: None })
    }
}

fn rows(what: &str, len: usize, width: u32) -> Result<usize> {
    let w = width as usize;
    if w == 0 || len % w != 0 {
        return Err(Error::local(Status::InvalidArgument, format!("{what}: {len} values is not a multiple of {w}")));
    }
    Ok(len / w)
}

impl<'g> Runtime<'g> {
    /// Shapes, modules present and buffer sizes.
    pub fn info(&self) -> &sys::stk_refrun_info {
        &self.info
    }

    /// Causal PRF attention of `layer` over one sequence from a fresh state (token t attends to
    /// keys 0..=t): x `[n, d_model]`, v `[n, d_v]` -> `[n, d_v]`.  `memory`: the state's channels
    /// filtered by the positional memory bank (STK_PRF_MEMORY).
    pub fn prf_run(&mut self, layer: u32, memory: bool, x: &[f32], v: &[f32]) -> Result<Vec<f32>> {
        let n = rows("x", x.len(), self.info.d_model)?;
        if rows("v", v.len(), self.info.d_v)? != n {
            return Err(Error::local(Status::InvalidArgument, "x and v hold different token counts".into()));
        }
        let bytes = if memory { self.info.prf_state_bytes_memory } else { self.info.prf_state_bytes };
        let mut state = vec![0u64; (bytes + 7) / 8];
        let mut out = vec![0f32; n * self.info.d_v as usize];
        let g = self.gen.raw.as_ptr();
        let flags = if memory { sys::STK_PRF_MEMORY } else { 0 };
        // SAFETY: g is open; every buffer is valid for the length passed.
        check(unsafe { sys::stk_prf_reset(g, layer, flags, state.as_mut_ptr().cast(), bytes) })?;
        check(unsafe {
            sys::stk_prf_run(
                g,
                layer,
                state.as_mut_ptr().cast(),
                bytes,
                n as u64,
                x.as_ptr(),
                v.as_ptr(),
                out.as_mut_ptr(),
                self.scratch.as_mut_ptr().cast(),
                self.info.scratch_bytes,
            )
        })?;
        Ok(out)
    }

    /// deltaC(q) = U ((phi_w(q)^T H) Z) per query: x `[n, d_model]` -> `[n, d_v]`.
    pub fn overlay_delta(&mut self, layer: u32, x: &[f32]) -> Result<Vec<f32>> {
        let n = rows("x", x.len(), self.info.d_model)?;
        let mut out = vec![0f32; n * self.info.d_v as usize];
        // SAFETY: as above.
        check(unsafe {
            sys::stk_overlay_run(
                self.gen.raw.as_ptr(),
                layer,
                n as u64,
                x.as_ptr(),
                out.as_mut_ptr(),
                self.scratch.as_mut_ptr().cast(),
                self.info.scratch_bytes,
            )
        })?;
        Ok(out)
    }

    /// FFN unit `unit` through the linear dictionary (no bias): x `[n, d_model]` -> `[n, d_model]`.
    /// The index is built on first use.
    pub fn ffn_apply(&mut self, unit: u32, x: &[f32]) -> Result<Vec<f32>> {
        let n = rows("x", x.len(), self.info.d_model)?;
        let bytes = self.info.ffn_index_bytes;
        let g = self.gen.raw.as_ptr();
        if self.index.is_none() {
            let mut idx = vec![0u64; (bytes + 7) / 8];
            // SAFETY: idx holds `bytes` bytes.
            check(unsafe { sys::stk_ffn_index_build(g, idx.as_mut_ptr().cast(), bytes) })?;
            self.index = Some(idx);
        }
        let idx = self.index.as_ref().expect("built above");
        let mut y = vec![0f32; x.len()];
        // SAFETY: as above.
        check(unsafe { sys::stk_ffn_apply_batch(g, idx.as_ptr().cast(), bytes, unit, n as u64, x.as_ptr(), y.as_mut_ptr()) })?;
        Ok(y)
    }

    /// linear_bias.bin: the sum over all dense layers of W2 relu(b1) + b2 (Status::MissingArray
    /// for a model without FFN biases).
    pub fn ffn_bias(&self) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.info.d_model as usize];
        // SAFETY: out holds d_model floats.
        check(unsafe { sys::stk_ffn_bias(self.gen.raw.as_ptr(), out.as_mut_ptr(), out.len()) })?;
        Ok(out)
    }

    /// The positional memory bank's output for the input sequence `u`, from its initial registers.
    pub fn memory_run(&self, u: &[f32]) -> Result<Vec<f32>> {
        let bytes = self.info.memory_state_bytes;
        let mut state = vec![0u64; (bytes + 7) / 8];
        let g = self.gen.raw.as_ptr();
        // SAFETY: state holds `bytes` bytes; y is a valid out-pointer.
        check(unsafe { sys::stk_memory_reset(g, state.as_mut_ptr().cast(), bytes) })?;
        let mut out = Vec::with_capacity(u.len());
        for &x in u {
            let mut y = 0f32;
            check(unsafe { sys::stk_memory_step(g, state.as_mut_ptr().cast(), bytes, x, &mut y) })?;
            out.push(y);
        }
        Ok(out)
    }
}

// ---- The LM runtime (experimental tier: stk_lm_* / stk_seq_*) -------------------------------

/// How [`Lm::open`] keeps the weights in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum LmWeights {
    F32 = sys::STK_LM_WEIGHTS_F32,
    /// Half the memory; widened to f32 on the fly.
    Bf16 = sys::STK_LM_WEIGHTS_BF16,
}

/// The model's shape as the LM runtime reads it (`stk_lm_get_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmInfo {
    pub vocab_size: u64,
    pub n_layers: u32,
    pub d_model: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub model_type: String,
}

/// The weights of the LM runtime (`stk_lm_open`): an HF model directory or a GGUF, read through
/// stk's ingestion.  Read-only after opening: any number of [`Sequence`]s, on any threads.
pub struct Lm {
    raw: NonNull<sys::stk_lm>,
}

// SAFETY: the header: "weights + config, read-only: shared by any number of sequences", any thread.
unsafe impl Send for Lm {}
unsafe impl Sync for Lm {}

impl Lm {
    /// Opens the weights at `path`.  A family the forward does not compute is
    /// [`Status::NotImplemented`] naming it.
    pub fn open(path: impl AsRef<Path>, weights: LmWeights) -> Result<Lm> {
        check_version()?;
        let p = path_cstring("path", path.as_ref())?;
        let mut raw: *mut sys::stk_lm = std::ptr::null_mut();
        // SAFETY: p is NUL-terminated; raw is a valid out-pointer.
        check(unsafe { sys::stk_lm_open(p.as_ptr(), weights as u32, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::local(Status::Internal, "stk_lm_open returned STK_OK and a NULL handle".into()))?;
        Ok(Lm { raw })
    }

    pub fn info(&self) -> Result<LmInfo> {
        // SAFETY: an all-zero stk_lm_info is valid (integers and a char array).
        let mut i: sys::stk_lm_info = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<sys::stk_lm_info>();
        // SAFETY: raw is open; i is a valid out-pointer of the declared size.
        check(unsafe { sys::stk_lm_get_info(self.raw.as_ptr(), &mut i) })?;
        let bytes: Vec<u8> = i.model_type.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Ok(LmInfo {
            vocab_size: i.vocab_size,
            n_layers: i.n_layers,
            d_model: i.d_model,
            n_heads: i.n_heads,
            n_kv_heads: i.n_kv_heads,
            head_dim: i.head_dim,
            model_type: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

impl Drop for Lm {
    fn drop(&mut self) {
        // SAFETY: raw came from stk_lm_open and is closed once; sequences borrow self, so none is left.
        unsafe { sys::stk_lm_close(self.raw.as_ptr()) }
    }
}

/// A sequence's fixed state: `sinks` first positions plus a ring of the `window` most recent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqParams {
    pub sinks: u32,
    /// At least 1 (the query's own position).
    pub window: u32,
    /// 0: 1.
    pub threads: u32,
    /// Prompt tokens computed together (GEMM); 0: 64.
    pub max_batch: u32,
    /// Which `window` positions the state keeps: [`POLICY_WINDOW`] (the most recent),
    /// [`POLICY_TOVA`], [`POLICY_H2O`], [`POLICY_TOVA_HEAD`] (stk.h `STK_SEQ_POLICY_*`).
    pub policy: u32,
    /// H2O: the most recent positions never evicted; 0: window / 2.
    pub recent: u32,
}

pub const POLICY_WINDOW: u32 = 0;
pub const POLICY_TOVA: u32 = 1;
pub const POLICY_H2O: u32 = 2;
pub const POLICY_TOVA_HEAD: u32 = 3;
/// The model's own: a faithful generation's runtime block's policy (and its recent count when
/// `recent` is 0), else the window (stk.h `STK_SEQ_POLICY_DEFAULT`).
pub const POLICY_DEFAULT: u32 = 0xffff_ffff;

impl SeqParams {
    fn raw(&self) -> sys::stk_seq_params {
        sys::stk_seq_params {
            struct_size: std::mem::size_of::<sys::stk_seq_params>(),
            sinks: self.sinks,
            window: self.window,
            threads: self.threads,
            max_batch: self.max_batch,
            policy: self.policy,
            recent: self.recent,
        }
    }
}

/// One sequence over an [`Lm`] (`stk_seq_open`), in an arena this handle owns (sized by
/// `stk_seq_arena_size`; nothing is allocated per token).
pub struct Sequence<'lm> {
    raw: NonNull<sys::stk_seq>,
    _arena: Box<[u8]>,
    _lm: &'lm Lm,
    vocab: usize,
}

// SAFETY: the sequence's state lies in its own arena; the Lm it reads is Sync.
unsafe impl Send for Sequence<'_> {}

impl<'lm> Sequence<'lm> {
    pub fn open(lm: &'lm Lm, params: &SeqParams) -> Result<Sequence<'lm>> {
        let p = params.raw();
        let mut bytes = 0usize;
        // SAFETY: lm is open; p and bytes are valid pointers.
        check(unsafe { sys::stk_seq_arena_size(lm.raw.as_ptr(), &p, &mut bytes) })?;
        let mut arena = vec![0u8; bytes].into_boxed_slice();
        let mut raw: *mut sys::stk_seq = std::ptr::null_mut();
        // SAFETY: the arena holds `bytes` bytes and lives (boxed, never moved) as long as the sequence.
        check(unsafe { sys::stk_seq_open(lm.raw.as_ptr(), &p, arena.as_mut_ptr().cast(), bytes, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::local(Status::Internal, "stk_seq_open returned STK_OK and a NULL handle".into()))?;
        let vocab = lm.info()?.vocab_size as usize;
        Ok(Sequence { raw, _arena: arena, _lm: lm, vocab })
    }

    /// Feeds `tokens` at the next positions; the last token's logits are then [`Sequence::logits`].
    pub fn feed(&mut self, tokens: &[i32]) -> Result<()> {
        // SAFETY: raw is open; tokens is valid for its length; no logits are written.
        check(unsafe { sys::stk_seq_feed(self.raw.as_ptr(), tokens.as_ptr(), tokens.len(), std::ptr::null_mut()) })
    }

    /// Feeds `tokens` and returns every token's logits, row-major [tokens.len(), vocab].
    pub fn feed_all(&mut self, tokens: &[i32]) -> Result<Vec<f32>> {
        let mut out = vec![0f32; tokens.len() * self.vocab];
        // SAFETY: out holds tokens.len() * vocab floats.
        check(unsafe { sys::stk_seq_feed(self.raw.as_ptr(), tokens.as_ptr(), tokens.len(), out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// The logits of the last token fed (zeros before any) and the position (tokens fed so far).
    pub fn logits(&self) -> Result<(&[f32], u64)> {
        let (mut p, mut n, mut pos) = (std::ptr::null::<f32>(), 0usize, 0u64);
        // SAFETY: raw is open; out-pointers are valid.  The slice borrows self: valid until the
        // next feed / reset (which take &mut self).
        check(unsafe { sys::stk_seq_logits(self.raw.as_ptr(), &mut p, &mut n, &mut pos) })?;
        if p.is_null() || n != self.vocab {
            return Err(Error::local(Status::Internal, format!("stk_seq_logits gave {n} logits, the model has {}", self.vocab)));
        }
        // SAFETY: the library holds n floats at p while the sequence is unchanged.
        Ok((unsafe { std::slice::from_raw_parts(p, n) }, pos))
    }

    /// Back to position 0, the state emptied.
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: raw is open.
        check(unsafe { sys::stk_seq_reset(self.raw.as_ptr()) })
    }

    /// The positions layer `layer`'s state holds now (key/value head `kv_head`'s under
    /// [`POLICY_TOVA_HEAD`]), ascending.
    pub fn kept(&self, layer: u32, kv_head: u32) -> Result<Vec<u64>> {
        let mut n = 0usize;
        // SAFETY: raw is open; a NULL positions array with capacity 0 asks for the count.
        check(unsafe { sys::stk_seq_kept(self.raw.as_ptr(), layer, kv_head, std::ptr::null_mut(), 0, &mut n) })?;
        let mut out = vec![0u64; n];
        // SAFETY: out holds n positions.
        check(unsafe { sys::stk_seq_kept(self.raw.as_ptr(), layer, kv_head, out.as_mut_ptr(), n, &mut n) })?;
        out.truncate(n);
        Ok(out)
    }

    pub fn vocab(&self) -> usize {
        self.vocab
    }
}

impl Drop for Sequence<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from stk_seq_open and is closed once, before the arena is freed.
        unsafe { sys::stk_seq_close(self.raw.as_ptr()) }
    }
}
