from __future__ import annotations

import pytest

from conftest import cli
from engram.api import Engram
from engram.errors import SecretError
from engram.secrets import find_secrets

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx"


def stored_bytes(engram: Engram) -> bytes:
    return b"".join(p.read_bytes() for s in engram.stores() for p in s.event_files())


def test_a_secret_is_refused_with_its_kind_and_position_and_never_echoed(
    home_store: Engram,
) -> None:
    before = stored_bytes(home_store)
    with pytest.raises(SecretError) as info:
        home_store.remember(f"deploy notes\nthe key is {AWS_KEY} for s3")
    message = str(info.value)
    assert "AWS Access Key" in message and "line 2, column 12" in message
    assert "--redact" in message
    assert AWS_KEY not in message
    assert stored_bytes(home_store) == before


def test_the_cli_refuses_a_secret_with_exit_status_2(home_store: Engram) -> None:
    result = cli("remember", f"token {GITHUB_TOKEN}")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: content contains what looks like a secret "
                                    "(GitHub Token) at line 1, column 7")
    assert GITHUB_TOKEN not in result.output
    assert GITHUB_TOKEN.encode() not in stored_bytes(home_store)


def test_redaction_stores_the_text_without_the_secret(home_store: Engram) -> None:
    memory = home_store.remember(f"the key is {AWS_KEY} for s3", redact=True)
    assert memory.content == "the key is [REDACTED:AWS Access Key] for s3"
    assert AWS_KEY.encode() not in stored_bytes(home_store)


def test_updates_and_reasons_are_scanned_too(home_store: Engram) -> None:
    memory = home_store.remember("harmless")
    with pytest.raises(SecretError):
        home_store.update(memory.id, f'password = "{"hunter2" * 3}"')
    with pytest.raises(SecretError, match="reason contains"):
        home_store.forget(memory.id, reason=f"rotated {AWS_KEY}")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
         "Private Key"),
        ("db postgres://admin:s3cretpw@db.example.com/app", "Basic Auth Credentials"),
        ("sk-ant-api03-" + "a" * 40, "Anthropic API Key"),
        ("xoxb-" + "1234567890-1234567890-abcdefghijklmnopqrstuvwx", "Slack Token"),
    ],
)
def test_common_credentials_are_detected(text: str, kind: str) -> None:
    assert [f.type for f in find_secrets(text)] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "fixed in commit 3f9a2c1d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c",
        "event 01JDX3F9ZQ8K2M4N6P8R0T2V4W, memory k3x9q2mf7a1b",
        "the password field must be hashed with argon2",
        "server at 10.0.0.12 and 93.184.216.34",
    ],
)
def test_what_coding_agents_write_every_day_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == []
