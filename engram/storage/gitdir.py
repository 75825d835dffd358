"""A git directory's own files read by hand, for the write path: where the git directory is, the
commit HEAD points at, whether git's index stages a file. No repository object is opened (that is
`engram.git`'s work, above this layer): an append stays cheap.
"""

from __future__ import annotations

from pathlib import Path

COMMONDIR = "commondir"  # in a linked worktree's git directory: the shared one, relative
INDEX = "index"


def git_dir(work_tree: Path) -> Path:
    """The git directory of `work_tree`: `.git`, or where a `.git` file points (a linked
    worktree or a submodule: "gitdir: <path>")."""
    dot_git = work_tree / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            target = Path(text.split(":", 1)[1].strip())
            return target if target.is_absolute() else (work_tree / target).resolve()
    return dot_git


def is_linked(git_dir: Path) -> bool:
    """Is this the git directory of a linked worktree (`git worktree add`)?"""
    return (git_dir / COMMONDIR).is_file()


def common_dir(git_dir: Path) -> Path:
    """The git directory shared by every work tree of the repository (`git_dir` itself, except
    in a linked worktree). `git worktree remove` leaves it in place."""
    try:
        pointer = (git_dir / COMMONDIR).read_text(encoding="utf-8").strip()
        return (git_dir / pointer).resolve()
    except (OSError, UnicodeDecodeError):
        return git_dir


def head_id(git_dir: Path) -> str:
    """The commit HEAD points at ("" when unborn), read from the ref files; "?" when they
    cannot be read (never equal to a recorded head, so the writer starts a new file)."""
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head
        ref = head[4:].strip()
        common = git_dir
        if is_linked(git_dir):
            common = git_dir / (git_dir / COMMONDIR).read_text().strip()
        for base in (git_dir, common):
            try:
                return (base / ref).read_text(encoding="utf-8").strip()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
        try:
            packed = (common / "packed-refs").read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        for line in packed.splitlines():
            if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                return line.split(" ", 1)[0]
        return ""
    except (OSError, UnicodeDecodeError):
        return "?"


def index_stamp(git_dir: Path) -> str | None:
    """`mtime:size` of git's index (None without one): the index changed when this did."""
    try:
        st = (git_dir / INDEX).stat()
    except OSError:
        return None
    return f"{st.st_mtime_ns}:{st.st_size}"


def staged(git_dir: Path, name: str) -> bool | None:
    """Does git's index hold `name` (a path in the work tree)? None when it cannot be read."""
    index = git_dir / INDEX
    try:
        data = index.read_bytes()
        found = name.encode() + b"\0" in data
        if not found and data[4:8] == b"\0\0\0\x04":  # version 4 compresses paths
            import pygit2

            found = name in pygit2.Index(str(index))
    except (OSError, ValueError):
        return None
    except Exception:  # pygit2.GitError: an index git itself could not read
        return None
    return found
