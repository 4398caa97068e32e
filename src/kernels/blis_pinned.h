// The one BLIS context every GEMM of the stages runs in (issue 40: the same bytes on every CPU).
//
// BLIS picks a micro-kernel and its cache blocking for the CPU at run time (and from the
// BLIS_ARCH_TYPE environment variable), and each choice sums a GEMM's k dimension in another
// order: the same conversion gave other bytes on an AVX-512 machine than on an AVX2 one.  We
// link BLIS statically and privately (meson.build) and pass every call this context, built once
// from BLIS's haswell configuration (AVX2 + FMA kernels and blocksizes), whatever the CPU or the
// environment says.  A CPU without AVX2 and FMA cannot run those kernels: the call is refused
// (STK_E_UNSUPPORTED) rather than computed in another order (kernels/numeric_mode.h checks it,
// and BLIS_ARCH_TYPE, when a job opens).  Only gemm.cc and abs_gemm.cc
// include this (it includes blis.h).
#pragma once

#include <blis.h>

namespace stk::kernels {

// The pinned context (initialised on first use, thread-safe); throws STK_E_UNSUPPORTED on a CPU
// without AVX2 + FMA.
cntx_t *pinned_blis_context();

}  // namespace stk::kernels
