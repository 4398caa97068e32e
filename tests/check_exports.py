#!/usr/bin/env python3
"""The exported names of the shared libstk, the functions include/stk/stk.h declares (with those of
any further public header given, such as include/stk/stk_acceptance.h) and the global names of
src/api/stk.map must be exactly the same set (issue 2 item 1).

usage: check_exports.py LIBSTK_SO STK_H STK_MAP [MORE_HEADERS...]
"""
import re
import subprocess
import sys


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2].split("@")[0]
        if kind == "A":  # the version node itself (STK_0.1)
            continue
        names.add(name)
    return names


def declared(header):
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"\bSTK_API\b[^;{]*?\b(stk_\w+)\s*\(", text))


def mapped(map_file):
    text = open(map_file, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    m = re.search(r"global:(.*?)local:", text, flags=re.S)
    if not m:
        sys.exit(f"{map_file}: no global: ... local: section")
    return set(n.strip() for n in m.group(1).split(";") if n.strip())


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    lib, header, map_file = sys.argv[1:4]
    headers = set()
    for h in [header] + sys.argv[4:]:
        headers |= declared(h)
    sets = {"libstk.so exports": exported(lib), "stk.h declares": headers, "stk.map lists": mapped(map_file)}
    ok = True
    names = list(sets)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for n in sorted(sets[a] - sets[b]):
                print(f"{n}: {a}, but {b.split()[0]} does not")
                ok = False
    if not sets["stk.h declares"]:
        print("no STK_API functions found in the header")
        ok = False
    print(f"{len(sets['libstk.so exports'])} exported, {len(sets['stk.h declares'])} declared, "
          f"{len(sets['stk.map lists'])} in the map: {'equal' if ok else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
