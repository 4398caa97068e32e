// Test-only fault injection: ONE slot holding a fault name, compiled in and inert unless armed.
// The slot starts as the environment variable STK_TEST_FAULT (read once, at the first query);
// tests in one process may replace it with set_test_fault ("" or nullptr disarms).  Only tests
// arm it; docs/decisions.md "Failure policy" lists what each name forces.
//
//   breach:<stage name>     job_run_stage throws a BoundBreach from that stage after it ran (its
//                           arrays are on disk: the policy must remove them)
//   overlays_ortho          overlays_build's first QR output loses orthonormality (18.2 rerun)
//   memory_unstable         memory_fit's RoPE poles at radius 1.05: 18.3 scales twice, accepts
//   memory_unstable_hard    radius 1.2: three 18.3 scalings do not suffice -> memory disabled
//   array_header_crc        the next array header is corrupted between its write and its
//                           read-back (18.5: the header is recomputed, the payload untouched)
#pragma once

namespace stk {

// True if the armed fault is exactly `name`.
bool test_fault(const char *name);
void set_test_fault(const char *name);

}  // namespace stk
