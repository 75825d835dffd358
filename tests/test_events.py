from __future__ import annotations

import time

import pytest

from engram.storage import events as ev


def make_event(**overrides: object) -> ev.Event:
    fields = dict(
        id=ev.new_event_id(),
        kind="memory.created",
        clock=ev.next_clock(0),
        time=ev.format_time(ev.utc_now()),
        actor="a <a@x>",
        session=None,
        machine="m",
        data={"memory": ev.new_entity_id(), "content": "é ✓"},
    )
    fields.update(overrides)
    return ev.Event(**fields)  # type: ignore[arg-type]


def test_event_line_is_canonical_json_and_round_trips() -> None:
    event = make_event()
    line = event.to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert ev.is_canonical(line[:-1])
    assert line.index(b'"actor"') < line.index(b'"clock"') < line.index(b'"data"')
    assert ev.parse_line(line[:-1]) == event


def test_event_ids_are_ulids_that_sort_by_time() -> None:
    first = ev.new_event_id(now_ms=1_000)
    second = ev.new_event_id(now_ms=2_000)
    assert ev.EVENT_ID_RE.match(first) and len(first) == 26
    assert first < second
    assert len({ev.new_event_id() for _ in range(1000)}) == 1000


def test_entity_ids_are_random_so_short_prefixes_differ() -> None:
    ids = [ev.new_entity_id() for _ in range(200)]
    assert all(ev.ENTITY_ID_RE.match(i) for i in ids)
    assert len({i[:6] for i in ids}) == 200


def test_clock_moves_past_wall_time_its_last_value_and_what_it_observed() -> None:
    now = time.time_ns() // 1000
    assert ev.next_clock(0, now=now) == now
    assert ev.next_clock(now + 50, now=now) == now + 51
    assert ev.next_clock(now, observed=now + 1000, now=now) == now + 1001


def test_clock_follows_what_it_observed_only_up_to_the_skew() -> None:
    now = time.time_ns() // 1000
    day = 86_400 * 10**6
    assert ev.next_clock(0, observed=now + day, now=now) == now + ev.MAX_SKEW_US + 1
    assert ev.next_clock(0, observed=now + day, now=now, skew_us=0) == now + 1
    assert ev.next_clock(0, observed=now + 5, now=now, skew_us=0) == now + 1
    assert (
        ev.next_clock(0, observed=now + 60 * 10**6, now=now, skew_us=120 * 10**6)
        == now + 60 * 10**6 + 1
    )
    assert ev.followed(now + day, now, skew_us=10) == now + 10


def test_an_event_with_after_sorts_just_after_it_and_only_then() -> None:
    first = make_event(clock=5_000)
    assert first.order == 5_000 and first.sort_key == (5_000, first.id)
    ahead = make_event(clock=1_000, data={**first.data, "after": 9_000})
    assert ahead.order == 9_001
    behind = make_event(clock=10_000, data={**first.data, "after": 9_000})
    assert behind.order == 10_000  # its own clock is later already
    assert ev.parse_line(ahead.to_line()[:-1]).order == 9_001
    raw = ahead.to_dict()
    for bad in (-1, ev.MAX_CLOCK, "9000", True, 1.5):
        with pytest.raises(ev.EventFormatError, match="malformed 'after'"):
            ev.event_from_dict({**raw, "data": {**raw["data"], "after": bad}})


def test_the_test_clock_offset_moves_every_time_an_event_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ev.TEST_CLOCK_OFFSET, "-900")
    slow = ev.now_us()
    assert abs(time.time_ns() // 1000 - 900 * 10**6 - slow) < 10**6
    assert abs(ev.next_clock(0) - slow) < 10**6
    assert abs(ev.utc_now().timestamp() * 1e6 - slow) < 10**6
    ms = 0
    for char in ev.new_event_id()[:10]:  # a ULID's first ten characters are its milliseconds
        ms = ms * 32 + ev.CROCKFORD.index(char)
    assert abs(ms * 1000 - slow) < 10**6
    for ignored in ("soon", "1e300", "nan", ""):
        monkeypatch.setenv(ev.TEST_CLOCK_OFFSET, ignored)
        assert abs(ev.now_us() - time.time_ns() // 1000) < 10**6


def test_an_imported_event_shows_it_was_imported_and_from_whom() -> None:
    ada = "Ada Lovelace <ada@example.com>"
    assert ev.written_by("Me <me@x>", None) == "Me <me@x>"
    assert (
        ev.written_by("Me <me@x>", {"format": "engram", "id": "x", "actor": ada})
        == f"Me <me@x> (imported from {ada}, from an Engram export)"
    )
    assert (
        ev.written_by("Me <me@x>", {"format": "mcp-engram", "id": "task:1"})
        == "Me <me@x> (imported from mcp-engram)"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json", "invalid JSON"),
        (b"[1,2]", "not an object"),
        (b'{"schema":1}', "field 'id' is missing"),
        (b'{"schema":99,"id":"x"}', "newer than this Engram understands"),
    ],
)
def test_bad_lines_say_what_is_wrong(line: bytes, message: str) -> None:
    with pytest.raises(ev.EventFormatError, match=message):
        ev.parse_line(line)


def test_wrong_field_type_and_unknown_field_are_refused() -> None:
    raw = make_event().to_dict()
    with pytest.raises(ev.EventFormatError, match="clock"):
        ev.event_from_dict({**raw, "clock": "12"})
    with pytest.raises(ev.EventFormatError, match="unknown field"):
        ev.event_from_dict({**raw, "extra": 1})
    with pytest.raises(ev.EventFormatError, match="not a ULID"):
        ev.event_from_dict({**raw, "id": "nope"})


def test_old_schema_is_upgraded_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event written by schema 1 reads as the current schema, through the named upgrades."""
    old = make_event(data={"memory": "abcdefghjkmn", "text": "renamed later"})
    old_line = old.to_line()[:-1]

    def m001_text_to_content(raw: dict) -> dict:
        data = dict(raw["data"])
        data["content"] = data.pop("text")
        return {**raw, "data": data}

    monkeypatch.setattr(ev, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(ev.UPGRADES, 1, m001_text_to_content)
    upgraded = ev.parse_line(old_line)
    assert upgraded.schema == 2
    assert upgraded.data == {"memory": "abcdefghjkmn", "content": "renamed later"}


def test_conflict_markers_are_recognised() -> None:
    assert ev.is_conflict_marker(b"<<<<<<< HEAD")
    assert ev.is_conflict_marker(b"=======")
    assert ev.is_conflict_marker(b">>>>>>> theirs")
    assert not ev.is_conflict_marker(b'{"a":"<<<<<<< "}')
