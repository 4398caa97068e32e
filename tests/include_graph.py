#!/usr/bin/env python3
"""The include graph of src/ against the layer table of docs/decisions.md ("Layout and layering").

Every `#include "..."` under src/ is read (plain text: the files are ours) and checked:
  - it names a file that exists (under src/ or include/);
  - the folder it comes from may include the folder it names: its own folder, the public header
    (stk/stk.h), or a folder that the table lists for it;
  - the table itself only looks down: every folder a row lists sits on a lower layer, so no
    include runs back up a layer or sideways, and the folders cannot form a circle;
  - no circle among the files either (a.h -> b.h -> a.h inside one folder);
  - every folder under src/ has a row, and every row a folder.
Exit 0 when all hold; otherwise one line per violation, naming file and line, and exit 1.

Usage: include_graph.py [SOURCE_ROOT]   (default: the repository holding this script)
"""
import os
import re
import sys

PUBLIC = "stk"  # include/stk/*.h: every layer may include the public headers

# Includes that the layer table no longer allows but that files still make while they move to
# the public API (issue 21: the stk command compiles against include/stk/ alone).  Per file, the
# folders it may still include.  The list only shrinks: an entry the file no longer needs is an
# error, so each is removed as its file is converted, until the list is empty.
TRANSITIONAL: dict = {}

TABLE_MARK = "<!-- include-graph -->"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(decisions_path):
    """Rows of the table following TABLE_MARK: {folder: (layer, set of folders it may include)}."""
    with open(decisions_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == TABLE_MARK)
    except StopIteration:
        sys.exit(f"{decisions_path}: no '{TABLE_MARK}' marker before the layer table")
    rows = {}
    for l in lines[start + 1:]:
        l = l.strip()
        if not l.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in l.strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue  # the header row and the |---| rule
        layer = int(cells[0])
        folder = cells[1].strip("`")
        may = {m.strip().strip("`") for m in cells[2].split(",") if m.strip() and m.strip() not in ("-", "—", "nothing")}
        if folder in rows:
            sys.exit(f"{decisions_path}: folder {folder} has two rows")
        rows[folder] = (layer, may)
    if not rows:
        sys.exit(f"{decisions_path}: the layer table after '{TABLE_MARK}' has no rows")
    return rows


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    src = os.path.join(root, "src")
    inc = os.path.join(root, "include")
    decisions = os.path.join(root, "docs", "decisions.md")
    table = read_table(decisions)
    errors = []

    # The table looks down only.
    for folder, (layer, may) in sorted(table.items()):
        for m in sorted(may):
            if m not in table:
                errors.append(f"docs/decisions.md: {folder} may include {m}, which has no row")
            elif table[m][0] >= layer:
                errors.append(f"docs/decisions.md: {folder} (layer {layer}) may include {m} (layer {table[m][0]}): "
                              "a row may list only lower layers")

    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in table:
            errors.append(f"src/{d}: no row in the layer table of docs/decisions.md")
    for d in table:
        if d not in folders:
            errors.append(f"docs/decisions.md: the layer table has a row for {d}, but src/{d} does not exist")

    graph = {}  # "folder/file" -> [(line, "folder/file")], for the circle check
    used = {f: set() for f in TRANSITIONAL}  # the transitional allowances actually needed
    for d in folders:
        for dirpath, _, files in os.walk(os.path.join(src, d)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".c", ".hpp", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src)
                edges = graph.setdefault(rel, [])
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        where = f"src/{rel}:{n}"
                        top = target.split("/")[0] if "/" in target else None
                        if top == PUBLIC:
                            if not os.path.isfile(os.path.join(inc, target)):
                                errors.append(f"{where}: #include \"{target}\": no such file under include/")
                            continue
                        if top is None or not os.path.isfile(os.path.join(src, target)):
                            errors.append(f"{where}: #include \"{target}\": not a path under src/ (write folder/file.h)")
                            continue
                        edges.append((n, target))
                        if top == d:
                            continue
                        if top in TRANSITIONAL.get(rel, ()):
                            used[rel].add(top)
                            continue
                        if d in table and top not in table[d][1]:
                            layer = table[d][0]
                            t_layer = table[top][0] if top in table else "?"
                            how = "up a layer" if isinstance(t_layer, int) and t_layer >= layer else "not in its row"
                            errors.append(f"{where}: {d} (layer {layer}) includes {target} ({top}, layer {t_layer}): {how}")

    for f, tops in sorted(TRANSITIONAL.items()):
        for t in sorted(tops - used[f]):
            errors.append(f"tests/include_graph.py: src/{f} no longer includes {t}/: remove it from TRANSITIONAL")

    # Circles among files: depth-first search, reporting each circle once.
    state = {}
    stack = []

    def visit(f):
        state[f] = 1
        stack.append(f)
        for n, t in graph.get(f, []):
            if state.get(t) == 1:
                circle = stack[stack.index(t):] + [t]
                errors.append(f"src/{f}:{n}: include circle: " + " -> ".join(circle))
            elif t not in state:
                visit(t)
        stack.pop()
        state[f] = 2

    sys.setrecursionlimit(10000)
    for f in sorted(graph):
        if f not in state:
            visit(f)

    n_edges = sum(len(e) for e in graph.values())
    if errors:
        for e in errors:
            print(e)
        print(f"include graph: {len(errors)} violation(s) in {len(graph)} files, {n_edges} includes")
        return 1
    print(f"include graph: {len(graph)} files, {n_edges} includes, {len(table)} folders: every include looks down, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
