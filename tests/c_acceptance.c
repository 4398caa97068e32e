/* include/stk/stk_acceptance.h compiled as C99 with -pedantic -Werror (tests/meson.build), linked
 * against the shared libstk, which exports it: the header is plain C, and every function it
 * declares is called (refusals here; tests/test_cli_api.cc runs them on a real generation). */
#define STK_EXPERIMENTAL
#include <stk/stk_acceptance.h>

#include <stdio.h>
#include <string.h>

static stk_status (*const f_check_model)(const stk_acceptance_params *) = &stk_acceptance_check_model;
static stk_status (*const f_run)(const stk_acceptance_params *, stk_acceptance **) = &stk_acceptance_run;
static void (*const f_close)(stk_acceptance *) = &stk_acceptance_close;
static stk_status (*const f_summary)(const stk_acceptance *, uint32_t *, uint32_t *) = &stk_acceptance_summary;
static stk_status (*const f_row_at)(const stk_acceptance *, uint32_t, stk_acceptance_row *) = &stk_acceptance_row_at;
static stk_status (*const f_table)(const stk_acceptance *, const char **) = &stk_acceptance_table;
static stk_status (*const f_json)(const stk_acceptance *, const char **) = &stk_acceptance_json;

int main(void) {
    int failures = 0;
    stk_acceptance_params params;
    stk_acceptance_row row;
    stk_acceptance *result = NULL;
    uint32_t rows = 0, passed = 0;
    const char *text = NULL;
    if (!f_check_model || !f_run || !f_close || !f_summary || !f_row_at || !f_table || !f_json) failures++;
    memset(&params, 0, sizeof params);
    params.struct_size = sizeof params;
    if (stk_acceptance_check_model(NULL) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_acceptance_check_model(&params) != STK_E_INVALID_ARGUMENT) failures++; /* no generation_dir */
    if (strstr(stk_last_error(), "generation_dir") == NULL) failures++;
    params.generation_dir = "/nonexistent-stk-c-acceptance";
    params.struct_size = 8;
    if (stk_acceptance_run(&params, &result) != STK_E_STRUCT_SIZE || result != NULL) failures++;
    stk_acceptance_close(NULL);
    if (stk_acceptance_summary(NULL, &rows, &passed) != STK_E_INVALID_ARGUMENT) failures++;
    memset(&row, 0, sizeof row);
    row.struct_size = sizeof row;
    if (stk_acceptance_row_at(NULL, 0, &row) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_acceptance_table(NULL, &text) != STK_E_INVALID_ARGUMENT) failures++;
    if (stk_acceptance_json(NULL, &text) != STK_E_INVALID_ARGUMENT) failures++;
    printf("c_acceptance: %d failures\n", failures);
    return failures ? 1 : 0;
}
