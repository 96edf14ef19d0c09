"""The series file and the patches it lists: parsing, trailers, hunks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .config import Package
from .errors import ForkError

REQUIRED_TRAILERS = ("Bug", "Forwarded")
KNOWN_TRAILERS = (
    "Bug",
    "Origin",
    "Depends",
    "Forwarded",
    "Applied-Upstream",
    "Signed-off-by",
    "Co-authored-by",
)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$")


def key(name: str) -> str:
    """A patch's name without its number and suffix: stable when the series is renumbered.

    ``Depends:`` trailers and the upstream material kept beside a patch use it."""
    return re.sub(r"^\d{4}-", "", name.removesuffix(".patch"))


def read_series(pkg: Package) -> list[str]:
    """Patch file names, in order. Blank lines and '#' comments are ignored."""
    if not pkg.series_file.is_file():
        raise ForkError(f"{pkg.series_file}: missing series file")
    names = []
    for n, line in enumerate(pkg.series_file.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "/" in line or not line.endswith(".patch"):
            raise ForkError(f"{pkg.series_file}:{n}: '{line}' is not a patch file name")
        names.append(line)
    return names


def series_header(pkg: Package) -> str:
    """The comment lines at the top of the series file, kept on export."""
    if not pkg.series_file.is_file():
        return ""
    lines = []
    for line in pkg.series_file.read_text().splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


@dataclass
class Hunk:
    old_start: int
    header: str


@dataclass
class Patch:
    path: Path
    subject: str
    message: str
    trailers: dict[str, list[str]]
    files: dict[str, list[Hunk]] = field(default_factory=dict)  # a/ path -> hunks

    @property
    def name(self) -> str:
        return self.path.name


def parse(path: Path) -> Patch:
    text = path.read_text()
    if not text.startswith("From "):
        raise ForkError(f"{path.name}: not in git format-patch form (no 'From ' header line)")
    head, sep, rest = text.partition("\n\n")
    subject = ""
    # a long header is folded onto indented continuation lines (RFC 2822, as git format-patch
    # writes a long subject): unfold it before reading it
    for line in re.sub(r"\n[ \t]+", " ", head).splitlines():
        if line.startswith("Subject: "):
            subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", line[len("Subject: ") :])
    if not sep or not subject:
        raise ForkError(f"{path.name}: no Subject header")
    message, _, diff = rest.partition("\n---\n")
    if not diff:
        raise ForkError(f"{path.name}: no '---' line between the message and the diff")
    trailers: dict[str, list[str]] = {}
    paragraphs = message.strip().split("\n\n")
    for line in paragraphs[-1].splitlines() if paragraphs else []:
        m = _TRAILER.match(line.strip())
        if m:
            trailers.setdefault(m.group(1), []).append(m.group(2).strip())
    patch = Patch(path, subject, message, trailers)
    current: list[Hunk] | None = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" ")
            current = patch.files.setdefault(parts[2], [])
        elif current is not None and (m := _HUNK.match(line)):
            current.append(Hunk(int(m.group(1)), line))
    if not patch.files:
        raise ForkError(f"{path.name}: contains no diff")
    return patch


def problems(pkg: Package, patch: Patch) -> list[str]:
    """What makes a patch break our conventions (empty when it follows them)."""
    out = []
    for name in REQUIRED_TRAILERS:
        if not patch.trailers.get(name):
            out.append(f"{patch.name}: missing '{name}:' trailer (see CONTRIBUTING.md)")
    prefix = f"a/{pkg.monorepo_path}/"
    for f in patch.files:
        if not f.startswith(prefix) and f != "/dev/null":
            out.append(f"{patch.name}: path {f} is not under {prefix} (use upstream monorepo paths)")
    return out


def locate_failure(patch: Patch, git_output: str) -> str:
    """Turn git's 'patch failed: FILE:LINE' into 'file FILE, hunk #N (@@ ... @@)'."""
    m = re.search(r"patch failed: (\S+):(\d+)", git_output)
    if m:
        file, line = m.group(1), int(m.group(2))
        hunks = patch.files.get(f"a/{file}", [])
        for i, h in enumerate(hunks, 1):
            if h.old_start == line:
                return f"file {file}, hunk #{i} ({h.header.split(' @@')[0]} @@)"
        return f"file {file}, at line {line}"
    m = re.search(
        r"error: (\S+): (does not exist in index|No such file or directory|already exists in working directory)",
        git_output,
    )
    if m:
        return f"file {m.group(1)}: {m.group(2)}"
    return git_output.strip().splitlines()[-1] if git_output.strip() else "git gave no reason"
