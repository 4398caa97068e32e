package stk

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fixture is the tiny GPT-2 directory of bindings/testdata (STK_BINDINGS_FIXTURE overrides).
func fixture(t *testing.T) string {
	if p := os.Getenv("STK_BINDINGS_FIXTURE"); p != "" {
		return p
	}
	p, err := filepath.Abs("../testdata/tiny-gpt2")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *stk.Error, got %T %v", err, err)
	}
	return e
}

func TestVersionMatchesHeader(t *testing.T) {
	if HeaderVersionNumber != 100 || VersionNumber() != 100 {
		t.Fatalf("header %d, library %d, want 100", HeaderVersionNumber, VersionNumber())
	}
	if VersionString() != "0.1.0" || HeaderVersionString != "0.1.0" {
		t.Fatalf("version string %q / %q", VersionString(), HeaderVersionString)
	}
	if err := CheckVersion(); err != nil {
		t.Fatal(err)
	}
}

func TestStatusStringsAndValues(t *testing.T) {
	cases := []struct {
		s    Status
		v    uint32
		name string
	}{
		{StatusOK, 0, "STK_OK: success"},
		{StatusStructSize, 2, "STK_E_STRUCT_SIZE: struct_size too small"},
		{StatusArenaTooSmall, 3, "STK_E_ARENA_TOO_SMALL: arena too small"},
		{StatusNotImplemented, 4, "STK_E_NOT_IMPLEMENTED: not implemented"},
		{StatusNotFound, 11, "STK_E_NOT_FOUND: file not found"},
		{StatusChecksum, 27, "STK_E_CHECKSUM: checksum mismatch"},
		{StatusUnsafePickle, 41, "STK_E_UNSAFE_PICKLE: pickle outside the allowlist"},
		{StatusKeyNotFound, 63, "STK_E_KEY_NOT_FOUND: key not found"},
		{StatusInternal, 99, "STK_E_INTERNAL: internal error"},
		{Status(12345), 12345, "STK_E_?: unknown status"},
	}
	for _, c := range cases {
		if uint32(c.s) != c.v || c.s.String() != c.name {
			t.Errorf("status %d: got value %d name %q, want %d %q", c.s, uint32(c.s), c.s.String(), c.v, c.name)
		}
	}
	e := &Error{Status: StatusNotFound, Message: "/x: missing"}
	if e.Error() != "STK_E_NOT_FOUND: file not found: /x: missing" {
		t.Errorf("Error() = %q", e.Error())
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", e), StatusNotFound) || errors.Is(e, StatusIO) {
		t.Error("errors.Is does not match on the status")
	}
}

func TestStageNames(t *testing.T) {
	want := []string{"parse_tensors", "tokenizer_build_or_wrap", "prf_build", "overlays_build", "ffn_collapse",
		"mphf_cuckoo", "memory_fit", "bridge_init", "manifest_emit", "check"}
	var got []string
	for _, s := range Stages() {
		got = append(got, s.String())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stages %v", got)
	}
	if Stage(11).String() != "Stage(11)" || Stage(0).String() != "Stage(0)" {
		t.Fatal("unknown stages must not get a name")
	}
}

func TestStructSizes(t *testing.T) {
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		if jobParamsSize() != 72 || verifyReportSize() != 288 {  // 72: policy and recent appended (issue 37)
			t.Fatalf("sizeof stk_job_params %d, stk_verify_report %d", jobParamsSize(), verifyReportSize())
		}
	}
}

func TestVerifyMissingDirIsNotFoundAndNamesIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-output")
	_, err := Verify(dir)
	e := asError(t, err)
	if e.Status != StatusNotFound || uint32(e.Status) != 11 {
		t.Fatalf("status %d (%v), want 11", uint32(e.Status), err)
	}
	if !strings.Contains(e.Message, dir) {
		t.Fatalf("message %q does not name %s", e.Message, dir)
	}
	if !strings.HasPrefix(err.Error(), "STK_E_NOT_FOUND: file not found: ") {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestGenerationOpenMissingDirIsNotFound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-output")
	g, err := OpenGeneration(dir)
	if g != nil {
		t.Fatal("got a generation for a missing directory")
	}
	e := asError(t, err)
	if e.Status != StatusNotFound || !strings.Contains(e.Message, dir) {
		t.Fatalf("%v", err)
	}
}

func TestArenaSizeWithStructSizeZero(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	st, msg, n := arenaSizeWithStructSize(0, fixture(t), out)
	if st != StatusStructSize || uint32(st) != 2 {
		t.Fatalf("status %d (%s), want 2", uint32(st), msg)
	}
	if !strings.Contains(msg, "struct_size") || n != 12345 {
		t.Fatalf("message %q, bytes %d", msg, n)
	}
	// One byte short of the first version (48 bytes: up to flags; calibration was appended).
	if st, _, _ := arenaSizeWithStructSize(47, fixture(t), out); st != StatusStructSize {
		t.Fatalf("one byte short: %v", st)
	}
}

func TestArenaOneByteTooSmall(t *testing.T) {
	p := &JobParams{InDir: fixture(t), OutDir: filepath.Join(t.TempDir(), "out")}
	need, err := ArenaSize(p)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ArenaSize(p); again != need || need <= 0 {
		t.Fatalf("arena size %d then %d", need, again)
	}
	_, err = OpenWithArena(p, need-1)
	e := asError(t, err)
	if e.Status != StatusArenaTooSmall || uint32(e.Status) != 3 || !strings.Contains(e.Message, "arena") {
		t.Fatalf("%v", err)
	}
	j, err := OpenWithArena(p, need)
	if err != nil {
		t.Fatal(err)
	}
	if j.ArenaBytes() != need {
		t.Fatalf("arena %d, want %d", j.ArenaBytes(), need)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := j.Run(StageParseTensors); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("Run after Close: %v", err)
	}
}

func TestOutOfRangeOptionsAreRefused(t *testing.T) {
	p := &JobParams{InDir: fixture(t), OutDir: filepath.Join(t.TempDir(), "out"), R: 5000}
	_, err := ArenaSize(p)
	if e := asError(t, err); e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "5000") {
		t.Fatalf("%v", err)
	}
	p.R, p.Flags = 0, 0x80
	if _, err := ArenaSize(p); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("flags 0x80: %v", err)
	}
	p.Flags = AllowNonfinite | AllowUncertifiedTokenizer
	if n, err := ArenaSize(p); err != nil || n <= 0 {
		t.Fatalf("%d %v", n, err)
	}
	// The faithful profile's window: refused without the profile, taken with it.
	p.Window = 60
	if _, err := ArenaSize(p); !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "faithful") {
		t.Fatalf("window without the profile: %v", err)
	}
	p.Flags |= ProfileFaithful | FaithfulFfnInt8
	if n, err := ArenaSize(p); err != nil || n <= 0 {
		t.Fatalf("faithful: %d %v", n, err)
	}
	p.Flags, p.Window = 0, 0
	p.InDir = "bad\x00dir"
	if _, err := ArenaSize(p); !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "InDir") {
		t.Fatalf("NUL in path: %v", err)
	}
}

func TestJobEnforcesStageOrder(t *testing.T) {
	j, err := Open(&JobParams{InDir: fixture(t), OutDir: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	err = j.Run(StageTokenizer)
	e := asError(t, err)
	if e.Status != StatusStageOrder || uint32(e.Status) != 5 || !strings.Contains(e.Message, "parse_tensors") {
		t.Fatalf("%v", err)
	}
	if _, err := j.Digest(StageParseTensors); !errors.Is(err, StatusStageOrder) {
		t.Fatalf("digest of a stage that has not run: %v", err)
	}
}

func TestOutputHoldingAGenerationIsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(out, "sera_manifest.bin")
	if err := os.WriteFile(manifest, []byte("published"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(&JobParams{InDir: fixture(t), OutDir: out})
	e := asError(t, err)
	if e.Status != StatusOutputExists || uint32(e.Status) != 12 || !strings.Contains(e.Message, out) {
		t.Fatalf("%v", err)
	}
	if b, _ := os.ReadFile(manifest); string(b) != "published" {
		t.Fatal("the existing manifest was touched")
	}
}

// publishTinyGPT2 runs the whole DAG on the tiny model into a fresh directory.  A stage may be
// NOT_IMPLEMENTED (it writes nothing and its feature is recorded as disabled); any other failure
// fails.  Every byte-level BPE vocabulary is ambiguous under Sardinas-Patterson ("he" = "h" +
// "e"), so the greedy tables are built only with AllowUncertifiedTokenizer.
func publishTinyGPT2(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	j, err := Open(&JobParams{InDir: fixture(t), OutDir: out, Flags: AllowUncertifiedTokenizer})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ran := map[Stage]bool{}
	for _, s := range Stages() {
		err := j.Run(s)
		if err == nil {
			ran[s] = true
		} else if !errors.Is(err, StatusNotImplemented) {
			t.Fatalf("stage %v: %v", s, err)
		}
	}
	if !ran[StageParseTensors] || !ran[StageTokenizer] || !ran[StageManifestEmit] {
		t.Fatalf("stages that ran: %v", ran)
	}
	// stk_job_get_info / stk_stage_get_info: what the CLI reports, through the public API.
	info, err := j.Info()
	if err != nil || info.TokenizerMode != TokenizerFSTUncertified || !info.TokenizerCertifiedRun || info.VocabSize != 261 ||
		!strings.Contains(info.TokenizerReason, "Sardinas-Patterson") {
		t.Fatalf("job info %+v, %v", info, err)
	}
	pd, _ := j.Digest(StageParseTensors)
	if si, err := j.StageInfo(StageParseTensors); err != nil || si.State != StageDone || si.Digest != pd || si.Reason != "" {
		t.Fatalf("stage info %+v, %v", si, err)
	}
	if done, total, _, err := j.Progress(); err != nil || done > total {
		t.Fatalf("progress %d/%d, %v", done, total, err)
	}
	if d, err := j.Digest(StageTokenizer); err != nil || d == (Digest{}) {
		t.Fatalf("tokenizer digest %+v, %v", d, err)
	}
	for s := range ran {
		if _, err := j.Digest(s); err != nil {
			t.Fatalf("digest %v: %v", s, err)
		}
	}
	return out
}

func TestConvertThenVerifyThenDetectAFlippedBit(t *testing.T) {
	out := publishTinyGPT2(t)
	rep, err := Verify(out)
	if err != nil {
		t.Fatalf("%v (%+v)", err, rep)
	}
	// tokenizer_fst.bin and T_1..T_8 (l_tok 8).
	if rep.ArraysChecked < 9 || rep.BytesChecked == 0 || rep.FailedFile != "" {
		t.Fatalf("report %+v", rep)
	}
	// One flipped payload bit: the report names the file and the payload's offset (after the
	// 128-byte array header).
	fst := filepath.Join(out, "arrays", "tokenizer_fst.bin")
	b, err := os.ReadFile(fst)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.Chmod(fst, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(out)
	if !errors.Is(err, StatusChecksum) || rep.FailedFile != "arrays/tokenizer_fst.bin" || rep.FailedOffset != 128 {
		t.Fatalf("%v, report %+v", err, rep)
	}
	if !strings.Contains(err.Error(), "tokenizer_fst.bin") {
		t.Fatalf("%v", err)
	}
}

func TestTokenLookupsOnAPublishedGeneration(t *testing.T) {
	out := publishTinyGPT2(t)
	g, err := OpenGeneration(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// bindings/testdata/generate.py: 256 byte tokens, then "Ġt" 256, "he" 257, "Ġthe" 258.
	for piece, id := range map[string]uint32{"he": 257, " the": 258, "A": 'A'} {
		if got, err := g.TokenID([]byte(piece)); err != nil || got != id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", piece, got, err, id)
		}
	}
	if b, err := g.TokenBytes(257); err != nil || string(b) != "he" {
		t.Errorf("TokenBytes(257) = %q, %v", b, err)
	}
	if _, err := g.TokenID([]byte("not a token")); !errors.Is(err, StatusKeyNotFound) {
		t.Errorf("absent token: %v", err)
	}
	if _, err := g.LookupInto(LookupTokenBytes, le32(257), make([]byte, 1)); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("1-byte buffer: %v", err)
	}
	two := make([]byte, 2)
	if n, err := g.LookupInto(LookupTokenBytes, le32(257), two); err != nil || n != 2 || string(two) != "he" {
		t.Errorf("2-byte buffer: %d %q %v", n, two, err)
	}
}

func TestLinearLookupsOnAPublishedGeneration(t *testing.T) {
	out := publishTinyGPT2(t)
	g, err := OpenGeneration(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// d_model 16, top-L 12: column 0 of unit 0 holds 12 base entries and its delta entries.
	found := 0
	for i := uint32(0); i < 16; i++ {
		v, err := g.LinearWeight(LinearKey(false, 0, i, 0))
		if err == nil {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Errorf("entry %d: %v", i, v)
			}
			found++
		} else if !errors.Is(err, StatusKeyNotFound) {
			t.Fatal(err)
		}
	}
	if found < 12 {
		t.Fatalf("%d entries of column 0", found)
	}
	// Units 0 and 1 only (two dense layers): unit 2 has no entries.
	if _, err := g.LinearWeight(LinearKey(true, 2, 0, 0)); !errors.Is(err, StatusKeyNotFound) {
		t.Errorf("unit 2: %v", err)
	}
	if _, err := g.LookupInto(LookupLinear, make([]byte, 4), make([]byte, 4)); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("4-byte key: %v", err)
	}
}

// mix64 is the library's mixer: one full splitmix64 step (increment included), written out plainly.
func mix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// hubRow is a W = 2 bridge row (docs/format.md, "Bridge arrays"): the bits of two salted hashes.
func hubRow(id uint64, salts [2]uint64) [2]uint64 {
	var row [2]uint64
	for _, salt := range salts {
		bit := ((mix64(id^mix64(salt^0xD6E8FEB86659FD93)) >> 32) * 128) >> 32
		row[bit/64] |= 1 << (bit % 64)
	}
	return row
}

func TestHubLookupsOnAPublishedGeneration(t *testing.T) {
	out := publishTinyGPT2(t)
	g, err := OpenGeneration(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tok := [2]uint64{0x416b6f742d677262, 0x426b6f742d677262} // "brg-tokA", "brg-tokB"
	ctx := [2]uint64{0x417874632d677262, 0x427874632d677262} // "brg-ctxA", "brg-ctxB"
	// 261 tokens (generate.py): 512 contexts (next power of two, at least 64).
	for _, c := range [][2]uint32{{0, 0}, {1, 7}, {260, 511}, {258, 100}} {
		words, err := g.Hub(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		tr, cr := hubRow(uint64(c[0]), tok), hubRow(uint64(c[1]), ctx)
		if len(words) != 2 || words[0] != tr[0]|cr[0] || words[1] != tr[1]|cr[1] {
			t.Errorf("token %d context %d: %x, want %x %x", c[0], c[1], words, tr[0]|cr[0], tr[1]|cr[1])
		}
	}
	if _, err := g.Hub(261, 0); !errors.Is(err, StatusKeyNotFound) {
		t.Errorf("token 261: %v", err)
	}
	if _, err := g.Hub(0, 512); !errors.Is(err, StatusKeyNotFound) {
		t.Errorf("context 512: %v", err)
	}
	if _, err := g.LookupInto(LookupHub, make([]byte, 4), make([]byte, 16)); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("4-byte key: %v", err)
	}
}

// The reference runtime: shapes, the FFN against the lookup, a first PRF token reading its own
// value, deltaC's shape, the memory bank, and a refused layer.
func TestReferenceRuntimeOnAPublishedGeneration(t *testing.T) {
	out := publishTinyGPT2(t)
	g, err := OpenGeneration(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rt, err := g.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	i := rt.Info
	if i.NLayers != 2 || i.DModel != 16 || i.DV != 16 || i.NFFNUnits != 2 || !i.HasPRF || !i.HasOverlays || !i.HasLinear || !i.HasMemory {
		t.Fatalf("info %+v", i)
	}
	d := int(i.DModel)
	x := make([]float32, d)
	x[3] = 2
	y, err := rt.FFNApply(1, x)
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o < d; o++ {
		m, err := g.LinearWeight(LinearKey(false, 1, uint32(o), 3))
		if err != nil {
			m = 0
		}
		if y[o] != float32(2*float64(m)) {
			t.Fatalf("output %d: %v, want 2 x %v", o, y[o], m)
		}
	}
	xq := make([]float32, d)
	v := make([]float32, d)
	for j := range xq {
		xq[j] = float32(math.Sin(float64(j) * 0.37))
		v[j] = float32(j) - 7.5
	}
	o, err := rt.PRFRun(0, false, xq, v)
	if err != nil {
		t.Fatal(err)
	}
	for j := range v {
		if math.Abs(float64(o[j]-v[j])) > 1e-5*(1+math.Abs(float64(v[j]))) {
			t.Fatalf("prf %d: %v, want %v", j, o[j], v[j])
		}
	}
	if _, err := rt.PRFRun(0, true, xq, v); err != nil {
		t.Fatal(err)
	}
	dc, err := rt.OverlayDelta(1, xq)
	if err != nil || len(dc) != d {
		t.Fatalf("overlay: %v (%d values)", err, len(dc))
	}
	h, err := rt.MemoryRun([]float32{1, 0, 0})
	if err != nil || len(h) != 3 {
		t.Fatalf("memory: %v", err)
	}
	_, err = rt.PRFRun(2, false, xq, v)
	if e, ok := err.(*Error); !ok || e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "layer 2, the generation has 2 layers") {
		t.Fatalf("layer 2: %v", err)
	}
}
