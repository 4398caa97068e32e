package stk

/*
#include <stdlib.h>
#define STK_EXPERIMENTAL
#include <stk/stk.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// LmWeights is how OpenLm keeps the weights in memory (STK_LM_WEIGHTS_*).
type LmWeights uint32

const (
	LmWeightsF32  LmWeights = C.STK_LM_WEIGHTS_F32
	LmWeightsBF16 LmWeights = C.STK_LM_WEIGHTS_BF16 // half the memory; widened to f32 on the fly
)

// LmInfo is stk_lm_info: the model's shape as the LM runtime reads it.
type LmInfo struct {
	VocabSize                                  uint64
	NLayers, DModel, NHeads, NKVHeads, HeadDim uint32
	ModelType                                  string
}

// Lm is the weights of the LM runtime (stk_lm_open): an HF model directory or a GGUF, read
// through stk's ingestion.  Read-only after opening: any number of Sequences, on any goroutines.
type Lm struct {
	raw *C.stk_lm
}

// OpenLm opens the weights at path.  A family the forward does not compute is
// StatusNotImplemented naming it.
func OpenLm(path string, weights LmWeights) (*Lm, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	p, err := cPath("path", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(p))
	var raw *C.stk_lm
	if err := call(func() C.stk_status { return C.stk_lm_open(p, C.uint32_t(weights), &raw) }); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, &Error{Status: StatusInternal, Message: "stk_lm_open returned STK_OK and a NULL handle"}
	}
	lm := &Lm{raw: raw}
	runtime.SetFinalizer(lm, (*Lm).Close)
	return lm, nil
}

// Info is stk_lm_get_info.
func (lm *Lm) Info() (LmInfo, error) {
	if lm.raw == nil {
		return LmInfo{}, &Error{Status: StatusInvalidArgument, Message: "the model is closed"}
	}
	var ci C.stk_lm_info
	ci.struct_size = C.size_t(unsafe.Sizeof(ci))
	if err := call(func() C.stk_status { return C.stk_lm_get_info(lm.raw, &ci) }); err != nil {
		return LmInfo{}, err
	}
	runtime.KeepAlive(lm)
	return LmInfo{
		VocabSize: uint64(ci.vocab_size), NLayers: uint32(ci.n_layers), DModel: uint32(ci.d_model),
		NHeads: uint32(ci.n_heads), NKVHeads: uint32(ci.n_kv_heads), HeadDim: uint32(ci.head_dim),
		ModelType: C.GoString(&ci.model_type[0]),
	}, nil
}

// Close frees the weights; close every Sequence over them first.  Closing twice is a no-op.
func (lm *Lm) Close() error {
	if lm.raw != nil {
		C.stk_lm_close(lm.raw)
		lm.raw = nil
		runtime.SetFinalizer(lm, nil)
	}
	return nil
}

// SeqParams is stk_seq_params: Sinks first positions plus a ring of the Window most recent.
type SeqParams struct {
	Sinks    uint32
	Window   uint32 // at least 1 (the query's own position)
	Threads  uint32 // 0: 1
	MaxBatch uint32 // prompt tokens computed together (GEMM); 0: 64
	Policy   uint32 // which Window positions the state keeps: PolicyWindow (0, the most recent), PolicyTova, PolicyH2O, PolicyTovaHead
	Recent   uint32 // PolicyH2O: the most recent positions never evicted; 0: Window / 2
}

// The retention policies of SeqParams.Policy (stk.h STK_SEQ_POLICY_*).
const (
	PolicyWindow   uint32 = C.STK_SEQ_POLICY_WINDOW
	PolicyTova     uint32 = C.STK_SEQ_POLICY_TOVA
	PolicyH2O      uint32 = C.STK_SEQ_POLICY_H2O
	PolicyTovaHead uint32 = C.STK_SEQ_POLICY_TOVA_HEAD
	// PolicyDefault: a faithful generation's runtime block's policy (its recent count when Recent
	// is 0); the window on a model read from its checkpoint.
	PolicyDefault uint32 = C.STK_SEQ_POLICY_DEFAULT
)

func (p SeqParams) toC() C.stk_seq_params {
	var c C.stk_seq_params
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	c.sinks, c.window, c.threads, c.max_batch = C.uint32_t(p.Sinks), C.uint32_t(p.Window), C.uint32_t(p.Threads), C.uint32_t(p.MaxBatch)
	c.policy, c.recent = C.uint32_t(p.Policy), C.uint32_t(p.Recent)
	return c
}

// Sequence is one sequence over an Lm (stk_seq_open).  Its arena is C memory (the library keeps
// a pointer into it across calls, which Go memory may not be), sized by stk_seq_arena_size.  Not
// safe for concurrent use.
type Sequence struct {
	lm    *Lm
	raw   *C.stk_seq
	arena unsafe.Pointer
	vocab int
}

// OpenSequence opens a sequence at position 0.
func (lm *Lm) OpenSequence(p SeqParams) (*Sequence, error) {
	info, err := lm.Info()
	if err != nil {
		return nil, err
	}
	cp := p.toC()
	var bytes C.size_t
	if err := call(func() C.stk_status { return C.stk_seq_arena_size(lm.raw, &cp, &bytes) }); err != nil {
		return nil, err
	}
	arena := C.malloc(bytes)
	if arena == nil {
		return nil, &Error{Status: StatusNomem, Message: fmt.Sprintf("a sequence arena of %d bytes", uint64(bytes))}
	}
	var raw *C.stk_seq
	if err := call(func() C.stk_status { return C.stk_seq_open(lm.raw, &cp, arena, bytes, &raw) }); err != nil {
		C.free(arena)
		return nil, err
	}
	s := &Sequence{lm: lm, raw: raw, arena: arena, vocab: int(info.VocabSize)}
	runtime.SetFinalizer(s, (*Sequence).Close)
	return s, nil
}

func (s *Sequence) closed() error {
	if s.raw == nil {
		return &Error{Status: StatusInvalidArgument, Message: "the sequence is closed"}
	}
	return nil
}

func tokensPtr(t []int32) *C.int32_t {
	if len(t) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&t[0]))
}

// Feed feeds tokens at the next positions; Logits then gives the last one's.
func (s *Sequence) Feed(tokens []int32) error {
	if err := s.closed(); err != nil {
		return err
	}
	err := call(func() C.stk_status { return C.stk_seq_feed(s.raw, tokensPtr(tokens), C.size_t(len(tokens)), nil) })
	runtime.KeepAlive(tokens)
	return err
}

// FeedAll feeds tokens and returns every token's logits, row-major [len(tokens), vocab].
func (s *Sequence) FeedAll(tokens []int32) ([]float32, error) {
	if err := s.closed(); err != nil {
		return nil, err
	}
	out := make([]float32, len(tokens)*s.vocab)
	err := call(func() C.stk_status {
		return C.stk_seq_feed(s.raw, tokensPtr(tokens), C.size_t(len(tokens)), f32Ptr(out))
	})
	runtime.KeepAlive(tokens)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Logits copies the logits of the last token fed (zeros before any) and gives the position
// (tokens fed so far).
func (s *Sequence) Logits() ([]float32, uint64, error) {
	if err := s.closed(); err != nil {
		return nil, 0, err
	}
	var p *C.float
	var n C.size_t
	var pos C.uint64_t
	if err := call(func() C.stk_status { return C.stk_seq_logits(s.raw, &p, &n, &pos) }); err != nil {
		return nil, 0, err
	}
	if p == nil || int(n) != s.vocab {
		return nil, 0, &Error{Status: StatusInternal, Message: fmt.Sprintf("stk_seq_logits gave %d logits, the model has %d", int(n), s.vocab)}
	}
	out := make([]float32, s.vocab)
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(p)), s.vocab))
	return out, uint64(pos), nil
}

// Reset goes back to position 0, the state emptied.
func (s *Sequence) Reset() error {
	if err := s.closed(); err != nil {
		return err
	}
	return call(func() C.stk_status { return C.stk_seq_reset(s.raw) })
}

// Kept is the positions layer's state holds now (kvHead's under PolicyTovaHead), ascending.
func (s *Sequence) Kept(layer, kvHead uint32) ([]uint64, error) {
	if err := s.closed(); err != nil {
		return nil, err
	}
	var n C.size_t
	if err := call(func() C.stk_status { return C.stk_seq_kept(s.raw, C.uint32_t(layer), C.uint32_t(kvHead), nil, 0, &n) }); err != nil {
		return nil, err
	}
	out := make([]uint64, int(n))
	if n == 0 {
		return out, nil
	}
	buf := (*C.uint64_t)(C.malloc(n * 8))
	defer C.free(unsafe.Pointer(buf))
	if err := call(func() C.stk_status { return C.stk_seq_kept(s.raw, C.uint32_t(layer), C.uint32_t(kvHead), buf, n, &n) }); err != nil {
		return nil, err
	}
	copy(out, unsafe.Slice((*uint64)(unsafe.Pointer(buf)), int(n)))
	return out[:int(n)], nil
}

// Vocab is the number of logits per token.
func (s *Sequence) Vocab() int { return s.vocab }

// Close frees the sequence and its arena.  Closing twice is a no-op.
func (s *Sequence) Close() error {
	if s.raw != nil {
		C.stk_seq_close(s.raw)
		C.free(s.arena)
		s.raw, s.arena = nil, nil
		runtime.SetFinalizer(s, nil)
		runtime.KeepAlive(s.lm)
	}
	return nil
}
