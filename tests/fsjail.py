"""Real file-system failures for tests: a directory on a read-only mount, or on a full disk.

A private mount namespace (`unshare --mount`) holds a read-only bind mount, or a small tmpfs, over
one directory; a sleeping process keeps the namespace alive and commands run inside it through
`nsenter`. Outside the namespace the directory is as it was, so a test can compare before and
after. Mounting needs CAP_SYS_ADMIN: root (as in a container) has it; elsewhere the tests that
need it are skipped, and read-only falls back to taking write permission away (`chmod -R a-w`),
which stops a process that is not root.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).parent.parent

_MANY = """
import json, os, sys
from click.testing import CliRunner
from engram.cli.main import main
out = []
for command in json.loads(sys.argv[1]):
    if command[0] == "!rm":
        os.remove(command[1])
        continue
    result = CliRunner().invoke(main, command, catch_exceptions=True)
    crash = None if result.exception is None or isinstance(result.exception, SystemExit) \\
        else repr(result.exception)
    out.append({"code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                "crash": crash})
print(json.dumps(out))
"""


def can_mount() -> bool:
    if not (shutil.which("unshare") and shutil.which("nsenter") and shutil.which("mount")):
        return False
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs -o size=16k tmpfs /mnt 2>/dev/null || "
            "mount -t tmpfs -o size=16k tmpfs /tmp",
        ],
        capture_output=True,
        timeout=10,
    )
    return done.returncode == 0


class Jail:
    """A mount namespace in which `path` is mounted differently."""

    def __init__(self, holder: subprocess.Popen[str] | None, path: Path) -> None:
        self.holder = holder
        self.path = path

    def _prefix(self) -> list[str]:
        if self.holder is None:
            return []
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--"]

    def run(
        self,
        *argv: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._prefix(), *argv],
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )

    def engram(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "engram", *args, **kwargs)  # type: ignore[arg-type]

    def engram_many(self, *commands: tuple[str, ...]) -> list[dict[str, object]]:
        """Several `engram` commands in one process (one start-up), each as the CLI runs it:
        exit code, stdout and stderr. A command ("!rm", path) removes a file instead."""
        done = self.run(sys.executable, "-c", _MANY, json.dumps(commands))
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        return json.loads(done.stdout)

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        return self.run("sh", "-c", script)

    def inside(self, path: Path) -> Path:
        """`path` as the namespace sees it, readable from outside."""
        if self.holder is None:
            return path
        return Path(f"/proc/{self.holder.pid}/root{path.resolve()}")


@contextmanager
def _namespace(path: Path, setup: str) -> Iterator[Jail]:
    holder = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"{setup} && echo ready && exec sleep 3600",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        ready = holder.stdout.readline().strip()
        if ready != "ready":
            raise RuntimeError(f"could not mount: {holder.stderr.read() if holder.stderr else ''}")
        yield Jail(holder, path)
    finally:
        holder.kill()
        holder.wait()


@contextmanager
def read_only(path: Path) -> Iterator[Jail]:
    """`path` on a read-only file system (EROFS), or write-protected (EACCES) without mounts."""
    if can_mount():
        where = shlex.quote(str(path.resolve()))
        with _namespace(
            path, f"mount --bind {where} {where} && mount -o remount,bind,ro {where}"
        ) as jail:
            yield jail
        return
    if os.geteuid() == 0:
        raise RuntimeError("root without CAP_SYS_ADMIN: nothing can make a directory read-only")
    subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
    try:
        yield Jail(None, path)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(path)], check=True)


@contextmanager
def small_disk(path: Path, kilobytes: int) -> Iterator[Jail]:
    """An empty tmpfs of `kilobytes` mounted on `path` (writes past it fail with ENOSPC)."""
    where = shlex.quote(str(path.resolve()))
    with _namespace(path, f"mount -t tmpfs -o size={kilobytes}k tmpfs {where}") as jail:
        yield jail
