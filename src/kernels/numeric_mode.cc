// The numeric mode of numeric_mode.h.
#include "kernels/numeric_mode.h"

#include <blis.h>
#include <hwy/targets.h>

#include <cstdlib>

#include "core/error.h"

namespace stk::kernels {

namespace {
// BLIS reads BLIS_ARCH_TYPE once, at bli_init, to choose its native context, and calls abort() on
// an id it was not built with.  We never run the native context's kernels (every call gets the
// pinned one: a forced skx runs on a CPU without AVX-512), but the abort would kill the caller:
// refuse such a value instead.  The ids this build has (blis.h's arch_t, BLIS_CONFIG_*): the x86-64
// family without knc and generic.  BLIS parses the value with strtol (so "haswell" reads as 0).
void check_blis_arch_type() {
    const char *v = std::getenv("BLIS_ARCH_TYPE");
    if (!v || !*v) return;
    const long id = std::strtol(v, nullptr, 10);
    const bool configured = id == BLIS_ARCH_SKX || id == BLIS_ARCH_KNL || (id >= BLIS_ARCH_HASWELL && id <= BLIS_ARCH_BULLDOZER);
    if (!configured)
        throw_error(STK_E_UNSUPPORTED,
                    "BLIS_ARCH_TYPE=%s names a BLIS configuration this build does not have (BLIS would abort); "
                    "unset it: stk's GEMMs run in one pinned context whatever it says",
                    v);
}
}  // namespace

const char *numeric_mode_name() {
    return "numeric mode 1: BLIS 0.9 haswell context (AVX2+FMA), reference LAPACK+BLAS, Highway FMA";
}

bool numeric_mode_available() {
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
    // Highway's targets with FMA on x86; a test may mock the dispatch down to SSE4 (no FMA),
    // where the sketch passes round the multiply and the add apart.
    return (hwy::SupportedTargets() & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
#else
    return false;
#endif
}

void require_numeric_mode() {
    check_blis_arch_type();
    if (numeric_mode_available()) return;
    throw_error(STK_E_UNSUPPORTED,
                "this CPU (or Highway's dispatch) has no AVX2 + FMA: stk computes every numeric array with "
                "BLIS's haswell kernels so the bytes are the same on every CPU, and refuses rather than write "
                "other bytes (docs/decisions.md, \"The numeric mode\")");
}

}  // namespace stk::kernels
