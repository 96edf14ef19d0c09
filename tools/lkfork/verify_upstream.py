"""verify-upstream: each PR's upstream test, run in an upstream checkout, red on stock and
green patched; and upstream's whole suite with no test that passes on stock failing patched.

The checkout is only read: its ``tests/`` folder and ``pyproject.toml`` (upstream's pytest
configuration) are exported into ``build/verify/checkout``, our test is copied in beside
upstream's helpers for the run and removed after. Two environments are made with uv:
``stock`` (the pinned releases from the package index) and ``patched`` (the same, with our
wheels installed over them: for a PR, built from the release plus the PR and what it
depends on; for the suite, the whole series of every package).

Each PR's result goes to its ``VERIFIED.md``. The suite's goes to one file, ``SUITE_RECORD``,
with the fingerprint of the wheels it ran: builds are reproducible, so a regrouped series that
builds the same code keeps its record, and any change to the code makes it stale
(``export-upstream`` then says so).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from . import gitutil, prs
from .build import build_one
from .config import Package, load_packages
from .errors import ForkError

REQUIREMENTS = Path("envs/upstream-tests/requirements.in")
SUITE_RECORD = Path("docs/upstream-suite.md")
_FINGERPRINT = "Wheels (sha256 of their names and contents): "


@dataclass
class Outcome:
    """What one pytest run gave, per test id."""

    results: dict[str, str] = field(default_factory=dict)  # id -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)

    def count(self, state: str) -> int:
        return sum(1 for s in self.results.values() if s == state)

    def summary(self) -> str:
        parts = [f"{self.count(s)} {s}" for s in ("passed", "failed", "error", "skipped") if self.count(s)]
        return ", ".join(parts) or "no tests"


def parse_junit(path: Path) -> Outcome:
    out = Outcome()
    if not path.is_file():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        state, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = {"failure": "failed"}.get(child.tag, child.tag)
                message = (child.get("message") or "").splitlines()[0] if child.get("message") else ""
                break
        out.results[tid] = state
        out.messages[tid] = message
    return out


def _uv() -> str:
    uv = shutil.which("uv")
    if not uv:
        raise ForkError("verify-upstream needs uv on PATH to make its test environments")
    return uv


def _run(
    cmd: list[str], cwd: Path | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def export_checkout(source: Path, dest: Path) -> str:
    """Upstream's tests and pytest configuration from ``source`` (a git repository, bare or
    not, whose HEAD is used; or a plain directory) into ``dest``. Returns what was used."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    probe = gitutil.git(source, "rev-parse", "HEAD", check=False)
    if probe.returncode == 0:
        commit = probe.stdout.strip()
        with tempfile.TemporaryDirectory() as tmp:
            tar = Path(tmp) / "t.tar"
            gitutil.git(source, "archive", "-o", str(tar), commit, "tests", "pyproject.toml")
            proc = _run(["tar", "-xf", str(tar), "-C", str(dest)])
            if proc.returncode != 0:
                raise ForkError(f"cannot unpack upstream's tests: {proc.stderr.strip()}")
        return f"upstream commit {commit[:12]}"
    if not (source / "tests").is_dir() or not (source / "pyproject.toml").is_file():
        raise ForkError(f"{source}: not an upstream checkout (no tests/ and pyproject.toml)")
    shutil.copytree(source / "tests", dest / "tests")
    shutil.copy(source / "pyproject.toml", dest / "pyproject.toml")
    return f"upstream checkout {source}"


def _requirements(root: Path, pkgs: list[Package]) -> list[str]:
    """Our packages at their pins (with the extras ``extras <distribution>: a,b`` lines name),
    then the other requirements of the file, as they are."""
    path = root / REQUIREMENTS
    if not path.is_file():
        raise ForkError(f"{REQUIREMENTS}: missing (what upstream's tests need to run)")
    extras: dict[str, str] = {}
    reqs = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("extras "):
            dist, _, names = line[len("extras ") :].partition(":")
            extras[dist.strip()] = names.strip()
        elif line:
            reqs.append(line)
    unknown = set(extras) - {p.distribution for p in pkgs}
    if unknown:
        raise ForkError(f"{REQUIREMENTS}: extras for {', '.join(sorted(unknown))}, which we do not ship")
    ours = [
        f"{p.distribution}{f'[{extras[p.distribution]}]' if p.distribution in extras else ''}=={p.version}"
        for p in pkgs
    ]
    return ours + reqs


def make_env(path: Path, requirements: list[str], python: str) -> Path:
    uv = _uv()
    if path.exists():
        shutil.rmtree(path)
    for cmd in (
        [uv, "venv", "-q", "--python", python, str(path)],
        [uv, "pip", "install", "-q", "--python", str(path / "bin/python"), *requirements],
    ):
        proc = _run(cmd)
        if proc.returncode != 0:
            raise ForkError(f"cannot make the test environment {path.name}:\n{proc.stderr.strip()}")
    return path / "bin/python"


def build_wheel(pkg: Package, names: list[str] | None, scratch: Path, out: Path) -> Path:
    """A wheel of ``pkg`` patched with ``names`` (in series order), or with its whole series."""
    (wheel,) = [p for p in build_one(pkg, scratch, out, names=names) if p.name.endswith(".whl")]
    return wheel


def install(python: Path, wheels: list[Path]) -> None:
    proc = _run(
        [
            _uv(),
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--reinstall",
            "--python",
            str(python),
            *map(str, wheels),
        ]
    )
    if proc.returncode != 0:
        raise ForkError(f"cannot install {', '.join(w.name for w in wheels)}:\n{proc.stderr.strip()}")


def pytest(python: Path, checkout: Path, args: list[str], junit: Path, timeout: float) -> Outcome:
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", *args]
    try:
        _run(cmd, cwd=checkout, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ForkError(f"pytest {' '.join(args)} ran over {timeout:.0f} s in {checkout}") from None
    return parse_junit(junit)


# "<X object at 0x7f...>": a different address every run, so the record would change each time;
# pytest's shortened repr keeps only its end ("<livekit.age...7fc77d0d32c0>")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+|(?<=\.\.\.)[0-9a-f]+(?=>)")


def fingerprint(wheels: list[Path]) -> str:
    """One hash of a set of wheels, whatever their order."""
    h = hashlib.sha256()
    for wheel in sorted(wheels, key=lambda w: w.name):
        h.update(f"{wheel.name} {hashlib.sha256(wheel.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


def series_wheels(root: Path, scratch: Path) -> list[Path]:
    """The wheels of every package we ship, each with its whole series."""
    dist = scratch / "all"
    dist.mkdir()
    return [build_wheel(p, None, scratch, dist) for p in load_packages(root)]


def suite_record(root: Path, wheels: list[Path]) -> str | None:
    """The recorded suite result line, if it was run on exactly these wheels."""
    path = root / SUITE_RECORD
    if not path.is_file():
        return None
    text = path.read_text()
    if f"{_FINGERPRINT}{fingerprint(wheels)}" not in text:
        return None
    return next((line for line in text.splitlines() if line.startswith("- ")), None)


@dataclass
class PRResult:
    pr: prs.PR
    stock: Outcome
    patched: Outcome

    @property
    def ok(self) -> bool:
        # red on stock by a failing test (an error in setup or collection proves nothing),
        # and every test green with the patch
        return (
            self.stock.count("failed") > 0
            and self.stock.count("error") == 0
            and bool(self.patched.results)
            and all(s == "passed" for s in self.patched.results.values())
        )

    def report(self) -> str:
        # why each test failed on stock: the reader checks it failed for the bug
        why = {}
        for t, s in sorted(self.stock.results.items()):
            if s == "failed":
                message = _ADDRESS.sub("", self.stock.messages.get(t, ""))[:160]
                why[t.rpartition("::")[2]] = message or "no message"
        stock = f"- stock: {self.stock.summary()}"
        lines = [stock]
        if len(why) == 1:
            lines[0] += f" ({next(iter(why.values()))})"
        else:
            lines += [f"  - `{t}`: {m}" for t, m in why.items()]
        lines.append(f"- patched: {self.patched.summary()}")
        return "\n".join(lines)


def select(pkgs: list[Package], only: list[str] | None) -> list[tuple[Package, prs.PR]]:
    """The PRs of ``pkgs`` to verify, in series order: all of them, or those ``only`` names.

    A name is a patch's file name, its name without number (its key), or its number
    (``0010`` or ``10``). A number names a patch in each package: when it names more than one,
    the package must be given too. A name that matches nothing is an error."""
    every = [(pkg, pr) for pkg in pkgs for pr in prs.load(pkg)]
    if not only:
        return every
    chosen: set[str] = set()
    problems = []
    for want in only:
        want = want.strip().removesuffix(".patch")
        if want.isdigit():
            hits = [(pkg, pr) for pkg, pr in every if int(pr.name[:4]) == int(want)]
        else:
            hits = [(pkg, pr) for pkg, pr in every if want in (pr.name.removesuffix(".patch"), pr.key)]
        if not hits:
            problems.append(f"--only {want}: no patch of {', '.join(p.distribution for p in pkgs)}")
        elif len(hits) > 1:
            which = ", ".join(f"{pkg.distribution} {pr.name}" for pkg, pr in hits)
            problems.append(f"--only {want}: names more than one patch ({which}); give the package")
        else:
            chosen.add(f"{hits[0][0].distribution}/{hits[0][1].name}")
    if problems:
        raise ForkError("\n  ".join(problems))
    return [(pkg, pr) for pkg, pr in every if f"{pkg.distribution}/{pr.name}" in chosen]


def run(
    root: Path,
    pkgs: list[Package],
    checkout_src: Path,
    *,
    suite: bool = False,
    record: bool = False,
    python: str | None = None,
    timeout: float = 3600,
    test_timeout: float = 120,
    only: list[str] | None = None,
) -> bool:
    chosen = select(pkgs, only)  # before the environments: a wrong name fails at once
    work = root / "build" / "verify"
    work.mkdir(parents=True, exist_ok=True)
    checkout = work / "checkout"
    source = export_checkout(checkout_src, checkout)
    print(f"upstream tests from {source}")
    python = python or sys.executable
    everything = load_packages(root)  # the environments hold every package we ship
    reqs = _requirements(root, everything)
    stock_py = make_env(work / "stock", reqs, python)
    patched_py = make_env(work / "patched", reqs, python)
    today = datetime.date.today().isoformat()
    ok = True
    results: list[PRResult] = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        scratch = Path(tmp)
        for pkg, pr in chosen:
            if not pr.tests:
                print(f"{pr.name}: no upstream test")
                ok = False
                continue
            out = scratch / f"wheel-{pr.key}"
            out.mkdir()
            install(patched_py, [build_wheel(pkg, [*pr.depends, pr.name], scratch, out)])
            copied = []
            for test in (*pr.tests, *pr.support):
                target = checkout / "tests" / test.name
                if target.exists():
                    raise ForkError(f"{test.name}: upstream's tests/ already has a file of that name")
                shutil.copy(test, target)
                copied.append(target)
            args = [f"tests/{t.name}" for t in pr.tests]
            try:
                stock = pytest(stock_py, checkout, args, scratch / f"{pr.key}-stock.xml", timeout)
                patched = pytest(patched_py, checkout, args, scratch / f"{pr.key}-patched.xml", timeout)
            finally:
                for c in copied:
                    c.unlink()
            result = PRResult(pr, stock, patched)
            results.append(result)
            ok &= result.ok
            print(f"{pr.name}: {'ok' if result.ok else 'FAILED'}\n{result.report()}")
            # back to stock for the next PR
            proc = _run(
                [
                    _uv(),
                    "pip",
                    "install",
                    "-q",
                    "--reinstall",
                    "--no-deps",
                    "--python",
                    str(patched_py),
                    f"{pkg.distribution}=={pkg.version}",
                ]
            )
            if proc.returncode != 0:
                raise ForkError(f"cannot reinstall stock {pkg.distribution}:\n{proc.stderr.strip()}")
        suite_text = ""
        if suite:
            wheels = series_wheels(root, scratch)
            install(patched_py, wheels)
            # a test that hangs fails on its own (on both builds) instead of holding the run
            args = ["tests", "--continue-on-collection-errors", f"--timeout={test_timeout:g}"]
            # the two builds at once: each run is long and single-threaded, and they share
            # nothing but the checkout, which pytest only reads
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                stock_run = pool.submit(
                    pytest, stock_py, checkout, args, scratch / "suite-stock.xml", timeout
                )
                patched_run = pool.submit(
                    pytest, patched_py, checkout, args, scratch / "suite-patched.xml", timeout
                )
                stock, patched = stock_run.result(), patched_run.result()
            broken = sorted(
                t for t, s in stock.results.items() if s == "passed" and patched.results.get(t) != "passed"
            )
            both = sum(
                1 for t, s in stock.results.items() if s == "passed" and patched.results.get(t) == "passed"
            )
            suite_line = (
                f"upstream's suite, whole series applied: {both} pass on stock and patched, "
                f"{len(broken)} pass on stock only"
            )
            # what each build ran: a run cut short (no report, or fewer tests) shows here
            ran = f"  - stock: {stock.summary()}\n  - patched: {patched.summary()}"
            print(f"{suite_line}\n{ran}")
            for t in broken:
                print(f"  passes on stock, not patched: {t} ({patched.results.get(t, 'missing')})")
            ok &= not broken and bool(stock.results) and bool(patched.results)
            suite_text = (
                f"On {today}, {source}, with `lkfork verify-upstream --suite`:\n- {suite_line}\n"
                f"{ran}\n\n{_FINGERPRINT}{fingerprint(wheels)}\n"
            )
    if record:
        for r in results:
            text = f"On {today}, {source}, with `lkfork verify-upstream`:\n{r.report()}\n"
            if r.ok:
                (r.pr.folder / "VERIFIED.md").write_text(text)
            else:
                (r.pr.folder / "VERIFIED.md").unlink(missing_ok=True)
        if suite_text:
            # a failed suite is recorded too: the record says what it found
            (root / SUITE_RECORD).parent.mkdir(parents=True, exist_ok=True)
            (root / SUITE_RECORD).write_text(suite_text)
    return ok
