// The versioned structs of stk.h: each begins with `size_t struct_size`, and later versions only
// append fields.  One rule for all of them, after libxkbcommon's abi-check.h:
//   - a caller built against an older stk.h passes a smaller struct: accepted, the fields past its
//     struct_size read as zero (their defaults) and are never written;
//   - a caller built against a newer stk.h passes a larger struct: accepted when every byte this
//     library does not know is zero (a field it would have to ignore is refused, never dropped
//     silently); when the library fills the struct, it zeroes those bytes;
//   - below the struct's first published size, or absurdly large: STK_E_STRUCT_SIZE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "stk/stk.h"
#include "stk/stk_acceptance.h"

namespace stk {

// A struct_size more than this past today's sizeof is garbage, not a newer struct.
constexpr size_t kAbiMaxGrowth = 4096;

// Every versioned struct of stk.h: its C name and the size of its first published version (the
// end of its last field then; appending a field never changes it).
struct AbiStruct {
    size_t first;
    const char *name;
};
#define STK_ABI_END(T, field) (offsetof(T, field) + sizeof(T::field))
constexpr AbiStruct abi_of(const stk_job_params *) { return {STK_ABI_END(stk_job_params, flags), "stk_job_params"}; }
constexpr AbiStruct abi_of(const stk_verify_report *) {
    return {STK_ABI_END(stk_verify_report, failed_offset), "stk_verify_report"};
}
// The first version ended with `dtype` plus 4 bytes of tail padding, which `reserved` now names.
constexpr AbiStruct abi_of(const stk_export_params *) { return {offsetof(stk_export_params, threads), "stk_export_params"}; }
constexpr AbiStruct abi_of(const stk_export_report *) {
    return {STK_ABI_END(stk_export_report, tied_lm_head), "stk_export_report"};
}
constexpr AbiStruct abi_of(const stk_array_view *) { return {STK_ABI_END(stk_array_view, data), "stk_array_view"}; }
constexpr AbiStruct abi_of(const stk_lwt_tensor *) { return {STK_ABI_END(stk_lwt_tensor, data), "stk_lwt_tensor"}; }
constexpr AbiStruct abi_of(const stk_job_info *) { return {STK_ABI_END(stk_job_info, tokenizer_reason), "stk_job_info"}; }
constexpr AbiStruct abi_of(const stk_stage_info *) { return {STK_ABI_END(stk_stage_info, reason), "stk_stage_info"}; }
// Experimental tier: what the stk command reads (plan, manifest, roots) and the acceptance runner.
constexpr AbiStruct abi_of(const stk_plan_info *) { return {STK_ABI_END(stk_plan_info, format), "stk_plan_info"}; }
constexpr AbiStruct abi_of(const stk_plan_array *) { return {STK_ABI_END(stk_plan_array, reason), "stk_plan_array"}; }
constexpr AbiStruct abi_of(const stk_plan_stage *) { return {STK_ABI_END(stk_plan_stage, arena_bytes), "stk_plan_stage"}; }
constexpr AbiStruct abi_of(const stk_manifest_info *) {
    return {STK_ABI_END(stk_manifest_info, first), "stk_manifest_info"};
}
constexpr AbiStruct abi_of(const stk_manifest_array *) {
    return {STK_ABI_END(stk_manifest_array, reserved), "stk_manifest_array"};
}
// What `stk inspect`, `tokenize`, `replay` and `--list-models` read (src/api/inspect_api.cc,
// tokenizer_api.cc, lwt_api.cc).
constexpr AbiStruct abi_of(const stk_model_info *) {
    return {STK_ABI_END(stk_model_info, max_layer_f32_bytes), "stk_model_info"};
}
constexpr AbiStruct abi_of(const stk_model_tensor *) { return {STK_ABI_END(stk_model_tensor, composed), "stk_model_tensor"}; }
constexpr AbiStruct abi_of(const stk_family_info *) { return {STK_ABI_END(stk_family_info, roles), "stk_family_info"}; }
constexpr AbiStruct abi_of(const stk_tokenizer_params *) {
    return {STK_ABI_END(stk_tokenizer_params, l_tok), "stk_tokenizer_params"};
}
constexpr AbiStruct abi_of(const stk_tokenizer_info *) { return {STK_ABI_END(stk_tokenizer_info, l_tok), "stk_tokenizer_info"}; }
constexpr AbiStruct abi_of(const stk_replay_params *) { return {STK_ABI_END(stk_replay_params, model_dir), "stk_replay_params"}; }
constexpr AbiStruct abi_of(const stk_replay_info *) { return {STK_ABI_END(stk_replay_info, state_digest), "stk_replay_info"}; }
constexpr AbiStruct abi_of(const stk_replay_module *) { return {STK_ABI_END(stk_replay_module, detail), "stk_replay_module"}; }
constexpr AbiStruct abi_of(const stk_replay_token *) { return {STK_ABI_END(stk_replay_token, hub_outside), "stk_replay_token"}; }
constexpr AbiStruct abi_of(const stk_manifest_stage *) {
    return {STK_ABI_END(stk_manifest_stage, sha256_low64), "stk_manifest_stage"};
}
constexpr AbiStruct abi_of(const stk_manifest_record *) {
    return {STK_ABI_END(stk_manifest_record, text), "stk_manifest_record"};
}
constexpr AbiStruct abi_of(const stk_root_info *) { return {STK_ABI_END(stk_root_info, needs_repair), "stk_root_info"}; }
constexpr AbiStruct abi_of(const stk_generation_entry *) {
    return {STK_ABI_END(stk_generation_entry, error), "stk_generation_entry"};
}
constexpr AbiStruct abi_of(const stk_acceptance_params *) {
    return {STK_ABI_END(stk_acceptance_params, threads), "stk_acceptance_params"};
}
constexpr AbiStruct abi_of(const stk_acceptance_row *) {
    return {STK_ABI_END(stk_acceptance_row, skipped), "stk_acceptance_row"};
}
constexpr AbiStruct abi_of(const stk_array_file_info *) {
    return {STK_ABI_END(stk_array_file_info, sha256_low64), "stk_array_file_info"};
}
constexpr AbiStruct abi_of(const stk_lwt_header *) { return {STK_ABI_END(stk_lwt_header, n_config), "stk_lwt_header"}; }
constexpr AbiStruct abi_of(const stk_refrun_info *) { return {STK_ABI_END(stk_refrun_info, ffn_entries), "stk_refrun_info"}; }
constexpr AbiStruct abi_of(const stk_seq_params *) { return {STK_ABI_END(stk_seq_params, max_batch), "stk_seq_params"}; }
constexpr AbiStruct abi_of(const stk_lm_info *) { return {STK_ABI_END(stk_lm_info, model_type), "stk_lm_info"}; }
#undef STK_ABI_END

// Checks struct_size and, for a newer caller's struct, that the bytes past sizeof(T) are zero.
template <class T>
void abi_check(const T *s, bool check_tail) {
    static_assert(std::is_trivially_copyable_v<T> && offsetof(T, struct_size) == 0);
    constexpr AbiStruct a = abi_of(static_cast<const T *>(nullptr));
    const size_t first = a.first;
    const char *name = a.name;
    const size_t n = s->struct_size;
    if (n < first)
        throw_error(STK_E_STRUCT_SIZE, "%s.struct_size is %zu: the smallest version of %s is %zu bytes (today's is %zu)", name, n,
                    name, first, sizeof(T));
    if (n > sizeof(T) + kAbiMaxGrowth)
        throw_error(STK_E_STRUCT_SIZE, "%s.struct_size is %zu: not a size of %s (today's is %zu bytes); set it to sizeof", name,
                    n, name, sizeof(T));
    if (!check_tail) return;
    const unsigned char *b = reinterpret_cast<const unsigned char *>(s);
    for (size_t i = sizeof(T); i < n; i++)
        if (b[i])
            throw_error(STK_E_STRUCT_SIZE,
                        "%s: byte %zu of its %zu is not zero: a field of a newer stk.h that this library "
                        "(%zu-byte %s) does not know",
                        name, i, n, sizeof(T), name);
}

// Caller -> library: the caller's struct as today's T (fields it does not have are zero).
template <class T>
T abi_read(const T *in) {
    abi_check(in, true);
    T out;
    std::memset(&out, 0, sizeof out);
    std::memcpy(&out, in, in->struct_size < sizeof(T) ? in->struct_size : sizeof(T));
    out.struct_size = sizeof(T);
    return out;
}

// Library -> caller: before any work, whether `out` can be filled (its struct_size).
template <class T>
void abi_check_out(const T *out) {
    abi_check(out, false);
}

// Library -> caller: today's `value` into the caller's struct_size bytes (an older caller gets
// the fields it knows, a newer one zero in those this library does not); struct_size kept.
// `value` must be memset to zero before its fields are set: its padding is copied too, and a
// newer stk.h may have put a field where today's struct has tail padding.
template <class T>
void abi_write(T *out, const T &value) {
    const size_t n = out->struct_size;
    unsigned char *b = reinterpret_cast<unsigned char *>(out);
    const size_t k = n < sizeof(T) ? n : sizeof(T);
    std::memcpy(b, &value, k);
    if (n > k) std::memset(b + k, 0, n - k);
    out->struct_size = n;
}

}  // namespace stk
