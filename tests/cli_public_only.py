#!/usr/bin/env python3
"""The stk command compiles against the public headers alone (include/stk/) plus its own files
(src/cli/).  src/cli/meson.build gives the `stk` target no other include directory, so the normal
build refuses an #include of an internal header; this test reads the build's
compile_commands.json and checks that this is still so:
  - every src/cli/*.cc is compiled for the stk target, and nothing else of src/ is;
  - each of those commands names only these include directories: include/, the target's private
    folder (*.p, objects only), and the `public-only` folder whose one entry, `cli`, links to
    src/cli; no forced -include, no -isystem/-iquote/-idirafter, no sysroot tricks;
  - the stk target's link statement in build.ninja (inputs and LINK_ARGS) names libstk and no
    other library of this build (not libstk_internal, not a separate acceptance library).
Exit 0 when all hold; otherwise one line per violation and exit 1.

Usage: cli_public_only.py SOURCE_ROOT BUILD_ROOT
"""
import glob
import json
import os
import shlex
import sys

INCLUDE_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros", "--include-directory", "--sysroot",
                 "-isysroot", "-iprefix", "-iwithprefix", "-iwithprefixbefore")


def include_args(args):
    """(flag, value) for each include-path argument, joined or separate ("-Ifoo", "-I foo")."""
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        for f in INCLUDE_FLAGS:
            if a == f:
                out.append((f, args[i + 1] if i + 1 < len(args) else ""))
                i += 1
                break
            if a.startswith(f) and not a.startswith("-include-pch"):
                value = a[len(f):].lstrip("=")
                out.append((f, value))
                break
        i += 1
    return out


def is_libstk(path):
    base = os.path.basename(path)
    return base == "libstk.a" or base == "libstk.so" or base.startswith("libstk.so.")


def project_libraries(build_root):
    """The libraries of this build that build.ninja's link statement for src/cli/stk names."""
    with open(os.path.join(build_root, "build.ninja"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("build src/cli/stk:"):
            break
    else:
        return None
    words = line.split()[2:]
    for body in lines[i + 1:]:
        if not body.startswith(" "):
            break
        name, _, value = body.strip().partition(" = ")
        if name == "LINK_ARGS":
            words += value.split()
    libs = set()
    for w in words:
        if w in ("|", "||") or w.startswith("-") and not w.startswith("-l"):
            continue
        if w.startswith("-l"):
            libs.add(w)  # a -l of a build library would name it here
            continue
        path = os.path.realpath(os.path.join(build_root, w))
        base = os.path.basename(path)
        if path.startswith(build_root + os.sep) and (base.endswith(".a") or ".so" in base):
            libs.add(os.path.relpath(path, build_root))
    return libs


def main():
    src_root, build_root = (os.path.realpath(p) for p in sys.argv[1:3])
    cli = os.path.join(src_root, "src", "cli")
    public = os.path.join(src_root, "include")
    with open(os.path.join(build_root, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    errors = []
    seen = set()
    for e in entries:
        file = os.path.realpath(os.path.join(e["directory"], e["file"]))
        output = e.get("output", "")
        if os.path.dirname(file) != cli or not file.endswith(".cc"):
            continue
        if "stk.p" not in output.split(os.sep) and "stk.p" not in output.split("/"):
            continue
        seen.add(os.path.basename(file))
        args = shlex.split(e["command"]) if "command" in e else e["arguments"]
        for flag, value in include_args(args):
            where = f"{os.path.relpath(file, src_root)}: {flag}{value}"
            path = os.path.realpath(os.path.join(e["directory"], value))
            if flag != "-I":
                errors.append(f"{where}: only -I include directories are expected")
            elif path == public:
                continue
            elif path.endswith(".p") and path.startswith(build_root + os.sep):
                if any(n.endswith((".h", ".hpp")) for n in os.listdir(path)):
                    errors.append(f"{where}: the target's private folder holds headers")
            elif path.startswith(build_root + os.sep) and os.path.basename(path) == "public-only":
                names = os.listdir(path)
                link = os.path.join(path, "cli")
                if names != ["cli"] or os.path.realpath(link) != cli:
                    errors.append(f"{where}: public-only must hold one entry, cli -> src/cli (holds {names})")
            else:
                errors.append(f"{where}: an include directory other than include/ and src/cli")
    wanted = {os.path.basename(p) for p in glob.glob(os.path.join(cli, "*.cc"))}
    for name in sorted(wanted - seen):
        errors.append(f"src/cli/{name}: not compiled for the stk target in compile_commands.json")
    if len(seen) < 10:
        errors.append(f"only {len(seen)} src/cli files found in compile_commands.json")
    libs = project_libraries(build_root)
    if libs is None:
        errors.append("build.ninja: no link statement for src/cli/stk")
    else:
        own = {l for l in libs if not l.startswith("-l")}
        others = sorted(l for l in own if not is_libstk(l))
        for l in others:
            errors.append(f"src/cli/stk links {l}: only libstk is expected among this build's libraries")
        if not any(is_libstk(l) for l in own):
            errors.append(f"src/cli/stk does not link libstk (this build's libraries on its link line: {sorted(own)})")
    if errors:
        for e in errors:
            print(e)
        return 1
    print(f"{len(seen)} files of src/cli compile with include/ and src/cli only as include directories; "
          f"the stk target links {', '.join(sorted(l for l in libs if not l.startswith('-l')))} of this build's libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
