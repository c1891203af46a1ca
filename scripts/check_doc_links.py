#!/usr/bin/env python3
"""Checks the links between README.md and docs/*.md (and any other Markdown file they link to).

Every relative link [text](path#anchor) in those files must name a file of the repository, and an
anchor must be a heading of the target file, slugged as GitHub does (lower case, punctuation but
- and _ dropped, spaces to -; a repeated heading gets -1, -2, ...). Absolute URLs (scheme://,
mailto:) are not checked. Links inside code fences and inline code are ignored.

Usage: scripts/check_doc_links.py [--root DIR] [FILE ...]   Exit 0 when every link works, else 1
with one line per broken link (file:line: link: why). Standard library only.
"""

import argparse
import glob
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    for line in strip_code(read(path), inline=False):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def strip_code(lines, inline=True):
    """The lines with fenced code blocks blanked and, when `inline`, inline code removed (line
    numbers kept). Headings keep their inline code: GitHub slugs its text (`poll.interval` ->
    pollinterval)."""
    out = []
    fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
            continue
        out.append("" if fence else re.sub(r"`[^`]*`", "", line) if inline else line)
    return out


def check(root, path, problems):
    rel = os.path.relpath(path, root)
    for n, line in enumerate(strip_code(read(path)), 1):
        for m in LINK.finditer(line):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: {target}: {os.path.relpath(dest, root)} does not exist")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}:{n}: {target}: no heading #{anchor} in "
                                f"{os.path.relpath(dest, root)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or [os.path.join(args.root, "README.md")] + sorted(
        glob.glob(os.path.join(args.root, "docs", "*.md")))
    problems = []
    for path in files:
        check(args.root, os.path.abspath(path), problems)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"doc links ok: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
