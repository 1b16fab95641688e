"""The packages scripts/deps.sh installs, Debian's and PyPI's, and which of them a Markdown file
leaves out: docs/dependencies.md must name every one."""
import re


def installed(deps_sh):
    """The package names of the script's `apt-get install` and `pip install` commands."""
    with open(deps_sh) as f:
        script = f.read().replace("\\\n", " ")
    names = []
    for line in script.splitlines():
        command = re.search(r"(apt-get install|pip install)\s(.*?)(>|$)", line)
        if command:
            names += [word for word in command.group(2).split() if not word.startswith("-")]
    return names


def unlisted(deps_sh, doc):
    """The packages deps_sh installs that the file doc does not name."""
    with open(doc) as f:
        text = f.read()
    return [name for name in installed(deps_sh)
            if not re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w.-])", text)]
