"""Command line: ``lkfork <verb> [package ...]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import (
    build,
    check,
    export,
    export_upstream,
    fetch,
    index,
    pin,
    prepare,
    rebase,
    status,
    verify_upstream,
)
from .config import find_root, load_packages
from .errors import ForkError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lkfork", description="Patch queue for the livekit-agents fork.")
    p.add_argument("--root", type=Path, help="repository root (default: found from the current directory)")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        if name in ("upstream-status", "rebase"):
            sp.add_argument("version", help="the other upstream release, e.g. 1.9.0")
        if name != "pin":
            sp.add_argument("packages", nargs="*", help="distribution names (default: all)")
        return sp

    verb("fetch", "download the pinned sdists into the cache and verify their sha256").add_argument(
        "--index-url", help="package index to use (default: as pip/uv are configured)"
    )
    verb("prepare", "make build/work/<package>, a git tree with each patch as a commit").add_argument(
        "--force", action="store_true", help="discard uncommitted or unexported work in the tree"
    )
    verb("export", "write the work tree's commits back to patches/ and series")
    verb("build", "build the patched wheels and sdists into dist/").add_argument(
        "--dist", type=Path, help="output directory (default: <root>/dist)"
    )
    verb("check", "verify the series: listed files, trailers, exact application, export round trip")
    verb("index", "write a PEP 503 simple index of dist/").add_argument("--dist", type=Path)
    verb(
        "export-upstream", "each patch as a git am series plus PR.md, verified on the pinned release"
    ).add_argument("--out", type=Path, help="output directory (default: <root>/build/upstream)")
    sp = verb(
        "verify-upstream",
        "each PR's upstream test in an upstream checkout: red on stock, green patched; --suite: "
        "upstream's whole suite, nothing that passes on stock fails patched",
    )
    sp.add_argument("--checkout", type=Path, required=True, help="upstream's repository (git, bare or not)")
    sp.add_argument("--suite", action="store_true", help="also run upstream's whole suite on both builds")
    sp.add_argument("--record", action="store_true", help="write each PR's result to its VERIFIED.md")
    sp.add_argument("--python", help="interpreter for the test environments (default: this one)")
    sp.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds one pytest run may take (default 3600; upstream's whole suite needs more on a "
        "small machine)",
    )
    sp.add_argument(
        "--test-timeout",
        type=float,
        default=120,
        help="seconds one test of upstream's suite may take before it fails (default 120)",
    )
    sp.add_argument(
        "--only",
        action="append",
        metavar="PATCH",
        help="verify only this PR: the patch's name, its name without number, or its number "
        "(repeatable; with a number, give the package when several have one)",
    )
    sp = verb("upstream-status", "per patch: applies, applies with 3-way, already upstream, or conflicts")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.add_argument("--index-url")
    verb("rebase", "move the series onto another upstream release and pin it").add_argument("--index-url")
    sp = verb("pin", "pin a package to another upstream release")
    sp.add_argument("package")
    sp.add_argument("version")
    sp.add_argument("--index-url")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        root = (args.root or find_root()).resolve()
        if args.verb == "pin":
            pin.run(load_packages(root, [args.package])[0], args.version, args.index_url)
            return 0
        pkgs = load_packages(root, args.packages)
        if args.verb == "fetch":
            fetch.run(pkgs, args.index_url)
        elif args.verb == "prepare":
            prepare.run(pkgs, force=args.force)
        elif args.verb == "export":
            export.run(pkgs)
        elif args.verb == "build":
            for path in build.run(pkgs, args.dist or root / "dist"):
                print(f"  {path.relative_to(root) if path.is_relative_to(root) else path}")
        elif args.verb == "check":
            check.run(pkgs)
        elif args.verb == "index":
            index.run(args.dist or root / "dist")
        elif args.verb == "export-upstream":
            export_upstream.run(pkgs, args.out)
        elif args.verb == "verify-upstream":
            ok = verify_upstream.run(
                root,
                pkgs,
                args.checkout,
                suite=args.suite,
                record=args.record,
                python=args.python,
                timeout=args.timeout,
                test_timeout=args.test_timeout,
                only=args.only,
            )
            return 0 if ok else 1
        elif args.verb == "upstream-status":
            rows = status.run(pkgs, args.version, as_json=args.json, index=args.index_url)
            return 3 if any(r.state == "conflicts" for r in rows) else 0
        elif args.verb == "rebase":
            for pkg in pkgs:
                rebase.run(pkg, args.version, args.index_url)
    except ForkError as e:
        print(f"lkfork: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
