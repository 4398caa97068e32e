// The numeric mode: what makes a conversion's bytes a function of its inputs and options alone,
// on every x86-64 CPU with AVX2 and FMA (issue 40; docs/decisions.md, "The numeric mode").
//
// - GEMM: BLIS linked statically, every call in the haswell context (kernels/blis_pinned.h),
//   whatever micro-kernel BLIS would pick for the CPU or BLIS_ARCH_TYPE names.
// - LAPACK: reference LAPACK over reference BLAS, both linked statically (generic x86-64 code,
//   no run-time dispatch), so the system's libblas.so.3 alternative (BLIS, OpenBLAS, MKL ...)
//   never computes a byte of ours.
// - Highway: the kernels are per-lane (no horizontal sums, fixed order), bit-identical on every
//   target with FMA (AVX2, AVX-512); a process whose Highway dispatch has no FMA target left is
//   refused like a CPU without AVX2.
#pragma once

namespace stk::kernels {

// One line for the manifest's record and `stk --version`: the mode and the libraries' versions.
const char *numeric_mode_name();

// True when this CPU (and Highway's current dispatch) can run the pinned mode.
bool numeric_mode_available();

// Throws STK_E_UNSUPPORTED, saying why, when numeric_mode_available() is false.  Called when a job
// opens and before every GEMM.
void require_numeric_mode();

}  // namespace stk::kernels
