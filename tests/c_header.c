/* include/stk/stk.h compiled as C99 with -pedantic -Werror (tests/meson.build), linked against
 * the shared libstk: the header is plain C, and its declarations match the exported symbols. */
#include <stk/stk.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Every public function, as a pointer of the type the header declares. */
static const char *(*const f_status_str)(stk_status) = &stk_status_str;
static const char *(*const f_last_error)(void) = &stk_last_error;
static uint32_t (*const f_version_number)(void) = &stk_version_number;
static const char *(*const f_version_string)(void) = &stk_version_string;
static const char *(*const f_stage_name)(stk_stage) = &stk_stage_name;
static stk_status (*const f_job_arena_size)(const stk_job_params *, size_t *) = &stk_job_arena_size;
static stk_status (*const f_open)(const stk_job_params *, void *, size_t, stk_job **) = &stk_open;
static stk_status (*const f_stage_run)(stk_job *, stk_stage) = &stk_stage_run;
static stk_status (*const f_stage_digest)(const stk_job *, stk_stage, uint32_t *, uint64_t *) = &stk_stage_digest;
static void (*const f_close)(stk_job *) = &stk_close;
static stk_status (*const f_verify)(const char *, stk_verify_report *) = &stk_verify;
static stk_status (*const f_generation_open)(const char *, stk_generation **) = &stk_generation_open;
static void (*const f_generation_close)(stk_generation *) = &stk_generation_close;
static stk_status (*const f_lookup)(const stk_generation *, stk_lookup_kind, const void *, size_t, void *, size_t,
                                    size_t *) = &stk_lookup;

typedef char struct_size_first[offsetof(stk_job_params, struct_size) == 0 ? 1 : -1];
typedef char report_size_first[offsetof(stk_verify_report, struct_size) == 0 ? 1 : -1];

int main(void) {
    stk_verify_report report;
    stk_job_params params;
    size_t bytes = 0;
    int failures = 0;
    if (!f_status_str || !f_last_error || !f_version_number || !f_version_string || !f_stage_name || !f_job_arena_size ||
        !f_open || !f_stage_run || !f_stage_digest || !f_close || !f_verify || !f_generation_open || !f_generation_close ||
        !f_lookup)
        failures++;
    if (stk_version_number() != STK_VERSION_NUMBER) failures++;
    if (strcmp(stk_version_string(), STK_VERSION_STRING) != 0) failures++;
    if (strcmp(stk_status_str(STK_E_CHECKSUM), "STK_E_CHECKSUM: checksum mismatch") != 0) failures++;
    if (strcmp(stk_stage_name(STK_STAGE_MANIFEST_EMIT), "manifest_emit") != 0) failures++;
    memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    if (stk_verify("/nonexistent-stk-c-header", &report) != STK_E_NOT_FOUND) failures++;
    if (strcmp(report.failed_file, "sera_manifest.bin") != 0) failures++;
    memset(&params, 0, sizeof params);
    params.struct_size = sizeof params - 1;
    if (stk_job_arena_size(&params, &bytes) != STK_E_STRUCT_SIZE) failures++;
    if (stk_last_error()[0] == '\0') failures++;
    stk_close(NULL);
    printf("c_header: %d failures\n", failures);
    return failures ? 1 : 0;
}
