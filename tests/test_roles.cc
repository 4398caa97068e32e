// Tensor roles and the model plan: the presets on the real tensor names of each family (synthetic
// tensor lists with the hub's names and shapes), fused-QKV splitting and Conv1D transposition
// checked element by element against values PyTorch wrote (tests/data/models/*/expected.json,
// computed in scripts/make_model_fixtures.py the way HF's modelling code slices the tensors),
// the parameter count (GPT-2 small: 124,439,808), and each refusal naming the tensor.
#include <simdjson.h>

#include <map>

#include "core/mapped_file.h"
#include "ingest/config.h"
#include "ingest/model.h"
#include "ingest/roles.h"

#include "test_util.h"

using namespace stk;

static TensorRef ref(const std::string &name, std::vector<uint64_t> shape, SrcDType dt = SrcDType::F32) {
    TensorRef t;
    t.name = name;
    t.dtype = dt;
    t.shape = shape;
    t.n_elements = 1;
    for (uint64_t d : shape) t.n_elements *= d;
    t.n_bytes = t.n_elements * src_dtype_size(dt);
    t.file = "synthetic.safetensors";
    return t;
}

static ParsedConfig shared_cfg(const char *file) {
    std::string path = test::third_party_data(std::string("configs/") + file);
    return parse_model_config(read_small_file(path, kMaxConfigBytes), path);
}

// GPT-2 small as the hub's pytorch_model.bin names it (with the attn.bias buffers).
static std::vector<TensorRef> gpt2_small_tensors() {
    std::vector<TensorRef> t;
    const uint64_t d = 768;
    t.push_back(ref("wte.weight", {50257, d}));
    t.push_back(ref("wpe.weight", {1024, d}));
    for (int i = 0; i < 12; i++) {
        std::string p = "h." + std::to_string(i) + ".";
        t.push_back(ref(p + "ln_1.weight", {d}));
        t.push_back(ref(p + "ln_1.bias", {d}));
        t.push_back(ref(p + "attn.bias", {1, 1, 1024, 1024}));
        t.push_back(ref(p + "attn.masked_bias", {}));
        t.push_back(ref(p + "attn.c_attn.weight", {d, 3 * d}));
        t.push_back(ref(p + "attn.c_attn.bias", {3 * d}));
        t.push_back(ref(p + "attn.c_proj.weight", {d, d}));
        t.push_back(ref(p + "attn.c_proj.bias", {d}));
        t.push_back(ref(p + "ln_2.weight", {d}));
        t.push_back(ref(p + "ln_2.bias", {d}));
        t.push_back(ref(p + "mlp.c_fc.weight", {d, 4 * d}));
        t.push_back(ref(p + "mlp.c_fc.bias", {4 * d}));
        t.push_back(ref(p + "mlp.c_proj.weight", {4 * d, d}));
        t.push_back(ref(p + "mlp.c_proj.bias", {d}));
    }
    t.push_back(ref("ln_f.weight", {d}));
    t.push_back(ref("ln_f.bias", {d}));
    return t;
}

static const PlanTensor *find(const ModelLayout &L, Role role, int32_t layer, int32_t expert = kNoExpert,
                              NormSlot slot = NormSlot::None) {
    for (const PlanTensor &t : L.tensors)
        if (t.role == role && t.layer == layer && t.expert == expert && (slot == NormSlot::None || t.slot == slot)) return &t;
    return nullptr;
}

static void gpt2_small_plan(void **) {
    ParsedConfig cfg = shared_cfg("derived-gpt2.config.json");
    std::vector<TensorRef> tensors = gpt2_small_tensors();
    ModelLayout L = analyze_model(cfg, tensors);
    // spec-notes 5: 124,439,808 (not seed 001's 124,443,648).
    assert_true(L.summary.n_params == 124439808ull);
    assert_true(L.summary.n_params_expected == 124439808ull);
    assert_int_equal(L.summary.n_buffers, 24);
    assert_int_equal(L.summary.n_unmapped, 0);
    // c_attn [768, 2304] -> Q, K, V, each [768, 768] transposed, concatenated layout.
    const PlanTensor *q = find(L, Role::Q, 5), *v = find(L, Role::V, 5);
    assert_non_null(q);
    assert_non_null(v);
    assert_string_equal(q->name, "h.5.attn.c_attn.weight");
    assert_true(q->transpose);
    assert_int_equal(int(q->layout), int(QkvLayout::Concat));
    assert_int_equal(q->dims[0], 768);
    assert_int_equal(q->dims[1], 768);
    assert_int_equal(v->part, 2);
    const PlanTensor *kb = find(L, Role::K_B, 11);
    assert_non_null(kb);
    assert_int_equal(kb->rank, 1);
    assert_int_equal(kb->dims[0], 768);
    const PlanTensor *w1 = find(L, Role::FFN_W1, 0);
    assert_true(w1->transpose);
    assert_int_equal(w1->dims[0], 3072);  // [out, in] after the transpose
    assert_int_equal(w1->dims[1], 768);
    const PlanTensor *w2 = find(L, Role::FFN_W2, 0);
    assert_string_equal(w2->name, "h.0.mlp.c_proj.weight");
    assert_int_equal(w2->dims[0], 768);
    assert_int_equal(w2->dims[1], 3072);
    // Tied head: an entry viewing wte, not a parameter.
    const PlanTensor *head = find(L, Role::LM_HEAD, kNoLayer);
    assert_non_null(head);
    assert_true(head->tied);
    assert_string_equal(head->name, "wte.weight");
    assert_int_equal(head->group, 3);
    // Stream order: embeddings (EMB, POS_EMB), 12 layers, final norm, head.
    assert_int_equal(L.units.size(), 15);
    assert_int_equal(L.units[0].group, 0);
    assert_int_equal(L.units[0].count, 2);
    assert_int_equal(L.units[1].layer, 0);
    assert_int_equal(L.units[13].group, 2);
    assert_int_equal(L.units[14].group, 3);
    assert_int_equal(int(L.tensors[L.units[1].first].role), int(Role::Q));  // role order: Q first in a layer
    // Largest unit: the embedding unit in f32 (wte 50257 x 768 and wpe 1024 x 768, 4 bytes each).
    assert_int_equal(L.summary.max_unit_f32_bytes, align_up(50257ull * 768 * 4, 64) + align_up(1024ull * 768 * 4, 64));
    // Buffers are listed last and never streamed.
    const PlanTensor &last = L.tensors.back();
    assert_int_equal(int(last.role), int(Role::BUFFER));
    assert_false(last.streamed);
}

static void gpt2_with_transformer_prefix(void **) {
    ParsedConfig cfg = shared_cfg("derived-gpt2.config.json");
    std::vector<TensorRef> tensors = gpt2_small_tensors();
    for (TensorRef &t : tensors) t.name = "transformer." + t.name;
    tensors.push_back(ref("lm_head.weight", {50257, 768}));  // a stored copy of the tied head
    ModelLayout L = analyze_model(cfg, tensors);
    assert_true(L.summary.n_params == 124439808ull);
    const PlanTensor *head = find(L, Role::LM_HEAD, kNoLayer);
    assert_false(head->tied);
    assert_true(head->buffer);
    assert_string_equal(head->name, "lm_head.weight");
}

static void shape_mismatch_names_the_tensor(void **) {
    ParsedConfig cfg = shared_cfg("derived-gpt2.config.json");
    std::vector<TensorRef> tensors = gpt2_small_tensors();
    for (TensorRef &t : tensors)
        if (t.name == "h.3.mlp.c_fc.weight") t = ref(t.name, {768, 3000});
    std::string msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, tensors); });
    assert_contains(msg, "h.3.mlp.c_fc.weight");
    assert_contains(msg, "FFN_W1 of layer 3");
    assert_contains(msg, "[3000, 768]");
    assert_contains(msg, "[3072, 768]");

    tensors = gpt2_small_tensors();
    for (TensorRef &t : tensors)
        if (t.name == "h.7.attn.c_attn.weight") t = ref(t.name, {768, 2000});
    msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, tensors); });
    assert_contains(msg, "h.7.attn.c_attn.weight");
    assert_contains(msg, "fused QKV shape [768, 2000]");

    // An extra parameter that no role pattern matches.
    tensors = gpt2_small_tensors();
    tensors.push_back(ref("score.weight", {3, 768}));
    msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, tensors); });
    assert_contains(msg, "124442112 parameters");
    assert_contains(msg, "implies 124439808");
    assert_contains(msg, "score.weight");

    // A missing tensor.
    tensors = gpt2_small_tensors();
    for (size_t i = 0; i < tensors.size(); i++)
        if (tensors[i].name == "h.11.ln_2.bias") tensors.erase(tensors.begin() + long(i));
    msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, tensors); });
    assert_contains(msg, "LN_B(ffn) of layer 11");
    assert_contains(msg, "no tensor of the checkpoint maps to it");

    // A layer index beyond the config.
    tensors = gpt2_small_tensors();
    tensors.push_back(ref("h.12.ln_1.weight", {768}));
    msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, tensors); });
    assert_contains(msg, "h.12.ln_1.weight");
    assert_contains(msg, "layer index 12");
}

// GraniteMoE's 3-D stacked experts and DeepSeek's MLA factors: hostile shapes refused naming the tensor.
static void stacked_and_mla_shapes_refused(void **) {
    const std::string dir = test::test_data("../fixtures/families/");
    for (const char *fam : {"granitemoe", "deepseek_v3"}) {
        std::unique_ptr<ModelDescription> d = describe_model(dir + fam);
        std::vector<TensorRef> tensors = d->checkpoint->tensors();
        const char *victim = std::strcmp(fam, "granitemoe") == 0 ? "model.layers.1.block_sparse_moe.input_linear.weight"
                                                                 : "model.layers.1.self_attn.kv_b_proj.weight";
        for (TensorRef &t : tensors)
            if (t.name == victim)
                t = ref(t.name,
                        std::strcmp(fam, "granitemoe") == 0 ? std::vector<uint64_t>{3, 64, 64} : std::vector<uint64_t>{120, 32});
        std::string msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(d->parsed, tensors); });
        assert_contains(msg, victim);
        // Expert views: each expert's W1 / W3 is a slice of the stacked tensor from element e * 2F * D (+ F rows for W3).
        if (std::strcmp(fam, "granitemoe") == 0) {
            const PlanTensor *w3 = find(d->layout, Role::FFN_W3, 1, 2);
            assert_non_null(w3);
            assert_int_equal(w3->src_offset, 2 * 64 * 64);  // expert 2 of [E, 2F = 64, D = 64]
            assert_int_equal(w3->dims[0], 32);
            assert_int_equal(w3->part, 1);
        }
    }
}

static void llama_family_presets(void **) {
    ParsedConfig cfg = shared_cfg("derived-mixtral-8x7b-v0.1.config.json");
    RoleMapper m(cfg.user_rules, preset_rules(cfg.config), cfg.source);
    RoleMatch r = m.match("model.layers.31.block_sparse_moe.experts.7.w2.weight");
    assert_int_equal(int(r.role), int(Role::FFN_W2));
    assert_int_equal(r.layer, 31);
    assert_int_equal(r.expert, 7);
    r = m.match("model.layers.3.block_sparse_moe.gate.weight");
    assert_int_equal(int(r.role), int(Role::ROUTER_GATE));
    assert_int_equal(r.layer, 3);
    assert_int_equal(r.expert, kNoExpert);
    r = m.match("model.layers.0.self_attn.rotary_emb.inv_freq");
    assert_int_equal(int(r.role), int(Role::ROPE_ALPHA));
    assert_true(m.rules()[size_t(r.rule)].buffer);
    // Whole-name match only.
    assert_int_equal(int(m.match("model.layers.0.self_attn.q_proj.weight.extra").role), int(Role::NONE));
    assert_int_equal(int(m.match("xmodel.embed_tokens.weight").role), int(Role::NONE));

    ParsedConfig q = shared_cfg("derived-qwen1.5-moe-a2.7b.config.json");
    RoleMapper mq(q.user_rules, preset_rules(q.config), q.source);
    r = mq.match("model.layers.5.mlp.shared_expert.up_proj.weight");
    assert_int_equal(int(r.role), int(Role::FFN_W3));
    assert_int_equal(r.expert, kSharedExpert);
    r = mq.match("model.layers.5.mlp.shared_expert_gate.weight");
    assert_int_equal(int(r.role), int(Role::SHARED_GATE));
    r = mq.match("model.layers.5.mlp.experts.59.down_proj.weight");
    assert_int_equal(r.expert, 59);
}

static void user_rules_first_match_and_lexical_ties(void **) {
    // Two user patterns both match "blk.0.attn": as an object they have one priority, so the
    // lexically smaller pattern string wins (seed 3.2); a preset comes after every user rule.
    const std::string roles = R"({"blk\\.(?P<layer>[0-9]+)\\.attn": "O", "blk\\.(?P<layer>[0-9]+)\\..*": "Q"})";
    std::vector<RoleRule> user = parse_role_rules_json(roles, "stk_roles.json");
    RoleMapper m(user, {}, "stk_roles.json");
    // "blk\.(?P<layer>[0-9]+)\..*" < "blk\.(?P<layer>[0-9]+)\.attn" bytewise ('.' 0x2e < 'a' 0x61)
    RoleMatch r = m.match("blk.0.attn");
    assert_int_equal(int(r.role), int(Role::Q));
    assert_int_equal(r.layer, 0);
    // As a list, the list order decides.
    user = parse_role_rules_json(R"([{"pattern": "blk\\.(?P<layer>[0-9]+)\\.attn", "role": "O"},
                                      {"pattern": "blk\\.(?P<layer>[0-9]+)\\..*", "role": "Q"}])",
                                 "stk_roles.json");
    RoleMapper m2(user, {}, "stk_roles.json");
    assert_int_equal(int(m2.match("blk.0.attn").role), int(Role::O));
    assert_int_equal(int(m2.match("blk.4.mlp").role), int(Role::Q));
    assert_int_equal(m2.match("blk.4.mlp").layer, 4);
    // Absence: no role.
    assert_int_equal(int(m2.match("other").role), int(Role::NONE));
}

static void custom_model_with_user_rules(void **) {
    const char *cfg_text = R"({"model_type": "tiny", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "vocab_size": 10, "stk_roles": [
          {"pattern": "tok", "role": "EMB"},
          {"pattern": "b(?P<layer>[0-9]+)\\.qkv", "role": "QKV", "layout": "qkv_heads"},
          {"pattern": "b(?P<layer>[0-9]+)\\.skip", "role": "BUFFER"}]})";
    ParsedConfig cfg = parse_model_config(cfg_text, "tiny/config.json");
    std::vector<TensorRef> t = {ref("tok", {10, 8}), ref("b0.qkv", {24, 8}), ref("b1.qkv", {24, 8}), ref("b0.skip", {4}),
                                ref("extra", {3})};
    ModelLayout L = analyze_model(cfg, t);
    assert_int_equal(L.summary.n_params, 80 + 2 * 192 + 3);
    assert_int_equal(L.summary.n_params_expected, 0);
    assert_int_equal(L.summary.n_unmapped, 1);
    assert_int_equal(L.summary.n_buffers, 1);
    const PlanTensor *k = find(L, Role::K, 1);
    assert_non_null(k);
    assert_int_equal(int(k->layout), int(QkvLayout::PerHead));
    assert_int_equal(k->dims[0], 8);
    // Two tensors for one role slot are refused, naming both.
    t.push_back(ref("tok2", {10, 8}));
    cfg.user_rules.push_back(RoleRule{"tok2", Role::EMB});
    std::string msg = test::expect_error(STK_E_PARAM_COUNT, [&] { analyze_model(cfg, t); });
    assert_contains(msg, "'tok'");
    assert_contains(msg, "'tok2'");
}

static void fused_layouts_map_rows(void **) {
    // Row mapping of each fused layout, checked on an identity-like source: element (r, c) of the
    // source holds r * 1000 + c, so each output element says which source row it came from.
    auto run = [](QkvLayout lay, uint8_t part, uint32_t heads, uint32_t kv, uint32_t hd, uint64_t r) {
        PlanTensor t;
        t.layout = lay;
        t.part = part;
        t.head_dim = hd;
        t.q_heads = heads;
        t.kv_heads = kv;
        t.rank = 2;
        uint64_t rows = uint64_t(part == 0 ? heads : kv) * hd, total = uint64_t(heads + 2 * kv) * hd;
        t.dims[0] = rows;
        t.dims[1] = 2;
        t.n_elements = rows * 2;
        t.src_rows = total;
        t.src_cols = 2;
        std::vector<float> src(total * 2), out(rows * 2);
        for (uint64_t i = 0; i < total; i++) src[i * 2] = float(i), src[i * 2 + 1] = float(i) + 0.5f;
        TensorRef ref_ = ref("fused", {total, 2});
        materialize_f32(t, ref_, reinterpret_cast<const uint8_t *>(src.data()), out.data(), nullptr);
        assert_true(out[r * 2 + 1] == out[r * 2] + 0.5f);
        // The same rows in three ranges (split inside a head's run of rows), as threads convert them.
        std::vector<float> parts(rows * 2, -1.0f);
        const uint64_t cut[4] = {0, rows / 3 + 1, 2 * rows / 3, rows};
        for (int q = 0; q < 3; q++)
            materialize_f32_rows(t, ref_, reinterpret_cast<const uint8_t *>(src.data()), cut[q], cut[q + 1], parts.data());
        assert_memory_equal(parts.data(), out.data(), out.size() * 4);
        return uint64_t(out[r * 2]);
    };
    // NeoX/Bloom [heads, 3, hd]: Q row 2*hd+3 (head 2, j 3) is source row (2*3+0)*hd+3.
    assert_int_equal(run(QkvLayout::PerHead, 0, 4, 4, 8, 19), (2 * 3 + 0) * 8 + 3);
    assert_int_equal(run(QkvLayout::PerHead, 2, 4, 4, 8, 9), (1 * 3 + 2) * 8 + 1);
    // Concat with MQA (Falcon-7B): K is the single head after all Q heads.
    assert_int_equal(run(QkvLayout::Concat, 1, 4, 1, 8, 5), 4 * 8 + 5);
    assert_int_equal(run(QkvLayout::Concat, 2, 4, 1, 8, 7), 5 * 8 + 7);
    // Grouped (Falcon-40B) with 4 q heads per kv group: [kv, 4 + 2, hd].
    assert_int_equal(run(QkvLayout::Grouped, 0, 8, 2, 4, 5 * 4 + 1), (1 * 6 + 1) * 4 + 1);  // q head 5 = group 1, #1
    assert_int_equal(run(QkvLayout::Grouped, 1, 8, 2, 4, 1 * 4 + 2), (1 * 6 + 4) * 4 + 2);
    assert_int_equal(run(QkvLayout::Grouped, 2, 8, 2, 4, 0 * 4 + 3), (0 * 6 + 5) * 4 + 3);
}

// Every check of expected.json: the element of the role tensor after our transforms equals the
// value PyTorch computed.
static void fixture_values(const char *name) {
    std::string dir = test::test_data(std::string("models/") + name);
    std::unique_ptr<ModelDescription> d;
    try {
        d = describe_model(dir);
    } catch (const Error &e) {
        if (e.status() == STK_E_NOT_IMPLEMENTED) {
            print_message("skipping %s: %s\n", name, e.what());
            skip();
        }
        throw;
    }
    std::string text = read_small_file(dir + "/expected.json", 1 << 20);
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.parse(text);
    assert_true(d->plan.n_params == uint64_t(root["n_params"]));
    assert_true(d->plan.n_buffers == uint64_t(root["n_buffers"]));
    assert_true(d->plan.n_source_tensors == uint64_t(root["n_source_tensors"]));
    int checked = 0;
    for (simdjson::dom::element c : root["checks"].get_array()) {
        Role role;
        assert_true(parse_role_name(std::string(std::string_view(c["role"])), &role));
        int32_t layer = int32_t(int64_t(c["layer"])), expert = int32_t(int64_t(c["expert"]));
        std::string_view norm;
        if (c["norm"].get(norm)) norm = "";
        const PlanTensor *t = nullptr;
        for (uint32_t i = 0; i < d->plan.n_tensors; i++) {
            const PlanTensor &p = d->plan.tensors[i];
            if (p.role == role && p.layer == layer && p.expert == expert && (norm.empty() || norm == norm_slot_name(p.slot)))
                t = &p;
        }
        assert_non_null(t);
        const TensorRef &src = d->checkpoint->tensors()[t->source];
        std::vector<uint8_t> scratch;
        const uint8_t *bytes = d->checkpoint->tensor_bytes(src, scratch);
        std::vector<float> out(t->n_elements), row(d->plan.max_row_floats + 1);
        materialize_f32(*t, src, bytes, out.data(), row.data());
        if (!t->transpose) {  // row ranges, as ffn_collapse's workers convert them: the same floats
            std::vector<float> parts(t->n_elements, -1.0f);
            const uint64_t rows = t->dims[0], cut[4] = {0, rows / 3, rows - rows / 5, rows};
            for (int q = 0; q < 3; q++) materialize_f32_rows(*t, src, bytes, cut[q], cut[q + 1], parts.data());
            assert_memory_equal(parts.data(), out.data(), out.size() * 4);
        }
        simdjson::dom::array idx = c["index"];
        std::vector<uint64_t> ix;
        for (simdjson::dom::element i : idx) ix.push_back(uint64_t(i));
        uint64_t e = ix.size() == 2 ? ix[0] * t->dims[1] + ix[1] : ix[0];
        float want = float(double(c["value"]));
        if (out[e] != want) {
            print_error("%s: %s layer %d expert %d element %llu: got %.9g, PyTorch says %.9g\n", name, role_name(role), layer,
                        expert, (unsigned long long)e, out[e], want);
            fail();
        }
        checked++;
    }
    print_message("%s: %d values checked\n", name, checked);
}

static void values_gpt2(void **) { fixture_values("gpt2"); }
static void values_llama(void **) { fixture_values("llama"); }
static void values_llama_f32(void **) { fixture_values("llama_f32"); }
static void values_mixtral(void **) { fixture_values("mixtral"); }
static void values_gpt_neox(void **) { fixture_values("gpt_neox"); }
static void values_bloom(void **) { fixture_values("bloom"); }
static void values_qwen2_moe(void **) { fixture_values("qwen2_moe"); }

// `stk inspect --json` prints one JSON object with the documented keys.
static void inspect_json(void **) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) {
        print_message("STK_BIN not set (run under meson test)\n");
        skip();
    }
    std::string cmd = std::string(bin) + " inspect --json --in " + test::test_data("models/gpt2");
    FILE *f = popen(cmd.c_str(), "r");
    assert_non_null(f);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    assert_int_equal(pclose(f), 0);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    assert_int_equal(parser.parse(out).get(root), simdjson::SUCCESS);
    assert_true(std::string_view(root["model_type"]) == "gpt2");
    assert_int_equal(uint64_t(root["n_layers"]), 2);
    assert_int_equal(uint64_t(root["d_model"]), 32);
    assert_int_equal(uint64_t(root["n_params"]), 28032);
    assert_int_equal(uint64_t(root["n_buffers"]), 4);
    int seen = 0;
    for (simdjson::dom::element t : root["tensors"].get_array()) {
        std::string_view name = t["name"];
        if (name == "h.1.attn.c_attn.weight" && !t["role"].is_null() && std::string_view(t["role"]) == "K") {
            assert_int_equal(uint64_t(t["layer"]), 1);
            simdjson::dom::array shape = t["shape"];
            assert_int_equal(shape.size(), 2);
            assert_int_equal(uint64_t(shape.at(0)), 32);
            assert_true(std::string_view(t["dtype"]) == "F32");
            assert_true(bool(t["transposed"]));
            seen++;
        }
        if (name == "h.0.attn.masked_bias") {
            assert_true(std::string_view(t["role"]) == "BUFFER");
            assert_false(bool(t["parameter"]));
            seen++;
        }
        if (name == "wte.weight" && std::string_view(t["role"]) == "LM_HEAD") {
            assert_true(std::string_view(t["tied_to"]) == "wte.weight");
            seen++;
        }
    }
    assert_int_equal(seen, 3);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_small_plan),
        cmocka_unit_test(gpt2_with_transformer_prefix),
        cmocka_unit_test(shape_mismatch_names_the_tensor),
        cmocka_unit_test(stacked_and_mla_shapes_refused),
        cmocka_unit_test(llama_family_presets),
        cmocka_unit_test(user_rules_first_match_and_lexical_ties),
        cmocka_unit_test(custom_model_with_user_rules),
        cmocka_unit_test(fused_layouts_map_rows),
        cmocka_unit_test(values_gpt2),
        cmocka_unit_test(values_llama),
        cmocka_unit_test(values_llama_f32),
        cmocka_unit_test(values_mixtral),
        cmocka_unit_test(values_gpt_neox),
        cmocka_unit_test(values_bloom),
        cmocka_unit_test(values_qwen2_moe),
        cmocka_unit_test(inspect_json),
    };
    return cmocka_run_group_tests_name("roles", tests, nullptr, nullptr);
}
