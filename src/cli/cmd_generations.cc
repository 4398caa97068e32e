// stk generations ROOT [--json] [--gc [--keep N] | --remove NAME [--force]]: list the generations
// of a root, or remove the ones that are not current (docs/decisions.md, "Publication").
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/error.h"
#include "format/manifest.h"
#include "publish/generations.h"

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

static std::string hex16_of(const uint8_t h[32]) { return hex32(h).substr(0, 16); }

int cmd_generations(int argc, char **argv) {
    Args args(argc, argv, 2);
    if (args.flag("help")) {
        std::fputs(kHelp, stdout);
        return kExitOk;
    }
    std::string root = args.get("root"), remove = args.get("remove");
    uint32_t keep = args.get_u32("keep", 2);
    bool json = args.flag("json"), gc = args.flag("gc"), force = args.flag("force");
    if (!args.finish("generations", 1)) return kExitUsage;
    if (!args.positional().empty()) {
        if (!root.empty())
            return report_usage("generations", "the root is given twice (--root and '" + args.positional()[0] + "')", json);
        root = args.positional()[0];
    }
    if (root.empty()) return report_usage("generations", "ROOT is required", json);
    if (gc && !remove.empty()) return report_usage("generations", "--gc and --remove go separately", json);
    if (args.has("keep") && !gc) return report_usage("generations", "--keep goes with --gc", json);
    if (force && remove.empty()) return report_usage("generations", "--force goes with --remove", json);
    if (gc && keep == 0) return report_usage("generations", "--keep is at least 1 (the current generation stays)", json);
    if (!is_generations_root(root)) {
        set_last_error(
            format("%s is not a generations root (no %s, no %s/)", root.c_str(), kCurrentFileName, kGenerationsDirName));
        return report_failure("generations", STK_E_NOT_FOUND, json);
    }

    std::vector<std::string> removed, in_use;
    uint32_t leftovers = 0;
    if (gc || !remove.empty()) {
        stk_status s = guard([&] {
            int fd = lock_root(root);
            try {
                leftovers = clean_leftovers(root);
                if (gc) removed = gc_generations(root, keep, &in_use);
                else {
                    remove_generation(root, remove, force);
                    removed.push_back(remove);
                }
            } catch (...) {
                unlock_root(fd);
                throw;
            }
            unlock_root(fd);
        });
        if (s == STK_E_INVALID_ARGUMENT) {  // a refused removal (the current one, a chain link): not a usage error
            std::string msg = stk_last_error();
            if (msg.find("only when forced") != std::string::npos) msg += " (--force removes it anyway)";
            if (json) json_result("generations", kExitFailed, s, msg).str("root", root).print();
            std::fprintf(stderr, "stk generations: %s: %s\n", stk_status_str(s), msg.c_str());
            return kExitFailed;
        }
        if (s != STK_OK) return report_failure("generations", s, json);
    }

    std::vector<GenerationInfo> gens;
    stk_status s = guard([&] { gens = list_generations(root); });
    if (s != STK_OK) return report_failure("generations", s, json);
    std::string current;
    for (const GenerationInfo &g : gens)
        if (g.current) current = g.name;
    std::string msg = root + ": " + std::to_string(gens.size()) + " generation" + (gens.size() == 1 ? "" : "s") +
                      (current.empty() ? ", none current" : ", current " + current);
    if (gc || !remove.empty())
        msg +=
            "; removed " + std::to_string(removed.size()) + " generation" + (removed.size() == 1 ? "" : "s") +
            (leftovers ? " and " + std::to_string(leftovers) + " leftover" + (leftovers == 1 ? "" : "s") + " of crashed writers"
                       : "");
    if (json) {
        std::vector<std::string> items, rem;
        for (const GenerationInfo &g : gens) {
            Json j;
            j.str("name", g.name).unum("seq", g.seq).boolean("current", g.current).boolean("on_chain", g.on_chain);
            if (g.readable) {
                j.str("curr_hash", hex32(g.curr_hash))
                    .str("prev_hash", hex32(g.prev_hash))
                    .unum("arrays", g.arrays)
                    .unum("bytes", g.bytes);
            } else {
                j.null("curr_hash").null("prev_hash").null("arrays").null("bytes");
            }
            j.str_or_null("error", g.error.c_str());
            items.push_back(j.text());
        }
        std::vector<std::string> busy;
        for (const std::string &r : removed) rem.push_back(json_escape(r));
        for (const std::string &r : in_use) busy.push_back(json_escape(r));
        json_result("generations", kExitOk, STK_OK, msg)
            .str("root", root)
            .str_or_null("current", current.c_str())
            .raw("generations", json_array(items))
            .raw("removed", json_array(rem))
            .raw("in_use", json_array(busy))
            .unum("leftovers_removed", leftovers)
            .print();
        return kExitOk;
    }
    for (const std::string &r : removed) std::fprintf(stderr, "stk generations: removed %s\n", r.c_str());
    for (const std::string &r : in_use)
        std::fprintf(stderr, "stk generations: kept %s: another process is reading it (the next --gc removes it)\n", r.c_str());
    std::printf("%s\n", msg.c_str());
    if (!gens.empty())
        std::printf("  %-24s %-7s %-5s %6s %10s  %-16s  %s\n", "name", "current", "chain", "arrays", "bytes", "curr_hash",
                    "prev_hash");
    static const uint8_t zero[32] = {};
    for (const GenerationInfo &g : gens) {
        if (!g.readable) {
            std::printf("  %-24s %-7s %-5s unreadable: %s\n", g.name.c_str(), g.current ? "yes" : "-", "-", g.error.c_str());
            continue;
        }
        std::printf("  %-24s %-7s %-5s %6llu %10s  %-16s  %s\n", g.name.c_str(), g.current ? "yes" : "-",
                    g.on_chain ? "yes" : "-", (unsigned long long)g.arrays, human_bytes(g.bytes).c_str(),
                    hex16_of(g.curr_hash).c_str(),
                    std::memcmp(g.prev_hash, zero, 32) ? hex16_of(g.prev_hash).c_str() : "(first)");
    }
    return kExitOk;
}

}  // namespace stk::cli
