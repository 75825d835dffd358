"""Engram's dataclasses are compiled once per Python: a later process runs the kept code, the
classes it defines are the same, and a cache file that is damaged or that others could have
written is never run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import orjson
import pytest

from engram.base import classcode

PROBE = """
import dataclasses, inspect, json
import engram.api, engram.model.freshness as f
from engram.base import classcode

c = f.Citation(path="src/app.py", blob="a" * 40, commit="b" * 40)
same = f.Citation(path="src/app.py", blob="a" * 40, commit="b" * 40)
try:
    c.path = "elsewhere"
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(json.dumps({
    "compiled": classcode.compiled,
    "used": sum(len(c) for c in classcode._codes.values()),
    "repr": repr(c), "equal": c == same, "hash": hash(c) == hash(same), "frozen": frozen,
    "signature": str(inspect.signature(f.Citation)),
    "fields": [x.name for x in dataclasses.fields(f.Citation)],
}))
"""


def probe(cache: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = orjson.loads(done.stdout)
    assert isinstance(found, dict)
    return found


def cache_file(cache: Path) -> Path:
    (found,) = (cache / "engram").glob("classcode-*.marshal")
    return found


def test_a_second_process_compiles_none_of_the_methods_the_first_did(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = probe(cache)
    assert isinstance(first["compiled"], int) and first["compiled"] > 10
    assert stat.S_IMODE(cache_file(cache).stat().st_mode) == 0o600
    second = probe(cache)
    assert second["compiled"] == 0
    assert second["used"] == first["used"]
    # ... and the classes it defines behave as those compiled in place.
    keys = ("repr", "equal", "hash", "frozen", "signature", "fields")
    assert {k: second[k] for k in keys} == {k: first[k] for k in keys}
    assert first["frozen"] is True and first["equal"] is True


@pytest.mark.parametrize("damage", ["garbage", "not a mapping", "writable by others"])
def test_a_cache_file_that_cannot_be_trusted_is_not_run(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    probe(cache)
    path = cache_file(cache)
    if damage == "garbage":
        path.write_bytes(b"\x00\xffnot marshal at all")
    elif damage == "not a mapping":
        import marshal

        path.write_bytes(marshal.dumps([compile("print('run')", "<x>", "exec")]))
    else:
        path.chmod(0o666)
    again = probe(cache)
    assert isinstance(again["compiled"], int) and again["compiled"] > 10  # compiled anew
    assert again["repr"].startswith("Citation(path='src/app.py'")  # type: ignore[union-attr]
    if damage != "writable by others":
        assert probe(cache)["compiled"] == 0  # the file was written again, whole


def test_classes_of_other_modules_are_left_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("not_engram_at_all")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    source = "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
    before = classcode.compiled
    exec(compile(source, "<probe>", "exec"), module.__dict__)
    assert classcode.compiled == before and module.__name__ not in classcode._codes
    assert module.Point(1, 2) == module.Point(1, 2)


def test_an_mcp_server_ended_by_a_signal_has_kept_its_classes(tmp_path: Path) -> None:
    """A client ends its server with SIGTERM or a kill, which `atexit` never sees: the server
    keeps its code as soon as it is built."""
    import marshal
    import signal
    import time

    from test_mcp import SERVE_MODULE

    cache = tmp_path / "cache"
    server = subprocess.Popen(
        [sys.executable, "-m", SERVE_MODULE, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )
    try:
        deadline = time.monotonic() + 60
        while not list((cache / "engram").glob("classcode-*.marshal")):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.1)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
    modules = marshal.loads(cache_file(cache).read_bytes())
    assert any(name.startswith("engram.mcp") for name in modules)
