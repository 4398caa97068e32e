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
/* Experimental: what the stk command reads (plan, manifest, roots). */
static const char *(*const f_dtype_name)(uint32_t) = &stk_dtype_name;
static stk_status (*const f_model_gguf_path)(const char *, char *, size_t, size_t *) = &stk_model_gguf_path;
static stk_status (*const f_plan_open)(const stk_job_params *, stk_plan **) = &stk_plan_open;
static void (*const f_plan_close)(stk_plan *) = &stk_plan_close;
static stk_status (*const f_plan_get_info)(const stk_plan *, stk_plan_info *) = &stk_plan_get_info;
static stk_status (*const f_plan_array_at)(const stk_plan *, uint32_t, stk_plan_array *) = &stk_plan_array_at;
static stk_status (*const f_plan_stage_info)(const stk_plan *, stk_stage, stk_plan_stage *) = &stk_plan_stage_info;
static stk_status (*const f_manifest_open)(const char *, stk_manifest **) = &stk_manifest_open;
static void (*const f_manifest_close)(stk_manifest *) = &stk_manifest_close;
static stk_status (*const f_manifest_get_info)(const stk_manifest *, stk_manifest_info *) = &stk_manifest_get_info;
static stk_status (*const f_manifest_array_at)(const stk_manifest *, uint32_t, stk_manifest_array *) = &stk_manifest_array_at;
static stk_status (*const f_manifest_record_at)(const stk_manifest *, uint32_t, stk_manifest_record *) = &stk_manifest_record_at;
static stk_status (*const f_manifest_stage_at)(const stk_manifest *, stk_stage, stk_manifest_stage *) = &stk_manifest_stage_at;
static stk_status (*const f_root_probe)(const char *, stk_root_info *) = &stk_root_probe;
static stk_status (*const f_root_list)(const char *, stk_generation_list **) = &stk_root_list;
static stk_status (*const f_root_chain)(const char *, stk_generation_list **) = &stk_root_chain;
static stk_status (*const f_generation_list_count)(const stk_generation_list *, uint32_t *) = &stk_generation_list_count;
static stk_status (*const f_generation_list_at)(const stk_generation_list *, uint32_t,
                                                stk_generation_entry *) = &stk_generation_list_at;
static void (*const f_generation_list_close)(stk_generation_list *) = &stk_generation_list_close;
static stk_status (*const f_root_gc)(const char *, uint32_t, stk_gc_result **) = &stk_root_gc;
static stk_status (*const f_root_remove)(const char *, const char *, uint32_t, stk_gc_result **) = &stk_root_remove;
static stk_status (*const f_gc_result_counts)(const stk_gc_result *, uint32_t *, uint32_t *, uint32_t *) = &stk_gc_result_counts;
static const char *(*const f_gc_result_removed)(const stk_gc_result *, uint32_t) = &stk_gc_result_removed;
static const char *(*const f_gc_result_in_use)(const stk_gc_result *, uint32_t) = &stk_gc_result_in_use;
static void (*const f_gc_result_close)(stk_gc_result *) = &stk_gc_result_close;
static stk_status (*const f_locate_damage)(const char *, const char *, uint64_t *, char *, size_t) = &stk_locate_damage;

/* The experimental calls of the stk command, each called: refusals of NULL, of a wrong
 * struct_size and of a path that is not there (tests/test_api.cc runs them on real roots). */
static int cli_calls(void) {
    int failures = 0;
    char path[64];
    size_t len = 1;
    uint32_t a = 0, b = 0, c = 0;
    uint64_t offset = 0;
    stk_plan *plan = NULL;
    stk_plan_info plan_info;
    stk_plan_array plan_array;
    stk_plan_stage plan_stage;
    stk_manifest *manifest = NULL;
    stk_manifest_info manifest_info;
    stk_manifest_array manifest_array;
    stk_manifest_record record;
    stk_manifest_stage manifest_stage;
    stk_root_info root;
    stk_generation_list *list = NULL;
    stk_generation_entry entry;
    stk_gc_result *gc = NULL;
    stk_job_params params;
    if (!f_dtype_name || !f_model_gguf_path || !f_plan_open || !f_plan_close || !f_plan_get_info || !f_plan_array_at ||
        !f_plan_stage_info || !f_manifest_open || !f_manifest_close || !f_manifest_get_info || !f_manifest_array_at ||
        !f_manifest_record_at || !f_manifest_stage_at || !f_root_probe || !f_root_list || !f_root_chain ||
        !f_generation_list_count || !f_generation_list_at || !f_generation_list_close || !f_root_gc || !f_root_remove ||
        !f_gc_result_counts || !f_gc_result_removed || !f_gc_result_in_use || !f_gc_result_close || !f_locate_damage)
        failures++;
    if (strcmp(stk_dtype_name(2), "f32") != 0 || strcmp(stk_dtype_name(99), "unknown") != 0) failures++;
    if (stk_model_gguf_path("/nonexistent-stk-c-header", path, sizeof path, &len) != STK_OK || len != 0 || path[0]) failures++;
    if (stk_model_gguf_path(NULL, path, sizeof path, &len) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&params, 0, sizeof params);
    params.struct_size = sizeof params;
    params.in_dir = "/nonexistent-stk-c-header";
    params.out_dir = "/nonexistent-stk-c-header-out";
    if (stk_plan_open(&params, &plan) != STK_E_NOT_FOUND || plan != NULL) failures++;
    params.struct_size = 8;
    if (stk_plan_open(&params, &plan) != STK_E_STRUCT_SIZE) failures++;
    stk_plan_close(NULL);
    memset(&plan_info, 0, sizeof plan_info);
    plan_info.struct_size = sizeof plan_info;
    if (stk_plan_get_info(NULL, &plan_info) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&plan_array, 0, sizeof plan_array);
    plan_array.struct_size = sizeof plan_array;
    if (stk_plan_array_at(NULL, 0, &plan_array) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&plan_stage, 0, sizeof plan_stage);
    plan_stage.struct_size = sizeof plan_stage;
    if (stk_plan_stage_info(NULL, STK_STAGE_PRF, &plan_stage) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_manifest_open("/nonexistent-stk-c-header", &manifest) != STK_E_NOT_FOUND || manifest != NULL) failures++;
    stk_manifest_close(NULL);
    memset(&manifest_info, 0, sizeof manifest_info);
    manifest_info.struct_size = sizeof manifest_info;
    if (stk_manifest_get_info(NULL, &manifest_info) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&manifest_array, 0, sizeof manifest_array);
    manifest_array.struct_size = sizeof manifest_array;
    if (stk_manifest_array_at(NULL, 0, &manifest_array) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&record, 0, sizeof record);
    record.struct_size = sizeof record;
    if (stk_manifest_record_at(NULL, 0, &record) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&manifest_stage, 0, sizeof manifest_stage);
    manifest_stage.struct_size = sizeof manifest_stage;
    if (stk_manifest_stage_at(NULL, STK_STAGE_PRF, &manifest_stage) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&root, 0xff, sizeof root);
    root.struct_size = sizeof root;
    if (stk_root_probe("/nonexistent-stk-c-header", &root) != STK_OK || root.is_root || root.needs_repair) failures++;
    root.struct_size = 4;
    if (stk_root_probe("/nonexistent-stk-c-header", &root) != STK_E_STRUCT_SIZE) failures++;
    if (stk_root_list("/nonexistent-stk-c-header", &list) != STK_E_NOT_FOUND || list != NULL) failures++;
    if (stk_root_chain("/nonexistent-stk-c-header", &list) != STK_E_NOT_FOUND || list != NULL) failures++;
    if (stk_generation_list_count(NULL, &a) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&entry, 0, sizeof entry);
    entry.struct_size = sizeof entry;
    if (stk_generation_list_at(NULL, 0, &entry) != STK_E_INVALID_ARGUMENT) failures++;
    stk_generation_list_close(NULL);
    if (stk_root_gc(NULL, 2, &gc) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_root_gc("/nonexistent-stk-c-header", 0, &gc) != STK_E_INVALID_ARGUMENT || gc != NULL) failures++;
    if (stk_root_remove("/nonexistent-stk-c-header", "x", 0x80, &gc) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_gc_result_counts(NULL, &a, &b, &c) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_gc_result_removed(NULL, 0) != NULL || stk_gc_result_in_use(NULL, 0) != NULL) failures++;
    stk_gc_result_close(NULL);
    if (stk_locate_damage(NULL, "x", &offset, path, sizeof path) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_locate_damage("/nonexistent-stk-c-header", "arrays/x.bin", &offset, path, sizeof path) != STK_E_KEY_NOT_FOUND)
        failures++;
    return failures;
}

static stk_status (*const f_path_kind_of)(const char *, uint32_t *) = &stk_path_kind_of;
static const char *(*const f_lwt_dtype_name)(uint32_t) = &stk_lwt_dtype_name;
static int (*const f_lwt_dtype_is_float)(uint32_t) = &stk_lwt_dtype_is_float;
static stk_status (*const f_lwt_dtype_parse)(const char *, uint32_t *) = &stk_lwt_dtype_parse;
static stk_status (*const f_model_open)(const char *, stk_model **) = &stk_model_open;
static void (*const f_model_close)(stk_model *) = &stk_model_close;
static stk_status (*const f_model_get_info)(const stk_model *, stk_model_info *) = &stk_model_get_info;
static stk_status (*const f_model_tensor_at)(const stk_model *, uint32_t, stk_model_tensor *) = &stk_model_tensor_at;
static uint32_t (*const f_family_count)(void) = &stk_family_count;
static stk_status (*const f_family_at)(uint32_t, stk_family_info *) = &stk_family_at;
static stk_status (*const f_tokenizer_open)(const stk_tokenizer_params *, stk_tokenizer **) = &stk_tokenizer_open;
static void (*const f_tokenizer_close)(stk_tokenizer *) = &stk_tokenizer_close;
static stk_status (*const f_tokenizer_get_info)(const stk_tokenizer *, stk_tokenizer_info *) = &stk_tokenizer_get_info;
static stk_status (*const f_tokenizer_encode)(stk_tokenizer *, const char *, size_t, uint32_t, const uint32_t **,
                                              size_t *) = &stk_tokenizer_encode;
static stk_status (*const f_tokenizer_decode)(stk_tokenizer *, const uint32_t *, size_t, const char **,
                                              size_t *) = &stk_tokenizer_decode;
static stk_status (*const f_tokenizer_piece)(const stk_tokenizer *, uint32_t, const char **, size_t *) = &stk_tokenizer_piece;
static stk_status (*const f_replay_run)(const stk_generation *, const stk_replay_params *, stk_replay **) = &stk_replay_run;
static void (*const f_replay_close)(stk_replay *) = &stk_replay_close;
static stk_status (*const f_replay_get_info)(const stk_replay *, stk_replay_info *) = &stk_replay_get_info;
static stk_status (*const f_replay_module_at)(const stk_replay *, uint32_t, stk_replay_module *) = &stk_replay_module_at;
static stk_status (*const f_replay_token_at)(const stk_replay *, uint64_t, stk_replay_token *) = &stk_replay_token_at;
static stk_status (*const f_array_file_verify)(const char *, stk_array_file_info *) = &stk_array_file_verify;
static stk_status (*const f_lwt_open_flags)(const char *, uint32_t, stk_lwt **) = &stk_lwt_open_flags;
static stk_status (*const f_lwt_get_header)(const stk_lwt *, stk_lwt_header *) = &stk_lwt_get_header;
static stk_status (*const f_lwt_config_at)(const stk_lwt *, uint32_t, const char **, uint64_t *) = &stk_lwt_config_at;

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
    if (!f_path_kind_of || !f_dtype_name || !f_lwt_dtype_name || !f_lwt_dtype_is_float || !f_lwt_dtype_parse || !f_model_open ||
        !f_model_close || !f_model_get_info || !f_model_tensor_at || !f_family_count || !f_family_at || !f_tokenizer_open ||
        !f_tokenizer_close || !f_tokenizer_get_info || !f_tokenizer_encode || !f_tokenizer_decode || !f_tokenizer_piece ||
        !f_replay_run || !f_replay_close || !f_replay_get_info || !f_replay_module_at || !f_replay_token_at || !f_manifest_open ||
        !f_manifest_close || !f_manifest_get_info || !f_manifest_stage_at || !f_manifest_array_at || !f_manifest_record_at ||
        !f_array_file_verify || !f_lwt_open_flags || !f_lwt_get_header || !f_lwt_config_at)
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
    params.struct_size = offsetof(stk_job_params, calibration) - 1; /* below the first version */
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
    failures += cli_calls();
    /* stk inspect / tokenize / replay / export / --list-models (tests/test_inspect_api.cc runs
     * them on real inputs) */
    {
        stk_model *model = NULL;
        stk_tokenizer *tok = NULL;
        stk_replay *replay = NULL;
        stk_model_info model_info;
        stk_model_tensor model_tensor;
        stk_family_info family;
        stk_tokenizer_params tok_params;
        stk_tokenizer_info tok_info;
        stk_replay_params replay_params;
        stk_replay_info replay_info;
        stk_replay_module replay_module;
        stk_replay_token replay_token;
        stk_array_file_info array_file;
        stk_lwt_header lwt_header;
        const uint32_t *ids = NULL;
        uint32_t kind = 99, dtype = 0;
        uint64_t config_value = 0;
        if (stk_path_kind_of("/nonexistent-stk-c-header", &kind) != STK_OK || kind != STK_PATH_OTHER) failures++;
        if (strcmp(stk_dtype_name(2), "f32") != 0) failures++;
        if (strcmp(stk_lwt_dtype_name(STK_LWT_I4), "int4") != 0 || stk_lwt_dtype_is_float(STK_LWT_I4) != 0) failures++;
        if (stk_lwt_dtype_parse("float16", &dtype) != STK_OK || dtype != STK_LWT_F16) failures++;
        if (stk_model_open("/nonexistent-stk-c-header", &model) != STK_E_NOT_FOUND || model != NULL) failures++;
        stk_model_close(NULL);
        memset(&model_info, 0, sizeof model_info);
        model_info.struct_size = sizeof model_info;
        if (stk_model_get_info(NULL, &model_info) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&model_tensor, 0, sizeof model_tensor);
        model_tensor.struct_size = sizeof model_tensor;
        if (stk_model_tensor_at(NULL, 0, &model_tensor) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&family, 0, sizeof family);
        family.struct_size = sizeof family;
        if (stk_family_count() == 0 || stk_family_at(0, &family) != STK_OK || family.name == NULL) failures++;
        if (stk_family_at(stk_family_count(), &family) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&tok_params, 0, sizeof tok_params);
        tok_params.struct_size = sizeof tok_params;
        tok_params.path = "/nonexistent-stk-c-header";
        if (stk_tokenizer_open(&tok_params, &tok) == STK_OK || tok != NULL) failures++;
        stk_tokenizer_close(NULL);
        memset(&tok_info, 0, sizeof tok_info);
        tok_info.struct_size = sizeof tok_info;
        if (stk_tokenizer_get_info(NULL, &tok_info) != STK_E_INVALID_ARGUMENT) failures++;
        if (stk_tokenizer_encode(NULL, "a", 1, 0, &ids, &bytes) != STK_E_INVALID_ARGUMENT) failures++;
        if (stk_tokenizer_decode(NULL, &count, 1, &text, &bytes) != STK_E_INVALID_ARGUMENT) failures++;
        if (stk_tokenizer_piece(NULL, 0, &text, &bytes) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&replay_params, 0, sizeof replay_params);
        replay_params.struct_size = sizeof replay_params;
        if (stk_replay_run(NULL, &replay_params, &replay) != STK_E_INVALID_ARGUMENT || replay != NULL) failures++;
        stk_replay_close(NULL);
        memset(&replay_info, 0, sizeof replay_info);
        replay_info.struct_size = sizeof replay_info;
        if (stk_replay_get_info(NULL, &replay_info) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&replay_module, 0, sizeof replay_module);
        replay_module.struct_size = sizeof replay_module;
        if (stk_replay_module_at(NULL, 0, &replay_module) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&replay_token, 0, sizeof replay_token);
        replay_token.struct_size = sizeof replay_token;
        if (stk_replay_token_at(NULL, 0, &replay_token) != STK_E_INVALID_ARGUMENT) failures++;
        memset(&array_file, 0, sizeof array_file);
        array_file.struct_size = sizeof array_file;
        if (stk_array_file_verify("/nonexistent-stk-c-header.bin", &array_file) != STK_E_NOT_FOUND) failures++;
        if (stk_lwt_open_flags("/nonexistent-stk-c-header.lwt", STK_LWT_OPEN_NO_CRC, &lwt) != STK_E_NOT_FOUND) failures++;
        memset(&lwt_header, 0, sizeof lwt_header);
        lwt_header.struct_size = sizeof lwt_header;
        if (stk_lwt_get_header(NULL, &lwt_header) != STK_E_INVALID_ARGUMENT) failures++;
        if (stk_lwt_config_at(NULL, 0, &text, &config_value) != STK_E_INVALID_ARGUMENT) failures++;
    }
    printf("c_header: %d failures\n", failures);
    return failures ? 1 : 0;
}
