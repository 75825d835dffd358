"""MCP tool arguments are taken as given or refused: a name no parameter has is an error that
names the closest parameter and all of them, and a boolean or a number must be one (no text
read as true or as a number, no true read as 1). Driven through the SDK's in-process client;
tests/test_mcp.py has a case over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import make_repo
from mcp.client import Client

from engram.api import Engram
from engram.mcp.server import build_server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo")
    Engram(cwd=path).init(project=True)
    return path


def kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a parameter's schema allows (`anyOf` with null included)."""
    found = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf", []):
        found |= kinds(option)
    return found


# For each JSON type, values of other types that lax validation would coerce into it.
WRONG = {
    "boolean": ["yes", "true", 1],
    "integer": ["5", True],
    "number": ["0.9", True],
}
SAYS = {
    "boolean": "is not true or false",
    "integer": "is not a whole number",
    "number": "is not a number",
}


def test_every_tool_refuses_unknown_arguments_and_coerced_types(repo: Path) -> None:
    problems: list[str] = []

    async def scenario() -> None:
        async with Client(build_server(cwd=repo, agent="other")) as client:
            for tool in (await client.list_tools()).tools:
                schema = tool.input_schema
                if schema.get("additionalProperties") is not False:
                    problems.append(f"{tool.name}: the schema allows any other argument")
                names = list(schema.get("properties", {}))
                result = await client.call_tool(tool.name, {"zzz_unknown": 1})
                expected = (
                    f"zzz_unknown: not a parameter of {tool.name}; it takes "
                    f"{', '.join(names) or 'none'}"
                )
                text = result.content[0].text
                if not result.is_error or expected not in text:
                    problems.append(f"{tool.name} with zzz_unknown: {text[:300]!r}")
                for name, prop in schema.get("properties", {}).items():
                    for kind in kinds(prop) & set(WRONG):
                        for value in WRONG[kind]:
                            if kind == "number" and "integer" in kinds(prop):
                                continue
                            result = await client.call_tool(tool.name, {name: value})
                            text = result.content[0].text
                            if not result.is_error or f"{name}: " not in text:
                                problems.append(f"{tool.name} {name}={value!r}: {text[:200]!r}")
                            elif SAYS[kind] not in text:
                                problems.append(f"{tool.name} {name}={value!r}: {text[:200]!r}")

    anyio.run(scenario)
    assert not problems, "\n".join(problems)


def test_a_mistyped_argument_names_the_parameter_meant(repo: Path) -> None:
    async def scenario() -> None:
        async with Client(build_server(cwd=repo, agent="other")) as client:
            result = await client.call_tool(
                "memory_remember", {"content": "Use Postgres", "kidn": "decision"}
            )
            assert result.is_error
            assert result.content[0].text == (
                "Error executing tool memory_remember: kidn: not a parameter of memory_remember "
                "(did you mean kind?); it takes content, kind, tags, scope, importance, source, "
                "task, valid_until, redact, cite"
            )
            cited = await client.call_tool(
                "discovery_record",
                {"content": "x", "citations": [{"path": "README.md", "start_lien": 1}]},
            )
            assert cited.is_error
            assert (
                "citations[0].start_lien: not a field here (did you mean start_line?); it takes "
                "path, start_line, end_line, excerpt"
            ) in cited.content[0].text
            # JSON has one type of number: 5.0 is a whole number where one is due.
            listed = await client.call_tool("memory_list", {"limit": 5.0})
            assert not listed.is_error, listed.content[0].text
            kept = await client.call_tool("memory_remember", {"content": "x y z", "importance": 1})
            assert not kept.is_error, kept.content[0].text

    anyio.run(scenario)
    with Engram(cwd=repo) as engram:
        assert [(m.content, m.kind, m.importance) for m in engram.memories()] == [
            ("x y z", "fact", 1.0)
        ]


def test_consolidate_with_apply_as_text_merges_nothing(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        engram.remember("Restart the worker pool after changing queue settings", kind="decision")
        engram.remember(
            "After changing queue settings, restart the worker pool",
            kind="decision",
            check_duplicates=False,
        )
        before = sorted(m.id for m in engram.memories())
    assert len(before) == 2

    async def scenario() -> None:
        async with Client(build_server(cwd=repo, agent="other")) as client:
            for value in ("yes", "true", 1):
                result = await client.call_tool(
                    "memory_consolidate", {"apply": value, "similarity": 0.3}
                )
                assert result.is_error
                assert "apply: " in result.content[0].text
            planned = await client.call_tool("memory_consolidate", {"similarity": 0.3})
            assert not planned.is_error and planned.structured_content
            assert planned.structured_content["clusters"], "the two would be merged"

    anyio.run(scenario)
    with Engram(cwd=repo) as engram:
        assert sorted(m.id for m in engram.memories()) == before
