"""Runs the examples of the README and of docs/*.md as written: every line of a code block that
starts with "$ " (with its "\\" continuation lines) runs in a scratch directory that holds the
repository's configs, scripts and demo data, with moetrain on PATH as `make install` would put it.
The README's run first, then each doc's, in one directory: a doc's example may read the README's
runs. A command must exit 0, and the output lines the file shows under it must appear in its output
in that order; a shown line ending in "..." matches as a prefix, and "..." alone or a line in
parentheses (an editorial note) matches nothing. A command that cannot run here is shown in a
block without "$ ". MOETRAIN names another binary to run them with (a CPU-only build's). Also
checks every file's links (doc_links.py) and that docs/dependencies.md names every package
scripts/deps.sh installs (deps_listed.py). Prints one PASS or FAIL line per command and check."""
import glob
import os
import re
import subprocess
import sys
import tempfile

import deps_listed
import doc_links

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def examples(readme):
    """(line number, command, shown output lines) of every "$ " line in a code block. A block may
    be indented (inside a list item): its lines lose the fence's indentation."""
    out, indent, i = [], None, 0
    lines = readme.splitlines()
    while i < len(lines):
        stripped = lines[i].lstrip()
        if stripped.startswith("```"):
            indent = len(lines[i]) - len(stripped) if indent is None else None
        elif indent is not None and lines[i][indent:].startswith("$ "):
            start, cmd = i + 1, lines[i][indent + 2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            shown = []
            while i + 1 < len(lines) and not lines[i + 1][indent:].startswith(("$ ", "```")):
                i += 1
                shown.append(lines[i][indent:])
            out.append((start, cmd, shown))
        i += 1
    return out


def matches(shown, actual):
    """The first shown line not found in order in the actual output, or None."""
    at = 0
    for want in shown:
        if want.strip() in ("", "...") or want.startswith("("):
            continue
        prefix = want.endswith("...")
        key = want[:-3].rstrip() if prefix else want.rstrip()
        while at < len(actual) and not (actual[at].startswith(key) if prefix else actual[at].rstrip() == key):
            at += 1
        if at == len(actual):
            return want
        at += 1
    return None


binary = os.path.abspath(os.environ.get("MOETRAIN", os.path.join(repo, "moetrain")))


def scratch_dir():
    work = tempfile.mkdtemp(prefix="mt_readme_")
    for name in ("configs", "scripts", "bench", "docs", ".venv"):
        if os.path.exists(os.path.join(repo, name)):
            os.symlink(os.path.join(repo, name), os.path.join(work, name))
    bin_dir = os.path.join(work, "bin")
    os.mkdir(bin_dir)
    os.symlink(binary, os.path.join(bin_dir, "moetrain"))
    os.symlink(binary, os.path.join(work, "moetrain"))
    data = os.path.join(repo, "data", "fortunes")
    os.mkdir(os.path.join(work, "data"))
    if os.path.exists(os.path.join(data, "train_000000.bin")):
        os.symlink(data, os.path.join(work, "data", "fortunes"))
    else:
        subprocess.run([binary, "prepare", "--input", "/usr/share/games/fortunes",
                        "--out", os.path.join(work, "data", "fortunes")], check=True, stdout=subprocess.DEVNULL)
    return work, bin_dir


def documents():
    """README.md, then docs/*.md in name order."""
    docs = sorted(glob.glob(os.path.join(repo, "docs", "*.md")))
    return ["README.md"] + [os.path.relpath(d, repo) for d in docs]


def run_examples(doc, work, env):
    with open(os.path.join(repo, doc)) as f:
        cases = examples(f.read())
    for line, cmd, shown in cases:
        name = f"{doc}:{line}: {cmd if len(cmd) < 90 else cmd[:87] + '...'}"
        try:
            r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env, capture_output=True,
                               text=True, timeout=900)
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: still running after 900 s")
            continue
        if r.returncode != 0:
            print(f"FAIL {name}: exit {r.returncode}")
            print("\n".join("    " + l for l in (r.stdout + r.stderr).splitlines()[-5:]))
            continue
        missing = matches(shown, (r.stdout + r.stderr).splitlines())
        if missing is not None:
            print(f"FAIL {name}: the output lacks the line {missing!r} that {doc} shows")
            print("\n".join("    " + l for l in r.stdout.splitlines()[-8:]))
        else:
            print(f"PASS {name}")


def check_documents():
    for doc in documents():
        broken = doc_links.broken_links(os.path.join(repo, doc))
        print(f"FAIL the links of {doc}: " + "; ".join(broken) if broken else f"PASS the links of {doc}")
    docs = [os.path.join(repo, doc) for doc in documents()[1:]]
    unlinked = [os.path.relpath(d, repo) for d in doc_links.unlinked(os.path.join(repo, "README.md"), docs)]
    name = "the README links every docs/*.md"
    print(f"FAIL {name}: not {', '.join(unlinked)}" if unlinked else f"PASS {name}")
    missing = deps_listed.unlisted(os.path.join(repo, "scripts", "deps.sh"),
                                   os.path.join(repo, "docs", "dependencies.md"))
    name = "docs/dependencies.md names every package scripts/deps.sh installs"
    print(f"FAIL {name}: not {', '.join(missing)}" if missing else f"PASS {name}")


def main():
    check_documents()
    sys.stdout.flush()
    work, bin_dir = scratch_dir()
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    if os.getuid() == 0:  # what the README tells root users to set
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for doc in documents():
        run_examples(doc, work, env)


if __name__ == "__main__":
    sys.exit(main())
