from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli, make_repo

from engram.api import Engram
from engram.base.errors import AmbiguousIdError, NotFoundError, UsageError


def event_lines(engram: Engram) -> int:
    return sum(len(p.read_bytes().splitlines()) for s in engram.stores() for p in s.event_files())


def test_remember_then_get_returns_every_field(home_store: Engram) -> None:
    memory = home_store.remember(
        "Run the migrations before the tests",
        kind="procedure",
        tags=["DB", "tests,ci"],
        scope="backend/api",
        source="user-said",
        importance=0.9,
        valid_from="2026-01-01",
        valid_until="2099-01-01",
    )
    got = Engram().get(memory.id[:6])
    assert got.content == "Run the migrations before the tests"
    assert (got.kind, got.scope, got.source, got.importance) == (
        "procedure",
        "backend/api",
        "user-said",
        0.9,
    )
    assert got.tags == ("db", "tests", "ci")
    assert got.valid_from == "2026-01-01T00:00:00.000000Z"
    assert got.store == "personal" and got.version == 1 and got.status == "active"


def test_superseded_memories_are_marked_with_what_replaced_them(home_store: Engram) -> None:
    old = home_store.remember("Use MySQL for the job queue", kind="decision").memory
    new = home_store.remember(
        "Use Postgres for the job queue", kind="decision", supersedes=[old.id]
    ).memory
    gone = home_store.remember("The queue runs on Redis", kind="fact").memory
    home_store.forget(gone.id, reason="no longer")
    mark = f"[superseded by {new.id[:8]}]"
    for command in (("list", "--all"), ("recall", "--all", "queue")):
        lines = {line[:8]: line for line in cli(*command).stdout.splitlines()}
        assert lines[old.id[:8]].endswith(mark), command
        assert lines[gone.id[:8]].endswith("[forgotten]"), command
        assert "[" not in lines[new.id[:8]], command
    for command in (
        ("list", "--all"),
        ("recall", "--all", "queue"),
        ("recall", "--all", "queue", "--full"),
    ):
        found = {m["id"]: m for m in json.loads(cli(*command, "--json").stdout)}
        assert found[old.id]["status"] == "superseded", command
        assert found[old.id]["superseded_by"] == new.id, command
        assert found[new.id]["status"] == "active", command
    assert f"status:     superseded by {new.id}" in cli("get", old.id[:8]).stdout.splitlines()


def test_update_and_forget_are_new_events_and_history_keeps_every_version(
    home_store: Engram,
) -> None:
    memory = home_store.remember("Deploys go out on Tuesdays", kind="convention")
    home_store.update(memory.id, "Deploys go out on Thursdays", tags=["deploy"])
    home_store.forget(memory.id, reason="we deploy continuously now")
    engram = Engram()
    assert engram.memories() == []
    assert [m.id for m in engram.memories(include_forgotten=True)] == [memory.id]
    versions = engram.history(memory.id)
    assert [e.kind for e, _ in versions] == ["memory.created", "memory.updated", "memory.forgotten"]
    assert [m.content for _, m in versions] == [
        "Deploys go out on Tuesdays",
        "Deploys go out on Thursdays",
        "Deploys go out on Thursdays",
    ]
    assert versions[-1][1].forgotten_reason == "we deploy continuously now"
    assert event_lines(engram) == 4  # store.created + three


def test_forgotten_memories_do_not_come_back_with_a_concurrent_update(home_store: Engram) -> None:
    memory = home_store.remember("temporary")
    home_store.forget(memory.id, reason="wrong")
    with pytest.raises(UsageError, match="was forgotten"):
        home_store.update(memory.id, "resurrected?")


def test_supersede_replaces_a_memory_with_its_kind_tags_and_task(home_store: Engram) -> None:
    engram = home_store
    task = engram.task_create("Move the API")
    old = engram.remember(
        "The API listens on port 8080",
        kind="convention",
        tags=["api"],
        scope="backend",
        importance=0.8,
        task=task.id,
    ).memory
    done = engram.supersede(old.id[:6], "The API listens on port 9090")
    assert done.old.id == old.id and done.old.status == "superseded"
    assert done.new.content == "The API listens on port 9090"
    assert (done.new.kind, done.new.tags, done.new.scope, done.new.importance, done.new.task) == (
        "convention",
        old.tags,
        "backend",
        0.8,
        task.id,
    )
    assert [m.id for m in engram.memories()] == [done.new.id]


def test_list_is_newest_first_and_filters(home_store: Engram) -> None:
    a = home_store.remember("a", kind="decision", tags=["db"], scope="backend")
    b = home_store.remember("b", kind="gotcha", tags=["db", "ci"])
    c = home_store.remember("c", kind="decision")
    engram = Engram()
    assert [m.id for m in engram.memories()] == [c.id, b.id, a.id]
    assert [m.id for m in engram.memories(limit=2)] == [c.id, b.id]
    assert [m.id for m in engram.memories(kinds=["decision"])] == [c.id, a.id]
    assert [m.id for m in engram.memories(tags=["db"])] == [b.id, a.id]
    assert [m.id for m in engram.memories(tags=["db", "ci"])] == [b.id]
    assert [m.id for m in engram.memories(scope="backend")] == [a.id]
    home_store.update(a.id, "a, revised")
    assert [m.id for m in Engram().memories()][0] == a.id


def test_memories_outside_their_validity_window_drop_out(home_store: Engram) -> None:
    past = home_store.remember("expired", valid_until="2020-01-01")
    future = home_store.remember("not yet", valid_from="2999-01-01")
    now = home_store.remember("current", valid_from="2020-01-01", valid_until="2999-01-01")
    engram = Engram()
    assert [m.id for m in engram.memories()] == [now.id]
    assert {m.id for m in engram.memories(include_expired=True)} == {past.id, future.id, now.id}
    assert past.id not in [h.memory.id for h in engram.recall("expired")]
    assert past.id in [h.memory.id for h in engram.recall("expired", include_expired=True)]
    with pytest.raises(UsageError, match="later than"):
        home_store.remember("backwards", valid_from="2030-01-01", valid_until="2029-01-01")


def test_short_prefixes_resolve_and_ambiguity_is_explained(home_store: Engram) -> None:
    memory = home_store.remember("unique")
    assert Engram().get(memory.id[:4]).id == memory.id
    with pytest.raises(NotFoundError, match="no memory with id 'zzzzzzzz'"):
        Engram().get("zzzzzzzz")
    with pytest.raises(UsageError, match="too short"):
        Engram().get("ab")
    # Two memories sharing a prefix: force it by writing ids by hand.
    engram = Engram()
    store = engram.write_store()
    from engram.storage import events as ev

    with store.lock():
        for suffix in ("aaaa", "bbbb"):
            store.append(
                [
                    ev.Event(
                        id=ev.new_event_id(),
                        kind="memory.created",
                        clock=store.next_clock(),
                        time=ev.format_time(ev.utc_now()),
                        actor="t",
                        session=None,
                        machine="m",
                        data={"memory": "qqqqqqqq" + suffix, "content": suffix},
                    )
                ]
            )
    with pytest.raises(AmbiguousIdError) as info:
        Engram().get("qqqqqqqq")
    assert info.value.candidates == ["qqqqqqqqaaaa", "qqqqqqqqbbbb"]
    assert "give more characters" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "content is empty"),
        ({"content": "   \n "}, "content is empty"),
        ({"content": "x" * 40000}, "over the limit of 32768"),
        ({"content": "bell\x07"}, "control character"),
        ({"content": "bad \udcff surrogate"}, "not valid UTF-8"),
        ({"content": "ok", "kind": "rumour"}, "unknown memory kind"),
        ({"content": "ok", "source": "someone"}, "unknown source"),
        ({"content": "ok", "importance": 1.5}, "from 0 to 1"),
        ({"content": "ok", "tags": ["has space"]}, "may hold only"),
        ({"content": "ok", "tags": [f"t{i}" for i in range(40)]}, "over the limit of 32"),
        ({"content": "ok", "scope": "../etc"}, "must not be an absolute path"),
        ({"content": "ok", "scope": "/abs/path"}, "must not be an absolute path"),
        ({"content": "ok", "valid_from": "next tuesday"}, "is not a date"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    home_store: Engram,
    kwargs: dict,
    message: str,
) -> None:
    before = event_lines(home_store)
    content = kwargs.pop("content")
    with pytest.raises(UsageError, match=message):
        home_store.remember(content, **kwargs)
    assert event_lines(home_store) == before


def test_writes_go_to_the_project_store_and_reads_cover_both(
    tmp_path: Path, home_store: Engram
) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    personal = Engram(cwd=repo, use="personal").remember(
        "I like short functions", kind="preference"
    )
    shared = Engram(cwd=repo).remember("This repo uses tabs", kind="convention")
    assert shared.store == "project" and personal.store == "personal"
    both = Engram(cwd=repo)
    assert {m.id for m in both.memories()} == {personal.id, shared.id}
    assert [m.id for m in Engram(cwd=repo, use="project").memories()] == [shared.id]
    assert [m.id for m in Engram(cwd=repo, use="personal").memories()] == [personal.id]
    assert Engram(cwd=repo).get(personal.id[:6]).store == "personal"


def test_an_update_that_ends_a_memory_in_the_past_says_it_is_expired(home_store: Engram) -> None:
    memory = home_store.remember("The staging database is Postgres 14").memory
    home_store.warnings.clear()
    home_store.update(memory.id, valid_until="2001-01-01")
    assert [w for w in home_store.warnings if "expired already" in w] == [
        "the memory is valid until 2001-01-01, which has passed: it is expired already, "
        "and recall and lists leave it out (give a later date, or none)"
    ]
    home_store.warnings.clear()
    home_store.update(memory.id, valid_until="2999-01-01")
    assert not [w for w in home_store.warnings if "expired already" in w]
