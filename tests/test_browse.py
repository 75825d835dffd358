"""`engram browse --html`: one self-contained page to search, filter and read the memories,
tasks and handoffs; checked as written, and in headless Chromium with typing in its search box."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, foreign_events

from engram.api import Engram

FIXTURES = Path(__file__).parent.parent / "fixtures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture
def stores(home_store: Engram) -> Engram:
    home_store.remember("Use PKCE for the OAuth flow", kind="decision", tags=["auth"])
    old = home_store.remember("Tokens live in localStorage", kind="fact", tags=["auth"]).memory
    home_store.forget(old.id, reason="moved to an httpOnly cookie")
    home_store.remember("Deploys need the staging queue drained", kind="procedure", scope="deploy")
    task = home_store.task_create("Add OAuth login", goal="Users sign in with GitHub")
    home_store.failure(task.id, "Callback returns 500", root_cause="state cookie missing")
    home_store.handoff(task.id, summary="Callback next", next=["Write the callback handler"])
    return home_store


def write_page(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "page" / "memories.html"
    out.parent.mkdir(exist_ok=True)
    result = cli("browse", "--html", str(out), *args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"wrote {out} (3 memories, 1 tasks, 1 handoffs)")
    assert list(out.parent.iterdir()) == [out]
    return out.read_text()


def test_the_page_holds_every_memory_task_and_handoff_and_loads_nothing(
    stores: Engram, tmp_path: Path
) -> None:
    page = write_page(tmp_path)
    for needle in ("<link", " src=", "http://", "https://", "@import", "url("):
        assert needle not in page, needle
    assert page.count("<style>") == 1 and page.count("<script>") == 1
    assert page.count('<li class="item memory card') == 3
    assert page.count('<li class="item task card"') == 1
    assert "Use PKCE for the OAuth flow" in page
    # A forgotten memory is there, marked, with its history: created, then forgotten.
    forgotten = re.search(
        r'<li class="item memory card fact"[^>]*data-status="forgotten".*?'
        r"</li>",
        page,
        re.DOTALL,
    )
    assert forgotten is not None and "history (2 events)" in forgotten.group(0)
    assert "moved to an httpOnly cookie" in forgotten.group(0)
    assert "Callback returns 500 — cause: state cookie missing" in page
    assert "Write the callback handler" in page and "Callback next" in page
    for name, value in (
        ("kind", "procedure"),
        ("tag", "auth"),
        ("scope", "deploy"),
        ("store", "personal"),
        ("status", "forgotten"),
    ):
        assert re.search(
            rf'<select data-filter="{name}">.*?<option value="{value}">', page, re.DOTALL
        ), name


@pytest.mark.parametrize(
    "command",
    [
        ("browse", "--html", "OUT"),
        ("timeline", "TASK", "--html", "OUT"),
        ("export", "OUT"),
        ("export", "--format", "markdown", "OUT"),
    ],
)
def test_a_missing_folder_is_refused_not_created(
    stores: Engram, tmp_path: Path, command: tuple[str, ...]
) -> None:
    task = stores.tasks()[0].id
    typo = tmp_path / "reprots" / "2026"
    out = typo / "out"
    args = [{"OUT": str(out), "TASK": task}.get(a, a) for a in command]
    result = cli(*args)
    assert result.exit_code == 2
    assert result.output == f"error: {typo} does not exist; create it first\n"
    assert not (tmp_path / "reprots").exists()  # nothing written, no folder made
    typo.mkdir(parents=True)
    assert cli(*args).exit_code == 0  # a Markdown export makes its own directory, OUT
    assert out.exists()


def test_store_text_is_escaped(home_store: Engram, tmp_path: Path) -> None:
    home_store.remember("<script>alert(1)</script> & <img src=x onerror=alert(2)>")
    home_store.task_create('"><b>bold</b>')
    home_store.remember("total \u202e0001$ due")
    foreign_events(
        home_store.personal.root,
        {  # another clone's push: not checked as a write
            "kind": "memory.created",
            "actor": "Eve <eve@example.com>",
            "data": {
                "memory": "eeee00000001",
                "content": "paid\x1b[31m in full",
                "kind": "fact",
                "tags": [],
                "scope": None,
                "source": "agent-inferred",
                "importance": 0.5,
                "valid_from": None,
                "valid_until": None,
            },
        },
    )
    out = tmp_path / "b.html"
    assert cli("browse", "--html", str(out)).exit_code == 0
    page = out.read_text()
    assert "<script>alert(1)" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x" in page
    assert page.count("<script>") == 1
    # Bidi overrides and terminal escapes cannot reorder or hide text: shown as escapes.
    assert "\u202e" not in page and "\x1b" not in page
    assert "total \\u202e0001$ due" in page and "paid\\x1b[31m in full" in page
    assert "Eve &lt;eve@example.com&gt;" in page


def test_imported_memories_of_another_tool_can_be_browsed(
    home_store: Engram, tmp_path: Path
) -> None:
    home_store.import_from(FIXTURES / "engram-go" / "engram-export.json")
    out = tmp_path / "b.html"
    assert cli("browse", "--html", str(out)).exit_code == 0
    page = out.read_text()
    assert "Idempotency keys for charges" in page and "#project:payments-api" in page
    assert "about 2026-02-20 09:30:12 UTC" in page


def test_without_a_store_it_says_what_to_do(tmp_path: Path) -> None:
    result = cli("browse", "--html", str(tmp_path / "b.html"))
    assert result.exit_code != 0 and "engram init" in result.stderr
    assert not (tmp_path / "b.html").exists()


def _browser() -> str | None:
    import shutil

    chosen = os.environ.get("ENGRAM_CHROMIUM")
    if chosen:
        return chosen
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class DevTools:
    """Chromium driven over its DevTools pipe (--remote-debugging-pipe: fd 3 in, fd 4 out)."""

    def __init__(self, browser: str, profile: Path) -> None:
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()
        # Out of the way of 3 and 4, where the child wants them.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)

        def wire() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4, *high),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in high:
            os.close(fd)
        self._buffer = b""
        self._next = 0
        self.session: str | None = None

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next:
                    assert "error" not in reply, reply
                    return reply["result"]
            chunk = os.read(self._read, 65536)
            if not chunk:
                raise AssertionError("the browser closed its DevTools pipe")
            self._buffer += chunk
        raise AssertionError(f"no answer to {method}")

    def evaluate(self, expression: str) -> Any:
        return self.send("Runtime.evaluate", expression=expression, returnByValue=True)[
            "result"
        ].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)


@pytest.mark.slow
def test_typing_in_the_search_box_filters_the_list_in_headless_chromium(
    stores: Engram, tmp_path: Path
) -> None:
    browser = _browser()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run should have installed it")
        pytest.skip(
            "chromium is not installed (apt-get install chromium), or set "
            "ENGRAM_CHROMIUM to a Chromium or Chrome binary"
        )
    out = tmp_path / "memories.html"
    assert cli("browse", "--html", str(out)).exit_code == 0
    tools = DevTools(browser, tmp_path / "profile")
    try:
        target = tools.send("Target.createTarget", url=out.as_uri())["targetId"]
        tools.session = tools.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for _ in range(100):
            if tools.evaluate("document.body && document.body.dataset.ready") == "1":
                break
            time.sleep(0.1)
        visible = (
            "Array.from(document.querySelectorAll('li.card'))"
            ".filter(c => !c.hidden && c.offsetParent !== null)"
            ".map(c => c.querySelector('.title').textContent)"
        )
        assert len(tools.evaluate(visible)) == 4
        tools.evaluate("document.getElementById('q').focus()")
        tools.send("Input.insertText", text="oauth")
        # The decision and the task mention OAuth; the rest are hidden.
        assert sorted(tools.evaluate(visible)) == ["Add OAuth login", "Use PKCE for the OAuth flow"]
        assert tools.evaluate("document.getElementById('shown').textContent") == "2"
        tools.send("Input.insertText", text=" pkce")
        assert tools.evaluate(visible) == ["Use PKCE for the OAuth flow"]
        tools.evaluate("var q = document.getElementById('q'); q.select()")
        tools.send(
            "Input.dispatchKeyEvent",
            type="keyDown",
            key="Backspace",
            code="Backspace",
            windowsVirtualKeyCode=8,
        )
        tools.send(
            "Input.dispatchKeyEvent",
            type="keyUp",
            key="Backspace",
            code="Backspace",
            windowsVirtualKeyCode=8,
        )
        assert len(tools.evaluate(visible)) == 4
        tools.evaluate(
            "var s = document.querySelector('select[data-filter=status]');"
            "s.value = 'forgotten'; s.dispatchEvent(new Event('change'))"
        )
        assert tools.evaluate(visible) == ["Tokens live in localStorage"]
        tools.send("Input.insertText", text="nothing like this")
        assert tools.evaluate(visible) == []
        assert tools.evaluate("document.getElementById('none').hidden") is False
    finally:
        tools.close()
