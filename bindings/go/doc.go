// Package stk binds libstk, the Sera Transfer Kit, through cgo: the C API of
// include/stk/stk.h with Go types on top.
//
//   - Status carries the header's pinned values (the constants come from the header itself, so
//     they cannot drift); *Error pairs a Status with the library's message, which names the
//     file, tensor and byte offset involved.  errors.Is(err, stk.StatusNotFound) works.
//   - Job is a conversion job.  Its arena (stk_job_arena_size bytes) is mapped outside the Go
//     heap, because the job handle lives inside it and C keeps pointers into it after each call
//     returns, which cgo forbids for Go memory.  Close releases the job, then the arena.
//   - Verify checks a published output directory.
//   - Generation serves the O(1) runtime lookups.
//
// At package initialisation the linked library's stk_version_number() is compared with the
// header's STK_VERSION_NUMBER; on a mismatch every call returns that error (see CheckVersion).
//
// Build: the header is found in the source tree (../../include); point the linker at libstk:
//
//	CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" go test ./...
package stk
