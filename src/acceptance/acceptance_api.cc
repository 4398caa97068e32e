// The C surface of the acceptance measurements in libstk (include/stk/stk_acceptance.h): the runner's rows behind a
// handle, the table and the JSON rendered once.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "acceptance/runner.h"
#include "core/abi.h"
#include "core/error.h"
#include "stk/stk_acceptance.h"

using namespace stk;

struct stk_acceptance {
    std::vector<AcceptanceRow> rows;
    bool passed = false;
    std::string table, json;
};

namespace {

AcceptanceContext context_of(const stk_acceptance_params *params, const char *fn) {
    if (!params) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL argument", fn);
    const stk_acceptance_params p = abi_read(params);
    if (!p.generation_dir || !*p.generation_dir) throw_error(STK_E_INVALID_ARGUMENT, "%s: generation_dir is empty", fn);
    AcceptanceContext ctx;
    ctx.out_dir = p.generation_dir;
    ctx.model_dir = p.model_dir ? p.model_dir : "";
    ctx.threads = p.threads ? p.threads : 1;
    ctx.progress = p.progress;
    ctx.progress_user = p.progress_user;
    ctx.calibration = p.calibration ? p.calibration : "";
    return ctx;
}

// print_acceptance_table into a string (the same bytes the command prints).
std::string table_text(const std::vector<AcceptanceRow> &rows) {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *f = ::open_memstream(&buf, &len);
    if (!f) throw_error(STK_E_NOMEM, "cannot open a memory stream for the acceptance table");
    print_acceptance_table(f, rows);
    std::fclose(f);
    std::string text(buf, len);
    std::free(buf);
    return text;
}

}  // namespace

extern "C" {

STK_API stk_status stk_acceptance_check_model(const stk_acceptance_params *params) {
    return guard([&] { acceptance_check_model(context_of(params, "stk_acceptance_check_model")); });
}

STK_API stk_status stk_acceptance_run(const stk_acceptance_params *params, stk_acceptance **out_result) {
    return guard([&] {
        if (!out_result) throw_error(STK_E_INVALID_ARGUMENT, "stk_acceptance_run: NULL argument");
        *out_result = nullptr;
        const AcceptanceContext ctx = context_of(params, "stk_acceptance_run");
        auto r = std::make_unique<stk_acceptance>();
        r->rows = run_acceptance(ctx);
        r->passed = acceptance_passed(r->rows);
        r->table = table_text(r->rows);
        r->json = acceptance_json(r->rows);
        *out_result = r.release();
    });
}

STK_API void stk_acceptance_close(stk_acceptance *result) { delete result; }

STK_API stk_status stk_acceptance_summary(const stk_acceptance *result, uint32_t *out_rows, uint32_t *out_passed) {
    return guard([&] {
        if (!result || !out_rows || !out_passed) throw_error(STK_E_INVALID_ARGUMENT, "stk_acceptance_summary: NULL argument");
        *out_rows = uint32_t(result->rows.size());
        *out_passed = result->passed ? 1 : 0;
    });
}

STK_API stk_status stk_acceptance_row_at(const stk_acceptance *result, uint32_t index, stk_acceptance_row *out) {
    return guard([&] {
        if (!result || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_acceptance_row_at: NULL argument");
        abi_check_out(out);
        if (index >= result->rows.size())
            throw_error(STK_E_KEY_NOT_FOUND, "stk_acceptance_row_at: index %u, the result has %zu rows", index,
                        result->rows.size());
        const AcceptanceRow &r = result->rows[index];
        stk_acceptance_row v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.test = r.test.c_str(), v.definition = r.definition.c_str();
        v.comparison = r.comparison.c_str(), v.note = r.note.c_str();
        v.value = r.value, v.threshold = r.threshold;
        v.gating = r.gating, v.pass = r.pass, v.skipped = r.skipped;
        abi_write(out, v);
    });
}

STK_API stk_status stk_acceptance_table(const stk_acceptance *result, const char **out_text) {
    return guard([&] {
        if (!result || !out_text) throw_error(STK_E_INVALID_ARGUMENT, "stk_acceptance_table: NULL argument");
        *out_text = result->table.c_str();
    });
}

STK_API stk_status stk_acceptance_json(const stk_acceptance *result, const char **out_json) {
    return guard([&] {
        if (!result || !out_json) throw_error(STK_E_INVALID_ARGUMENT, "stk_acceptance_json: NULL argument");
        *out_json = result->json.c_str();
    });
}

}  // extern "C"
