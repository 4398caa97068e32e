// include/stk/stk.h compiled as C++ (-pedantic -Werror), linked against the shared libstk: the
// stable tier alone (the build defines STK_EXPERIMENTAL for everything else).
#undef STK_EXPERIMENTAL
#include <stk/stk.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(std::is_same_v<decltype(&stk_verify), stk_status (*)(const char *, stk_verify_report *)>);
static_assert(std::is_standard_layout_v<stk_job_params> && std::is_standard_layout_v<stk_verify_report>);
static_assert(STK_OK == 0 && STK_E_INTERNAL == 99 && STK_STAGE_COUNT == 10);

// Without STK_EXPERIMENTAL, the experimental declarations do not exist (an unqualified call
// would be ill-formed; a template that names one is only instantiated when it does).
template <class T>
constexpr bool has_job_info = requires(T *j) {
    stk_job_get_info(j, nullptr);
};
static_assert(!has_job_info<stk_job>);

int main() {
    int failures = 0;
    if (stk_version_number() != STK_VERSION_NUMBER) failures++;
    if (std::strcmp(stk_status_str(STK_E_SCHEMA), "STK_E_SCHEMA: unknown schema digest") != 0) failures++;
    stk_verify_report r{};
    r.struct_size = sizeof r;
    if (stk_verify("/nonexistent-stk-cpp-header", &r) != STK_E_NOT_FOUND) failures++;
    std::printf("cpp_header: %d failures\n", failures);
    return failures ? 1 : 0;
}
