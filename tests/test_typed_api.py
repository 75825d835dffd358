"""The public API's type hints reach a user's own type checker: `engram` ships `py.typed`, so
`mypy --strict` reads its annotations instead of skipping the package as untyped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
from engram import Engram, NotFoundError
from engram.api import Remembered, VerifyReport


def main() -> None:
    with Engram() as engram:
        remembered: Remembered = engram.remember("Use Postgres", kind="decision")
        content: str = remembered.memory.content
        report: VerifyReport = engram.verify()
        ok: bool = report.ok
        for hit in engram.recall("postgres", k=3):
            print(hit.memory.id, content, ok)
        try:
            engram.get("zzzz")
        except NotFoundError as error:
            print(error)
"""


def test_mypy_strict_checks_a_script_against_the_api(tmp_path: Path) -> None:
    (tmp_path / "use_engram.py").write_text(SCRIPT)
    (tmp_path / "wrong.py").write_text(SCRIPT.replace("ok: bool = ", "ok: str = "))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def mypy(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    good = mypy("use_engram.py")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = mypy("wrong.py")
    assert bad.returncode == 1
    assert '(expression has type "bool", variable has type "str")' in bad.stdout
