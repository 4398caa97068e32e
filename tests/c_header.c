/* include/stk/stk.h compiled as C99 with -pedantic -Werror (tests/meson.build), linked against
 * the shared libstk: the header is plain C, and its declarations match the exported symbols. */
#define STK_EXPERIMENTAL /* both tiers */
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
static stk_status (*const f_job_generation_dir)(const stk_job *, const char **) = &stk_job_generation_dir;
static stk_status (*const f_generation_remove)(const char *, const char *) = &stk_generation_remove;
static stk_status (*const f_export_lwt)(const stk_export_params *, stk_export_report *) = &stk_export_lwt;
static stk_status (*const f_lwt_open)(const char *, stk_lwt **) = &stk_lwt_open;
static void (*const f_lwt_close)(stk_lwt *) = &stk_lwt_close;
static stk_status (*const f_lwt_info)(const stk_lwt *, uint32_t *, const char **, size_t *) = &stk_lwt_info;
static stk_status (*const f_lwt_tensor_at)(const stk_lwt *, uint32_t, stk_lwt_tensor *) = &stk_lwt_tensor_at;
static stk_status (*const f_lwt_find)(const stk_lwt *, const char *, stk_lwt_tensor *) = &stk_lwt_find;
static stk_status (*const f_lwt_read_f32)(const stk_lwt *, const char *, float *, size_t) = &stk_lwt_read_f32;
static stk_status (*const f_job_get_info)(const stk_job *, stk_job_info *) = &stk_job_get_info;
static stk_status (*const f_stage_get_info)(const stk_job *, stk_stage, stk_stage_info *) = &stk_stage_get_info;
static stk_status (*const f_job_progress)(const stk_job *, uint64_t *, uint64_t *, const char **) = &stk_job_progress;
static void (*const f_job_cancel)(stk_job *) = &stk_job_cancel;
static stk_status (*const f_generation_dir)(const stk_generation *, const char **) = &stk_generation_dir;
static stk_status (*const f_generation_array_count)(const stk_generation *, uint32_t *) = &stk_generation_array_count;
static stk_status (*const f_generation_array_at)(const stk_generation *, uint32_t, stk_array_view *) = &stk_generation_array_at;
static stk_status (*const f_generation_array_find)(const stk_generation *, const char *,
                                                   stk_array_view *) = &stk_generation_array_find;

typedef char struct_size_first[offsetof(stk_job_params, struct_size) == 0 ? 1 : -1];
typedef char report_size_first[offsetof(stk_verify_report, struct_size) == 0 ? 1 : -1];

int main(void) {
    stk_verify_report report;
    stk_job_params params;
    stk_export_params export_params;
    stk_lwt_tensor tensor;
    stk_job_info job_info;
    stk_stage_info stage_info;
    stk_array_view view;
    stk_generation *gen = NULL;
    stk_lwt *lwt = NULL;
    const char *text = NULL;
    size_t bytes = 0, value_len = 0;
    uint32_t count = 0;
    uint64_t done = 0, total = 0;
    float value = 0;
    int failures = 0;
    if (!f_status_str || !f_last_error || !f_version_number || !f_version_string || !f_stage_name || !f_job_arena_size ||
        !f_open || !f_stage_run || !f_stage_digest || !f_close || !f_verify || !f_generation_open || !f_generation_close ||
        !f_lookup || !f_job_generation_dir || !f_generation_remove || !f_export_lwt || !f_lwt_open || !f_lwt_close ||
        !f_lwt_info || !f_lwt_tensor_at || !f_lwt_find || !f_lwt_read_f32 || !f_job_get_info || !f_stage_get_info ||
        !f_job_progress || !f_job_cancel || !f_generation_dir || !f_generation_array_count || !f_generation_array_at ||
        !f_generation_array_find)
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
    /* Every other function, called: each refuses its NULL or missing argument with the status
     * the header promises (the tests of test_api.cc, test_abi.cc and test_lwt_export.cc run them
     * on real inputs). */
    if (stk_stage_run(NULL, STK_STAGE_PRF) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_stage_digest(NULL, STK_STAGE_PRF, &count, &done) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_job_generation_dir(NULL, &text) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_generation_remove(NULL, "x") != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_open(NULL, NULL, 0, NULL) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_generation_open("/nonexistent-stk-c-header", &gen) != STK_E_NOT_FOUND || gen != NULL) failures++;
    stk_generation_close(NULL);
    if (stk_lookup(NULL, STK_LOOKUP_TOKEN_ID, "a", 1, &value, sizeof value, &value_len) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&export_params, 0, sizeof export_params);
    export_params.struct_size = sizeof export_params;
    export_params.in_dir = "/nonexistent-stk-c-header";
    export_params.out_path = "/nonexistent-stk-c-header/x.lwt";
    if (stk_export_lwt(&export_params, NULL) == STK_OK) failures++;
    if (stk_lwt_open("/nonexistent-stk-c-header.lwt", &lwt) != STK_E_NOT_FOUND || lwt != NULL) failures++;
    stk_lwt_close(NULL);
    if (stk_lwt_info(NULL, &count, &text, &bytes) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&tensor, 0, sizeof tensor);
    tensor.struct_size = sizeof tensor;
    if (stk_lwt_tensor_at(NULL, 0, &tensor) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_lwt_find(NULL, "x", &tensor) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_lwt_read_f32(NULL, "x", &value, 1) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&job_info, 0, sizeof job_info);
    job_info.struct_size = sizeof job_info;
    if (stk_job_get_info(NULL, &job_info) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&stage_info, 0, sizeof stage_info);
    stage_info.struct_size = sizeof stage_info;
    if (stk_stage_get_info(NULL, STK_STAGE_PRF, &stage_info) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_job_progress(NULL, &done, &total, &text) != STK_E_INVALID_ARGUMENT) failures++;
    stk_job_cancel(NULL);
    if (stk_generation_dir(NULL, &text) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_generation_array_count(NULL, &count) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&view, 0, sizeof view);
    view.struct_size = sizeof view;
    if (stk_generation_array_at(NULL, 0, &view) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_generation_array_find(NULL, "x", &view) != STK_E_INVALID_ARGUMENT) failures++;
    printf("c_header: %d failures\n", failures);
    return failures ? 1 : 0;
}
