"""`engram timeline`: a task's history in the terminal and as one self-contained HTML page."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import cli, foreign_events

from engram.api import Engram
from engram.storage import events as ev

FIXTURES = Path(__file__).parent.parent / "fixtures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture
def history(home_store: Engram, monkeypatch: pytest.MonkeyPatch) -> str:
    """Two agents on two machines work on one task, one after the other."""
    ada = Engram(actor="Ada <ada@example.com>")
    first = ada.session_start(agent="claude-code")
    task = ada.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    ada.progress(task.id, "Register the OAuth app", component="auth")
    ada.failure(
        task.id,
        "Callback returns 500: state mismatch",
        component="auth",
        root_cause="the session cookie is not set before the redirect",
        fix="set it before redirecting",
    )
    ada.handoff(
        task.id,
        summary="App registered; callback next",
        next=["Write the callback handler"],
        must_not_redo=["Create the OAuth app"],
    )
    ada.session_end(outcome="failure", session_id=first.id)
    monkeypatch.setenv("ENGRAM_MACHINE", "desktop")
    bo = Engram(actor="Bo <bo@example.com>")
    second = bo.session_start(agent="codex")
    bo.remember("Use PKCE for the OAuth flow", kind="decision", task=task.id)
    bo.progress(task.id, "Write the callback handler", component="auth")
    bo.handoff(
        task.id,
        summary="Callback works; tests next",
        next=["Write callback tests"],
        must_preserve=["Do not touch the main branch"],
    )
    bo.session_end(outcome="success", session_id=second.id)
    return task.id


def test_text_timeline_shows_what_happened_in_order_by_whom_and_where(history: str) -> None:
    result = cli("timeline", history[:6])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert text.startswith(f"task {history[:8]}  Add OAuth login  [in_progress]")
    order = [
        "started (claude-code)",
        "created: Add OAuth login",
        "[done] Register the OAuth app",
        "[auth] Callback returns 500",
        "checkpoint 1 (failure)",
        "checkpoint 2 (handoff): App registered; callback next",
        "ended (failure",
        "started (codex)",
        "Use PKCE for the OAuth flow",
        "[done] Write the callback handler",
        "(handoff): Callback works; tests next",
        "ended (success",
    ]
    positions = [text.index(item) for item in order]
    assert positions == sorted(positions)
    assert "— Ada <ada@example.com> on testbox, session" in text
    assert "— Bo <bo@example.com> on desktop, session" in text
    # The handoff fields that changed between checkpoints, field by field.
    assert "next steps: + Write callback tests" in text
    assert "next steps: − Write the callback handler" in text
    assert "must preserve: + Do not touch the main branch" in text
    assert "root cause: the session cookie is not set before the redirect" in text


def test_json_timeline_has_items_and_sessions(history: str) -> None:
    import json

    data = json.loads(cli("timeline", history, "--json").stdout)
    categories = [item["category"] for item in data["items"]]
    # Two handoffs, and the automatic checkpoints of a failure and of a plan change.
    assert categories.count("checkpoint") == 4 and categories.count("failure") == 1
    assert {s["state"] for s in data["sessions"]} == {"ended"}
    assert {(s["actor"], s["machine"]) for s in data["sessions"]} == {
        ("Ada <ada@example.com>", "testbox"),
        ("Bo <bo@example.com>", "desktop"),
    }


def test_html_timeline_is_one_self_contained_file(history: str, tmp_path: Path) -> None:
    out = tmp_path / "page" / "timeline.html"
    out.parent.mkdir()
    result = cli("timeline", history, "--html", str(out))
    assert result.exit_code == 0, result.stderr
    assert list(out.parent.iterdir()) == [out]
    page = out.read_text()
    # Nothing is loaded from anywhere: no links, no sources, no URLs, no imports.
    for needle in ("<link", " src=", "http://", "https://", "@import", "url("):
        assert needle not in page, needle
    assert page.count("<style>") == 1 and page.count("<script>") == 1 and "<svg" in page
    assert page.count('<li class="item checkpoint"') == 4
    assert page.count('<li class="item failure"') == 1
    assert page.count('class="mark checkpoint"') == 4
    assert "Callback returns 500: state mismatch" in page
    assert "Handoff fields, checkpoint by checkpoint" in page
    assert "Ada &lt;ada@example.com&gt;" in page and "on desktop" in page


def test_text_is_escaped_in_the_html(home_store: Engram, tmp_path: Path) -> None:
    task = home_store.task_create("<script>alert(1)</script>")
    home_store.failure(task.id, "broke on <b>bold</b> & co")
    out = tmp_path / "t.html"
    assert cli("timeline", task.id, "--html", str(out)).exit_code == 0
    page = out.read_text()
    assert "<script>alert(1)</script>" not in page and "<b>bold</b>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page


def test_bidi_overrides_are_shown_as_escapes_in_the_html(
    home_store: Engram, tmp_path: Path
) -> None:
    """As in the browse page: a right-to-left override in someone's progress note cannot
    reorder what the page shows around it."""
    task = home_store.task_create("Pay the invoice")
    home_store.progress(task.id, "total \u202e0001$ due")
    out = tmp_path / "t.html"
    assert cli("timeline", task.id, "--html", str(out)).exit_code == 0
    page = out.read_text()
    assert "\u202e" not in page
    assert "total \\u202e0001$ due" in page


def test_an_unknown_task_is_a_one_line_error(home_store: Engram) -> None:
    result = cli("timeline", "nope-not-a-task")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: no task with id")


def test_imported_history_has_a_timeline(home_store: Engram) -> None:
    home_store.import_from(FIXTURES / "mcp-engram")
    [task] = Engram().tasks(include_closed=True)
    text = cli("timeline", task.id).stdout
    assert "interrupted: rate_limit" in text
    assert "checkpoint 3 (handoff): Middleware done; Redis pool next" in text
    assert "— mcp-engram:default" in text


def _browser() -> str | None:
    chosen = os.environ.get("ENGRAM_CHROMIUM")
    if chosen:
        return chosen
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


@pytest.mark.slow
def test_html_timeline_renders_in_headless_chromium(history: str, tmp_path: Path) -> None:
    browser = _browser()
    if browser is None:
        if os.environ.get("CI"):  # CI installs it (.ci/run): missing there is a failure
            pytest.fail("chromium is not installed; .ci/run should have installed it")
        pytest.skip(
            "chromium is not installed (apt-get install chromium), or set "
            "ENGRAM_CHROMIUM to a Chromium or Chrome binary"
        )
    artifacts = Path(os.environ.get("ENGRAM_TEST_ARTIFACTS") or tmp_path / "artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    page = artifacts / "timeline.html"
    assert cli("timeline", history, "--html", str(page)).exit_code == 0
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1280,1600",
    ]
    done = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    # The page's script ran to the end, and every event was laid out as a mark on the chart.
    events = len(Engram().timeline(history).items)
    assert f'data-rendered="{events}"' in body.group(0)
    assert f'data-marks="{events}"' in body.group(0)
    assert len(re.findall(r'<li class="item checkpoint"', dom)) == 4
    assert len(re.findall(r'<li class="item failure"', dom)) == 1
    assert re.search(r'class="count" data-category="failure">1<', dom)
    assert "Callback returns 500: state mismatch" in dom
    shot = artifacts / "timeline.png"
    done = subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 1600)
    assert len(data) > 20_000  # a page with text and a chart, not a blank one


@pytest.fixture
def time_zone() -> Iterator[Callable[[str], None]]:
    """Set this process's local time zone (TZ) for the rest of the test."""
    saved = os.environ.get("TZ")

    def use(name: str) -> None:
        os.environ["TZ"] = name
        time.tzset()

    yield use
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


def test_events_at_the_ends_of_time_are_shown_with_their_dates(
    home_store: Engram, tmp_path: Path, time_zone: Callable[[str], None]
) -> None:
    """Another clone's events dated 9999-12-31 and 0001-01-01 (valid RFC 3339 times): the
    timeline renders, in any time zone, with their real dates; on the chart they sit at the
    edges of an axis that still spans the other events."""
    task = home_store.task_create("Add OAuth login")
    now = datetime.now(UTC)
    ends = {"9999-12-31T23:59:59.999999Z": "far future", "0001-01-01T00:00:00.000000Z": "far past"}
    foreign_events(
        home_store.write_store().root,
        *(
            {
                "kind": "task.progress",
                "time": when,
                "data": {"task": task.id, "feature": feature, "status": "done"},
            }
            for when, feature in [
                *ends.items(),
                (ev.format_time(now - timedelta(days=2)), "two days ago"),
                (ev.format_time(now - timedelta(days=1)), "yesterday"),
            ]
        ),
    )
    for zone in ("UTC", "Asia/Tokyo", "America/New_York"):
        time_zone(zone)
        text = cli("timeline", task.id)
        assert text.exit_code == 0, text.output
        assert re.search(
            r"^9999-12-31 \d\d:\d\d( UTC)?  • progress   \[done\] far future$",
            text.stdout,
            re.MULTILINE,
        ), text.stdout
        assert re.search(
            r"^0001-01-0[12] \d\d:\d\d( UTC)?  • progress   \[done\] far past$",
            text.stdout,
            re.MULTILINE,
        ), text.stdout
        assert cli("log").exit_code == 0
        out = tmp_path / f"{zone.replace('/', '-')}.html"
        result = cli("timeline", task.id, "--html", str(out))
        assert result.exit_code == 0, result.output
    page = out.read_text()
    for when in ends:
        assert f'<time datetime="{when}">{when[:10]} {when[11:19]} UTC</time>' in page
    marks = {
        title: float(x)
        for title, x in re.findall(
            r'<title>[^<]*?: \[done\] ([^<]+)</title><circle class="mark progress" cx="([\d.]+)"',
            page,
        )
    }
    assert marks["far past (off the time axis)"] == marks["two days ago"] == 240.0
    assert marks["far future (off the time axis)"] == 1066.0
    assert 600 < marks["yesterday"] < 700  # half-way: the axis still spans the others
