package stk

/*
#include <stdlib.h>
#include <stk/stk.h>
*/
import "C"

import "unsafe"

// Direct C calls with arguments the safe API never produces, for the tests (cgo is not allowed in
// _test.go files).

// arenaSizeWithStructSize calls stk_job_arena_size with the given struct_size; it returns the
// status, the message and the bytes the library wrote (sentinel 12345 if none).
func arenaSizeWithStructSize(structSize uintptr, inDir, outDir string) (Status, string, uint64) {
	var p C.stk_job_params
	p.struct_size = C.size_t(structSize)
	p.in_dir = C.CString(inDir)
	p.out_dir = C.CString(outDir)
	defer C.free(unsafe.Pointer(p.in_dir))
	defer C.free(unsafe.Pointer(p.out_dir))
	n := C.size_t(12345)
	var msg string
	err := call(func() C.stk_status { return C.stk_job_arena_size(&p, &n) })
	if err != nil {
		msg = err.(*Error).Message
		return err.(*Error).Status, msg, uint64(n)
	}
	return StatusOK, "", uint64(n)
}

// jobParamsSize is sizeof(stk_job_params) as the C compiler lays it out.
func jobParamsSize() uintptr { return unsafe.Sizeof(C.stk_job_params{}) }

// verifyReportSize is sizeof(stk_verify_report).
func verifyReportSize() uintptr { return unsafe.Sizeof(C.stk_verify_report{}) }
