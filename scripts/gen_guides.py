"""Run the console examples of docs/guides/ and write their real output into the pages.

    .venv/bin/python scripts/gen_guides.py           # rerun the examples, rewrite the guides
    .venv/bin/python scripts/gen_guides.py --check   # exit 1 if an output changed (tests run this)

A console block that shows Engram at work is marked with a comment saying where it runs:

    <!-- run: machine=laptop -->            in the home directory of the machine `laptop`
    <!-- run: machine=desktop offline -->   with the remote out of reach for this block
    <!-- run: machine=laptop cwd=~/app -->  in a directory of that machine's home
    <!-- run: machine=desktop lines=30 -->  each output cut after 30 lines, then `...`

and a hidden setup, run but not shown, is a comment of commands:

    <!-- setup: machine=laptop
    $ git init -q -b main app
    $ cd app
    $ engram init --project
    -->

Each guide runs in a fresh temporary directory: every machine has its own HOME and ENGRAM_HOME,
an empty git configuration and its own ENGRAM_MACHINE and ENGRAM_ACTOR (ACTORS below), all in
UTC. One bare repository stands for the shared remote, `/srv/git/engram-store.git`. The `$` lines
run in order (`engram` as `python -m engram`, `git` as itself; `cd DIR`, `mkdir DIR` and
`write PATH TEXT` are done here), and each one's stdout and stderr replace the lines under it.
Paths are printed back as the page names them: a machine's home as `/home/ada`, the remote as
above.

Ids, times, durations and commit hashes differ in every run. Commands name ids that earlier
commands printed: the ids printed by the page's previous run are matched to this run's by their
place in the output, and replaced in later commands (a prefix too: `ymnf`). `--check` compares
the pages with volatile parts blanked (VOLATILE), so it fails when counts, wording or structure
change, not when ids or times do; the pages are rewritten only then.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDES = [
    ROOT / "docs" / "guides" / "resume-on-another-machine.md",
    ROOT / "docs" / "guides" / "review-a-handoff-in-a-pull-request.md",
    ROOT / "docs" / "guides" / "git-and-your-events.md",
    ROOT / "docs" / "guides" / "review-memory-in-a-pull-request.md",
]
HOME = "/home/ada"
REMOTE = "/srv/git/engram-store.git"
ACTORS = {
    "laptop": "Claude Code <claude@laptop>",
    "desktop": "Codex <codex@desktop>",
}
GIT_USER = {
    "GIT_AUTHOR_NAME": "Ada Lovelace",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Lovelace",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
}

ID_CHARS = "[0-9a-hjkmnp-tv-z]"  # Engram's ids: lowercase Crockford base32
ID = re.compile(rf"\b{ID_CHARS}{{8}}(?:{ID_CHARS}{{4}})?\b")
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?"), "<time>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<date>"),  # `engram list` shows the day
    (re.compile(r"\b\d{4}/\d\d/"), "<month>/"),
    (re.compile(r"\bin \d+(?:\.\d+)?s\b"), "in <seconds>"),
    (re.compile(r"\b[0-9a-f]{7}\b|\b[0-9a-f]{40}\b"), "<hash>"),
    (re.compile(r"\bcompacted-[0-9a-f]{16}\b"), "compacted-<hash>"),  # named by its content
    (ID, "<id>"),
]
BLOCK = re.compile(
    r"^<!-- run:(?P<run>[^\n]*?)-->\n```console\n(?P<body>.*?)^```$"
    r"|^<!-- setup:(?P<setup>[^\n]*)\n(?P<commands>.*?)^-->$",
    re.MULTILINE | re.DOTALL,
)


def normalise(text: str) -> str:
    for pattern, blank in VOLATILE:
        text = pattern.sub(blank, text)
    return text


@dataclass
class World:
    """The temporary machines and remote one guide runs in."""

    root: Path
    ids: dict[str, str] = field(default_factory=dict)  # previous run's id -> this run's

    @property
    def remote(self) -> Path:
        return self.root / "srv" / "engram-store.git"

    def home(self, machine: str) -> Path:
        home = self.root / machine / "home"
        if not home.exists():
            home.mkdir(parents=True)
            (self.root / machine / "gitconfig").write_text("")
        return home

    def env(self, machine: str) -> dict[str, str]:
        home = self.home(machine)
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("ENGRAM_", "GIT_", "XDG_"))
        }
        env.update(GIT_USER)
        env.update(
            {
                "HOME": str(home),
                "ENGRAM_HOME": str(home / ".engram"),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "GIT_CONFIG_GLOBAL": str(self.root / machine / "gitconfig"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_SYSTEM": os.devnull,
                "ENGRAM_MACHINE": machine,
                "ENGRAM_ACTOR": ACTORS.get(machine, f"Agent <agent@{machine}>"),
                "TZ": "UTC",
                "LC_ALL": "C.UTF-8",
                "COLUMNS": "80",
                "NO_COLOR": "1",
            }
        )
        path = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
        return env

    def shown(self, text: str, machine: str) -> str:
        """Real paths as the page names them."""
        text = text.replace(str(self.remote), REMOTE)
        return text.replace(str(self.home(machine)), HOME)

    def real(self, word: str, machine: str) -> str:
        word = word.replace(REMOTE, str(self.remote))
        if word == "~" or word.startswith("~/"):
            word = HOME + word[1:]
        return word.replace(HOME, str(self.home(machine)))

    def with_ids(self, command: str) -> str:
        """The command with the previous run's ids (or their prefixes) replaced by this run's."""

        def swap(match: re.Match[str]) -> str:
            word = match.group(0)
            for old, new in self.ids.items():
                if old.startswith(word) and len(new) == len(old):
                    return new[: len(word)]
            return word

        return re.sub(rf"\b{ID_CHARS}{{4,12}}\b", swap, command)

    def learn_ids(self, before: list[str], after: list[str]) -> None:
        """Pair the ids of the previous output with this one's, line by line where they agree."""
        matcher = difflib.SequenceMatcher(
            a=[normalise(line) for line in before],
            b=[normalise(line) for line in after],
            autojunk=False,
        )
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag != "equal":
                continue
            for old_line, new_line in zip(before[a0:a1], after[b0:b1], strict=True):
                for old, new in zip(ID.findall(old_line), ID.findall(new_line), strict=False):
                    if old != new:
                        self.ids[old] = new


def parse_spec(spec: str) -> dict[str, str]:
    found = {}
    for word in spec.split():
        name, _, value = word.partition("=")
        found[name] = value or "yes"
    if "machine" not in found:
        raise SystemExit(f"a run or setup comment names no machine: {spec.strip()!r}")
    return found


def run_command(world: World, spec: dict[str, str], command: str) -> str:
    machine = spec["machine"]
    words = [world.real(word, machine) for word in shlex.split(command)]
    cwd = Path(world.real(spec.get("cwd", "~"), machine))
    if words[0] == "cd":  # cd DIR: the next commands of this block or setup run there
        spec["cwd"] = str(Path(spec.get("cwd", "~")) / shlex.split(command)[1])
        return ""
    if words[0] == "mkdir":  # mkdir -p DIR
        (cwd / words[-1]).mkdir(parents=True, exist_ok=True)
        return ""
    if words[0] == "write":  # write PATH TEXT: a file with TEXT and a newline
        target = cwd / words[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(words[2] + "\n", encoding="utf-8")
        return ""
    if words[0] == "engram":
        words = [sys.executable, "-m", "engram", *words[1:]]
    elif words[0] != "git":
        raise SystemExit(f"cannot run {command!r}: only engram, git, cd, mkdir and write are known")
    done = subprocess.run(
        words,
        check=False,
        cwd=cwd,
        env=world.env(machine),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return world.shown(done.stdout, machine)


def run_block(world: World, spec: dict[str, str], body: str) -> str:
    """Run the `$` lines of a console block; the block with this run's output."""
    entries: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            entries.append((line[2:], []))
        elif entries:
            entries[-1][1].append(line)
    offline = "offline" in spec
    if offline:
        world.remote.rename(world.remote.with_name("engram-store.git.offline"))
    try:
        lines = []
        for command, before in entries:
            command = world.with_ids(command)
            after = [line.rstrip() for line in run_command(world, spec, command).splitlines()]
            if "lines" in spec and len(after) > int(spec["lines"]):
                after = after[: int(spec["lines"])] + ["..."]
            world.learn_ids(before, after)
            lines += ["$ " + command, *after]
    finally:
        if offline:
            world.remote.with_name("engram-store.git.offline").rename(world.remote)
    return "".join(line + "\n" for line in lines)


def render(page: Path) -> tuple[str, World]:
    """The page with this run's output, and the world it ran in (its ids)."""
    text = page.read_text(encoding="utf-8")
    marked = len(re.findall(r"^<!-- (?:run|setup):", text, flags=re.MULTILINE))
    if marked != len(BLOCK.findall(text)):
        raise SystemExit(
            f"{page.name}: a run comment must stand right above a ```console block, "
            "a setup comment's commands end with a line `-->`"
        )
    with tempfile.TemporaryDirectory(prefix="engram-guide-") as tmp:
        world = World(Path(tmp).resolve())
        world.remote.parent.mkdir(parents=True)
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", "main", str(world.remote)],
            check=True,
            env=world.env("server"),
        )
        parts, at = [], 0
        for block in BLOCK.finditer(text):
            if block["setup"] is not None:
                spec = parse_spec(block["setup"])
                for line in block["commands"].splitlines():
                    if line.startswith("$ "):
                        run_command(world, spec, world.with_ids(line[2:]))
                continue
            start = block.start("body")
            parts += [text[at:start], run_block(world, parse_spec(block["run"]), block["body"])]
            at = block.end("body")
        parts.append(text[at:])
    return "".join(parts), world


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a guide's output differs from what Engram prints",
    )
    parser.add_argument("guides", nargs="*", type=Path, help="only these guides")
    args = parser.parse_args()
    stale = 0
    for page in [guide.resolve() for guide in args.guides] or GUIDES:
        current = page.read_text(encoding="utf-8")
        text, world = render(page)
        name = page.relative_to(ROOT)
        # The page's commands as they were run: id prefixes (`ymnf`) are not blanked otherwise.
        current = re.sub(
            r"^\$ .*$",
            lambda line, world=world: world.with_ids(line.group(0)),
            current,
            flags=re.MULTILINE,
        )
        if normalise(current) == normalise(text):
            continue
        if args.check:
            stale += 1
            diff = difflib.unified_diff(
                normalise(current).splitlines(),
                normalise(text).splitlines(),
                f"{name} (page)",
                f"{name} (this run)",
                lineterm="",
            )
            print("\n".join(diff), file=sys.stderr)
            print(f"{name} is stale; run `python scripts/gen_guides.py`", file=sys.stderr)
            continue
        page.write_text(text, encoding="utf-8")
        print(f"wrote {name}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
