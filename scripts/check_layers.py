#!/usr/bin/env python3
"""Checks the source tree against its layers and size limits.

Layers: the order is the ```layers block of docs/architecture.md (lowest first, one rank a line;
names on one line share a rank, names joined by + are peers that may include each other). Every
#include "..." in src/ and main.cpp must stay in its own folder or reach a lower rank.
Sizes: every file there at most MAX_FILE_LINES lines, every function (Universal Ctags, with end
lines) at most MAX_FUNCTION_LINES, but for the declarative tables of ALLOWED_FUNCTIONS.
Line length: every line there at most MAX_LINE_CHARS characters, but for those of ALLOWED_LINES.

Usage: scripts/check_layers.py [--root DIR] [--layers-only]. Prints one line per problem and exits
1 when there is any, 2 when the layer block cannot be read.
"""
import argparse
import json
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_LINE_CHARS = 120
SOURCE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h")
# Functions longer than the limit that are tables, each with why it is one.
ALLOWED_FUNCTIONS = {
    "src/config/schema.cpp:schema_fields": "the experiment schema: one line per key with its range and help",
}
# Lines longer than the limit that cannot be wrapped without changing what the program prints, as
# "path:text of the line with its indentation" (a line number would go stale), each with why.
ALLOWED_LINES = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(doc):
    """{folder: rank}, {folder: peer group id}, from the ```layers block of `doc`."""
    try:
        text = open(doc, encoding="utf-8").read()
    except OSError as e:
        sys.exit(f"{doc}: cannot read the layer order: {e.strerror}")
    block = re.search(r"^```layers\n(.*?)^```", text, re.M | re.S)
    if not block:
        print(f"{doc}: no ```layers block: it lists the folders of src/, lowest first", file=sys.stderr)
        sys.exit(2)
    rank, peers = {}, {}
    for number, line in enumerate(block.group(1).splitlines()):
        names = line.split("#", 1)[0].split()
        for group in names:
            for name in group.split("+"):
                if name in rank:
                    print(f"{doc}: layers block: {name} is listed twice; list each folder once", file=sys.stderr)
                    sys.exit(2)
                rank[name], peers[name] = number, group
    return rank, peers


def sources(root):
    """Paths (relative to root) of the files the layers cover."""
    found = ["main.cpp"] if os.path.exists(os.path.join(root, "main.cpp")) else []
    for folder, _, files in os.walk(os.path.join(root, "src")):
        found += [os.path.relpath(os.path.join(folder, f), root) for f in files if f.endswith(SOURCE_SUFFIXES)]
    return sorted(found)


def layer_of(path):
    """The layer a file belongs to: its top folder under src/, or main.cpp."""
    parts = path.split(os.sep)
    if parts[0] == "src":
        return parts[1] if len(parts) > 2 else path
    return parts[0]


def resolve(root, path, include):
    """The file an include names, as the build finds it (-Isrc, then beside the file)."""
    for base in ("src", os.path.dirname(path)):
        candidate = os.path.normpath(os.path.join(base, include))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def check_layers(root, rank, peers, doc):
    problems = []
    files = sources(root)
    for layer in sorted({layer_of(p) for p in files} - set(rank)):
        problems.append(f"{layer}: not in the layers block of {doc}; add it where what it includes sits below it")
    for path in files:
        here = layer_of(path)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                target = match and resolve(root, path, match.group(1))
                if not target or here not in rank:
                    continue
                there = layer_of(target)
                if there == here or there not in rank or rank[there] < rank[here] or peers[there] == peers[here]:
                    continue
                way = "up" if rank[there] > rank[here] else "sideways"
                problems.append(f"{path}:{number}: includes {match.group(1)}: {here} reaches {way} to {there}; "
                                f"{here} may include only folders listed before it in {doc}")
    return problems


def functions(root, files):
    """(path, name, first line, last line) of every function definition, by Universal Ctags."""
    command = ["ctags", "--output-format=json", "--fields=+ne", "--kinds-c++=f", "--langmap=c++:+.cu.cuh",
               "--language-force=c++", "-f", "-"] + files
    try:
        out = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("ctags: not found; install Universal Ctags (scripts/deps.sh installs universal-ctags)")
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and "end" in tag:
            # mt::plan::estimate_step is named plan::estimate_step; anonymous namespaces are left out.
            scope = [s for s in tag.get("scope", "").split("::") if s and not s.startswith("__anon")]
            scope = scope[1:] if scope[:1] == ["mt"] else scope
            yield tag["path"], "::".join(scope), tag["name"], tag["line"], tag["end"]


def check_sizes(root):
    problems = []
    files = sources(root)
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_FILE_LINES:
            problems.append(f"{path}: {lines} lines, more than {MAX_FILE_LINES}: split it by what its parts do")
    for path, scope, name, first, last in functions(root, files):
        qualified = f"{scope}::{name}" if scope else name
        length = last - first + 1
        if length > MAX_FUNCTION_LINES and f"{path}:{qualified}" not in ALLOWED_FUNCTIONS:
            problems.append(f"{path}:{first}: {qualified} is {length} lines, more than {MAX_FUNCTION_LINES}: "
                            "split it, or list it in ALLOWED_FUNCTIONS with why it is a table")
    return problems


def check_line_lengths(root):
    problems = []
    for path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if len(line) > MAX_LINE_CHARS and f"{path}:{line}" not in ALLOWED_LINES:
                    problems.append(f"{path}:{number}: {len(line)} characters, more than {MAX_LINE_CHARS}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--layers-only", action="store_true", help="check the includes, not the sizes and line lengths")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    doc = "docs/architecture.md"
    rank, peers = read_layers(os.path.join(root, doc))
    problems = check_layers(root, rank, peers, doc)
    if not args.layers_only:
        problems += check_sizes(root)
        problems += check_line_lengths(root)
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} problem(s)" if problems else "check_layers: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
