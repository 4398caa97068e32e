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

// RefrunInfo is stk_refrun_info: the reference runtime's shapes, modules and buffer sizes.
type RefrunInfo struct {
	NLayers, DModel, DV, R, RV                               uint32
	HasPRF, HasOverlays, HasLinear, HasLinearBias, HasMemory bool
	NFFNUnits, MemorySections                                uint32
	Tau, BetaFloor, WhiteningEps                             float64
	PRFStateBytes, PRFStateBytesMemory, ScratchBytes         uint64
	FFNIndexBytes, MemoryStateBytes, FFNEntries              uint64
}

// Runtime is the reference runtime of a generation's arrays (docs/format.md "Reference
// runtime"): per token, what Sera computes from each module.  Inputs are row-major [n, width]
// slices.  Not safe for concurrent use (one scratch buffer); make one per goroutine.
type Runtime struct {
	g       *Generation
	Info    RefrunInfo
	scratch []uint64
	index   []uint64
}

// Runtime maps the arrays the reference runtime reads and recovers the PRF diagonal D.
func (g *Generation) Runtime() (*Runtime, error) {
	if g.raw == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "the generation is closed"}
	}
	var ci C.stk_refrun_info
	ci.struct_size = C.size_t(unsafe.Sizeof(ci))
	if err := call(func() C.stk_status { return C.stk_refrun_get_info(g.raw, &ci) }); err != nil {
		return nil, err
	}
	runtime.KeepAlive(g)
	i := RefrunInfo{
		NLayers: uint32(ci.n_layers), DModel: uint32(ci.d_model), DV: uint32(ci.d_v), R: uint32(ci.r), RV: uint32(ci.r_v),
		HasPRF: ci.has_prf != 0, HasOverlays: ci.has_overlays != 0, HasLinear: ci.has_linear != 0,
		HasLinearBias: ci.has_linear_bias != 0, HasMemory: ci.has_memory != 0,
		NFFNUnits: uint32(ci.n_ffn_units), MemorySections: uint32(ci.memory_sections),
		Tau: float64(ci.tau), BetaFloor: float64(ci.beta_floor), WhiteningEps: float64(ci.whitening_eps),
		PRFStateBytes: uint64(ci.prf_state_bytes), PRFStateBytesMemory: uint64(ci.prf_state_bytes_memory),
		ScratchBytes: uint64(ci.scratch_bytes), FFNIndexBytes: uint64(ci.ffn_index_bytes),
		MemoryStateBytes: uint64(ci.memory_state_bytes), FFNEntries: uint64(ci.ffn_entries),
	}
	return &Runtime{g: g, Info: i, scratch: make([]uint64, (i.ScratchBytes+7)/8+1)}, nil
}

func words(bytes uint64) []uint64 { return make([]uint64, (bytes+7)/8+1) }

func f32Ptr(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

func rowsOf(what string, n int, width uint32) (int, error) {
	if width == 0 || n%int(width) != 0 {
		return 0, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("%s: %d values is not a multiple of %d", what, n, width)}
	}
	return n / int(width), nil
}

// PRFRun is causal PRF attention of layer over one sequence from a fresh state (token t attends
// to keys 0..t): x [n, DModel], v [n, DV] -> [n, DV].  memory: STK_PRF_MEMORY.
func (r *Runtime) PRFRun(layer uint32, memory bool, x, v []float32) ([]float32, error) {
	n, err := rowsOf("x", len(x), r.Info.DModel)
	if err != nil {
		return nil, err
	}
	if m, err := rowsOf("v", len(v), r.Info.DV); err != nil || m != n {
		return nil, &Error{Status: StatusInvalidArgument, Message: "x and v hold different token counts"}
	}
	bytes, flags := r.Info.PRFStateBytes, C.uint32_t(0)
	if memory {
		bytes, flags = r.Info.PRFStateBytesMemory, C.STK_PRF_MEMORY
	}
	state := words(bytes)
	out := make([]float32, n*int(r.Info.DV))
	sp := unsafe.Pointer(&state[0])
	err = call(func() C.stk_status { return C.stk_prf_reset(r.g.raw, C.uint32_t(layer), flags, sp, C.size_t(bytes)) })
	if err == nil {
		err = call(func() C.stk_status {
			return C.stk_prf_run(r.g.raw, C.uint32_t(layer), sp, C.size_t(bytes), C.uint64_t(n), f32Ptr(x), f32Ptr(v),
				f32Ptr(out), unsafe.Pointer(&r.scratch[0]), C.size_t(r.Info.ScratchBytes))
		})
	}
	runtime.KeepAlive(r.g)
	return out, err
}

// OverlayDelta is deltaC(q) = U ((phi_w(q)^T H) Z) per query: x [n, DModel] -> [n, DV].
func (r *Runtime) OverlayDelta(layer uint32, x []float32) ([]float32, error) {
	n, err := rowsOf("x", len(x), r.Info.DModel)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n*int(r.Info.DV))
	err = call(func() C.stk_status {
		return C.stk_overlay_run(r.g.raw, C.uint32_t(layer), C.uint64_t(n), f32Ptr(x), f32Ptr(out),
			unsafe.Pointer(&r.scratch[0]), C.size_t(r.Info.ScratchBytes))
	})
	runtime.KeepAlive(r.g)
	return out, err
}

// FFNApply is FFN unit through the linear dictionary, without bias: x [n, DModel] -> [n, DModel].
// The index is built on first use.
func (r *Runtime) FFNApply(unit uint32, x []float32) ([]float32, error) {
	n, err := rowsOf("x", len(x), r.Info.DModel)
	if err != nil {
		return nil, err
	}
	bytes := C.size_t(r.Info.FFNIndexBytes)
	if r.index == nil {
		idx := words(r.Info.FFNIndexBytes)
		if err := call(func() C.stk_status { return C.stk_ffn_index_build(r.g.raw, unsafe.Pointer(&idx[0]), bytes) }); err != nil {
			return nil, err
		}
		r.index = idx
	}
	y := make([]float32, len(x))
	err = call(func() C.stk_status {
		return C.stk_ffn_apply_batch(r.g.raw, unsafe.Pointer(&r.index[0]), bytes, C.uint32_t(unit), C.uint64_t(n), f32Ptr(x), f32Ptr(y))
	})
	runtime.KeepAlive(r.g)
	return y, err
}

// FFNBias is linear_bias.bin (StatusMissingArray for a model without FFN biases).
func (r *Runtime) FFNBias() ([]float32, error) {
	out := make([]float32, r.Info.DModel)
	err := call(func() C.stk_status { return C.stk_ffn_bias(r.g.raw, f32Ptr(out), C.size_t(len(out))) })
	runtime.KeepAlive(r.g)
	return out, err
}

// MemoryRun is the positional memory bank's output for the inputs u, from its initial registers.
func (r *Runtime) MemoryRun(u []float32) ([]float32, error) {
	bytes := C.size_t(r.Info.MemoryStateBytes)
	state := words(r.Info.MemoryStateBytes)
	sp := unsafe.Pointer(&state[0])
	if err := call(func() C.stk_status { return C.stk_memory_reset(r.g.raw, sp, bytes) }); err != nil {
		return nil, err
	}
	out := make([]float32, len(u))
	for t, x := range u {
		var y C.float
		if err := call(func() C.stk_status { return C.stk_memory_step(r.g.raw, sp, bytes, C.float(x), &y) }); err != nil {
			return nil, err
		}
		out[t] = float32(y)
	}
	runtime.KeepAlive(r.g)
	return out, nil
}
