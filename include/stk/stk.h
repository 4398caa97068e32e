/*
 * stk - the Sera Transfer Kit.
 *
 * The one public header of libstk: a stable C ABI (C99 and C++), opaque handles,
 * status codes with pinned values, parameter structs that begin with their size,
 * and caller-provided arenas.  Everything not declared here is hidden.
 *
 * Conventions
 *   - Every function returns an stk_status (STK_OK == 0) unless it cannot fail.
 *   - On failure, stk_last_error() returns a message for the calling thread that
 *     names the file, tensor and byte offset involved where there is one.
 *   - Structs start with `size_t struct_size`: zero the struct, set
 *     struct_size = sizeof(the struct), then fill the fields you need.  Later
 *     versions only append fields.  A caller built against an older stk.h
 *     passes its smaller struct: accepted, the fields it lacks take their
 *     defaults (structs the library fills are filled up to its struct_size).
 *     A caller built against a newer stk.h passes a larger struct: accepted
 *     when the fields this library does not know are zero, else
 *     STK_E_STRUCT_SIZE (a setting is never ignored silently).
 *   - Memory: stk_job_arena_size() says how many bytes a conversion job needs
 *     and the caller provides them to stk_open().  Everything the job keeps
 *     (its parameters, the log of arrays written, the model plan, each stage's
 *     scratch) lives in that arena, and a stage that would need more than its
 *     share fails with STK_E_ARENA_TOO_SMALL rather than fall back to the heap.
 *     The library still uses the heap for short-lived work of its own: reading
 *     the model's metadata and tokenizer files, worker threads, file names;
 *     the per-tensor and per-key inner loops allocate nothing.
 *     stk_generation_open, stk_lwt_open and stk_export_lwt allocate their own
 *     bounded state (freed by the matching close).  See docs/decisions.md,
 *     "Arenas".
 *   - Threads: each declaration says which calls may run at the same time.
 *     Calls on different handles are independent.  stk_last_error() is per
 *     thread.
 *
 * Tiers
 *   Everything below is the stable tier unless it sits inside
 *   `#ifdef STK_EXPERIMENTAL`: define STK_EXPERIMENTAL before including this
 *   header to see the experimental tier (zstd's ZSTD_STATIC_LINKING_ONLY).
 *   Experimental declarations may change or go in any release; the symbols
 *   are exported, so a program using them must be rebuilt with each libstk
 *   (the bindings check stk_version_number() for that).  Stable ones change
 *   only by appending (fields, enum values, functions).
 */
#ifndef STK_STK_H
#define STK_STK_H

#include <stddef.h>
#include <stdint.h>

#define STK_VERSION_MAJOR 0
#define STK_VERSION_MINOR 1
#define STK_VERSION_PATCH 0
#define STK_VERSION_NUMBER (STK_VERSION_MAJOR * 10000 + STK_VERSION_MINOR * 100 + STK_VERSION_PATCH)
#define STK_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#  define STK_API __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#  define STK_API __attribute__((visibility("default")))
#else
#  define STK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes.  Values are pinned: never renumbered, only appended within a group. */
typedef enum stk_status {
    STK_OK = 0,

    /* 1..9: the call itself */
    STK_E_INVALID_ARGUMENT = 1, /* a NULL pointer, a zero size, an out-of-range option */
    STK_E_STRUCT_SIZE = 2,      /* struct_size is smaller than the first version of the struct, or a
                                   newer struct sets fields this library does not know */
    STK_E_ARENA_TOO_SMALL = 3,  /* the arena is smaller than stk_job_arena_size() said */
    STK_E_NOT_IMPLEMENTED = 4,  /* the stage or feature does not exist yet; nothing was written */
    STK_E_STAGE_ORDER = 5,      /* a stage was run before the stages it depends on */
    STK_E_CANCELLED = 6,        /* stk_job_cancel stopped the job; nothing was published */

    /* 10..19: the file system */
    STK_E_IO = 10,            /* open/read/write/fsync/rename failed (errno in the message) */
    STK_E_NOT_FOUND = 11,     /* a required file is missing */
    STK_E_OUTPUT_EXISTS = 12, /* the output already holds a published generation */

    /* 20..39: Sera arrays and manifest */
    STK_E_TRUNCATED = 20,     /* the file ends before the bytes its header promises */
    STK_E_BAD_MAGIC = 21,     /* not a Sera array / manifest */
    STK_E_BAD_DTYPE = 22,     /* dtype not in 1..9 */
    STK_E_BAD_RANK = 23,      /* rank not in 1..5, or unused dims not 1 */
    STK_E_DIMS_OVERFLOW = 24, /* the product of dims (times the element size) overflows */
    STK_E_SIZE_MISMATCH = 25, /* byte_len, file length or a table size disagrees with the dims */
    STK_E_MISALIGNED = 26,    /* payload not 64-byte aligned */
    STK_E_CHECKSUM = 27,      /* crc32c, sha256_low64 or the header checksum does not match */
    STK_E_MISSING_ARRAY = 28, /* the manifest names an array that is not there */
    STK_E_SCHEMA = 29,        /* unknown manifest schema digest */
    STK_E_BAD_HEADER = 30,    /* reserved bytes or unknown flag bits set */
    STK_E_CORRUPT = 31,       /* any other malformed structure (the message says what) */

    /* 40..59: checkpoints and configs */
    STK_E_UNSUPPORTED = 40,   /* a real but unsupported format or dtype */
    STK_E_UNSAFE_PICKLE = 41, /* a pickle opcode or global outside the allowlist */
    STK_E_LFS_POINTER = 42,   /* a Git LFS pointer where a checkpoint should be */
    STK_E_UNKNOWN_MODEL = 43, /* model_type without a role preset or user patterns */
    STK_E_BAD_JSON = 44,      /* JSON that does not parse or has the wrong shape */
    STK_E_NONFINITE = 45,     /* NaN or Inf weights refused by the conversion policy */
    STK_E_PARAM_COUNT = 46,   /* shapes disagree with the configuration */

    /* 60..79: tokenizer and hash structures */
    STK_E_SP_REJECTED = 60,    /* Sardinas-Patterson found an ambiguity (not uniquely decodable) */
    STK_E_MPHF_EXHAUSTED = 61, /* seed search hit its cap (the stage retries with M += 5 %) */
    STK_E_TABLE_FULL = 62,     /* cuckoo table: kicks, stash and ring exhausted */
    STK_E_KEY_NOT_FOUND = 63,  /* a lookup found no entry */

    /* 90..99: the library itself */
    STK_E_NOMEM = 90,   /* a transient allocation outside any arena failed */
    STK_E_INTERNAL = 99 /* a bug: please report with the message */
} stk_status;

/* A short constant English name for a status ("STK_E_CHECKSUM: checksum mismatch").
 * Threads: any. */
STK_API const char *stk_status_str(stk_status status);

/* The message of the last failure on the calling thread ("" if none).  Valid until the next
 * stk_* call on this thread.  Threads: any (each thread has its own message). */
STK_API const char *stk_last_error(void);

/* STK_VERSION_NUMBER of the library actually linked (bindings check it against the header).
 * Threads: any. */
STK_API uint32_t stk_version_number(void);
STK_API const char *stk_version_string(void);

/* ------------------------------------------------------------------------------------------ */
/* Conversion jobs                                                                             */

/* The stages of a conversion, in the order they run (docs/format.md lists what each writes).
 * Values pinned. */
typedef enum stk_stage {
    STK_STAGE_PARSE_TENSORS = 1,
    STK_STAGE_TOKENIZER = 2, /* tokenizer_build_or_wrap */
    STK_STAGE_PRF = 3,
    STK_STAGE_OVERLAYS = 4,
    STK_STAGE_FFN_COLLAPSE = 5,
    STK_STAGE_MPHF_CUCKOO = 6,
    STK_STAGE_MEMORY_FIT = 7,
    STK_STAGE_BRIDGE_INIT = 8,
    STK_STAGE_MANIFEST_EMIT = 9,
    STK_STAGE_CHECK = 10
} stk_stage;

#define STK_STAGE_COUNT 10

/* Name of a stage ("parse_tensors"), or NULL for an unknown value.  Threads: any. */
STK_API const char *stk_stage_name(stk_stage stage);

/* Job flags */
#define STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER 0x1u /* build the greedy FST even if SP rejects */
#define STK_JOB_ALLOW_NONFINITE 0x2u             /* record NaN/Inf weights instead of refusing */
#define STK_JOB_PUBLISH_ROOT 0x4u                /* out_dir is a generations root (see below) */
/* RoPE memory: a least-squares SOS bank of the weights' RoPE kernel, not the spec's AR(2) */
#define STK_JOB_MEMORY_FIT_LSQ 0x8u
/* The faithful profile (`stk convert --profile faithful`; docs/format.md "Faithful profile"): the
 * model's own weights (bf16 matrices, f32 norms and biases, per-layer RoPE frequencies) and the
 * manifest's runtime block (sinks, window, per-layer attention kind, the family's constants).
 * The spec's numeric stages (prf_build .. bridge_init) are not run: each is recorded disabled by
 * the profile.  Without this flag every byte is the default profile's. */
#define STK_JOB_PROFILE_FAITHFUL 0x10u
/* Faithful profile only: FFN and expert matrices as .lwt int8 (one f32 scale per matrix,
 * docs/spec/lowbit-packing.txt) instead of bf16. */
#define STK_JOB_FAITHFUL_FFN_INT8 0x20u
/* Faithful profile only, at most one of the FFN flags (issue 37): FFN and expert matrices as ggml
 * Q4_0 / Q8_0 blocks (docs/format.md "Block-scaled arrays": blocks of 32 along each row, one f16
 * scale per block; gguf-py's quantize); a matrix whose rows are not a multiple of 32 values is
 * written bf16 instead (its dtype in the manifest's array table; a job warning names it).
 * Without an FFN flag the faithful profile writes Q8_0 (the decided default, docs/fidelity.md);
 * STK_JOB_FAITHFUL_FFN_BF16 keeps them bf16. */
#define STK_JOB_FAITHFUL_FFN_Q4_0 0x40u
#define STK_JOB_FAITHFUL_FFN_Q8_0 0x80u
#define STK_JOB_FAITHFUL_FFN_BF16 0x100u

typedef struct stk_job_params {
    size_t struct_size;  /* sizeof(stk_job_params) */
    const char *in_dir;  /* HF model directory (config.json, weights, tokenizer files) */
    const char *out_dir; /* output directory (created; must not hold a generation), or with
                            STK_JOB_PUBLISH_ROOT a generations root that gains one */
    uint32_t r;          /* PRF rank, default 512 */
    uint32_t rv;         /* overlay rank, default 12 */
    uint32_t l_tok;      /* longest token piece in bytes, default 8 */
    uint32_t top_l;      /* FFN top-L, default 12 */
    uint32_t threads;    /* worker threads, default 1; output bytes do not depend on it */
    uint32_t flags;      /* STK_JOB_* */
    /* Appended (an older caller's struct_size leaves it NULL): a calibration statistics file
     * (`python -m stk calibrate`; docs/format.md "Calibration statistics") the stages fit to, or
     * NULL for the data-free conversion (every array then as without this field).  stk_open
     * validates it and refuses one of another shape; parse_tensors refuses one of another model. */
    const char *calibration;
    /* Appended; faithful profile only (0 elsewhere, else STK_E_INVALID_ARGUMENT): the sink
     * positions and the window of recent positions the runtime keeps exact (0: the defaults 4 and
     * 252; the runtime block records them). */
    uint32_t sinks;
    uint32_t window;
    /* Appended (issue 37); faithful profile only (0 elsewhere, else STK_E_INVALID_ARGUMENT): the
     * retention policy the runtime block records, the default of a sequence opened on the
     * generation (STK_SEQ_POLICY_WINDOW .. _TOVA_HEAD; 0: window), and H2O's recent positions
     * (0: window / 2; only with STK_SEQ_POLICY_H2O, and < window). */
    uint32_t policy;
    uint32_t recent;
} stk_job_params;

typedef struct stk_job stk_job;

/* How many arena bytes a job with these parameters needs.  Reads the checkpoint's metadata
 * (headers, config, tokenizer sizes), never the weights.  Threads: any. */
STK_API stk_status stk_job_arena_size(const stk_job_params *params, size_t *out_bytes);

/* Open a job inside the caller's arena (at least stk_job_arena_size() bytes, any alignment).
 * The job handle itself lives in the arena; the arena must outlive stk_close().
 * Threads: any.  A job is used by one thread at a time: no two calls on the same job may
 * overlap, except stk_job_progress (experimental tier). */
STK_API stk_status stk_open(const stk_job_params *params, void *arena, size_t arena_bytes, stk_job **out_job);

/* Run one stage.  Stages run in the order of stk_stage; a stage whose inputs are missing returns
 * STK_E_STAGE_ORDER.  A stage that is not implemented returns STK_E_NOT_IMPLEMENTED and writes
 * nothing.  Threads: one call on a job at a time (the stage itself uses params.threads workers). */
STK_API stk_status stk_stage_run(stk_job *job, stk_stage stage);

/* The digests a finished stage recorded: crc32c and sha256_low64 over the bytes of every array
 * the stage wrote, in write order.  Threads: not during stk_stage_run on the same job. */
STK_API stk_status stk_stage_digest(const stk_job *job, stk_stage stage, uint32_t *out_crc32c, uint64_t *out_sha256_low64);

/* Release everything the job holds outside the arena (open files, mappings).  NULL is a no-op.
 * With STK_JOB_PUBLISH_ROOT it also releases the root's lock and removes the staging directory
 * of a job that did not publish.  Threads: no other call on the job may be running. */
STK_API void stk_close(stk_job *job);

/* Ask a job to stop, from any thread (or a signal handler: it only sets a flag).  The running
 * stage returns STK_E_CANCELLED at its next progress point (a layer, an FFN, a tensor), every
 * later stk_stage_run returns STK_E_CANCELLED at once, and the check stage does not publish:
 * stk_close then removes the staging directory, so a cancelled job into a generations root leaves
 * the root as it was.  NULL is a no-op.  Threads: any, also while stk_stage_run runs on the job
 * (from another thread or a signal handler). */
STK_API void stk_job_cancel(stk_job *job);

/* Generations roots (STK_JOB_PUBLISH_ROOT; docs/format.md "Generations root").
 * A root holds generations/<name>/ (each a published output directory) and one pointer file,
 * CURRENT, naming the current one.  stk_open locks the root (one writer at a time: a second one
 * gets STK_E_IO), removes what crashed writers left, and points the stages at a staging
 * directory under the root, with the current generation's curr_hash as prev_hash.  The check
 * stage, once it has verified the staging directory, renames it into generations/ and swaps
 * CURRENT atomically: a reader sees the old generation or the new one, whole.
 * stk_verify and stk_generation_open accept a root (they resolve CURRENT once and pin that
 * generation) as well as a generation directory. */

/* After the check stage published: the new generation's directory (ROOT/generations/<name>),
 * valid until stk_close.  STK_E_STAGE_ORDER before, STK_E_INVALID_ARGUMENT without
 * STK_JOB_PUBLISH_ROOT.  Threads: not during stk_stage_run on the same job. */
STK_API stk_status stk_job_generation_dir(const stk_job *job, const char **out_dir);

/* Remove generation `name` from a root: never the current one (STK_E_INVALID_ARGUMENT); takes
 * the root's lock (STK_E_IO while a writer holds it).  Threads: any (the lock serialises
 * writers, in this process and others). */
STK_API stk_status stk_generation_remove(const char *root, const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Verification                                                                                */

typedef struct stk_verify_report {
    size_t struct_size;      /* sizeof(stk_verify_report) */
    uint32_t arrays_checked; /* arrays whose header and payload were verified */
    uint64_t bytes_checked;  /* payload bytes hashed */
    /* on failure: where */
    char failed_file[256];  /* file name relative to the output directory, "" if none */
    uint64_t failed_offset; /* byte offset inside that file */
} stk_verify_report;

/* Verify a published output directory: the manifest (magic, schema digest, sizes, hash chain)
 * and every array it lists (header, payload crc32c and sha256_low64).  report may be NULL.
 * out_dir may also be a generations root: its CURRENT generation is verified, and failed_file
 * is then relative to the root ("CURRENT", "generations/<name>/arrays/x.bin").  Large
 * generations are hashed on up to 8 threads; the result does not depend on how many.
 * Threads: any, several at once (read-only). */
STK_API stk_status stk_verify(const char *out_dir, stk_verify_report *report);

/* ------------------------------------------------------------------------------------------ */
/* Runtime lookups over a published generation                                                */

typedef struct stk_generation stk_generation;

/* Map a published generation read-only (verifies it first, as stk_verify).  Given a generations
 * root, CURRENT is read once and that generation pinned: lookups keep answering from it when a
 * newer one is published or it is removed.  Threads: any. */
STK_API stk_status stk_generation_open(const char *out_dir, stk_generation **out_gen);
/* Threads: no stk_lookup on this generation may be running. */
STK_API void stk_generation_close(stk_generation *gen);

/* The path of the generation directory this handle mapped (for a root, the generation CURRENT
 * named when it was opened), valid until stk_generation_close.  Threads: any. */
STK_API stk_status stk_generation_dir(const stk_generation *gen, const char **out_dir);

/* One published array of an open generation: its manifest entry and its payload bytes inside a
 * read-only mapping (docs/format.md, "Sera array").  dtype: 1 f64, 2 f32, 3 i32, 4 i16, 5 i8,
 * 6 u8, 7 Q8.8 and 8 Q4.12 (i16 fixed point), 9 bf16, 10 q4_0 and 11 q8_0 (ggml blocks of 32
 * along the last dim: byte_len = elements / 32 x 18 or 34); little-endian, row-major. */
typedef struct stk_array_view {
    size_t struct_size; /* sizeof(stk_array_view) */
    char name[64];      /* file name under arrays/ ("prf_W.bin"), NUL-terminated */
    uint32_t stage;     /* the stk_stage that wrote it */
    uint32_t dtype;
    uint32_t rank;     /* 1..5 */
    uint32_t flags;    /* the array header's flags */
    uint64_t dims[5];  /* dims[0..rank); the rest 1 */
    uint64_t byte_len; /* payload bytes */
    const void *data;  /* the payload (64-byte aligned), valid until stk_generation_close */
} stk_array_view;

/* Number of arrays the generation's manifest lists, in manifest order.  Threads: any. */
STK_API stk_status stk_generation_array_count(const stk_generation *gen, uint32_t *out_count);
/* Array `index` (0-based, manifest order; STK_E_KEY_NOT_FOUND past the end) or the array whose
 * file name is `name` (STK_E_KEY_NOT_FOUND if none).  The first call for an array maps its file
 * and verifies it against the manifest entry (header, crc32c, sha256_low64; STK_E_CHECKSUM or
 * STK_E_SIZE_MISMATCH naming the file otherwise); later calls return the same mapping.
 * Threads: any, several at once on one generation (the first mapping of an array is locked). */
STK_API stk_status stk_generation_array_at(const stk_generation *gen, uint32_t index, stk_array_view *out);
STK_API stk_status stk_generation_array_find(const stk_generation *gen, const char *name, stk_array_view *out);

typedef enum stk_lookup_kind {
    STK_LOOKUP_TOKEN_ID = 1,    /* key: token bytes -> value: token id */
    STK_LOOKUP_TOKEN_BYTES = 2, /* key: u32 token id (LE) -> value: token bytes */
    STK_LOOKUP_LINEAR = 3,      /* key: u64 feature key (LE) -> value: f32 base weight */
    STK_LOOKUP_HUB = 4          /* key: u32 token id, u32 context id (LE) -> value: hub bitset, W u64 LE words */
} stk_lookup_kind;

/* One O(1) lookup.  Threads: a generation is read-only once open: stk_lookup may be called from
 * many threads at once on the same generation.  On success writes up to value_cap bytes to value and the full length to
 * *value_len (STK_E_INVALID_ARGUMENT if value_cap is too small; *value_len says how much is
 * needed).  STK_E_KEY_NOT_FOUND if the key is absent. */
STK_API stk_status stk_lookup(const stk_generation *gen, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                              size_t value_cap, size_t *value_len);

/* ------------------------------------------------------------------------------------------ */
/* .lwt weight files (docs/format.md, "LWT weight file") */

/* Element types of .lwt tensors (the u32 in the index entry).  Values pinned. */
typedef enum stk_lwt_dtype {
    STK_LWT_F32 = 1,
    STK_LWT_F16 = 2,
    STK_LWT_BF16 = 3,
    STK_LWT_I8 = 4,
    STK_LWT_U8 = 5,
    STK_LWT_I4 = 6,
    STK_LWT_U4 = 7,
    STK_LWT_FP4 = 8,
    STK_LWT_I2 = 9,
    STK_LWT_U2 = 10,
    STK_LWT_TERNARY = 11,
    STK_LWT_BINARY = 12,
    /* Block-scaled: ggml's Q4_0 / Q8_0 blocks of 32 values, each with its own f16 scale (no
     * per-tensor scale: the entry stores 1 and 0); a tensor's last dimension is a multiple of 32.
     * stk_export_lwt refuses a model with a matrix whose rows are not (STK_E_UNSUPPORTED). */
    STK_LWT_Q4_0 = 13,
    STK_LWT_Q8_0 = 14
} stk_lwt_dtype;

typedef struct stk_export_params {
    size_t struct_size;   /* sizeof(stk_export_params) */
    const char *in_dir;   /* HF model directory (config.json + safetensors or pytorch_model.bin) */
    const char *out_path; /* the .lwt to create; STK_E_OUTPUT_EXISTS if it exists */
    uint32_t dtype;       /* stk_lwt_dtype for matrices (rank >= 2); 0 = STK_LWT_F32.  Vectors: f32 */
    uint32_t reserved;    /* ignored: the tail padding of the first version of this struct, which
                             callers built against it may leave uninitialised */
    uint32_t threads;     /* worker threads, default 1 (0 = 1, at most 64); output bytes do not
                             depend on it.  A struct_size that ends before this field (32, the
                             first version's sizeof) means 1. */
} stk_export_params;

typedef struct stk_export_report {
    size_t struct_size;    /* sizeof(stk_export_report) */
    uint64_t tensors;      /* tensors written */
    uint64_t parameters;   /* elements written (= the model's parameter count) */
    uint64_t file_bytes;   /* size of the .lwt */
    uint32_t data_crc32;   /* CRC32 of its data section */
    uint32_t tied_lm_head; /* 1 if the head is the token embedding (not stored) */
} stk_export_report;

/* HuggingFace checkpoint -> .lwt.  The file appears under out_path only when complete.
 * report may be NULL.  Threads: any (each call with its own out_path). */
STK_API stk_status stk_export_lwt(const stk_export_params *params, stk_export_report *report);

typedef struct stk_lwt stk_lwt;

/* Map a .lwt read-only and validate it (structure, sizes, CRC32 of the data section).
 * Threads: any.  The calls below only read an open file: any number may run at once on it. */
STK_API stk_status stk_lwt_open(const char *path, stk_lwt **out_lwt);
/* Threads: no other call on this file may be running. */
STK_API void stk_lwt_close(stk_lwt *lwt);

typedef struct stk_lwt_tensor {
    size_t struct_size; /* sizeof(stk_lwt_tensor) */
    char name[128];     /* NUL-terminated */
    uint32_t dtype;     /* stk_lwt_dtype */
    uint32_t ndim;      /* 0..8 */
    uint64_t shape[8];  /* unused dims 0 */
    uint64_t n_elements;
    uint64_t size_bytes; /* packed bytes */
    float scale;         /* 1 for float and block-scaled dtypes */
    uint32_t zero_point; /* unsigned dtypes; else 0 */
    const void *data;    /* the packed bytes inside the mapping (valid until stk_lwt_close) */
    uint64_t offset;     /* of the packed bytes, from the start of the data section */
} stk_lwt_tensor;

/* Number of tensors, and the whole header JSON (points into the mapping). */
STK_API stk_status stk_lwt_info(const stk_lwt *lwt, uint32_t *out_tensor_count, const char **out_header_json,
                                size_t *out_header_len);
/* The index entry of tensor `index` (0-based) or of the tensor called `name` (STK_E_KEY_NOT_FOUND). */
STK_API stk_status stk_lwt_tensor_at(const stk_lwt *lwt, uint32_t index, stk_lwt_tensor *out);
STK_API stk_status stk_lwt_find(const stk_lwt *lwt, const char *name, stk_lwt_tensor *out);
/* Unpack a tensor to f32 into caller memory of out_count floats (STK_E_INVALID_ARGUMENT if fewer
 * than its n_elements). */
STK_API stk_status stk_lwt_read_f32(const stk_lwt *lwt, const char *name, float *out, size_t out_count);

/* ------------------------------------------------------------------------------------------ */
/* Experimental tier: define STK_EXPERIMENTAL before including this header.  These may change
 * in any release (see "Tiers" at the top). */
#ifdef STK_EXPERIMENTAL

/* What the tokenizer stage decided (docs/decisions.md, "EXT mode and replay"). */
typedef enum stk_tokenizer_mode {
    STK_TOKENIZER_NOT_RUN = 0,         /* the tokenizer stage has not run (yet) */
    STK_TOKENIZER_ABSENT = 1,          /* no tokenizer files in the model: the feature is disabled */
    STK_TOKENIZER_FST = 2,             /* greedy token tables, certified uniquely decodable */
    STK_TOKENIZER_FST_UNCERTIFIED = 3, /* tables built although the certification failed
                                          (STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER) */
    STK_TOKENIZER_EXT = 4              /* no tables: tokenizing needs the model's own tokenizer */
} stk_tokenizer_mode;

typedef struct stk_job_info {
    size_t struct_size;               /* sizeof(stk_job_info) */
    uint32_t tokenizer_mode;          /* stk_tokenizer_mode */
    uint32_t tokenizer_certified_run; /* 1 if the unique-decodability test ran (byte-level BPE) */
    uint32_t vocab_size;              /* tokens in the vocabulary (0 before the tokenizer stage) */
    uint32_t l_tok;                   /* longest token piece in the tables, bytes */
    char tokenizer_reason[512];       /* why that mode, NUL-terminated ("" if nothing to say) */
} stk_job_info;

/* What the job decided so far.  Threads: not during stk_stage_run on the same job. */
STK_API stk_status stk_job_get_info(const stk_job *job, stk_job_info *out);

typedef enum stk_stage_state {
    STK_STAGE_STATE_PENDING = 0,        /* not run, or it failed (stk_stage_run said why) */
    STK_STAGE_STATE_DONE = 1,           /* ran; its arrays are written */
    STK_STAGE_STATE_DISABLED = 2,       /* ran, but a bound it could not meet (or a disabled stage
                                           it needs) disabled its feature: nothing of it is kept,
                                           and the manifest records why */
    STK_STAGE_STATE_NOT_IMPLEMENTED = 3 /* this build has no such stage: nothing written */
} stk_stage_state;

typedef struct stk_stage_info {
    size_t struct_size; /* sizeof(stk_stage_info) */
    uint32_t state;     /* stk_stage_state */
    uint32_t crc32c;    /* DONE or DISABLED: as stk_stage_digest */
    uint64_t sha256_low64;
    char reason[128]; /* DISABLED: the reason the manifest records, NUL-terminated; else "" */
} stk_stage_info;

/* The state of one stage.  Threads: not during stk_stage_run on the same job. */
STK_API stk_status stk_stage_get_info(const stk_job *job, stk_stage stage, stk_stage_info *out);

/* The progress of the stage running now, for a display: *out_done of *out_total units of
 * *out_unit ("B" for bytes read, "layers", "FFNs"; a static string).  *out_total is 0 when the
 * stage does not report progress.  Threads: the one call that may run while stk_stage_run runs
 * on the same job (from another thread); the numbers are a snapshot. */
STK_API stk_status stk_job_progress(const stk_job *job, uint64_t *out_done, uint64_t *out_total, const char **out_unit);

/* The job's warnings, the list `stk convert` prints and its --json "warnings" holds: fallbacks
 * that change what was written (the tokenizer in EXT mode, no tokenizer files, uncertified token
 * tables: from the tokenizer stage on) and, once the check stage has published into a root, a
 * default rv clamped to the model, a CURRENT that was repaired, a generation with no arrays.
 * stk_job_warning_at writes warning `index` (0..count-1) NUL-terminated into out (out_cap bytes)
 * and its length to *out_len (STK_E_INVALID_ARGUMENT when out_cap is too small; *out_len says how
 * much is needed, without the NUL).  Threads: not during stk_stage_run on the same job. */
STK_API stk_status stk_job_warning_count(const stk_job *job, uint32_t *out_count);
STK_API stk_status stk_job_warning_at(const stk_job *job, uint32_t index, char *out, size_t out_cap, size_t *out_len);

/* ------------------------------------------------------------------------------------------ */
/* Experimental: what the stk command reads (model paths, the plan, manifests, roots).         */
/* Everything `stk convert`, `stk check` and `stk generations` print comes from these calls.  */

/* On-disk names of a published generation and a generations root (docs/format.md). */
#  define STK_MANIFEST_FILE_NAME "sera_manifest.bin" /* GEN/sera_manifest.bin */
#  define STK_ARRAYS_DIR_NAME "arrays"               /* GEN/arrays/<name> */
#  define STK_ARRAY_HEADER_BYTES 128                 /* an array file = header + payload */
#  define STK_CURRENT_FILE_NAME "CURRENT"            /* ROOT/CURRENT */
#  define STK_GENERATIONS_DIR_NAME "generations"     /* ROOT/generations/<name>/ */
#  define STK_LOCK_FILE_NAME "LOCK"                  /* ROOT/LOCK, held by the one writer */
#  define STK_STAGING_PREFIX ".staging-"             /* ROOT/.staging-<pid>-<n>/: a conversion being built */

/* The short name of an array dtype ("f32", "q8_8", ...; stk_array_view's list; 10 "q4_0" and 11
 * "q8_0", the block-scaled types of a faithful generation), "unknown" for a value outside 1..11.
 * Threads: any. */
STK_API const char *stk_dtype_name(uint32_t dtype);

/* The GGUF file a model path names, or "" when it is not a GGUF model: a file that starts with
 * the GGUF magic, or a directory without config.json holding exactly one GGUF model (for a split
 * set, its first file).  Writes the path NUL-terminated into out (out_cap bytes) and its length
 * to *out_len (STK_E_INVALID_ARGUMENT when out_cap is too small; *out_len says how much is
 * needed, without the NUL).  A directory holding several GGUF models is refused, naming them.
 * Threads: any. */
STK_API stk_status stk_model_gguf_path(const char *path, char *out, size_t out_cap, size_t *out_len);

/* The plan of a conversion, from the model's metadata, the tokenizer files and the options alone
 * (`stk convert --dry-run`): the normalised options, the model, the arena, and every array each
 * stage will publish.  Reads no weights and writes nothing.  A library-owned handle. */
typedef struct stk_plan stk_plan;

typedef struct stk_plan_info {
    size_t struct_size; /* sizeof(stk_plan_info) */
    /* the options as the job will use them (defaults applied, the default rv clamped on a narrow
       model) */
    uint32_t r, rv, l_tok, top_l, threads;
    uint32_t n_layers;
    uint32_t n_tensors;   /* tensors of the checkpoint that the plan streams or maps */
    uint32_t array_count; /* entries for stk_plan_array_at, disabled ones included */
    uint64_t n_params;
    uint64_t checkpoint_bytes;
    uint64_t arena_bytes;            /* = stk_job_arena_size */
    uint64_t largest_unit_f32_bytes; /* the largest layer converted to f32 while it streams */
    uint64_t expected_peak_bytes;    /* arena_bytes + largest_unit_f32_bytes */
    /* totals over the arrays: written (certainly), optional (on some data), disabled (not
       written, not counted below); the payload split into exact sizes and upper bounds */
    uint64_t arrays_written, arrays_optional, arrays_disabled;
    uint64_t payload_exact_bytes, payload_bound_bytes;
    uint64_t file_bytes; /* payloads and headers of the written and optional arrays */
    char model_type[32]; /* config.json's model_type, NUL-terminated */
    char format[32];     /* the checkpoint's container ("safetensors", "gguf", ...) */
} stk_plan_info;

/* Whether a planned array will be written. */
typedef enum stk_plan_presence {
    STK_PLAN_WRITTEN = 0,  /* written (unless the failure policy disables its stage) */
    STK_PLAN_OPTIONAL = 1, /* written only on some data (reason says when) */
    STK_PLAN_DISABLED = 2  /* not written: the inputs or options switch it off (reason says why) */
} stk_plan_presence;

typedef struct stk_plan_array {
    size_t struct_size; /* sizeof(stk_plan_array) */
    char name[64];      /* file name under arrays/, NUL-terminated */
    uint32_t stage;     /* stk_stage */
    uint32_t dtype;     /* as stk_array_view */
    uint32_t rank;
    uint32_t exact;    /* 0: dims and bytes are upper bounds (sizes that depend on the values) */
    uint32_t presence; /* stk_plan_presence */
    uint32_t reserved;
    uint64_t dims[5];       /* dims[0..rank) */
    uint64_t payload_bytes; /* 0 for a disabled array of unknown size */
    uint64_t file_bytes;    /* payload + STK_ARRAY_HEADER_BYTES */
    const char *reason;     /* why not exact / optional / disabled ("; "-separated clauses; "" when
                               written exactly); valid until stk_plan_close */
} stk_plan_array;

typedef struct stk_plan_stage {
    size_t struct_size;   /* sizeof(stk_plan_stage) */
    uint32_t implemented; /* 0: this build has no such stage (its feature will be disabled) */
    uint32_t arrays;      /* arrays it will or may write (disabled ones not counted) */
    uint64_t arena_bytes; /* its share of the arena (what its sizing asks for, before alignment) */
} stk_plan_stage;

/* Plan a job with these parameters, as stk_job_arena_size reads them (out_dir counts: the arena
 * holds its name; nothing is written there).  Refuses what stk_job_arena_size refuses.
 * Threads: any; a plan is read-only once open (the calls below may run at once on it). */
STK_API stk_status stk_plan_open(const stk_job_params *params, stk_plan **out_plan);
/* NULL is a no-op.  Threads: no other call on this plan may be running. */
STK_API void stk_plan_close(stk_plan *plan);
STK_API stk_status stk_plan_get_info(const stk_plan *plan, stk_plan_info *out);
/* Planned array `index` (0-based; stages in DAG order, each stage's arrays in write order;
 * STK_E_KEY_NOT_FOUND past the end). */
STK_API stk_status stk_plan_array_at(const stk_plan *plan, uint32_t index, stk_plan_array *out);
/* One stage of the plan (STK_E_INVALID_ARGUMENT for an unknown stage). */
STK_API stk_status stk_plan_stage_info(const stk_plan *plan, stk_stage stage, stk_plan_stage *out);

/* A generation's manifest, decoded and validated (magic, schema digest, every bound, curr_hash),
 * without reading the arrays (stk_verify does that).  A library-owned handle. */
typedef struct stk_manifest stk_manifest;

typedef struct stk_manifest_info {
    size_t struct_size;        /* sizeof(stk_manifest_info) */
    uint8_t curr_hash[32];     /* SHA-256 of the manifest before it: the generation's identity */
    uint8_t prev_hash[32];     /* the generation it replaced; zeros for a root's first */
    uint8_t schema_sha256[32]; /* the schema digest */
    uint32_t array_count;
    uint32_t record_count;
    uint32_t pgen_count;
    uint32_t abi_flags;     /* 1: fused multiply-adds, 2: flush-to-zero */
    uint64_t payload_bytes; /* the arrays' byte_len summed */
    /* tokenizer fields (docs/format.md, "Manifest") */
    uint32_t tokenizer_mode; /* 0 disabled, 1 fst certified, 2 fst uncertified, 3 ext wrapper */
    uint32_t tokenizer_l_tok;
    uint32_t tokenizer_s_norm;
    uint32_t tokenizer_l_norm;
    uint32_t tokenizer_vocab_size;
    uint32_t tokenizer_unicode_policy; /* 0 none, 1 byte-level, 2 sentencepiece, 3 raw utf-8 */
    uint8_t tokenizer_sp_cert_digest[32];
    uint32_t prf_r;       /* PRF rank (0: the feature is disabled) */
    uint32_t overlays_rv; /* overlay rank (0: disabled) */
    /* where it was read (valid until stk_manifest_close) */
    const char *dir;           /* the generation directory */
    const char *manifest_path; /* its sera_manifest.bin */
    uint32_t published;        /* 1: dir sits in a generations root's generations/ (it was published,
                                  so the check stage passed it) */
    uint32_t first;            /* 1: the first generation of its root (prev_hash all zero) */
    /* Appended: the conversion profile (docs/format.md "Runtime block"): 0 default (no runtime
     * block), 1 faithful; then, for the faithful profile, its sinks, window and FFN element type
     * (9 bf16, 5 int8, 10 q4_0, 11 q8_0: docs/format.md's array dtype codes). */
    uint32_t profile;
    uint32_t runtime_sinks;
    uint32_t runtime_window;
    uint32_t runtime_ffn_dtype;
    /* Appended (issue 37): the retention policy a sequence keeps by default (STK_SEQ_POLICY_*
     * numbers: 0 window, 1 tova, 2 h2o, 3 tova-head) and H2O's recent count (0: window / 2). */
    uint32_t runtime_policy;
    uint32_t runtime_recent;
} stk_manifest_info;

typedef struct stk_manifest_array {
    size_t struct_size; /* sizeof(stk_manifest_array) */
    char name[64];      /* file name under arrays/, NUL-terminated */
    uint32_t stage;     /* the stk_stage that wrote it */
    uint32_t dtype;     /* as stk_array_view */
    uint32_t rank;
    uint32_t flags;
    uint64_t dims[5];
    uint64_t byte_len; /* payload bytes */
    uint64_t sha256_low64;
    uint32_t crc32c;
    uint32_t reserved;
} stk_manifest_array;

/* A stage's state in the manifest's stage table (values as stored). */
typedef enum stk_manifest_stage_state {
    STK_MANIFEST_STAGE_PENDING = 0,         /* runs after the manifest is written (check) */
    STK_MANIFEST_STAGE_RAN = 1,             /* ran, feature enabled */
    STK_MANIFEST_STAGE_NOT_IMPLEMENTED = 2, /* did not exist: wrote nothing, feature disabled */
    STK_MANIFEST_STAGE_DISABLED = 3,        /* ran, disabled its feature (a record says why) */
    STK_MANIFEST_STAGE_FAILED = 4           /* failed, feature disabled (a record says why) */
} stk_manifest_stage_state;

typedef struct stk_manifest_stage {
    size_t struct_size; /* sizeof(stk_manifest_stage) */
    uint32_t state;     /* stk_manifest_stage_state */
    uint32_t crc32c;
    uint64_t sha256_low64;
} stk_manifest_stage;

/* The kind of a manifest record (values as stored). */
typedef enum stk_record_kind {
    STK_RECORD_FEATURE_DISABLED = 1,
    STK_RECORD_INVARIANT_PASS = 2,
    STK_RECORD_INVARIANT_FAIL = 3,
    STK_RECORD_NOTE = 4 /* e.g. "approx: ..." from parse_tensors: what the arrays cannot represent */
} stk_record_kind;

typedef struct stk_manifest_record {
    size_t struct_size; /* sizeof(stk_manifest_record) */
    uint32_t stage;     /* stk_stage */
    uint32_t kind;      /* stk_record_kind */
    uint32_t feature;   /* docs/format.md, "Manifest": 0 none, 1 tokenizer_fst ... 8 o0_route */
    uint32_t status;    /* the stk_status that caused it (0 for a pass) */
    double value;       /* measured value */
    double bound;       /* the bound it was held to */
    char text[128];     /* printable ASCII, NUL-terminated */
} stk_manifest_record;

/* Read a manifest: `path` is a generation directory, a generations root (its CURRENT generation,
 * read once) or the manifest file itself.  Threads: any; read-only once open (any number of the
 * calls below may run at once on it). */
STK_API stk_status stk_manifest_open(const char *path, stk_manifest **out_manifest);
/* NULL is a no-op.  Threads: no other call on this manifest may be running. */
STK_API void stk_manifest_close(stk_manifest *manifest);
STK_API stk_status stk_manifest_get_info(const stk_manifest *manifest, stk_manifest_info *out);
/* Entry `index` of the array table / the record table, in manifest order (STK_E_KEY_NOT_FOUND
 * past the end); the stage table's row of `stage` (STK_E_INVALID_ARGUMENT for an unknown one). */
STK_API stk_status stk_manifest_array_at(const stk_manifest *manifest, uint32_t index, stk_manifest_array *out);
STK_API stk_status stk_manifest_record_at(const stk_manifest *manifest, uint32_t index, stk_manifest_record *out);
STK_API stk_status stk_manifest_stage_at(const stk_manifest *manifest, stk_stage stage, stk_manifest_stage *out);

/* Generations roots: what a root holds, its generations, and their removal. */
typedef struct stk_root_info {
    size_t struct_size;    /* sizeof(stk_root_info) */
    uint32_t is_root;      /* the directory holds CURRENT or generations/ */
    uint32_t needs_repair; /* it holds generations but no usable CURRENT (none, unreadable, or
                              naming a generation that is not there): the next stk_open of
                              the root points CURRENT at the newest generation that verifies */
} stk_root_info;

/* What `path` is; a path that does not exist is no root (not an error).  Threads: any. */
STK_API stk_status stk_root_probe(const char *path, stk_root_info *out);

typedef struct stk_generation_list stk_generation_list;

typedef struct stk_generation_entry {
    size_t struct_size; /* sizeof(stk_generation_entry) */
    char name[64];      /* "<seq>-<16 hex digits of curr_hash>", NUL-terminated */
    uint64_t seq;
    uint32_t readable; /* its manifest decoded and its curr_hash matched (else see error) */
    uint32_t current;  /* CURRENT names it */
    uint32_t on_chain; /* reached from CURRENT by following prev_hash */
    uint32_t reserved;
    uint8_t curr_hash[32];
    uint8_t prev_hash[32]; /* zeros: the root's first generation */
    uint64_t arrays;       /* arrays its manifest lists */
    uint64_t bytes;        /* their payload bytes */
    const char *error;     /* why it is not readable, "" if it is; valid until the list is closed */
} stk_generation_entry;

/* Every generation of a root (generations/<name> with a well-formed name), in publication
 * order.  STK_E_NOT_FOUND when root is not a generations root.  Takes no lock (a snapshot).
 * Threads: any. */
STK_API stk_status stk_root_list(const char *root, stk_generation_list **out_list);
/* The published history: from CURRENT back through prev_hash over the generations present,
 * newest first (each verified as stk_check follows it: a link to a generation that is not older,
 * or a CURRENT whose hash is not its generation's, is STK_E_CHECKSUM).  The last one's prev_hash
 * is zero (the root's first generation) or names one that was removed.  Threads: any. */
STK_API stk_status stk_root_chain(const char *root, stk_generation_list **out_list);
/* How many entries, and entry `index` (STK_E_KEY_NOT_FOUND past the end).  A list is a
 * read-only snapshot: threads: any, several at once on one list. */
STK_API stk_status stk_generation_list_count(const stk_generation_list *list, uint32_t *out_count);
STK_API stk_status stk_generation_list_at(const stk_generation_list *list, uint32_t index, stk_generation_entry *out);
/* NULL is a no-op.  Threads: no other call on this list may be running. */
STK_API void stk_generation_list_close(stk_generation_list *list);

/* What a removal did: the generations removed, those a reader held (kept for the next gc), and
 * how many leftovers of crashed writers went first.  A library-owned handle. */
typedef struct stk_gc_result stk_gc_result;

#  define STK_REMOVE_FORCE 0x1u /* stk_root_remove: also a chain member that would cut the chain */

/* Under the root's lock (STK_E_IO while a writer holds it): remove the leftovers of crashed
 * writers, then every generation off the chain and every chain member beyond the newest `keep`
 * (keep >= 1: the current one always stays; 0 is STK_E_INVALID_ARGUMENT).  A generation a
 * reader has open (stk_generation_open, stk_verify) stays, named in the result's in_use list.
 * Threads: any (the lock serialises writers, in this process and others). */
STK_API stk_status stk_root_gc(const char *root, uint32_t keep, stk_gc_result **out_result);
/* The same lock and leftovers, then remove generation `name`: never the current one, and a chain
 * member with older and newer chain members present (it would cut the chain) only with
 * STK_REMOVE_FORCE; both refusals are STK_E_INVALID_ARGUMENT, and a generation a reader holds
 * is STK_E_IO.  Threads: as stk_root_gc. */
STK_API stk_status stk_root_remove(const char *root, const char *name, uint32_t flags, stk_gc_result **out_result);
/* Counts of the result.  Threads: any. */
STK_API stk_status stk_gc_result_counts(const stk_gc_result *result, uint32_t *out_removed, uint32_t *out_in_use,
                                        uint32_t *out_leftovers);
/* Name `index` of the removed generations / of those kept because a reader held them; NULL past
 * the end.  Valid until stk_gc_result_close.  Threads: any. */
STK_API const char *stk_gc_result_removed(const stk_gc_result *result, uint32_t index);
STK_API const char *stk_gc_result_in_use(const stk_gc_result *result, uint32_t index);
/* NULL is a no-op.  Threads: no other call on this result may be running. */
STK_API void stk_gc_result_close(stk_gc_result *result);

/* A payload that failed its checksum (stk_verify's failed_file under a root,
 * "generations/<name>/arrays/<file>"): another generation of the root whose manifest lists the
 * same array with the same digests, and whose file verifies, is compared byte by byte with the
 * damaged one.  On success *out_offset is the first byte that differs (from the start of the
 * file, header included) and witness the name of that generation (NUL-terminated, witness_cap
 * bytes).  STK_E_KEY_NOT_FOUND when no generation holds an intact copy (or `file` is not an
 * array of one of the root's generations).  Reads only.  Threads: any. */
STK_API stk_status stk_locate_damage(const char *root, const char *file, uint64_t *out_offset, char *witness, size_t witness_cap);

/* ---- What `stk inspect`, `stk tokenize`, `stk replay`, `stk export` and `stk --list-models`
 * read: paths, model descriptions, tokenizers, replays, manifests, the family table. ---- */

/* What a path names, in the order `stk inspect` asks (the first that holds wins). */
typedef enum stk_path_kind {
    STK_PATH_OTHER = 0,      /* none of these (a model directory, a checkpoint, or nothing at all) */
    STK_PATH_GENERATION = 1, /* a directory holding sera_manifest.bin */
    STK_PATH_ROOT = 2,       /* a generations root (CURRENT or generations/) */
    STK_PATH_LWT = 3,        /* a regular file named *.lwt, or one starting with the .lwt magic */
    STK_PATH_ARRAY = 4,      /* a regular file starting with the Sera array magic */
    STK_PATH_GGUF = 5        /* a regular file starting with the GGUF magic */
} stk_path_kind;

/* Which of stk_path_kind `path` is (reads at most 8 bytes of a file; a missing path is
 * STK_PATH_OTHER, not an error).  Threads: any. */
STK_API stk_status stk_path_kind_of(const char *path, uint32_t *out_kind);

/* Names of the .lwt dtype codes ("float32", ...), NULL for an unknown code (static strings), and
 * whether an .lwt dtype is a float type (no scale or zero point).  The Sera array dtypes' names:
 * stk_dtype_name above.  Threads: any. */
STK_API const char *stk_lwt_dtype_name(uint32_t lwt_dtype);
STK_API int stk_lwt_dtype_is_float(uint32_t lwt_dtype);
/* The stk_lwt_dtype of a full name ("bfloat16"; ASCII case ignored): STK_E_INVALID_ARGUMENT for
 * any other string.  Threads: any. */
STK_API stk_status stk_lwt_dtype_parse(const char *name, uint32_t *out_lwt_dtype);

/* CRC-32C (Castagnoli; reflected, initial and final xor 0xFFFFFFFF) of len bytes, continuing
 * from crc (0 to start): stk_crc32c(0, "123456789", 9) == 0xE3069283, and stk_crc32c(stk_crc32c(0,
 * a, n), b, m) is the CRC of a then b.  The checksum of the generation arrays and the calibration
 * statistics file (docs/format.md), through ISA-L.  Threads: any. */
STK_API uint32_t stk_crc32c(uint32_t crc, const void *data, size_t len);

/* -- Calibration moments: the sums `stk calibrate` writes (docs/format.md, "Calibration
 * statistics"), for callers that gather activations themselves.  Float32 activations in
 * (row-major), float64 sums out, ADDED into the caller's accumulators; GEMMs sum at most 1,024
 * rows in float32, the blocks in float64.  The same bits at any thread count (1..1024) and on
 * every CPU the conversion runs on (STK_E_UNSUPPORTED elsewhere, as stk_open).  Only the upper
 * triangle (j >= i) of a square accumulator is written.  Dimensions up to 2^24.  Threads: any,
 * on distinct accumulators.
 *
 * stk_moment_gram:  acc[i][j] += sum_r a[r][i] a[r][j], j >= i      (a rows x n; acc n x n)
 * stk_moment_cross: acc[i][j] += sum_r a[r][i] b[r][j]              (b rows x m; acc n x m)
 * stk_moment_causal_pairs: every pair (t, s <= t) of one context, weighted by weights[t]:
 *   l(t, s) = scale * q_t . k_s (a float32 GEMM; q, k rows x dq),
 *   acc_m[a][b] += sum_t w_t sum_{s<=t} x_t[a] x_s[a] x_t[b] x_s[b]  (b >= a; d x d, float64 throughout),
 *   acc_b[a]    += sum_t w_t x_t[a] sum_{s<=t} l(t, s) x_s[a]        (d),
 *   acc_l[0]    += sum_t w_t sum_{s<=t} l(t, s); acc_l[1] the same of l(t, s)^2.
 *   With w_t = min(P, t + 1) / (t + 1) these are the expected sums over P keys drawn uniformly
 *   from 0..t for each query t: stk calibrate's PRF pairs. */
STK_API stk_status stk_moment_gram(const float *a, size_t rows, size_t n, double *acc, uint32_t threads);
STK_API stk_status stk_moment_cross(const float *a, const float *b, size_t rows, size_t n, size_t m, double *acc,
                                    uint32_t threads);
STK_API stk_status stk_moment_causal_pairs(const float *x, const float *q, const float *k, size_t rows, size_t d, size_t dq,
                                           double scale, const double *weights, double *acc_m, double *acc_b, double *acc_l,
                                           uint32_t threads);

/* -- Model descriptions: a model directory, a checkpoint's directory, or a GGUF, as the
 * conversion would read it (config normalised, every tensor with its role), from the headers and
 * the config only, never the weights. */

typedef struct stk_model stk_model;

/* Threads: any.  The calls below only read: any number may run at once on one model. */
STK_API stk_status stk_model_open(const char *path, stk_model **out_model);
/* Threads: no other call on this model may be running. */
STK_API void stk_model_close(stk_model *model);

/* Strings point into the model (valid until stk_model_close); "" where the config says nothing. */
typedef struct stk_model_info {
    size_t struct_size;     /* sizeof(stk_model_info) */
    const char *model_type; /* config.json "model_type" (or the GGUF's architecture) */
    const char *family;     /* the built-in preset ("custom": user role patterns) */
    const char *format;     /* the checkpoint format ("safetensors", "gguf", ...) */
    uint64_t checkpoint_bytes;
    uint32_t n_layers, d_model, n_heads, n_kv_heads, head_dim;
    uint32_t rotary_dim; /* rotated dims per head (RoPE) */
    uint64_t vocab_size;
    uint64_t ffn_dim;
    const char *ffn_kind;   /* "plain", "gated", ... */
    const char *activation; /* "gelu_new", "silu", ... */
    const char *norm;       /* "layernorm", "rmsnorm", ... */
    double norm_eps;
    const char *positions;    /* "none", "learned", "rope", "alibi" */
    uint32_t rope;            /* 1 when positions is RoPE */
    uint32_t tied_embeddings; /* 1 when the head is the token embedding */
    double rope_theta;        /* 0 without RoPE */
    const char *rope_scaling; /* "" none; "linear", "yarn", "llama3", ... */
    double rope_scaling_factor;
    uint64_t max_positions;    /* 0: not stated */
    uint32_t n_experts, top_k; /* 0: dense */
    uint64_t moe_ffn_dim;      /* per expert */
    uint64_t shared_expert_ffn_dim;
    const char *router;         /* "" dense */
    uint32_t parallel_attn;     /* 1: attention and FFN read the same input */
    uint32_t n_tensors;         /* entries for stk_model_tensor_at */
    const char *qkv_layout;     /* how a fused query_key_value is laid out ("separate": not fused) */
    uint64_t n_params;          /* parameters (buffers and tied copies excluded) */
    uint64_t n_params_expected; /* what the config implies; 0 for a custom model */
    uint32_t n_source_tensors, n_buffers, n_unmapped;
    uint64_t max_layer_f32_bytes; /* the largest layer in f32 */
} stk_model_info;

STK_API stk_status stk_model_get_info(const stk_model *model, stk_model_info *out);

#  define STK_NO_LAYER (-1)
#  define STK_NO_EXPERT (-1)
#  define STK_SHARED_EXPERT (-2) /* the MoE shared expert */

/* One tensor of the checkpoint as the conversion maps it (a fused QKV shows as its three
 * parts).  Strings and shapes point into the model (valid until stk_model_close). */
typedef struct stk_model_tensor {
    size_t struct_size;    /* sizeof(stk_model_tensor) */
    const char *name;      /* as stored */
    const char *role;      /* "Q", "FFN_W1", ...; NULL: no role */
    const char *norm_slot; /* a norm's slot ("attn", ...); NULL for other tensors */
    const char *fused;     /* the fused layout it is a part of; NULL when not fused */
    const char *dtype;     /* the stored dtype ("BF16", ...) */
    int32_t layer;         /* STK_NO_LAYER outside the layers */
    int32_t expert;        /* STK_NO_EXPERT, STK_SHARED_EXPERT, or the expert's index */
    uint32_t rank;         /* of shape: the logical shape the conversion streams ([out, in]) */
    uint32_t source_rank;  /* of source_shape: as stored */
    const uint64_t *shape;
    const uint64_t *source_shape;
    uint32_t parameter;  /* 1: counted as a parameter (not a buffer, not a tied copy) */
    uint32_t buffer;     /* 1: a buffer (inv_freq, masks), not a parameter */
    uint32_t transposed; /* 1: stored [in, out] */
    uint32_t tied;       /* 1: the head that views the token embedding */
    uint32_t composed;   /* 1: composed per head from stored factors for the attention stages
                            (MLA); shape is the composed one */
    const char *read_as; /* the dtype its values are read as: dtype itself, or "F32" for a
                            block-quantised type (a GGUF's "Q4_K", MXFP4) dequantised on read */
} stk_model_tensor;

/* Tensor `index` (0..n_tensors): the streamed ones in stream order, then the rest by name. */
STK_API stk_status stk_model_tensor_at(const stk_model *model, uint32_t index, stk_model_tensor *out);

/* -- The family table: the model families with a built-in role preset, in --list-models order. */

/* Number of families (stk_family_at's indexes).  Threads: any. */
STK_API uint32_t stk_family_count(void);

/* Static strings; lists end with NULL. */
typedef struct stk_family_info {
    size_t struct_size;                    /* sizeof(stk_family_info) */
    const char *name;                      /* stk's name ("llama") */
    const char *const *model_types;        /* config.json "model_type" values that select it */
    const char *const *architectures;      /* config.json "architectures" entries */
    const char *const *gguf_architectures; /* GGUF general.architecture values */
    const char *summary;                   /* one line: the layout, what is exact */
    const char *fixture;                   /* the test model it is checked on; "" none yet */
    const char *const *roles;              /* the roles its preset maps, sorted ("FFN_W1", ...) */
} stk_family_info;

/* Family `index` (STK_E_INVALID_ARGUMENT past the end).  Threads: any. */
STK_API stk_status stk_family_at(uint32_t index, stk_family_info *out);

/* -- Tokenizers: a model's own encoder, or the greedy tables built in memory. */

typedef enum stk_tokenize_kind {
    STK_TOKENIZE_BPE = 1,   /* the real encoder (BPE / SentencePiece): HF tokenizers' ids */
    STK_TOKENIZE_GREEDY = 2 /* greedy longest match over the token tables (byte-level BPE only),
                               built even where the certification rejects the vocabulary */
} stk_tokenize_kind;

typedef struct stk_tokenizer_params {
    size_t struct_size; /* sizeof(stk_tokenizer_params) */
    const char *path;   /* a model directory (tokenizer.json, vocab.json + merges.txt, encoder.json
                           + vocab.bpe, or tokenizer.model) or a GGUF */
    uint32_t kind;      /* stk_tokenize_kind; 0 = BPE */
    uint32_t l_tok;     /* GREEDY: longest piece the tables hold, bytes (0 = 8, at most 64) */
} stk_tokenizer_params;

typedef struct stk_tokenizer stk_tokenizer;

/* Threads: any.  A tokenizer is used by one thread at a time (encoding keeps a cache). */
STK_API stk_status stk_tokenizer_open(const stk_tokenizer_params *params, stk_tokenizer **out_tok);
/* Threads: no other call on this tokenizer may be running. */
STK_API void stk_tokenizer_close(stk_tokenizer *tok);

typedef struct stk_tokenizer_info {
    size_t struct_size;     /* sizeof(stk_tokenizer_info) */
    const char *source;     /* the path of the file it was read from (valid until close) */
    uint32_t kind;          /* stk_tokenize_kind */
    uint32_t vocab_size;    /* ids 0..vocab_size */
    uint32_t longest_piece; /* bytes of the longest piece */
    uint32_t l_tok;         /* GREEDY: the tables' longest piece; 0 for BPE */
} stk_tokenizer_info;

/* Threads: any, also during encode. */
STK_API stk_status stk_tokenizer_get_info(const stk_tokenizer *tok, stk_tokenizer_info *out);

#  define STK_TOKENIZE_ADD_SPECIAL 0x1u /* BPE: the post-processor's special ids (Llama's <s>) */

/* Encode len bytes of text: *out_ids points to *out_count ids owned by the tokenizer, valid until
 * the next encode, decode or close on it.  Threads: one call on a tokenizer at a time. */
STK_API stk_status stk_tokenizer_encode(stk_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                                        const uint32_t **out_ids, size_t *out_count);
/* Decode ids to bytes (*out_text, *out_len; owned as above; not NUL-terminated).  An id outside
 * the vocabulary is STK_E_INVALID_ARGUMENT naming its position.  Threads: as encode. */
STK_API stk_status stk_tokenizer_decode(stk_tokenizer *tok, const uint32_t *ids, size_t count, const char **out_text,
                                        size_t *out_len);
/* The bytes of one id's piece as they appear in decoded text (valid until close); summing the
 * lengths of the ids gives each token's byte offset where the pieces concatenate to the text
 * (GREEDY always).  Threads: any, also during encode. */
STK_API stk_status stk_tokenizer_piece(const stk_tokenizer *tok, uint32_t id, const char **out_bytes, size_t *out_len);

/* -- Replay: a prompt's tokens walked through the O(1) path of every module a generation holds
 * (docs/decisions.md, "stk replay"). */

typedef struct stk_replay_params {
    size_t struct_size;    /* sizeof(stk_replay_params) */
    const char *prompt;    /* the text to tokenize and replay */
    size_t prompt_len;     /* bytes of prompt */
    const char *model_dir; /* the model, to tokenize a generation built in EXT mode; NULL if none */
} stk_replay_params;

typedef struct stk_replay stk_replay;

/* Tokenize (the generation's greedy tables, else the model's own tokenizer) and walk every token;
 * everything below reads the result.  gen must outlive the replay.  Threads: any (gen is only
 * read).  The calls below only read: any number may run at once on one replay. */
STK_API stk_status stk_replay_run(const stk_generation *gen, const stk_replay_params *params, stk_replay **out_replay);
/* Threads: no other call on this replay may be running. */
STK_API void stk_replay_close(stk_replay *replay);

typedef struct stk_replay_info {
    size_t struct_size; /* sizeof(stk_replay_info) */
    const char *mode;   /* how the prompt was tokenized: "greedy" or "ext" */
    uint64_t n_tokens;
    uint32_t n_modules;         /* stk_replay_module_at's indexes, in walk order */
    uint32_t lookup_mismatches; /* greedy: tokens whose TOKEN_ID(TOKEN_BYTES(id)) is not id */
    const char *state_digest;   /* SHA-256 (hex) of every step and the final states */
} stk_replay_info;

STK_API stk_status stk_replay_get_info(const stk_replay *replay, stk_replay_info *out);

/* The modules, in the order they are walked (stk_replay_module_at's index). */
typedef enum stk_replay_module_id {
    STK_REPLAY_TOKEN = 0,
    STK_REPLAY_LINEAR = 1,
    STK_REPLAY_PRF = 2,
    STK_REPLAY_OVERLAYS = 3,
    STK_REPLAY_MEMORY = 4,
    STK_REPLAY_BRIDGE = 5
} stk_replay_module_id;

typedef struct stk_replay_module {
    size_t struct_size; /* sizeof(stk_replay_module) */
    const char *name;   /* "token", "linear", "prf", "overlays", "memory", "bridge" */
    uint32_t enabled;
    const char *detail; /* enabled: what it walks; disabled: why */
} stk_replay_module;

STK_API stk_status stk_replay_module_at(const stk_replay *replay, uint32_t index, stk_replay_module *out);

/* What one token did in each module (the fields of a disabled module are zero). */
typedef struct stk_replay_token {
    size_t struct_size; /* sizeof(stk_replay_token) */
    uint32_t id;
    uint32_t round_trip; /* greedy: TOKEN_ID(bytes) == id */
    const char *bytes;   /* the token's bytes (not NUL-terminated) */
    size_t bytes_len;
    const char *line; /* the diagnostic line, identical for identical generations */
    /* linear: unit, input, sign; outputs read through the dictionary */
    uint32_t lin_unit, lin_input, lin_sign, lin_base, lin_delta, lin_zero, lin_probes;
    uint32_t prf_floored; /* prf: layers whose denominator hit beta_floor */
    double lin_norm;
    double prf_den0, prf_feature_sum; /* prf: layer 0's denominator, the sum of all features */
    double overlays_delta_norm;
    double mem_u;                   /* memory: input u_t */
    double mem_y;                   /* memory: output y_t (an f32) */
    uint32_t hub_context, hub_bits; /* bridge: the context and the set bits of HUB(token, context) */
    uint32_t hub_outside;           /* the bridge has no row for this id */
} stk_replay_token;

/* Token `index` (valid until stk_replay_close). */
STK_API stk_status stk_replay_token_at(const stk_replay *replay, uint64_t index, stk_replay_token *out);

/* -- One Sera array file: its header decoded and validated and its payload hashed against it
 * (STK_E_CHECKSUM, STK_E_TRUNCATED, ... naming the file otherwise).  Threads: any. */
typedef struct stk_array_file_info {
    size_t struct_size; /* sizeof(stk_array_file_info) */
    uint32_t dtype;     /* stk_dtype_name */
    uint32_t rank;
    uint64_t dims[5];
    uint64_t byte_len;     /* payload bytes */
    uint64_t header_bytes; /* where the payload starts */
    uint32_t crc32c;
    uint32_t flags;
    uint64_t sha256_low64;
} stk_array_file_info;

STK_API stk_status stk_array_file_verify(const char *path, stk_array_file_info *out);

/* -- .lwt files, more: open without the CRC pass (to report a mismatch rather than refuse), and
 * the header's fields. */
#  define STK_LWT_OPEN_NO_CRC 0x1u

/* As stk_lwt_open; flags STK_LWT_OPEN_*.  Threads: any. */
STK_API stk_status stk_lwt_open_flags(const char *path, uint32_t flags, stk_lwt **out_lwt);

typedef struct stk_lwt_header {
    size_t struct_size;     /* sizeof(stk_lwt_header) */
    uint32_t version;       /* 1 (every tensor float32) or 2 */
    uint32_t entry_bytes;   /* bytes per index entry */
    uint32_t old_layout;    /* 1: a version-1 file with 224-byte entries (written before version 2) */
    uint32_t tied_lm_head;  /* 1: the head is the token embedding (not stored) */
    const char *model_type; /* strings valid until stk_lwt_close */
    const char *dtype;      /* the dtype the export chose for matrices */
    uint64_t tensor_count, parameter_count;
    uint64_t data_bytes, data_offset, file_bytes;
    uint32_t data_crc32;     /* what the header says */
    uint32_t crc32_computed; /* the CRC32 of the data section (computed now if open skipped it) */
    uint32_t n_config;       /* the header's config entries, for stk_lwt_config_at */
} stk_lwt_header;

/* Threads: any, several at once. */
STK_API stk_status stk_lwt_get_header(const stk_lwt *lwt, stk_lwt_header *out);
/* Config entry `index` of the header, in the order written ("n_layer", 2).  Threads: any,
 * several at once. */
STK_API stk_status stk_lwt_config_at(const stk_lwt *lwt, uint32_t index, const char **out_key, uint64_t *out_value);


/* -- The reference runtime of the arrays (docs/format.md "Reference runtime"; docs/decisions.md
 * "The reference runtime"): per token, what Sera computes from each module of an open, verified
 * generation.  Every buffer is the caller's (8-byte aligned, sized by stk_refrun_info); the steps
 * allocate nothing, run on the calling thread, and sum each output element in one fixed order
 * (the same bits at any number of caller threads).  A module the generation lacks is refused
 * with STK_E_MISSING_ARRAY and the manifest's reason; a wrong layer, unit, NULL, misaligned or
 * short buffer, or a state/index of another generation or layer with STK_E_INVALID_ARGUMENT.
 * The bridge's step is stk_lookup(STK_LOOKUP_HUB); the dictionary's single entry is
 * stk_lookup(STK_LOOKUP_LINEAR).  Threads: any, several at once on one generation, each with its
 * own state and scratch (the index is read-only after its build). */
typedef struct stk_refrun_info {
    size_t struct_size; /* sizeof(stk_refrun_info) */
    uint32_t n_layers, d_model, d_v, r, r_v;
    uint32_t has_prf, has_overlays, has_linear, has_linear_bias, has_memory;
    uint32_t n_ffn_units;     /* FFN units of the dictionary (layers; MoE experts) */
    uint32_t memory_sections; /* K: second-order sections of the memory bank */
    double tau, beta_floor, whitening_eps;
    size_t prf_state_bytes;        /* one layer's PRF state (R, s) */
    size_t prf_state_bytes_memory; /* the same with STK_PRF_MEMORY (0 without a memory bank) */
    size_t scratch_bytes;          /* scratch of every PRF and overlay step */
    size_t ffn_index_bytes;        /* stk_ffn_index_build's buffer */
    size_t memory_state_bytes;     /* stk_memory_reset's state */
    uint64_t ffn_entries;          /* keys the index holds (base + delta) */
} stk_refrun_info;

/* The shapes, the modules present and the buffer sizes.  The first call on a generation maps and
 * verifies the arrays the runtime reads and recovers the PRF diagonal D (the one step that
 * allocates); later calls are cheap. */
STK_API stk_status stk_refrun_get_info(const stk_generation *gen, stk_refrun_info *out);

/* PRF attention of layer `layer`.  flags: 0, or STK_PRF_MEMORY: every channel of R and s runs
 * through the positional memory bank instead of a plain sum (state_bytes >=
 * prf_state_bytes_memory). */
#  define STK_PRF_MEMORY 0x1u
STK_API stk_status stk_prf_reset(const stk_generation *gen, uint32_t layer, uint32_t flags, void *state, size_t state_bytes);
/* Adds one key: x_key [d_model] the hidden state the layer's attention reads (after its input
 * norm), v [d_v] the concatenated head values (GQA kv heads repeated to n_heads). */
STK_API stk_status stk_prf_add_key(const stk_generation *gen, uint32_t layer, void *state, size_t state_bytes,
                                   const float *x_key, const float *v, void *scratch, size_t scratch_bytes);
/* out [d_v] = phi_w(q)^T R / max(phi_w(q)^T s, beta_floor) for x_query [d_model]. */
STK_API stk_status stk_prf_read(const stk_generation *gen, uint32_t layer, const void *state, size_t state_bytes,
                                const float *x_query, float *out, void *scratch, size_t scratch_bytes);
/* The read's two parts, for a caller that combines this state with other attention (stk eval's
 * window with the PRF state carrying the keys that left it): out [d_v] = phi_w(q)^T R /
 * phi_w(q)^T s with no beta_floor (0 for an empty state), *out_log_den = log(phi_w(q)^T s) in the
 * unshifted scale (-inf for an empty state). */
STK_API stk_status stk_prf_read_parts(const stk_generation *gen, uint32_t layer, const void *state, size_t state_bytes,
                                      const float *x_query, float *out, double *out_log_den, void *scratch,
                                      size_t scratch_bytes);
/* For t = 0..n-1: add key (x[t], v[t]) then read x[t] into out[t] (a query sees its own key);
 * x [n, d_model], v and out [n, d_v]; the same bits as the per-token calls. */
STK_API stk_status stk_prf_run(const stk_generation *gen, uint32_t layer, void *state, size_t state_bytes, uint64_t n_tokens,
                               const float *x, const float *v, float *out, void *scratch, size_t scratch_bytes);

/* The overlay correction deltaC(q) = U ((phi_w(q)^T H) Z) [d_v], in value space (before W_O);
 * _run: n queries, x [n, d_model], out [n, d_v]. */
STK_API stk_status stk_overlay_delta(const stk_generation *gen, uint32_t layer, const float *x_query, float *out,
                                     void *scratch, size_t scratch_bytes);
STK_API stk_status stk_overlay_run(const stk_generation *gen, uint32_t layer, uint64_t n_tokens, const float *x_query,
                                   float *out, void *scratch, size_t scratch_bytes);

/* The FFN through the linear dictionary.  The index (every key of linear_keys.bin and
 * cuckoo_delta.bin resolved through the lookup, as a CSR by unit, sign and input feature) is built
 * once into caller memory of stk_refrun_info's ffn_index_bytes (= *out_bytes).  Apply: y
 * [d_model] = sum_j |x_j| M^{sign x_j}[:, j] for unit `unit`, summed over j ascending in double,
 * rounded once; linear_bias is not added (stk_ffn_bias).  _batch: x, y [n, d_model]. */
STK_API stk_status stk_ffn_index_bytes(const stk_generation *gen, size_t *out_bytes);
STK_API stk_status stk_ffn_index_build(const stk_generation *gen, void *index, size_t index_bytes);
STK_API stk_status stk_ffn_apply(const stk_generation *gen, const void *index, size_t index_bytes, uint32_t unit,
                                 const float *x, float *y);
STK_API stk_status stk_ffn_apply_batch(const stk_generation *gen, const void *index, size_t index_bytes, uint32_t unit,
                                       uint64_t n_tokens, const float *x, float *y);
/* linear_bias.bin [d_model] (n must be d_model): the sum over every dense layer of W2 relu(b1) +
 * b2, added once to the sum of all dense units' outputs, never per unit.  STK_E_MISSING_ARRAY
 * for a model without FFN biases. */
STK_API stk_status stk_ffn_bias(const stk_generation *gen, float *out, size_t n);

/* The positional memory: one step of the bank (u in, y out), state of memory_state_bytes. */
STK_API stk_status stk_memory_reset(const stk_generation *gen, void *state, size_t state_bytes);
STK_API stk_status stk_memory_step(const stk_generation *gen, void *state, size_t state_bytes, float u, float *y);


/* -- The language-model runtime (issue 36; docs/decisions.md "The LM runtime"): a Transformer's
 * forward, token by token, over a fixed state per sequence: the keys and values of `sinks` first
 * positions plus a ring of the `window` most recent, per layer (StreamingLLM).  A query at
 * position p sees key k when k <= p and (k < sinks or p - k < window), and on a layer with the
 * model's own sliding window sw also p - k < sw: the definition of `stk eval --swap window`.
 * With sinks + window >= the context it is the exact model.  f32 compute; the same bits at any
 * thread count.  Families the forward does not compute are refused by name with
 * STK_E_NOT_IMPLEMENTED when the model opens. */
typedef struct stk_lm stk_lm;   /* weights + config, read-only: shared by any number of sequences */
typedef struct stk_seq stk_seq; /* one sequence's state, inside the caller's arena */

#  define STK_LM_WEIGHTS_F32 0u  /* model weights kept in memory as f32 (default) */
#  define STK_LM_WEIGHTS_BF16 1u /* ... as bf16 (half the memory; widened to f32 on the fly) */
/* Or'ed with one of the above (issue 37): the FFN matrices kept block-scaled instead, quantised
 * at open by ggml's rule (docs/format.md "Block-scaled types"; rows a multiple of 32). */
#  define STK_LM_WEIGHTS_FFN_Q4_0 0x10u /* 4-bit codes, blocks of 32 with an f16 scale */
#  define STK_LM_WEIGHTS_FFN_Q8_0 0x20u /* 8-bit codes, blocks of 32 with an f16 scale */

typedef struct stk_seq_params {
    size_t struct_size; /* sizeof(stk_seq_params) */
    uint32_t sinks;     /* S: the first positions every query sees */
    uint32_t window;    /* W >= 1: the most recent positions every query sees (its own included) */
    uint32_t threads;   /* 0: 1 */
    uint32_t max_batch; /* prompt tokens computed together (GEMM); 0: 64 */
    /* Appended (issue 37; an older caller's struct_size leaves them 0: the window).  Which
     * `window` non-sink positions the state keeps (docs/decisions.md "Retention policies"):
     * STK_SEQ_POLICY_*.  The state holds sinks + window positions per layer (per key/value head
     * for TOVA_HEAD), the query's own included, whatever the length; the scores are state too
     * (in stk_seq_arena_size). */
    uint32_t policy;
    uint32_t recent;    /* H2O: the most recent positions never evicted; 0: window / 2; < window */
} stk_seq_params;

#  define STK_SEQ_POLICY_WINDOW 0u    /* evict the oldest (StreamingLLM sinks + window) */
#  define STK_SEQ_POLICY_TOVA 1u      /* the lowest attention weight of the last query, averaged over heads */
#  define STK_SEQ_POLICY_H2O 2u       /* the lowest accumulated attention, outside the `recent` newest */
#  define STK_SEQ_POLICY_TOVA_HEAD 3u /* TOVA per key/value head: each keeps its own positions */
/* The model's own (issue 37): on a faithful generation its runtime block's policy (and its recent
 * count when `recent` is 0), else WINDOW.  A caller whose struct_size ends before `policy` gets it
 * too. */
#  define STK_SEQ_POLICY_DEFAULT 0xffffffffu

typedef struct stk_lm_info {
    size_t struct_size; /* sizeof(stk_lm_info) */
    uint64_t vocab_size;
    uint32_t n_layers, d_model, n_heads, n_kv_heads, head_dim;
    char model_type[32];
    /* Appended (issue 37; an older caller's struct_size stops before them).  generation: 1 for a
     * faithful generation, whose runtime block gives sinks, window, policy (STK_SEQ_POLICY_*) and
     * recent: what `stk convert --profile faithful` wrote, policy the default of a sequence
     * opened with STK_SEQ_POLICY_DEFAULT; 0 for a model read from its checkpoint (those four 0).
     * ffn_dtype: what the FFN matrices hold, as the array dtype codes (stk_dtype_name): 2 f32,
     * 9 bf16, 5 int8, 10 q4_0, 11 q8_0 (a generation: its runtime block's; a matrix whose rows are
     * not whole blocks of 32 may still be bf16). */
    uint32_t generation;
    uint32_t sinks, window, policy, recent;
    uint32_t ffn_dtype;
} stk_lm_info;

/* Open the weights at `path`: an HF model directory or a GGUF (file, or directory holding one),
 * read through stk's own ingestion (the same tensors `stk convert` reads), kept as `flags`
 * (STK_LM_WEIGHTS_F32 / _BF16, optionally or-ed with one STK_LM_WEIGHTS_FFN_* block type for
 * the FFN matrices); or a generation of the faithful profile (a generations root, meaning its
 * current generation, or one generation directory: its arrays mapped and verified, at the width
 * they were written in; a default-profile generation is refused by name, and an FFN block type
 * other than the one its FFN holds (--ffn q4_0 / q8_0 at convert) with STK_E_NOT_IMPLEMENTED).
 * Threads: any. */
STK_API stk_status stk_lm_open(const char *path, uint32_t flags, stk_lm **out);
STK_API void stk_lm_close(stk_lm *lm);
STK_API stk_status stk_lm_get_info(const stk_lm *lm, stk_lm_info *out);

/* Bytes of the arena a sequence with `params` needs (the KV ring of n_layers x (sinks + window)
 * positions, activations of max_batch tokens, scratch): the only memory a sequence uses. */
STK_API stk_status stk_seq_arena_size(const stk_lm *lm, const stk_seq_params *params, size_t *out_bytes);
/* A sequence at position 0 in `arena` (at least stk_seq_arena_size bytes; the caller keeps it,
 * and `lm`, alive until stk_seq_close).  feed/logits/reset allocate nothing. */
STK_API stk_status stk_seq_open(const stk_lm *lm, const stk_seq_params *params, void *arena, size_t arena_bytes,
                                stk_seq **out);
/* Feed n tokens at the next positions (n > max_batch is split).  all_logits: NULL, or
 * [n, vocab_size] floats receiving every token's logits.  A token outside the vocabulary (or a
 * position past a model's learned positions) is STK_E_INVALID_ARGUMENT with nothing fed. */
STK_API stk_status stk_seq_feed(stk_seq *seq, const int32_t *tokens, size_t n, float *all_logits);
/* The logits of the last token fed ([vocab_size] floats, valid until the next feed / reset /
 * close; zeros before any) and the position (tokens fed so far). */
STK_API stk_status stk_seq_logits(const stk_seq *seq, const float **out, size_t *out_vocab, uint64_t *out_position);
STK_API stk_status stk_seq_reset(stk_seq *seq);
/* The positions layer `layer`'s state holds now (key/value head `kv_head`'s under TOVA_HEAD,
 * ignored otherwise), ascending, into positions[capacity] (NULL: count only); *out_n: how many
 * (at most sinks + window; more than capacity: the first capacity written). */
STK_API stk_status stk_seq_kept(const stk_seq *seq, uint32_t layer, uint32_t kv_head, uint64_t *positions, size_t capacity,
                                size_t *out_n);
STK_API void stk_seq_close(stk_seq *seq);

/* -- Probes (issue 38; experimental; docs/decisions.md "Probes"): a callback the forward calls at
 * fixed points of every layer for every chunk of tokens it computes (a feed splits into chunks of
 * max_batch), with the chunk's activations as f32 [n_tokens, width], row-major, token i at
 * position `position + i`.  For `stk calibrate` (the moments) and `stk eval` (a swap overwrites
 * the data at a writable point and the forward continues with it).  The callback runs on the
 * thread that called stk_seq_feed, between the forward's parallel phases, in layer order and, in a
 * layer, in the order of the points below; it must not call stk_seq_feed / reset / close on the
 * same sequence (stk_seq_attn_project is allowed).  It returns 0 to go on; anything else stops
 * the feed with STK_E_CANCELLED, the sequence's state then half-written: reset it.  Without a
 * probe (or with points 0) the forward computes exactly what it computes without this call.  No
 * allocation: `data` points into the sequence's arena and is valid during the call only. */
#  define STK_PROBE_ATTN_IN 0u   /* the attention's input: after the layer's input norm [n, d_model] */
#  define STK_PROBE_Q_PRE 1u     /* the queries after their projection (and q norm), before RoPE [n, n_heads * head_width] */
#  define STK_PROBE_K_PRE 2u     /* the keys, likewise [n, n_kv_heads * head_width] */
#  define STK_PROBE_Q 3u         /* the queries after RoPE: what the scores read */
#  define STK_PROBE_K 4u         /* the keys after RoPE: what the state holds */
#  define STK_PROBE_V 5u         /* the values [n, n_kv_heads * head_width] */
#  define STK_PROBE_ATTN_OUT 6u  /* the heads' outputs concatenated, W_O's input [n, n_heads * head_width]; writable */
#  define STK_PROBE_ATTN_PROJ 7u /* W_O's output (+ its bias), before any post-attention norm and the residual add [n, d_model]; writable */
#  define STK_PROBE_FFN_IN 8u    /* the FFN's input: after its norm (MoE: the router's input) [n, d_model] */
#  define STK_PROBE_FFN_OUT 9u   /* the FFN's output (MoE: every expert summed), before any post-FFN norm and the residual add [n, d_model]; writable */
#  define STK_PROBE_POINTS 10u
#  define STK_PROBE_ALL 0x3ffu   /* every point: the mask of stk_seq_set_probe */

/* stk_probe_data.flags */
#  define STK_PROBE_LAYER_MOE 0x1u         /* the layer's FFN is a mixture of experts */
#  define STK_PROBE_LAYER_SLIDING 0x2u     /* the layer has the model's own sliding window */
#  define STK_PROBE_ROPE_INTERLEAVED 0x4u  /* RoPE rotates (2f, 2f+1) pairs, not rotate_half's (f, f + rot/2) */

typedef struct stk_probe_data {
    size_t struct_size; /* sizeof(stk_probe_data) as the library writes it (later fields appended) */
    uint32_t layer;
    uint32_t point;     /* STK_PROBE_* */
    uint64_t position;  /* of the chunk's first token */
    uint64_t n_tokens;
    uint64_t width;     /* floats per token (heads * head_width at the per-head points) */
    float *data;        /* [n_tokens, width] */
    uint32_t writable;  /* 1 at ATTN_OUT, ATTN_PROJ and FFN_OUT: what the callback leaves there goes on */
    uint32_t flags;     /* STK_PROBE_LAYER_* / STK_PROBE_ROPE_* */
    uint32_t heads;     /* Q*: n_heads; K*, V: key/value heads; ATTN_OUT: n_heads; else 1 */
    uint32_t head_width;/* width / heads */
    uint32_t rot_offset;/* Q* / K*: the first element of each head the rotation reads (MLA: its nope width) */
    uint32_t rot_pairs; /* Q* / K*: pairs rotated per head (0: no RoPE) */
} stk_probe_data;

typedef int (*stk_probe_fn)(void *user, const stk_probe_data *d);

/* Register `fn` (NULL: none) at the points of `points` (a mask, bit STK_PROBE_x for point x;
 * STK_PROBE_ALL); replaces any earlier probe.  STK_E_INVALID_ARGUMENT for bits past the last
 * point. */
STK_API stk_status stk_seq_set_probe(stk_seq *seq, uint32_t points, stk_probe_fn fn, void *user);
/* y[n, d_model] = W_O x + its bias for layer `layer`'s attention (x [n, n_heads * head_width],
 * the width of STK_PROBE_ATTN_OUT), as the forward computes it: what a callback needs to measure a
 * swap made at ATTN_OUT against the block's own output.  Callable from inside the probe. */
STK_API stk_status stk_seq_attn_project(stk_seq *seq, uint32_t layer, const float *x, uint64_t n, float *y);


#endif /* STK_EXPERIMENTAL */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STK_STK_H */
