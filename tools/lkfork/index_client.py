"""Find a release's sdist on the package index the user's pip/uv is configured for."""

from __future__ import annotations

import configparser
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from .config import normalize
from .errors import ForkError

DEFAULT_INDEX = "https://pypi.org/simple/"
_TIMEOUT = 60


def configured_index() -> str:
    """The primary index URL, as uv or pip would pick it (ours, uv's, then pip's settings)."""
    for var in ("LKFORK_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(var):
            return os.environ[var].split()[0]
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), Path.home() / ".pip" / "pip.conf"]
    files.append(Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "pip" / "pip.conf")
    if os.environ.get("VIRTUAL_ENV"):
        files.append(Path(os.environ["VIRTUAL_ENV"]) / "pip.conf")
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    url = DEFAULT_INDEX
    for f in files:  # later files override earlier ones, as in pip
        parser = configparser.ConfigParser()
        try:
            parser.read(f)
        except configparser.Error:
            continue
        for section in ("global", "download", "install"):
            if parser.has_option(section, "index-url"):
                url = parser.get(section, "index-url").split()[0]
    return url


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = ""

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, self._text.strip()))
            self._href = None


def _open(url: str, accept: str | None = None) -> tuple[bytes, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:  # noqa: S310 - index URLs are the user's
        return resp.read(), resp.headers.get("Content-Type", "")


def project_files(distribution: str, index: str | None = None) -> list[IndexFile]:
    """Every file the index lists for a project (PEP 691 JSON, or PEP 503 HTML)."""
    base = (index or configured_index()).rstrip("/") + "/"
    page = urllib.parse.urljoin(base, normalize(distribution) + "/")
    if page.startswith("file:"):
        page += "index.html"
    try:
        body, ctype = _open(page, "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise ForkError(f"{distribution} is not on the package index {base}") from None
        raise ForkError(f"package index {base} answered {e.code} for {distribution}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ForkError(f"cannot reach the package index {base}: {getattr(e, 'reason', e)}") from None
    files = []
    if "json" in ctype:
        for f in json.loads(body)["files"]:
            files.append(
                IndexFile(
                    f["filename"], urllib.parse.urljoin(page, f["url"]), f.get("hashes", {}).get("sha256")
                )
            )
        return files
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text in parser.links:
        url, _, frag = href.partition("#")
        m = re.fullmatch(r"sha256=([0-9a-f]{64})", frag)
        name = text or urllib.parse.unquote(url.rsplit("/", 1)[-1])
        files.append(IndexFile(name, urllib.parse.urljoin(page, url), m.group(1) if m else None))
    return files


def find_sdist(distribution: str, filename: str, version: str, index: str | None = None) -> IndexFile:
    files = project_files(distribution, index)
    for f in files:
        if f.filename == filename:
            return f
    versions = sorted(
        {m.group(1) for f in files if (m := re.search(r"-(\d[^-]*?)(\.tar\.gz|-py)", f.filename))}
    )
    near = ", ".join(versions[-8:]) or "none"
    raise ForkError(
        f"{distribution} {version}: no sdist '{filename}' on the package index (latest versions there: {near})"
    )


def download(url: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT) as resp, open(dest, "wb") as out:  # noqa: S310
            while chunk := resp.read(1 << 20):
                out.write(chunk)
    except (urllib.error.URLError, OSError) as e:
        dest.unlink(missing_ok=True)
        raise ForkError(f"download of {url} failed: {getattr(e, 'reason', e)}") from None
