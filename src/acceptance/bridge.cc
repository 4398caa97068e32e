// 16.4: the bridge's guard precheck on synthetic margins (docs/decisions.md "Bridge",
// "Acceptance 16.4").
//
// Synthetic margins from the legs' own statistics: for each token row t (every row, or a fixed
// stride to at most kRows rows) the published legs a = qDin/s_in and b = qDout/s_out give the
// row's mean, sd and in/out correlation rho over the H hubs.  H synthetic hubs are drawn
// a' = mu_a + sd_a g1, b' = mu_b + sd_b (rho g1 + sqrt(1 - rho^2) g2), g1, g2 standard normal
// from the stream (kStreamAcceptanceBridge, row), quantized with the row's own published scales,
// and the stage's guard (bridge_guard_row) takes the top K of them.  A pair passes the precheck
// when it would be promoted: m > 0 and C_h = slack (sd_a' + sd_b') < m.  Its ratio
// r = m / (sd_a' + sd_b') decides it for every slack at once: pass iff r > slack.
//
// Gating: the pass-rate at the published slack (manifest capacity.slack) >= 0.9.  Reported: the
// slack limit, the largest slack at which 0.9 still holds (the 10th percentile of r), the
// pass-rate at 2x, 4x and 8x the slack, and the promoted share of the published tuples (the
// model's real margins).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "acceptance/acceptance.h"
#include "acceptance/runner.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/prng.h"
#include "format/array.h"
#include "format/manifest.h"
#include "kernels/random.h"
#include "stages/bridge_init.h"

namespace stk {

namespace {
constexpr uint64_t kRows = 8192;
}

BridgePrecheck bridge_guard_precheck(const int16_t *qin, const int16_t *qout, const float *s_in, const float *s_out, uint64_t v,
                                     uint32_t h, uint32_t k, uint64_t seed) {
    if (h < k + 1 || h > 65536 || k > 64) throw_error(STK_E_INVALID_ARGUMENT, "bridge precheck: %u hubs, K %u", h, k);
    BridgePrecheck out;
    const uint64_t stride = v > kRows ? (v + kRows - 1) / kRows : 1;
    std::vector<double> g(2 * size_t(h)), z(h), a(h), b(h);
    std::vector<float> xa(h), xb(h);
    std::vector<int16_t> qa(h), qb(h);
    std::vector<uint32_t> order(h);
    GuardTuple tup[64];
    for (uint64_t t = 0; t < v; t += stride) {
        const double ia = 1.0 / s_in[t], ib = 1.0 / s_out[t];
        double ma = 0, mb = 0;
        for (uint32_t i = 0; i < h; i++) {
            a[i] = double(qin[t * h + i]) * ia;
            b[i] = double(qout[t * h + i]) * ib;
            ma += a[i];
            mb += b[i];
        }
        ma /= h;
        mb /= h;
        double va = 0, vb = 0, cab = 0;
        for (uint32_t i = 0; i < h; i++) {
            va += (a[i] - ma) * (a[i] - ma);
            vb += (b[i] - mb) * (b[i] - mb);
            cab += (a[i] - ma) * (b[i] - mb);
        }
        const double sa = std::sqrt(va / h), sb = std::sqrt(vb / h);
        double rho = va > 0 && vb > 0 ? cab / std::sqrt(va * vb) : 0;
        rho = std::max(-1.0, std::min(1.0, rho));
        kernels::gaussians(stream_seed(seed, kStreamAcceptanceBridge, uint32_t(t)), 0, 2 * size_t(h), g.data());
        for (uint32_t i = 0; i < h; i++) {
            xa[i] = float(ma + sa * g[2 * i]);
            xb[i] = float(mb + sb * (rho * g[2 * i] + std::sqrt(1 - rho * rho) * g[2 * i + 1]));
        }
        bridge_quantize_row(xa.data(), h, s_in[t], qa.data());
        bridge_quantize_row(xb.data(), h, s_out[t], qb.data());
        // slack 1: u, v are the legs' sds; the ratio decides every slack.
        bridge_guard_row(qa.data(), qb.data(), s_in[t], s_out[t], h, k, 1.0, z.data(), order.data(), tup);
        for (uint32_t j = 0; j < k; j++) {
            const double spread = double(tup[j].u) + double(tup[j].v);
            double r = tup[j].m > 0 ? (spread > 0 ? double(tup[j].m) / spread : INFINITY) : -INFINITY;
            out.ratios.push_back(r);
        }
        out.rows++;
    }
    std::sort(out.ratios.begin(), out.ratios.end());
    const size_t n = out.ratios.size();
    const size_t need = size_t(std::ceil(0.9 * double(n)));  // passes needed for 0.9
    out.slack_limit = n ? out.ratios[n - need] : 0;          // pass iff r > slack
    return out;
}

double BridgePrecheck::pass_rate(double slack) const {
    if (ratios.empty()) return 0;
    // ratios ascending: the passes are those > slack.
    const size_t first = size_t(std::upper_bound(ratios.begin(), ratios.end(), slack) - ratios.begin());
    return double(ratios.size() - first) / double(ratios.size());
}

void acceptance_bridge(const AcceptanceContext &ctx, std::vector<AcceptanceRow> &rows) {
    const std::string arrays = ctx.out_dir + "/" + kArraysDirName + "/";
    for (const char *n : {"bridge_qDin.bin", "bridge_qDout.bin", "bridge_qDin_scale.bin", "bridge_qDout_scale.bin"})
        if (!file_exists(arrays + n)) return;  // no bridge in this generation (17.3)
    ArrayReader qin(arrays + "bridge_qDin.bin"), qout(arrays + "bridge_qDout.bin"), sin(arrays + "bridge_qDin_scale.bin"),
        sout(arrays + "bridge_qDout_scale.bin");
    const ArrayHeader &hq = qin.header();
    if (hq.dtype != uint16_t(DType::I16) || hq.rank != 2 || qout.header().dims[0] != hq.dims[0] ||
        qout.header().dims[1] != hq.dims[1] || sin.header().dims[0] != hq.dims[0] || sout.header().dims[0] != hq.dims[0] ||
        sin.header().dtype != uint16_t(DType::F32) || sout.header().dtype != uint16_t(DType::F32) ||
        qout.header().dtype != uint16_t(DType::I16))
        throw_error(STK_E_CORRUPT, "%s: the bridge legs and scales do not agree in shape or type", ctx.out_dir.c_str());
    const Manifest man = read_manifest(ctx.out_dir + "/" + kManifestFileName);
    const uint64_t v = hq.dims[0];
    const uint32_t h = uint32_t(hq.dims[1]), k = man.fields.bridge.k ? man.fields.bridge.k : kBridgeK;
    const double slack = man.fields.capacity.slack;
    // The payloads are 64-byte aligned in the mapping: typed views are safe on this LE host.
    const BridgePrecheck pc = bridge_guard_precheck(
        reinterpret_cast<const int16_t *>(qin.payload()), reinterpret_cast<const int16_t *>(qout.payload()),
        reinterpret_cast<const float *>(sin.payload()), reinterpret_cast<const float *>(sout.payload()), v, h, k, 0x16'04);
    char def[200];
    std::snprintf(def, sizeof def,
                  "top-%u of %u synthetic Gaussian hubs per row, each row's own mean/sd/rho and scales; %llu rows, %zu pairs", k,
                  h, (unsigned long long)pc.rows, pc.ratios.size());
    rows.push_back(acceptance_row("16.4 bridge-guard-pass-rate", def, pc.pass_rate(slack), 0.9, ">=", true,
                                  "pass = promoted: m > 0 and C_h = slack (sd_in + sd_out) < m, slack from the manifest"));
    rows.push_back(acceptance_row(
        "16.4 bridge-guard-slack", "the published slack against the largest slack at which 0.9 holds", slack, pc.slack_limit,
        "<=", false, "0.9 is a choice of slack: it holds for slack below the threshold (10th pct of m/(sd_in+sd_out))"));
    for (double f : {2.0, 4.0, 8.0}) {
        char name[64];
        std::snprintf(name, sizeof name, "16.4 bridge-guard-pass-rate@%gx-slack", f);
        rows.push_back(acceptance_row(name, "the same synthetic pairs at a larger slack (curve)", pc.pass_rate(f * slack), 0.9,
                                      ">=", false));
    }
    if (file_exists(arrays + "bridge_guard.bin")) {
        ArrayReader gd(arrays + "bridge_guard.bin");
        const uint64_t n = gd.payload_size() / kGuardTupleSize;
        uint64_t promoted = 0;
        for (uint64_t i = 0; i < n; i++) promoted += guard_tuple_load(gd.payload() + i * kGuardTupleSize).flags & kGuardPromoted;
        rows.push_back(acceptance_row("16.4 bridge-guard-promoted-published",
                                      "promoted share of the published guard tuples (real margins)",
                                      n ? double(promoted) / double(n) : 0, 0.9, ">=", false));
    }
}

}  // namespace stk
