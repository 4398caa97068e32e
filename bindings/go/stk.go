package stk

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lstk
#include <stdlib.h>
#define STK_EXPERIMENTAL
#include <stk/stk.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"syscall"
	"unsafe"
)

// HeaderVersionNumber is STK_VERSION_NUMBER of the header this package was compiled with.
const HeaderVersionNumber = uint32(C.STK_VERSION_NUMBER)

// HeaderVersionString is STK_VERSION_STRING of that header.
const HeaderVersionString = C.STK_VERSION_STRING

// Job flags.
const (
	AllowUncertifiedTokenizer = uint32(C.STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER)
	AllowNonfinite            = uint32(C.STK_JOB_ALLOW_NONFINITE)
	// ProfileFaithful: the model's own weights and the manifest's runtime block instead of the
	// spec's numeric arrays (stk convert --profile faithful).
	ProfileFaithful = uint32(C.STK_JOB_PROFILE_FAITHFUL)
	// FaithfulFfnInt8: with ProfileFaithful, the FFN and expert matrices as .lwt int8.
	FaithfulFfnInt8 = uint32(C.STK_JOB_FAITHFUL_FFN_INT8)
	// FaithfulFfnBf16: with ProfileFaithful, the FFN matrices kept bf16 (the profile's default
	// is Q8_0 blocks since issue 37).
	FaithfulFfnBf16 = uint32(C.STK_JOB_FAITHFUL_FFN_BF16)
)

// Status is a libstk status code; the values are the header's pinned values.
type Status uint32

const (
	StatusOK              Status = C.STK_OK
	StatusInvalidArgument Status = C.STK_E_INVALID_ARGUMENT
	StatusStructSize      Status = C.STK_E_STRUCT_SIZE
	StatusArenaTooSmall   Status = C.STK_E_ARENA_TOO_SMALL
	StatusNotImplemented  Status = C.STK_E_NOT_IMPLEMENTED
	StatusStageOrder      Status = C.STK_E_STAGE_ORDER
	StatusCancelled       Status = C.STK_E_CANCELLED
	StatusIO              Status = C.STK_E_IO
	StatusNotFound        Status = C.STK_E_NOT_FOUND
	StatusOutputExists    Status = C.STK_E_OUTPUT_EXISTS
	StatusTruncated       Status = C.STK_E_TRUNCATED
	StatusBadMagic        Status = C.STK_E_BAD_MAGIC
	StatusBadDtype        Status = C.STK_E_BAD_DTYPE
	StatusBadRank         Status = C.STK_E_BAD_RANK
	StatusDimsOverflow    Status = C.STK_E_DIMS_OVERFLOW
	StatusSizeMismatch    Status = C.STK_E_SIZE_MISMATCH
	StatusMisaligned      Status = C.STK_E_MISALIGNED
	StatusChecksum        Status = C.STK_E_CHECKSUM
	StatusMissingArray    Status = C.STK_E_MISSING_ARRAY
	StatusSchema          Status = C.STK_E_SCHEMA
	StatusBadHeader       Status = C.STK_E_BAD_HEADER
	StatusCorrupt         Status = C.STK_E_CORRUPT
	StatusUnsupported     Status = C.STK_E_UNSUPPORTED
	StatusUnsafePickle    Status = C.STK_E_UNSAFE_PICKLE
	StatusLFSPointer      Status = C.STK_E_LFS_POINTER
	StatusUnknownModel    Status = C.STK_E_UNKNOWN_MODEL
	StatusBadJSON         Status = C.STK_E_BAD_JSON
	StatusNonfinite       Status = C.STK_E_NONFINITE
	StatusParamCount      Status = C.STK_E_PARAM_COUNT
	StatusSPRejected      Status = C.STK_E_SP_REJECTED
	StatusMPHFExhausted   Status = C.STK_E_MPHF_EXHAUSTED
	StatusTableFull       Status = C.STK_E_TABLE_FULL
	StatusKeyNotFound     Status = C.STK_E_KEY_NOT_FOUND
	StatusNomem           Status = C.STK_E_NOMEM
	StatusInternal        Status = C.STK_E_INTERNAL
)

// String is stk_status_str: a short constant English name ("STK_E_CHECKSUM: checksum mismatch").
func (s Status) String() string {
	return C.GoString(C.stk_status_str(C.stk_status(s)))
}

// Error makes a Status usable as an error target: errors.Is(err, stk.StatusNotFound).
func (s Status) Error() string { return s.String() }

// Error is a failed libstk call: the status and the message the library gave for it.
type Error struct {
	Status  Status
	Message string // stk_last_error() right after the failing call ("" if none)
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Status.String() + ": " + e.Message
}

// Is reports whether target is this error's Status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// call runs one C call and, on failure, reads stk_last_error on the same OS thread (the message
// is per thread, and a goroutine may otherwise move between the two calls).
func call(f func() C.stk_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.STK_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.stk_last_error())}
}

// VersionNumber is stk_version_number() of the library actually linked.
func VersionNumber() uint32 { return uint32(C.stk_version_number()) }

// VersionString is stk_version_string() of the library actually linked.
func VersionString() string { return C.GoString(C.stk_version_string()) }

var versionErr error

func init() {
	if linked := VersionNumber(); linked != HeaderVersionNumber {
		versionErr = &Error{Status: StatusUnsupported, Message: fmt.Sprintf(
			"libstk %s (version number %d) is linked, but this package was built for %s (%d); rebuild it against the installed header",
			VersionString(), linked, HeaderVersionString, HeaderVersionNumber)}
	}
}

// CheckVersion returns the error found at package initialisation if the linked library is not
// the version of the header (the structs and enums of another version may not match).  Every
// function of this package returns it before calling in.
func CheckVersion() error { return versionErr }

// Stage is one stage of the fixed DAG (seed 15.2).
type Stage uint32

const (
	StageParseTensors Stage = C.STK_STAGE_PARSE_TENSORS
	StageTokenizer    Stage = C.STK_STAGE_TOKENIZER
	StagePRF          Stage = C.STK_STAGE_PRF
	StageOverlays     Stage = C.STK_STAGE_OVERLAYS
	StageFFNCollapse  Stage = C.STK_STAGE_FFN_COLLAPSE
	StageMPHFCuckoo   Stage = C.STK_STAGE_MPHF_CUCKOO
	StageMemoryFit    Stage = C.STK_STAGE_MEMORY_FIT
	StageBridgeInit   Stage = C.STK_STAGE_BRIDGE_INIT
	StageManifestEmit Stage = C.STK_STAGE_MANIFEST_EMIT
	StageCheck        Stage = C.STK_STAGE_CHECK
)

// StageCount is STK_STAGE_COUNT.
const StageCount = int(C.STK_STAGE_COUNT)

// Stages lists the stages in DAG order.
func Stages() []Stage {
	s := make([]Stage, StageCount)
	for i := range s {
		s[i] = Stage(i + 1)
	}
	return s
}

// String is the spec's name of the stage (stk_stage_name), or "Stage(N)" for an unknown value.
func (s Stage) String() string {
	p := C.stk_stage_name(C.stk_stage(s))
	if p == nil {
		return fmt.Sprintf("Stage(%d)", uint32(s))
	}
	return C.GoString(p)
}

// JobParams are the parameters of a conversion job.  Zero means "the library's default".
type JobParams struct {
	InDir   string // HF model directory (config.json, weights, tokenizer files)
	OutDir  string // output directory (created; must not hold a generation)
	R       uint32 // PRF rank (default 512)
	RV      uint32 // overlay rank (default 12)
	LTok    uint32 // longest token piece in bytes (default 8)
	TopL    uint32 // FFN top-L (default 12)
	Threads uint32 // worker threads (default 1); output bytes do not depend on it
	Flags   uint32 // AllowUncertifiedTokenizer | AllowNonfinite
	// Calibration: a calibration statistics file (python -m stk calibrate) the stages fit to;
	// "" converts without data.
	Calibration string
	// Sinks, Window: with ProfileFaithful, the sink positions and recent positions the runtime
	// keeps exact (0: 4 and 252); 0 otherwise.
	Sinks, Window uint32
}

// cParams is the C struct and the C strings it points to; free releases the strings.
type cParams struct {
	raw C.stk_job_params
}

func (p *JobParams) toC() (*cParams, error) {
	for _, s := range []struct{ what, v string }{{"InDir", p.InDir}, {"OutDir", p.OutDir}, {"Calibration", p.Calibration}} {
		for i := 0; i < len(s.v); i++ {
			if s.v[i] == 0 {
				return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("%s %q contains a NUL byte", s.what, s.v)}
			}
		}
	}
	c := &cParams{}
	c.raw.struct_size = C.size_t(unsafe.Sizeof(c.raw))
	c.raw.in_dir = C.CString(p.InDir)
	c.raw.out_dir = C.CString(p.OutDir)
	c.raw.r = C.uint32_t(p.R)
	c.raw.rv = C.uint32_t(p.RV)
	c.raw.l_tok = C.uint32_t(p.LTok)
	c.raw.top_l = C.uint32_t(p.TopL)
	c.raw.threads = C.uint32_t(p.Threads)
	c.raw.flags = C.uint32_t(p.Flags)
	c.raw.sinks = C.uint32_t(p.Sinks)
	c.raw.window = C.uint32_t(p.Window)
	if p.Calibration != "" {
		c.raw.calibration = C.CString(p.Calibration)
	}
	return c, nil
}

func (c *cParams) free() {
	C.free(unsafe.Pointer(c.raw.in_dir))
	C.free(unsafe.Pointer(c.raw.out_dir))
	C.free(unsafe.Pointer(c.raw.calibration)) // free(NULL) is a no-op
}

// ArenaSize is stk_job_arena_size: how many arena bytes a job with these parameters needs.  It
// reads the checkpoint's metadata, never its weights.
func ArenaSize(p *JobParams) (int, error) {
	if versionErr != nil {
		return 0, versionErr
	}
	c, err := p.toC()
	if err != nil {
		return 0, err
	}
	defer c.free()
	var n C.size_t
	if err := call(func() C.stk_status { return C.stk_job_arena_size(&c.raw, &n) }); err != nil {
		return 0, err
	}
	if uint64(n) > math.MaxInt {
		return 0, &Error{Status: StatusNomem, Message: fmt.Sprintf("arena of %d bytes does not fit in an int", uint64(n))}
	}
	return int(n), nil
}

// Digest is what a finished stage recorded: crc32c and sha256_low64 over the bytes of every
// array it wrote, in write order.
type Digest struct {
	CRC32C      uint32
	SHA256Low64 uint64
}

// Job is a conversion job.  It lives inside its arena, anonymous memory mapped outside the Go
// heap; Close (or the finalizer, as a safety net) closes the job and then unmaps the arena.
// A Job is not safe for concurrent use.
type Job struct {
	raw   *C.stk_job
	arena []byte // mmap'd; len = the arena size handed to stk_open
}

// Open sizes the arena with ArenaSize and opens the job in it.
func Open(p *JobParams) (*Job, error) {
	n, err := ArenaSize(p)
	if err != nil {
		return nil, err
	}
	return OpenWithArena(p, n)
}

// OpenWithArena opens the job in an arena of exactly arenaBytes (at least ArenaSize; a smaller
// one is StatusArenaTooSmall).  The pages are committed only as the library touches them.
func OpenWithArena(p *JobParams, arenaBytes int) (*Job, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	if arenaBytes <= 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("arena of %d bytes", arenaBytes)}
	}
	c, err := p.toC()
	if err != nil {
		return nil, err
	}
	defer c.free()
	arena, err := syscall.Mmap(-1, 0, arenaBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, &Error{Status: StatusNomem, Message: fmt.Sprintf("mapping a %d-byte arena for %s: %v", arenaBytes, p.InDir, err)}
	}
	var raw *C.stk_job
	err = call(func() C.stk_status {
		return C.stk_open(&c.raw, unsafe.Pointer(&arena[0]), C.size_t(len(arena)), &raw)
	})
	if err == nil && raw == nil {
		err = &Error{Status: StatusInternal, Message: "stk_open returned STK_OK and a NULL job"}
	}
	if err != nil {
		_ = syscall.Munmap(arena)
		return nil, err
	}
	j := &Job{raw: raw, arena: arena}
	runtime.SetFinalizer(j, (*Job).Close)
	return j, nil
}

// ArenaBytes is the size of the arena the job lives in.
func (j *Job) ArenaBytes() int { return len(j.arena) }

func (j *Job) closed() error {
	if j.raw == nil {
		return &Error{Status: StatusInvalidArgument, Message: "the job is closed"}
	}
	return nil
}

// Run is stk_stage_run: runs one stage (in DAG order; StatusStageOrder otherwise).
func (j *Job) Run(s Stage) error {
	if err := j.closed(); err != nil {
		return err
	}
	err := call(func() C.stk_status { return C.stk_stage_run(j.raw, C.stk_stage(s)) })
	runtime.KeepAlive(j)
	return err
}

// Digest is stk_stage_digest: what a finished stage recorded.
func (j *Job) Digest(s Stage) (Digest, error) {
	if err := j.closed(); err != nil {
		return Digest{}, err
	}
	var crc C.uint32_t
	var sha C.uint64_t
	err := call(func() C.stk_status { return C.stk_stage_digest(j.raw, C.stk_stage(s), &crc, &sha) })
	runtime.KeepAlive(j)
	if err != nil {
		return Digest{}, err
	}
	return Digest{CRC32C: uint32(crc), SHA256Low64: uint64(sha)}, nil
}

// TokenizerMode is what the tokenizer stage decided (stk_tokenizer_mode, experimental tier).
type TokenizerMode uint32

const (
	TokenizerNotRun         TokenizerMode = C.STK_TOKENIZER_NOT_RUN
	TokenizerAbsent         TokenizerMode = C.STK_TOKENIZER_ABSENT
	TokenizerFST            TokenizerMode = C.STK_TOKENIZER_FST
	TokenizerFSTUncertified TokenizerMode = C.STK_TOKENIZER_FST_UNCERTIFIED
	TokenizerEXT            TokenizerMode = C.STK_TOKENIZER_EXT
)

// JobInfo is stk_job_get_info: what a job decided so far.
type JobInfo struct {
	TokenizerMode         TokenizerMode
	TokenizerCertifiedRun bool   // the unique-decodability test ran (byte-level BPE)
	VocabSize             uint32 // tokens in the vocabulary
	LTok                  uint32 // longest token piece in the tables, bytes
	TokenizerReason       string // why that mode ("" if nothing to say)
}

// Info is stk_job_get_info (experimental tier).
func (j *Job) Info() (JobInfo, error) {
	if err := j.closed(); err != nil {
		return JobInfo{}, err
	}
	var c C.stk_job_info
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	err := call(func() C.stk_status { return C.stk_job_get_info(j.raw, &c) })
	runtime.KeepAlive(j)
	if err != nil {
		return JobInfo{}, err
	}
	return JobInfo{
		TokenizerMode:         TokenizerMode(c.tokenizer_mode),
		TokenizerCertifiedRun: c.tokenizer_certified_run != 0,
		VocabSize:             uint32(c.vocab_size),
		LTok:                  uint32(c.l_tok),
		TokenizerReason:       C.GoString(&c.tokenizer_reason[0]),
	}, nil
}

// StageState is the state of one stage (stk_stage_state, experimental tier).
type StageState uint32

const (
	StagePending        StageState = C.STK_STAGE_STATE_PENDING
	StageDone           StageState = C.STK_STAGE_STATE_DONE
	StageDisabled       StageState = C.STK_STAGE_STATE_DISABLED
	StageNotImplemented StageState = C.STK_STAGE_STATE_NOT_IMPLEMENTED
)

// StageInfo is stk_stage_get_info: a stage's state, digest and (when disabled) the reason the
// manifest records.
type StageInfo struct {
	State  StageState
	Digest Digest
	Reason string
}

// StageInfo is stk_stage_get_info (experimental tier).
func (j *Job) StageInfo(s Stage) (StageInfo, error) {
	if err := j.closed(); err != nil {
		return StageInfo{}, err
	}
	var c C.stk_stage_info
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	err := call(func() C.stk_status { return C.stk_stage_get_info(j.raw, C.stk_stage(s), &c) })
	runtime.KeepAlive(j)
	if err != nil {
		return StageInfo{}, err
	}
	return StageInfo{
		State:  StageState(c.state),
		Digest: Digest{CRC32C: uint32(c.crc32c), SHA256Low64: uint64(c.sha256_low64)},
		Reason: C.GoString(&c.reason[0]),
	}, nil
}

// Progress is stk_job_progress (experimental tier): done of total units of the running stage.
// The C call may run while Run runs on another goroutine.
func (j *Job) Progress() (done, total uint64, unit string, err error) {
	if err = j.closed(); err != nil {
		return
	}
	var d, t C.uint64_t
	var u *C.char
	err = call(func() C.stk_status { return C.stk_job_progress(j.raw, &d, &t, &u) })
	runtime.KeepAlive(j)
	if err != nil {
		return
	}
	return uint64(d), uint64(t), C.GoString(u), nil
}

// Close releases the job (stk_close), then its arena.  Closing twice is a no-op.
func (j *Job) Close() error {
	if j.raw == nil {
		return nil
	}
	C.stk_close(j.raw)
	j.raw = nil
	runtime.SetFinalizer(j, nil)
	err := syscall.Munmap(j.arena)
	j.arena = nil
	return err
}

// VerifyReport is what stk_verify checked, and on failure where it stopped.
type VerifyReport struct {
	ArraysChecked uint32 // arrays whose header and payload were verified
	BytesChecked  uint64 // payload bytes hashed
	FailedFile    string // on failure: file relative to the output directory ("" if none)
	FailedOffset  uint64 // on failure: byte offset inside that file
}

// Verify is stk_verify: it checks a published output directory (manifest, hash chain, every
// array).  The report is filled on failure too (FailedFile, FailedOffset).
func Verify(outDir string) (VerifyReport, error) {
	if versionErr != nil {
		return VerifyReport{}, versionErr
	}
	dir, err := cPath("outDir", outDir)
	if err != nil {
		return VerifyReport{}, err
	}
	defer C.free(unsafe.Pointer(dir))
	var r C.stk_verify_report
	r.struct_size = C.size_t(unsafe.Sizeof(r))
	err = call(func() C.stk_status { return C.stk_verify(dir, &r) })
	// Bounded: the field is 256 bytes; up to the first NUL.
	name := make([]byte, 0, len(r.failed_file))
	for _, ch := range r.failed_file {
		if ch == 0 {
			break
		}
		name = append(name, byte(ch))
	}
	return VerifyReport{
		ArraysChecked: uint32(r.arrays_checked),
		BytesChecked:  uint64(r.bytes_checked),
		FailedFile:    string(name),
		FailedOffset:  uint64(r.failed_offset),
	}, err
}

func cPath(what, p string) (*C.char, error) {
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("%s %q contains a NUL byte", what, p)}
		}
	}
	return C.CString(p), nil
}

// LookupKind selects one of the O(1) lookups of a generation.
type LookupKind uint32

const (
	LookupTokenID    LookupKind = C.STK_LOOKUP_TOKEN_ID    // token bytes -> u32 token id (LE)
	LookupTokenBytes LookupKind = C.STK_LOOKUP_TOKEN_BYTES // u32 token id (LE) -> token bytes
	LookupLinear     LookupKind = C.STK_LOOKUP_LINEAR      // u64 feature key (LE) -> f32 base weight (LE)
	LookupHub        LookupKind = C.STK_LOOKUP_HUB         // u32 token id, u32 context id (LE) -> hub bitset
)

// Generation is a published generation, mapped read-only and verified (stk_generation_open).
type Generation struct {
	raw *C.stk_generation
}

// OpenGeneration maps and verifies the generation published in outDir.
func OpenGeneration(outDir string) (*Generation, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	dir, err := cPath("outDir", outDir)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(dir))
	var raw *C.stk_generation
	if err := call(func() C.stk_status { return C.stk_generation_open(dir, &raw) }); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, &Error{Status: StatusInternal, Message: "stk_generation_open returned STK_OK and a NULL handle"}
	}
	g := &Generation{raw: raw}
	runtime.SetFinalizer(g, (*Generation).Close)
	return g, nil
}

// Close unmaps the generation.  Closing twice is a no-op.
func (g *Generation) Close() error {
	if g.raw != nil {
		C.stk_generation_close(g.raw)
		g.raw = nil
		runtime.SetFinalizer(g, nil)
	}
	return nil
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// lookupRaw returns the value length, and on failure also the length the library asked for.
func (g *Generation) lookupRaw(kind LookupKind, key, value []byte) (int, int, error) {
	if g.raw == nil {
		return 0, 0, &Error{Status: StatusInvalidArgument, Message: "the generation is closed"}
	}
	var n C.size_t
	err := call(func() C.stk_status {
		return C.stk_lookup(g.raw, C.stk_lookup_kind(kind), bytesPtr(key), C.size_t(len(key)),
			bytesPtr(value), C.size_t(len(value)), &n)
	})
	runtime.KeepAlive(g)
	if err != nil {
		return 0, int(n), err
	}
	if int(n) > len(value) {
		return 0, 0, &Error{Status: StatusInternal, Message: fmt.Sprintf("stk_lookup said %d bytes for a %d-byte buffer", n, len(value))}
	}
	return int(n), 0, nil
}

// LookupInto is one lookup into value; it returns the value's length.  A value longer than
// value is StatusInvalidArgument; an absent key is StatusKeyNotFound.
func (g *Generation) LookupInto(kind LookupKind, key, value []byte) (int, error) {
	n, _, err := g.lookupRaw(kind, key, value)
	return n, err
}

// Lookup is one lookup; an absent key is an error that errors.Is StatusKeyNotFound.
func (g *Generation) Lookup(kind LookupKind, key []byte) ([]byte, error) {
	buf := make([]byte, 64)
	n, need, err := g.lookupRaw(kind, key, buf)
	if err != nil {
		e, ok := err.(*Error)
		if !ok || e.Status != StatusInvalidArgument || need <= len(buf) {
			return nil, err
		}
		buf = make([]byte, need) // the library said how much it needs
		if n, _, err = g.lookupRaw(kind, key, buf); err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}

func (g *Generation) fixed4(kind LookupKind, key []byte) ([4]byte, error) {
	var out [4]byte
	v, err := g.Lookup(kind, key)
	if err != nil {
		return out, err
	}
	if len(v) != 4 {
		return out, &Error{Status: StatusCorrupt, Message: fmt.Sprintf("lookup kind %d returned %d bytes, expected 4", kind, len(v))}
	}
	copy(out[:], v)
	return out, nil
}

// TokenID maps token bytes to the token id.
func (g *Generation) TokenID(piece []byte) (uint32, error) {
	v, err := g.fixed4(LookupTokenID, piece)
	return uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24, err
}

// TokenBytes maps a token id to its bytes.
func (g *Generation) TokenBytes(id uint32) ([]byte, error) {
	return g.Lookup(LookupTokenBytes, le32(id))
}

// LinearKey is the key of entry (output out, input feature in) of FFN unit unit's collapsed map
// for inputs of sign negative (docs/format.md, "Linear dictionary"): bit 63 the sign, bits 48..62
// the unit, 24..47 the output index, 0..23 the input index.
func LinearKey(negative bool, unit, out, in uint32) uint64 {
	var s uint64
	if negative {
		s = 1
	}
	return s<<63 | uint64(unit&0x7FFF)<<48 | uint64(out&0xFFFFFF)<<24 | uint64(in&0xFFFFFF)
}

// LinearWeight maps a LinearKey to the collapsed FFN map's entry (base or delta); an entry the
// truncation dropped (value 0) or a key of no entry is StatusKeyNotFound.
func (g *Generation) LinearWeight(key uint64) (float32, error) {
	k := make([]byte, 8)
	for i := range k {
		k[i] = byte(key >> (8 * i))
	}
	v, err := g.fixed4(LookupLinear, k)
	bits := uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24
	return math.Float32frombits(bits), err
}

// Hub maps (token id, context id) to the bridge's hub bitset (docs/format.md, "Bridge arrays"):
// W uint64 words (hub h is bit h%64 of word h/64), the token's row OR the context's row.  An id
// out of range is StatusKeyNotFound; a generation without a bridge StatusMissingArray.
func (g *Generation) Hub(token, context uint32) ([]uint64, error) {
	v, err := g.Lookup(LookupHub, append(le32(token), le32(context)...))
	if err != nil {
		return nil, err
	}
	if len(v)%8 != 0 {
		return nil, &Error{Status: StatusCorrupt, Message: "hub lookup returned a partial word"}
	}
	words := make([]uint64, len(v)/8)
	for i := range words {
		for b := 0; b < 8; b++ {
			words[i] |= uint64(v[8*i+b]) << (8 * b)
		}
	}
	return words, nil
}

func le32(v uint32) []byte {
	return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
}
