"""The repository stands alone (issue 31 §5): no tracked file sends the reader outside it — not to
team documents beside the checkout, not to absolute paths of the machine it was written on, not
through a relative link that climbs out of the repository."""

import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Built from pieces so that this file does not match itself.
_UP = re.escape("..") + "/"
OUTSIDE = [
    (re.compile(_UP + "shared"), "a directory beside the checkout"),
    (re.compile(r"\b(API|DESIGN|CONVENTIONS)" + re.escape(".md") + r"\b"), "a document that is not in the repository"),
    (re.compile("/" + "work/(shared|main|wt)" + r"(?=[/\s'\"`)]|$)"), "an absolute path of the machine the docs were written on"),
    (re.compile("/" + r"work/\.(library|mirror)"), "an absolute path of the machine the docs were written on"),
]
# The checkout's own absolute path: a file that names it works only in this checkout (unless a
# pattern above already catches it: then a line naming it would count twice).
if not any(pattern.search(REPO) for pattern, _ in OUTSIDE):
    OUTSIDE.append((re.compile(re.escape(REPO) + r"(?![\w.-])"), "this checkout's absolute path"))
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files():
    out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def references_outside(path, text):
    """(path:line, what, the line) for each reference outside the repository in one file."""
    found = []
    for n, line in enumerate(text.split("\n"), 1):
        for pattern, what in OUTSIDE:
            if pattern.search(line):
                found.append(f"{path}:{n}: {what}: {line.strip()[:160]}")
        if path.endswith(".md"):
            for target in MD_LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                    continue  # a URL (http:, mailto:) or an anchor
                if target.startswith("/"):
                    found.append(f"{path}:{n}: a link to an absolute path: {target}")
                    continue
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
                if resolved == ".." or resolved.startswith("../"):
                    found.append(f"{path}:{n}: a link that leaves the repository: {target}")
    return found


def test_no_tracked_file_refers_outside_the_repository():
    found = []
    for path in tracked_files():
        full = os.path.join(REPO, path)
        if not os.path.isfile(full) or os.path.islink(full):
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue  # binary
        found += references_outside(path, data.decode("utf-8", errors="replace"))
    assert not found, "references outside the repository:\n" + "\n".join(found)


def test_relative_links_of_the_docs_lead_to_tracked_files():
    tracked = set(tracked_files())
    tracked_dirs = {os.path.dirname(p) for p in tracked}
    missing = []
    for path in tracked:
        if not path.endswith(".md"):
            continue
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for target in MD_LINK.findall(line):
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
                        continue
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
                    if resolved not in tracked and resolved not in tracked_dirs and not resolved.startswith(".."):
                        missing.append(f"{path}:{n}: {target}")
    assert not missing, "links to files that are not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("text, expected", [
    ("see " + ".." + "/shared/" + "API" + ".md", 2),
    ("The design is in " + "DESIGN" + ".md", 1),
    ("cat /" + "work/shared/notes", 1),
    ("[x](../../elsewhere.md)", 1),
    ("sandfort exec sbx -- ls /work/src", 0),             # /work inside a sandbox is not the host's
    ("tar member shared/lib.so", 0),
    ("upload_file(\"/work/main.py\", source)", 0),
    ("cd /" + "work/main && make", 1),
])
def test_the_check_tells_inside_from_outside(text, expected):
    assert len(references_outside("docs/x.md", text)) == expected, references_outside("docs/x.md", text)
