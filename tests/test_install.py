"""The documented install, followed step by step from a fresh home: `engram` ends up on the PATH
it sets up, and the client pages show what `engram mcp install` writes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engram import __version__

ROOT = Path(__file__).parent.parent


def install_blocks() -> list[str]:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    section = page.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, re.DOTALL)


@pytest.mark.slow
def test_the_documented_venv_install_puts_engram_on_the_path_of_a_fresh_home(
    tmp_path: Path,
) -> None:
    """The fallback steps, run as written: only the checkout's path is filled in, and (to stay
    hermetic) the new environment sees this one's packages, so pip installs the project alone
    (with --no-deps) and needs the network for nothing but its build backend."""
    steps = next(b for b in install_blocks() if "python3 -m venv" in b)
    assert "/path/to/engram" in steps and steps.rstrip().endswith("engram --version")
    home = tmp_path / "fresh"
    home.mkdir()
    site = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    venv = "python3 -m venv ~/.local/engram"
    script = steps.replace(
        venv,
        venv
        + "\n"
        + (
            "~/.local/engram/bin/python -c 'import sys, sysconfig; "
            'open(sysconfig.get_path("purelib") + "/these-packages.pth", "w")'
            ".write(sys.argv[1])' " + shlex.quote("\n".join(site))
        ),
    )
    script = script.replace(
        "pip install -q /path/to/engram", f"pip install -q --no-deps {shlex.quote(str(ROOT))}"
    )
    python = Path(sys.executable).parent  # a python3 first on PATH, as a user has
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(
        HOME=str(home),
        PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(python / "python3")
    assert (
        subprocess.run(["bash", "-c", "command -v engram"], env=env, capture_output=True).returncode
        == 1
    )
    done = subprocess.run(
        ["bash", "-e", "-c", script], env=env, cwd=home, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == f"engram, version {__version__}", done.stdout
    assert (
        'add ~/.local/bin to your PATH: put export PATH="$HOME/.local/bin:$PATH" in '
        "~/.profile" in lines
    )
    assert (home / ".local" / "bin" / "engram").resolve() == (
        home / ".local" / "engram" / "bin" / "engram"
    ).resolve()
    # Installed from the checkout into the new environment, not read from the checkout.
    where = subprocess.run(
        [str(home / ".local" / "bin" / "engram"), "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    found = subprocess.run(
        [
            str(home / ".local" / "engram" / "bin" / "python"),
            "-c",
            "import engram; print(engram.__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.stdout.startswith(str(home / ".local" / "engram")), found.stdout
    # With ~/.local/bin on the PATH already, the steps say nothing about it.
    env["PATH"] = f"{home / '.local' / 'bin'}:{env['PATH']}"
    again = subprocess.run(
        ["bash", "-e", "-c", script], env=env, cwd=home, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    assert "add ~/.local/bin" not in again.stdout


def test_the_codex_page_shows_what_a_user_install_writes() -> None:
    """The user table names this installation's console script by its path, the project table
    the engram on the PATH; scripts/gen_cli_docs.py fills both in from the installer."""
    page = (ROOT / "docs" / "clients" / "codex.md").read_text()
    user = page.split("<!-- install: codex -->", 1)[1].split("<!-- /install -->", 1)[0]
    assert 'command = "/home/you/.local/engram/bin/engram"\n' in user
    assert 'args = ["serve", "--agent", "codex"]' in user
    project = page.split("<!-- install: codex --project -->", 1)[1].split("<!-- /install -->")[0]
    assert 'command = "engram"\nargs = ["serve", "--agent", "codex"]' in project
