"""Personal memories written in a repository belong to its project, named by its root commit:
clones, renamed folders and linked worktrees see them; other repositories do not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import cli, git, make_repo

from engram.api import Engram
from engram.git.identity import normal_remote, project_of


def recalled(query: str, cwd: Path) -> str:
    result = cli("recall", query, cwd=cwd)
    assert result.exit_code == 0, result.output
    return result.output


def listed(cwd: Path) -> str:
    result = cli("list", cwd=cwd)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_projects_memories_follow_clones_renames_and_worktrees(
    home_store: Engram, tmp_path: Path
) -> None:
    app = make_repo(tmp_path / "app", {"main.py": "print('hi')\n"})
    git(app, "commit", "-q", "--allow-empty", "-m", "second")
    root = git(app, "rev-list", "--max-parents=0", "HEAD").strip()

    done = cli("remember", "the billing service retries webhooks three times", cwd=app)
    assert done.exit_code == 0
    assert f"personal store, project {root[:8]}" in done.output
    assert (
        cli("remember", "--global", "the user wants short commit subjects", cwd=app).exit_code == 0
    )
    memory = next(m for m in Engram().memories() if "billing" in m.content)
    assert memory.project == root

    clone = tmp_path / "elsewhere" / "app-copy"
    git(tmp_path, "clone", "-q", str(app), str(clone))
    git(app, "worktree", "add", "-q", str(tmp_path / "app-feature"), "-b", "feature")
    renamed = tmp_path / "renamed-app"
    shutil.move(str(app), renamed)
    git(renamed, "worktree", "repair")
    other = make_repo(tmp_path / "other", {"x.txt": "unrelated\n"})

    for place in (clone, renamed, tmp_path / "app-feature", clone / "subdir"):
        place.mkdir(exist_ok=True)
        assert "billing service retries webhooks" in recalled("billing webhooks retries", place)
        assert "billing service" in listed(place)
        assert "short commit subjects" in listed(place)
    assert "billing service" not in recalled("billing webhooks retries", other)
    assert "billing service" not in listed(other)
    assert "short commit subjects" in listed(other)
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert "billing service" in listed(outside)  # outside any project: everything, as before


def test_a_project_store_recalls_its_projects_personal_memories_too(
    home_store: Engram, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "shop")
    Engram(cwd=repo).init(project=True)
    other = make_repo(tmp_path / "blog", {"index.md": "a blog\n"})
    assert cli("remember", "checkout totals are computed in cents", cwd=repo).exit_code == 0
    assert (
        cli(
            "remember", "--personal", "I debug checkout totals with the cents log", cwd=repo
        ).exit_code
        == 0
    )
    assert (
        cli(
            "remember", "--personal", "checkout totals of the blog shop plugin are fake", cwd=other
        ).exit_code
        == 0
    )
    out = recalled("checkout totals cents", repo)
    assert "computed in cents" in out and "cents log" in out
    assert "blog shop plugin" not in out
    assert "blog shop plugin" in recalled("checkout totals", other)


def test_a_shallow_clone_is_known_by_its_remote(home_store: Engram, tmp_path: Path) -> None:
    app = make_repo(tmp_path / "app")
    git(app, "commit", "-q", "--allow-empty", "-m", "second")
    git(app, "remote", "add", "origin", "https://ci-token@github.com/Acme/app.git")
    assert cli("remember", "deploys go through the staging queue", cwd=app).exit_code == 0
    memory = next(m for m in Engram().memories() if "staging" in m.content)
    assert memory.project_remote == "github.com/Acme/app"  # no credentials kept

    shallow = tmp_path / "ci-checkout"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{app}", str(shallow))
    git(shallow, "remote", "set-url", "origin", "git@github.com:Acme/app.git")
    assert project_of(shallow).root is None
    assert "staging queue" in recalled("deploys staging queue", shallow)
    git(shallow, "remote", "set-url", "origin", "git@github.com:Acme/other.git")
    assert "staging queue" not in recalled("deploys staging queue", shallow)


def test_the_oldest_root_names_a_repository_with_merged_histories(
    home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = make_repo(tmp_path / "new")
    new_root = git(new, "rev-parse", "HEAD").strip()
    assert cli("remember", "the api speaks json only", cwd=new).exit_code == 0
    with monkeypatch.context() as old_times:
        old_times.setenv("GIT_AUTHOR_DATE", "2001-01-01T00:00:00Z")
        old_times.setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z")
        old = make_repo(tmp_path / "old")
    old_root = git(old, "rev-parse", "HEAD").strip()
    git(new, "fetch", "-q", str(old), "main:imported")
    git(new, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", "imported")

    project = project_of(new)
    assert project is not None
    assert project.root == old_root and project.roots == {old_root, new_root}
    assert "json only" in recalled("api json", new)  # written before the merge: still here
    assert cli("remember", "the merged api keeps its json", cwd=new).exit_code == 0
    assert next(m for m in Engram().memories() if "merged" in m.content).project == old_root


def test_the_personal_stores_own_repository_is_no_project(home_store: Engram) -> None:
    assert (
        cli("remember", "written from inside the store", cwd=home_store.personal.root).exit_code
        == 0
    )
    assert Engram().memories()[0].project is None


def test_an_export_keeps_the_project_of_its_memories(
    home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_repo(tmp_path / "app")
    git(app, "remote", "add", "origin", "git@example.com:team/app.git")
    assert cli("remember", "the app's cache is warmed at boot", cwd=app).exit_code == 0
    out = tmp_path / "export.jsonl"
    assert cli("export", str(out)).exit_code == 0
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "second-home"))
    Engram().init()
    report = Engram().import_from(out)
    assert report.skipped_count == 0 and len(report.added) == 1
    [memory] = Engram().memories()
    assert memory.project == git(app, "rev-parse", "HEAD").strip()
    assert memory.project_remote == "example.com/team/app"
    assert "cache is warmed" in recalled("cache warmed boot", app)
    assert "cache is warmed" not in listed(make_repo(tmp_path / "other", {"o": "o\n"}))


def test_a_near_duplicate_of_another_projects_memory_is_added_here(
    home_store: Engram, tmp_path: Path
) -> None:
    api = make_repo(tmp_path / "api", {"a.py": "a\n"})
    web = make_repo(tmp_path / "web", {"w.js": "w\n"})
    first = cli("remember", "Run tests with pytest -x", cwd=api).output.split()[1]
    again = cli("remember", "run the tests with `pytest -x`", cwd=web)
    assert again.output.startswith("remembered ") and "possible contradiction" not in again.output
    assert "pytest -x" in listed(web)
    # In the memory's own project it is a near-duplicate, as before.
    there = cli("remember", "run the tests with `pytest -x`", cwd=api)
    assert there.output.startswith(f"reinforced {first} instead of adding a near-duplicate")
    # A memory for every project is not folded into one that only a project sees.
    both = cli("remember", "--global", "run the tests with `pytest -x`", cwd=api)
    assert both.output.startswith("remembered ")
    assert "pytest -x" in listed(make_repo(tmp_path / "third", {"t": "t\n"}))


def test_remote_urls_are_compared_without_scheme_credentials_or_dot_git() -> None:
    assert normal_remote("git@github.com:Acme/app.git") == "github.com/Acme/app"
    assert normal_remote("https://user:pw@GitHub.com/Acme/app.git/") == "github.com/Acme/app"
    assert normal_remote("ssh://git@github.com:22/Acme/app") == "github.com/Acme/app"
    assert normal_remote("/srv/git/app.git") is None
    assert normal_remote("file:///srv/git/app.git") is None
