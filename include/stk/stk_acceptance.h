/*
 * stk_acceptance - the acceptance measurements of a published generation (`stk check
 * --acceptance`; docs/decisions.md, "Acceptance", defines every row).
 *
 * The measurements are built into libstk (static and shared; the shared one exports these
 * functions), which the stk command links alone.  This header is not installed.  The conventions are stk.h's: status codes, stk_last_error(), versioned
 * structs that begin with struct_size.  The whole header is experimental: it may change in any
 * release.
 */
#ifndef STK_STK_ACCEPTANCE_H
#define STK_STK_ACCEPTANCE_H

#include "stk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_acceptance_params {
    size_t struct_size;         /* sizeof(stk_acceptance_params) */
    const char *generation_dir; /* a published generation directory (not a root), verified first
                                   with stk_verify: the runner trusts its arrays */
    const char *model_dir;      /* the checkpoint it was converted from, or NULL: the rows that
                                   need the weights say skipped */
    uint32_t threads;           /* 0 = 1; the figures are seeded, not timed */
    /* Appended (struct_size says whether a caller has them).  Called on the calling thread as
     * stk_acceptance_run and stk_acceptance_check_model go, for a display: `step` is what starts
     * now ("16.2 linear", "16.2 linear: FFN 3/30", "16.5 determinism: a fresh conversion at
     * threads 2"), `suite` its suite's index 1..`suites` (0: before the suites), `rows` the rows
     * measured so far.  NULL: no calls.  It must not call into this run. */
    void (*progress)(void *user, const char *step, uint32_t suite, uint32_t suites, uint32_t rows);
    void *progress_user;
    /* Appended: the calibration statistics a `--calibration` generation was fitted to, or NULL.
     * Their SHA-256 must be the one its manifest records (checked by stk_acceptance_check_model,
     * STK_E_INVALID_ARGUMENT otherwise, also for a data-free generation); the reruns then convert
     * with them.  NULL on a calibrated generation: the rows that compare it with a data-free
     * rerun or with the data-free generator are skipped, their note saying "calibrated". */
    const char *calibration;
} stk_acceptance_params;

/* Refuses (STK_E_INVALID_ARGUMENT) a model_dir whose weights are not the ones the generation was
 * converted from (its parse_tensors digest against the manifest's stage table): rows run on the
 * wrong model would fail for the wrong reason; and a `calibration` whose SHA-256 is not the one
 * the manifest records (or given for a generation converted without one).  Reads the weights and
 * the statistics once, writes nothing.  STK_OK without model_dir and calibration.  Threads: any. */
STK_API stk_status stk_acceptance_check_model(const stk_acceptance_params *params);

/* The rows of every acceptance suite this build has, in the spec's order.  A suite that fails
 * contributes one failing gating row naming it (the call still succeeds).  Threads: any; a result
 * is read-only (the calls below may run at once on it). */
typedef struct stk_acceptance stk_acceptance;
STK_API stk_status stk_acceptance_run(const stk_acceptance_params *params, stk_acceptance **out_result);
/* NULL is a no-op.  Threads: no other call on this result may be running. */
STK_API void stk_acceptance_close(stk_acceptance *result);

/* How many rows, and whether every gating row passed (1) or one failed (0).  Threads: any. */
STK_API stk_status stk_acceptance_summary(const stk_acceptance *result, uint32_t *out_rows, uint32_t *out_passed);

typedef struct stk_acceptance_row {
    size_t struct_size;     /* sizeof(stk_acceptance_row) */
    const char *test;       /* "16.1 prf-estimator-mean" */
    const char *definition; /* what exactly is measured, in one line */
    const char *comparison; /* "<=" or ">=": how value is held to threshold */
    const char *note;       /* where it falls short and why, or "" */
    double value;           /* the measured value (not meaningful when skipped) */
    double threshold;
    uint32_t gating;  /* 1: a failure fails the run; 0: a reported figure */
    uint32_t pass;    /* value meets threshold under comparison */
    uint32_t skipped; /* not measured (note says why): no value, no verdict */
} stk_acceptance_row;

/* Row `index` (STK_E_KEY_NOT_FOUND past the end); its strings are valid until
 * stk_acceptance_close.  Threads: any. */
STK_API stk_status stk_acceptance_row_at(const stk_acceptance *result, uint32_t index, stk_acceptance_row *out);

/* The rows as the table `stk check --acceptance` prints (test | measured | threshold | verdict |
 * definition, one line each) and as its JSON value ({"passed": ..., "rows": [...]}, docs/cli.md).
 * NUL-terminated, valid until stk_acceptance_close.  Threads: any. */
STK_API stk_status stk_acceptance_table(const stk_acceptance *result, const char **out_text);
STK_API stk_status stk_acceptance_json(const stk_acceptance *result, const char **out_json);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STK_STK_ACCEPTANCE_H */
