// stk generations ROOT [--json] [--gc [--keep N] | --remove NAME [--force]]: list the generations
// of a root, or remove the ones that are not current (docs/decisions.md, "Publication").
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "stk/stk.h"

namespace stk::cli {

static const char kHelp[] =
    "usage: stk generations ROOT [--json]\n"
    "       stk generations ROOT --gc [--keep N] [--json]\n"
    "       stk generations ROOT --remove NAME [--force] [--json]\n"
    "\n"
    "List the generations of a generations root (what stk convert --out ROOT publishes): name,\n"
    "curr_hash, prev_hash, arrays, payload bytes, whether it is the current one, and whether it\n"
    "is on the chain that stk check follows back from CURRENT through prev_hash.\n"
    "\n"
    "  --root ROOT    the root (or give it as the only argument)\n"
    "  --gc           remove what is not needed: generations off the chain (a crash between the\n"
    "                 rename and the CURRENT swap leaves one), chain members beyond the newest\n"
    "                 --keep, and leftovers of crashed writers.  Never the current generation\n"
    "  --keep N       with --gc: chain members kept, the current one included (default 2, so\n"
    "                 that stk check can still verify the current generation's prev_hash link)\n"
    "  --remove NAME  remove one generation; never the current one; a chain member with older\n"
    "                 and newer chain members present (it would cut the chain) only with --force\n"
    "  --json         one JSON object on stdout (docs/cli.md)\n"
    "\n"
    "Removal takes the root's lock (a running convert makes it fail with exit 5) and renames the\n"
    "generation out of generations/ before deleting it.  A reader that already opened a\n"
    "generation keeps its mapped files (stk_generation_open pins it).\n"
    "\n"
    "exit codes: 0 ok, 1 refused (the current generation, a chain link), 2 usage, 5 no such root,\n"
    "the root is locked, or an I/O error\n";

static std::string hex16_of(const uint8_t h[32]) { return hex_hash(h).substr(0, 16); }

namespace {

struct GenerationsOptions {
    std::string root, remove;
    uint32_t keep = 2;
    bool json = false, gc = false, force = false;
};

// What --gc / --remove did.
struct Removal {
    std::vector<std::string> removed, in_use;
    uint32_t leftovers = 0;
};

// Returns -1 to go on, else the exit code (help, usage).
int generations_options(int argc, char **argv, GenerationsOptions &o) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    o.root = args.get("root"), o.remove = args.get("remove");
    o.keep = args.get_u32("keep", 2);
    o.json = args.flag("json"), o.gc = args.flag("gc"), o.force = args.flag("force");
    const bool json = o.json;
    if (!args.finish("generations", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!o.root.empty())
            return report_usage("generations", "the root is given twice (--root and '" + args.positional()[0] + "')", json);
        o.root = args.positional()[0];
    }
    if (o.root.empty()) return report_usage("generations", "ROOT is required", json);
    if (o.gc && !o.remove.empty()) return report_usage("generations", "--gc and --remove go separately", json);
    if (args.has("keep") && !o.gc) return report_usage("generations", "--keep goes with --gc", json);
    if (o.force && o.remove.empty()) return report_usage("generations", "--force goes with --remove", json);
    if (o.gc && o.keep == 0) return report_usage("generations", "--keep is at least 1 (the current generation stays)", json);
    return -1;
}

// --gc or --remove (stk_root_gc / stk_root_remove).  Returns -1 to go on, else the exit code.
int remove_generations(const GenerationsOptions &o, Removal &r) {
    stk_gc_result *res = nullptr;
    stk_status s = o.gc ? stk_root_gc(o.root.c_str(), o.keep, &res)
                        : stk_root_remove(o.root.c_str(), o.remove.c_str(), o.force ? STK_REMOVE_FORCE : 0, &res);
    if (s == STK_E_INVALID_ARGUMENT) {  // a refused removal (the current one, a chain link): not a usage error
        std::string msg = stk_last_error();
        if (msg.find("only when forced") != std::string::npos) msg += " (--force removes it anyway)";
        if (o.json) json_result("generations", kExitFailed, s, msg).str("root", o.root).print();
        std::fprintf(stderr, "stk generations: %s: %s\n", stk_status_str(s), msg.c_str());
        return kExitFailed;
    }
    if (s != STK_OK) return report_failure("generations", s, o.json);
    uint32_t n_removed = 0, n_in_use = 0;
    stk_gc_result_counts(res, &n_removed, &n_in_use, &r.leftovers);
    for (uint32_t i = 0; i < n_removed; i++) r.removed.push_back(stk_gc_result_removed(res, i));
    for (uint32_t i = 0; i < n_in_use; i++) r.in_use.push_back(stk_gc_result_in_use(res, i));
    stk_gc_result_close(res);
    return -1;
}

void print_generations_json(const GenerationsOptions &o, const std::vector<Generation> &gens, const Removal &r,
                            const std::string &current, const std::string &msg) {
    std::vector<std::string> items, rem, busy;
    for (const Generation &l : gens) {
        const stk_generation_entry &g = l.e;
        Json j;
        j.str("name", g.name).unum("seq", g.seq).boolean("current", g.current).boolean("on_chain", g.on_chain);
        if (g.readable) {
            j.str("curr_hash", hex_hash(g.curr_hash))
                .str("prev_hash", hex_hash(g.prev_hash))
                .unum("arrays", g.arrays)
                .unum("bytes", g.bytes);
        } else {
            j.null("curr_hash").null("prev_hash").null("arrays").null("bytes");
        }
        j.str_or_null("error", l.error.c_str());
        items.push_back(j.text());
    }
    for (const std::string &x : r.removed) rem.push_back(json_escape(x));
    for (const std::string &x : r.in_use) busy.push_back(json_escape(x));
    json_result("generations", kExitOk, STK_OK, msg)
        .str("root", o.root)
        .str_or_null("current", current.c_str())
        .raw("generations", json_array(items))
        .raw("removed", json_array(rem))
        .raw("in_use", json_array(busy))
        .unum("leftovers_removed", r.leftovers)
        .print();
}

void print_generations_text(const std::vector<Generation> &gens, const Removal &r, const std::string &msg) {
    for (const std::string &x : r.removed) std::fprintf(stderr, "stk generations: removed %s\n", x.c_str());
    for (const std::string &x : r.in_use)
        std::fprintf(stderr, "stk generations: kept %s: another process is reading it (the next --gc removes it)\n", x.c_str());
    std::printf("%s\n", msg.c_str());
    if (!gens.empty())
        std::printf("  %-24s %-7s %-5s %6s %10s  %-16s  %s\n", "name", "current", "chain", "arrays", "bytes", "curr_hash",
                    "prev_hash");
    static const uint8_t zero[32] = {};
    for (const Generation &l : gens) {
        const stk_generation_entry &g = l.e;
        if (!g.readable) {
            std::printf("  %-24s %-7s %-5s unreadable: %s\n", g.name, g.current ? "yes" : "-", "-", l.error.c_str());
            continue;
        }
        std::printf("  %-24s %-7s %-5s %6llu %10s  %-16s  %s\n", g.name, g.current ? "yes" : "-", g.on_chain ? "yes" : "-",
                    (unsigned long long)g.arrays, human_bytes(g.bytes).c_str(), hex16_of(g.curr_hash).c_str(),
                    std::memcmp(g.prev_hash, zero, 32) ? hex16_of(g.prev_hash).c_str() : "(first)");
    }
}

}  // namespace

int cmd_generations(int argc, char **argv) {
    GenerationsOptions o;
    if (int code = generations_options(argc, argv, o); code >= 0) return code;
    stk_root_info ri{};
    ri.struct_size = sizeof ri;
    if (stk_root_probe(o.root.c_str(), &ri) != STK_OK || !ri.is_root)
        return report_error("generations", STK_E_NOT_FOUND,
                            format("%s is not a generations root (no %s, no %s/)", o.root.c_str(), STK_CURRENT_FILE_NAME,
                                   STK_GENERATIONS_DIR_NAME),
                            o.json);
    Removal r;
    const bool removing = o.gc || !o.remove.empty();
    if (removing)
        if (int code = remove_generations(o, r); code >= 0) return code;
    std::vector<Generation> gens;
    if (stk_status s = root_generations(stk_root_list, o.root, &gens); s != STK_OK)
        return report_failure("generations", s, o.json);
    std::string current;
    for (const Generation &l : gens)
        if (l.e.current) current = l.e.name;
    std::string msg = o.root + ": " + std::to_string(gens.size()) + " generation" + (gens.size() == 1 ? "" : "s") +
                      (current.empty() ? ", none current" : ", current " + current);
    if (removing)
        msg += "; removed " + std::to_string(r.removed.size()) + " generation" + (r.removed.size() == 1 ? "" : "s") +
               (r.leftovers
                    ? " and " + std::to_string(r.leftovers) + " leftover" + (r.leftovers == 1 ? "" : "s") + " of crashed writers"
                    : "");
    if (o.json) print_generations_json(o, gens, r, current, msg);
    else print_generations_text(gens, r, msg);
    return kExitOk;
}

}  // namespace stk::cli
