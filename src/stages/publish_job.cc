// A job that publishes into a generations root (STK_JOB_PUBLISH_ROOT): stk_open takes the root's
// lock and points the stages at a staging directory; the check stage, once the staging
// directory verified, publishes it (rename into generations/, then the CURRENT swap); stk_close
// unlocks and removes the staging directory of a job that did not get that far.
// Why the check stage and not a separate call or stk_close: publication must follow a passed
// verification and nothing else; the check stage is that verification, it can fail with a
// status (stk_close cannot), and a caller who runs the DAG to its end gets a published
// generation without a step to forget (docs/decisions.md, "Publication").
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/output_file.h"
#include "format/manifest.h"
#include "publish/generations.h"
#include "publish/verify.h"
#include "stages/stages.h"

namespace stk {

static const char *job_strdup(Job &job, const std::string &s) {
    if (s.size() > std::strlen(job.root ? job.root : job.out_dir) + kPublishPathSlack)
        throw_error(STK_E_INTERNAL, "path %s longer than the arena reserved for it", s.c_str());
    char *d = static_cast<char *>(job.arena.alloc(s.size() + 1, 1));
    std::memcpy(d, s.c_str(), s.size() + 1);
    return d;
}

void publish_begin(Job &job) {
    const std::string root = job.out_dir;
    job.root = job.out_dir;
    // A new root's own directory entry is made durable (make_dirs created it, unfsynced).  Best
    // effort: a parent we may not open (a root directly under a read-protected directory) must
    // not stop the conversion; the root's own contents are fsynced below regardless.
    try {
        durable_fsync_dir(dir_of(root));
    } catch (const Error &) {
    }
    job.root_lock_fd = lock_root(root);
    clean_leftovers(root);
    durable_mkdir(root + "/" + kGenerationsDirName);
    // Publication renames the staging directory into generations/: find out now, not after the
    // whole conversion, that it cannot (a read-only generations/ or file system).
    probe_writable_dir(root + "/" + kGenerationsDirName);
    CurrentPointer cp;
    bool has_current = read_current(root, &cp);
    // Generations but no CURRENT, or a CURRENT naming one that is not there: repaired from the
    // newest generation that verifies, so the chain goes on (the tool says so).
    if (!has_current || !is_dir_plain(root + "/" + kGenerationsDirName + "/" + cp.name)) {
        job.repaired_current = current_needs_repair(root);  // not a new root's first generation
        has_current = repair_current(root, &cp);
    }
    if (has_current) {
        // The chain continues from the current generation; refuse to chain onto one that does
        // not read back as what CURRENT says.
        std::string mpath = root + "/" + kGenerationsDirName + "/" + cp.name + "/" + kManifestFileName;
        Manifest m = read_manifest(mpath);
        if (std::memcmp(m.curr_hash, cp.curr_hash, 32) != 0)
            throw_error(STK_E_CHECKSUM, "%s: curr_hash %s, but %s/%s says %s; nothing published", mpath.c_str(),
                        hex32(m.curr_hash).c_str(), root.c_str(), kCurrentFileName, hex32(cp.curr_hash).c_str());
        std::memcpy(job.manifest.prev_hash, cp.curr_hash, 32);
    }
    std::string staging = make_staging_dir(root);
    job.out_dir = job_strdup(job, staging);
    job.params.out_dir = job.out_dir;
}

void publish_job(Job &job) {
    if (!job.root || job.generation_dir) return;
    job_cancel_point(job);  // the last moment a cancel can keep the root as it was
    Manifest m = read_manifest(std::string(job.out_dir) + "/" + kManifestFileName);
    std::string name = publish_staged(job.root, job.out_dir, m.curr_hash);
    job.generation_dir = job_strdup(job, std::string(job.root) + "/" + kGenerationsDirName + "/" + name);
    job.out_dir = job.generation_dir;
    job.params.out_dir = job.out_dir;
}

void publish_release(Job &job) {
    if (!job.root) return;
    if (!job.generation_dir && job.out_dir != job.root) {
        try {
            durable_remove_tree(job.out_dir);  // best effort: the next writer removes what is left
        } catch (...) {
        }
    }
    unlock_root(job.root_lock_fd);
    job.root_lock_fd = -1;
}

}  // namespace stk
