// The calibration statistics in the job (calib_job.h).
#include "stages/calib_job.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "format/calib_stats.h"
#include "ingest/model.h"
#include "stages/attn_common.h"

namespace stk {

CalibShape calib_shape_of(const ModelConfig &cfg) {
    CalibShape c;
    c.n_layers = cfg.n_layers;
    c.d_model = cfg.d_model;
    AttnShape s;
    if (guard([&] { s = attn_shape(cfg); }) == STK_OK) c.d_v = uint32_t(s.d_v);
    if (cfg.positions == PosKind::Rope) {
        std::vector<double> theta;
        std::string note;
        uint32_t n = 0;
        if (guard([&] { n = rope_angles(cfg, theta, &note); }) == STK_OK) c.n_pairs = n;
    }
    return c;
}

namespace {
uint32_t cfg_mla_dv(const ModelConfig &c) { return c.mla ? c.n_heads * c.v_head_dim : 0; }
}  // namespace

void calib_open(Job &job, const ModelDescription &model) {
    if (!job.params.calibration) return;
    const CalibShape want = calib_shape_of(model.plan.config);
    bool mla_width = false;
    // The shape checks run inside the reader, before it hashes the payload: statistics of another
    // model's shape are refused without reading them (docs/format.md, "Checks of the calibration
    // statistics reader").
    auto shape = [&](const CalibStats &st) {
        auto check = [&](const char *field, uint32_t have, uint32_t need) {
            if (have != need)
                throw_error(STK_E_INVALID_ARGUMENT,
                            "calibration statistics %s: %s is %u, this model's is %u (statistics of another model's shape)",
                            st.name().c_str(), field, have, need);
        };
        check("n_layers", st.n_layers(), want.n_layers);
        check("d_model", st.d_model(), want.d_model);
        // DeepSeek's MLA: o_proj reads n_heads x v_head_dim, the stages' d_v pads V to the q/k head
        // width; moments of that width are the model's own, and the overlay basis stays data-free.
        mla_width = cfg_mla_dv(model.plan.config) == st.d_v() && st.d_v() != want.d_v;
        if (!mla_width) check("d_v", st.d_v(), want.d_v);
        // n_pairs 0 on a RoPE model: the writer could not read this family's rotary pairs (GPT-J's
        // interleaved pairs, Phi-3's fused qkv) and wrote no RoPE section; the bank stays data-free.
        if (st.n_pairs() != 0 || want.n_pairs == 0) check("n_pairs", st.n_pairs(), want.n_pairs);
    };
    job.calib = new CalibStats(job.params.calibration, shape);
    const CalibStats &st = *job.calib;
    if (mla_width)
        draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_OK, double(st.d_v()),
                         double(want.d_v),
                         "calibration: attention outputs %u wide (n_heads x v_head_dim), the arrays' d_v %u (MLA's padded "
                         "V): the overlay basis stays data-free",
                         st.d_v(), want.d_v);
    draft_add_record(job.manifest, STK_STAGE_PARSE_TENSORS, kRecordNote, kFeatureNone, STK_OK, double(st.tokens()), 0,
                     "calib sha256 %s; value = tokens", st.digest_hex().c_str());
}

void calib_check_model(Job &job) {
    if (!job.calib) return;
    const CalibStats &st = *job.calib;
    const StageRecord &r = job.stages[STK_STAGE_PARSE_TENSORS];
    if (st.model_crc32c() != r.crc32c || st.model_sha256_low64() != r.sha256_low64)
        throw_error(STK_E_INVALID_ARGUMENT,
                    "calibration statistics %s were made from another model: their model digest is crc32c %08x "
                    "sha256_low64 %016llx, this model's is crc32c %08x sha256_low64 %016llx",
                    st.name().c_str(), st.model_crc32c(), (unsigned long long)st.model_sha256_low64(), r.crc32c,
                    (unsigned long long)r.sha256_low64);
}

}  // namespace stk
