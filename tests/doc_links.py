"""Checks the links of a Markdown file: every relative link names a file or folder that exists, and
every #anchor names a heading of the Markdown file it points into (GitHub's heading anchors).
Links in code (fenced blocks and `spans`) are text, not links, and web addresses are not followed."""
import os
import re

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def without_fences(text):
    return re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)


def prose(text):
    """The text without its fenced code blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", without_fences(text))


def anchors(text):
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as
    hyphens, and -1, -2 ... after a repeated one."""
    seen, out = {}, set()
    for heading in re.findall(r"^#+ +(.*?) *$", without_fences(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def broken_links(path):
    """Each link of the file at path that does not resolve, with why."""
    with open(path) as f:
        text = f.read()
    out = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(where):
            out.append(f"{target}: no such file")
        elif anchor and where.endswith(".md"):
            with open(where) as f:
                if anchor not in anchors(f.read()):
                    out.append(f"{target}: no heading with the anchor #{anchor}")
    return out


def unlinked(path, targets):
    """The files of targets that the Markdown file at path does not link to."""
    with open(path) as f:
        text = f.read()
    linked = {os.path.normpath(os.path.join(os.path.dirname(path), target.partition("#")[0]))
              for target in LINK.findall(prose(text))}
    return [t for t in targets if os.path.normpath(t) not in linked]
