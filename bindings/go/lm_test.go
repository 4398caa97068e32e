package stk

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The LM runtime through the Go binding: tiny GPT-2's logits against transformers' float32
// forward as tests/fixtures/lm/forward_reference.py recorded it.

func sourceRoot(t *testing.T) string {
	if p := os.Getenv("STK_SOURCE_ROOT"); p != "" {
		return p
	}
	p, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readNpy reads a little-endian f32 C-order .npy: (shape, values).
func readNpy(t *testing.T, path string) ([]int, []float32) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "\x93NUMPY" {
		t.Fatalf("%s: not a .npy", path)
	}
	hlen, start := int(binary.LittleEndian.Uint16(b[8:10])), 10
	if b[6] != 1 {
		hlen, start = int(binary.LittleEndian.Uint32(b[8:12])), 12
	}
	h := string(b[start : start+hlen])
	if !strings.Contains(h, "'descr': '<f4'") || !strings.Contains(h, "'fortran_order': False") {
		t.Fatalf("%s: header %q", path, h)
	}
	s := h[strings.Index(h, "'shape': (")+10:]
	var shape []int
	n := 1
	for _, f := range strings.Split(s[:strings.Index(s, ")")], ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			shape = append(shape, v)
			n *= v
		}
	}
	data := b[start+hlen:]
	if len(data) != 4*n {
		t.Fatalf("%s: %d data bytes for shape %v", path, len(data), shape)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return shape, out
}

func argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

func TestLmTinyGPT2MatchesTransformers(t *testing.T) {
	root := sourceRoot(t)
	var ref struct {
		Models map[string]struct {
			TokenIDs []int32 `json:"token_ids"`
		} `json:"models"`
	}
	raw, err := os.ReadFile(filepath.Join(root, "tests/fixtures/lm/reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	toks := ref.Models["tiny_gpt2"].TokenIDs
	shape, want := readNpy(t, filepath.Join(root, "tests/fixtures/lm/tiny_gpt2.full.npy"))
	if len(toks) == 0 || len(shape) != 2 || shape[0] != len(toks) || shape[1] != 261 {
		t.Fatalf("reference: %d tokens, logits %v", len(toks), shape)
	}
	lm, err := OpenLm(fixture(t), LmWeightsF32)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	info, err := lm.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.VocabSize != 261 || info.ModelType != "gpt2" {
		t.Fatalf("info %+v", info)
	}
	v := int(info.VocabSize)
	for _, mb := range []uint32{64, 1} {
		seq, err := lm.OpenSequence(SeqParams{Sinks: 0, Window: uint32(len(toks)), Threads: 2, MaxBatch: mb})
		if err != nil {
			t.Fatal(err)
		}
		got, err := seq.FeedAll(toks)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for p := range toks {
			g, w := got[p*v:(p+1)*v], want[p*v:(p+1)*v]
			if argmax(g) != argmax(w) {
				t.Fatalf("batch %d: top-1 at position %d: %d, transformers %d", mb, p, argmax(g), argmax(w))
			}
			for i := range g {
				worst = math.Max(worst, math.Abs(float64(g[i])-float64(w[i])))
			}
		}
		if worst > 1e-4 {
			t.Fatalf("batch %d: max |delta logit| %g", mb, worst)
		}
		last, pos, err := seq.Logits()
		if err != nil || pos != uint64(len(toks)) || argmax(last) != argmax(want[(len(toks)-1)*v:]) {
			t.Fatalf("Logits: pos %d, err %v", pos, err)
		}
		if err := seq.Reset(); err != nil {
			t.Fatal(err)
		}
		if err := seq.Feed(toks[:1]); err != nil {
			t.Fatal(err)
		}
		if first, pos, _ := seq.Logits(); pos != 1 || argmax(first) != argmax(want[:v]) {
			t.Fatalf("after reset: pos %d", pos)
		}
		seq.Close()
	}
	// Refusals carry their status and message.
	if _, err := lm.OpenSequence(SeqParams{Window: 0, Threads: 1, MaxBatch: 1}); !errors.Is(err, StatusInvalidArgument) {
		t.Fatalf("window 0: %v", err)
	}
	seq, err := lm.OpenSequence(SeqParams{Sinks: 1, Window: 4, Threads: 1, MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if err := seq.Feed([]int32{261}); !errors.Is(err, StatusInvalidArgument) || !strings.Contains(err.Error(), "vocabulary") {
		t.Fatalf("token 261: %v", err)
	}
}

func TestLmPolicyKeepsSinksAndNewest(t *testing.T) {
	lm, err := OpenLm(fixture(t), LmWeightsF32)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	for _, policy := range []uint32{PolicyWindow, PolicyTova} {
		seq, err := lm.OpenSequence(SeqParams{Sinks: 1, Window: 4, Threads: 1, MaxBatch: 4, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		if err := seq.Feed([]int32{5, 17, 3, 99, 42, 7, 8, 150, 2, 60}); err != nil {
			t.Fatal(err)
		}
		kept, err := seq.Kept(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) != 5 || kept[0] != 0 || kept[4] != 9 {
			t.Fatalf("policy %d: kept %v", policy, kept)
		}
		if policy == PolicyWindow && (kept[1] != 6 || kept[2] != 7 || kept[3] != 8) {
			t.Fatalf("window: kept %v", kept)
		}
		seq.Close()
	}
}
