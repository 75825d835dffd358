from __future__ import annotations

import time

import pytest

from engram.storage import events as ev


def make_event(**overrides: object) -> ev.Event:
    fields = dict(id=ev.new_event_id(), kind="memory.created", clock=ev.next_clock(0),
                  time=ev.format_time(ev.utc_now()), actor="a <a@x>", session=None,
                  machine="m", data={"memory": ev.new_entity_id(), "content": "é ✓"})
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
    assert ev.next_clock(0, now_us=now) == now
    assert ev.next_clock(now + 50, now_us=now) == now + 51
    assert ev.next_clock(now, observed=now + 1000, now_us=now) == now + 1001


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
