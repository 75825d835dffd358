"""Where stores live and what their settings are.

One environment variable moves all personal state: `ENGRAM_HOME` (default `~/.engram`). A project
store is `.engram/` at the top of the git work tree that holds the current directory, found the way
git finds `.git`. Settings live in each store's `config.yaml`, which is committed with the store
and edited with ruamel.yaml so that comments survive `engram config set`. A project store's file
overrides the personal one, which overrides the defaults below. Every number setting has a
range, declared with it; a committed file is input, so a value in it that fails its check is left
out with a one-line warning (`read_config`), while `engram config set` refuses it.
"""

from __future__ import annotations

import hashlib
import io
import math
import unicodedata
import warnings
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .errors import UsageError, quote
from .files import atomic_write
from .layout import CONFIG_FILE
from .layout import PROJECT_DIR as PROJECT_DIR
from .places import GO_ENGRAM as GO_ENGRAM
from .places import engram_home as engram_home
from .places import find_foreign_store as find_foreign_store
from .places import find_project_store as find_project_store
from .places import find_work_tree as find_work_tree
from .places import foreign_store as foreign_store
from .vocab import MEMORY_KIND

if TYPE_CHECKING:
    from ruamel.yaml import YAML

TEXT_SETTING_CHARS = 200
RECALL_K = 1_000  # the most results one recall returns (`k`)
LIST_LIMIT = 1_000_000  # the most records one listing (`engram list -n`, `log -n`) returns
PID_MOST = 2**31 - 1  # the largest process id (`engram session start --pid`) any system gives

SettingValue = str | int | float | bool | None  # a setting's value (None: not set)


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    type: type
    help: str
    minimum: float | None = None  # a number setting has both bounds (a test holds every one to it)
    maximum: float | None = None

    @property
    def bounds(self) -> str:
        """The range of a number setting as messages give it: "1 to 10000"."""
        return f"{_number(self.minimum)} to {_number(self.maximum)}"


_KINDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) and abs(value) < 1e15 else str(value)


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in [
        Setting("actor", None, str, "Who writes events and authors commits, as 'Name <email>'. "
                "Unset: ENGRAM_ACTOR, then the store repository's git user, then user@host."),
        Setting("commit.auto", True, bool,
                "Commit pending events automatically (batched). A session's start and end alone "
                "never make a commit: they go with the next one."),
        Setting("commit.every_events", 20, int,
                "Commit once this many events are pending. Session start and end do not count.",
                minimum=1, maximum=10_000),
        Setting("commit.every_seconds", 300, int,
                "Commit when the oldest pending event is this old: checked on each write, by the "
                "MCP server's timer, and when a command exits.", minimum=0, maximum=86_400),
        Setting("clock.max_skew", 300, int,
                "Seconds ahead of this machine's clock that the clock of new events follows "
                "events read from elsewhere; a line dated further ahead is read in its place "
                "but never drags this clone's clock. Only from your own configuration.",
                minimum=0, maximum=3600),
        Setting("compact.files", 64, int,
                "Fold a month's closed event files into one file (`engram compact`) once it has "
                "this many, checked at each commit and sync; 0 never compacts automatically.",
                minimum=0, maximum=100_000),
        Setting("limits.content_bytes", 32768, int, "Largest memory content, in UTF-8 bytes.",
                minimum=1, maximum=1_048_576),
        Setting("limits.text_bytes", 8000, int,
                "Longest task goal, progress note, failure (error, root cause, fix), or handoff "
                "summary or goal, in UTF-8 bytes.", minimum=1, maximum=262_144),
        Setting("limits.item_bytes", 4000, int,
                "Longest single item: a progress feature, a forget reason, a session note, one "
                "entry of a handoff list (a step, a command, an artifact), in UTF-8 bytes.",
                minimum=1, maximum=65_536),
        Setting("limits.list_items", 200, int,
                "Most entries in one handoff list, and most files in a working set or a "
                "progress record.", minimum=1, maximum=1_000),
        Setting("limits.title_chars", 200, int,
                "Longest task name or commit subject, in characters.", minimum=1,
                maximum=1_000),
        Setting("limits.tags", 32, int, "Most tags on one record.", minimum=0,
                maximum=256),
        Setting("limits.name_chars", 64, int, "Longest tag, scope or component, in characters.",
                minimum=1, maximum=256),
        Setting("limits.path_chars", 1024, int,
                "Longest file path in a working set or a citation, in characters.", minimum=1,
                maximum=4_096),
        Setting("limits.query_bytes", 8192, int, "Longest recall query, in UTF-8 bytes.",
                minimum=1, maximum=65_536),
        Setting("limits.package_bytes", 1_048_576, int,
                "Largest handoff package file (`engram handoff --from`), in bytes.", minimum=1,
                maximum=16_777_216),
        Setting("limits.citation_lines", 200, int, "Most lines one discovery citation may cite.",
                minimum=1, maximum=10_000),
        Setting("limits.import_line_bytes", 16_777_216, int,
                "Longest line `engram import` reads, in bytes; a longer line is skipped and "
                "reported.", minimum=1, maximum=268_435_456),
        Setting("limits.import_bytes", 268_435_456, int,
                "Most bytes one `engram import` reads, counted after decompression; over it, "
                "nothing is imported.", minimum=1, maximum=17_179_869_184),
        Setting("secrets.scan", True, bool,
                "Refuse content that looks like a credential before it reaches disk."),
        Setting("secrets.entropy", False, bool,
                "Also refuse high-entropy strings (noisy: commit hashes and ids look random)."),
        Setting("search.model", "builtin", str,
                "Embedding model: 'builtin' (all-MiniLM-L6-v2 int8, shipped with Engram), "
                "the absolute path of a folder with an ONNX model and its tokenizer.json "
                "(never downloads; see docs/search.md), any fastembed model name (downloaded "
                "on first use), or 'off' for BM25 only."),
        Setting("search.vector_flush", 256, int,
                "Fold changed memories into the saved vector index once this many are pending.",
                minimum=1, maximum=100_000),
        Setting("search.exact_below", 10_000, int,
                "Below this many saved vectors, recall compares the query with every one "
                "(exact, no memory unreachable); from it on, it searches the HNSW graph.",
                minimum=0, maximum=10_000_000),
        Setting("recall.weight_vector", 0.4, float,
                "Meaning against words in relevance: 0.5 counts both in full, 1 meaning only, "
                "0 words only.",
                minimum=0, maximum=1),
        Setting("recall.weight_strength", 0.15, float,
                "How much memory strength (recency, importance, reinforcement) moves the rank.",
                minimum=0, maximum=1),
        Setting("recall.strength_floor", 0.0, float,
                "Memories whose strength decayed below this are left out of recall (not "
                "deleted); 0, the default, leaves none out for its age: age only orders.",
                minimum=0, maximum=1),
        Setting("recall.min_relevance", 0.05, float,
                "Results less relevant than this are dropped (calibrated 0 to 1: 0.5 = probably "
                "answers; before time, kind and strength).",
                minimum=0, maximum=1),
        Setting("recall.context", 0.5, float,
                "Memories written together are context for each other: a result written next "
                "to a relevant one gains this share of its relevance (0 turns it off).",
                minimum=0, maximum=1),
        Setting("recall.context_floor", 0.0, float,
                "Context lends relevance only to a memory with at least this much evidence of "
                "its own for the query (meaning and words, 0 to 1; 0: any found by either).",
                minimum=0, maximum=1),
        Setting("recall.context_similarity", 0.3, float,
                "Context passes only between memories at least this similar to each other "
                "(cosine of their vectors): memories written together but about other things "
                "do not lift each other.",
                minimum=0, maximum=1),
        Setting("recall.sitting_penalty", 0.0, float,
                "Variety in the results: the n-th result of one sitting (memories written "
                "within 30 minutes of each other) keeps (1 - this)^(n - 1) of its score.",
                minimum=0, maximum=1),
        Setting("recall.background_sample", 0, int,
                "Memories of the store sampled into the background a query's meaning is "
                "calibrated against, besides the fixed sentences shipped with Engram (0, the "
                "default: the fixed sentences only, so a score does not move with what else "
                "the store holds).",
                minimum=0, maximum=4096),
        Setting("recall.candidates", 100, int,
                "Candidates taken from each index before fusing and filtering.", minimum=1,
                maximum=10_000),
        Setting("remember.check_duplicates", True, bool,
                "On remember, compare with existing memories (costs one embedding)."),
        Setting("remember.duplicate_similarity", 0.92, float,
                "At or above this similarity a new memory reinforces the existing one instead.",
                minimum=0, maximum=1),
        Setting("remember.related_similarity", 0.80, float,
                "At or above this (and below the duplicate level) a memory is reported as a "
                "possible contradiction that it may supersede.", minimum=0, maximum=1),
        Setting("consolidate.similarity", 0.90, float,
                "Memories at least this similar are merged by `engram consolidate`.",
                minimum=0, maximum=1),
        Setting("checkpoint.auto", True, bool,
                "Save checkpoints automatically when the picture changes (failure, plan change, "
                "working-set shift, quiet period). They stay in the events; only handoffs are "
                "rendered to Markdown under handoffs/."),
        Setting("checkpoint.plan_change", 0.5, float,
                "Share of next steps and work in progress that must change to count as a new "
                "plan (Jaccard distance).", minimum=0, maximum=1),
        Setting("checkpoint.working_set_change", 0.5, float,
                "Share of working-set files that must change to count as a shift.",
                minimum=0, maximum=1),
        Setting("checkpoint.quiet_minutes", 30.0, float,
                "A task event this long after the last checkpoint saves a new one.", minimum=0,
                maximum=10_080),
        Setting("checkpoint.debounce_seconds", 120.0, float,
                "At most one automatic checkpoint per reason in this time (failures always "
                "save one).", minimum=0, maximum=86_400),
        Setting("session.stale_minutes", 30.0, float,
                "An open session of this machine without a heartbeat for this long is "
                "interrupted.", minimum=0.001, maximum=10_080),
        Setting("resume.max_chars", 100_000, int,
                "Longest `engram resume` output; longer output is cut and says so.",
                minimum=1000, maximum=10_000_000),
        Setting("resume.hook_tokens", 2000, int,
                "Token budget of the context the SessionStart hook gives the agent, filled by "
                "priority (must-not-redo and must-preserve first); what does not fit is named.",
                minimum=100, maximum=100_000),
        Setting("capture.files", True, bool,
                "Client hooks (Claude Code's PostToolUse, `engram capture`) record the files "
                "the agent edits or writes, for the working set of the next checkpoint."),
        Setting("capture.commands", True, bool,
                "Client hooks record commands that fail (exit status, first lines of output, "
                "secrets redacted) as failure candidates of the session."),
        Setting("capture.recall", True, bool,
                "The UserPromptSubmit hook puts the memories relevant to the user's prompt in "
                "front of the agent (each once a session, unless it changed)."),
        Setting("capture.recall_threshold", 0.3, float,
                "Least calibrated relevance (0 to 1) of a memory the UserPromptSubmit hook "
                "adds; below it, nothing is added.", minimum=0, maximum=1),
        Setting("capture.recall_tokens", 300, int,
                "Token budget of the memories the UserPromptSubmit hook adds to a prompt.",
                minimum=20, maximum=4_000),
        *[
            Setting(f"decay.{kind}", days, float,
                    f"Days for a {kind} to fade to 37% strength (scaled up by importance and "
                    "by each reinforcement).", minimum=0.001, maximum=36_525)
            for kind, days in ((term.name, term.data["decay_days"]) for term in MEMORY_KIND.terms)
        ],
    ]
}
# What a cached parse of config.yaml was checked against: parsed again when the settings change.
_SCHEMA = hashlib.blake2b(
    repr([(s.key, s.type.__name__, s.minimum, s.maximum) for s in SETTINGS.values()]).encode(),
    digest_size=8,
).hexdigest()

_TEMPLATE_HEADER = """\
# Engram store settings. Change them with `engram config set KEY VALUE`; comments are kept.
# Every key and its default: `engram config list`. A project store's settings override the
# personal store's, which override the built-in defaults.
"""


def parse_value(key: str, text: str) -> Any:
    """Turn the text of `engram config set KEY VALUE` into the setting's type."""
    setting = _setting(key)
    if text.lower() in ("null", "none", "") and setting.default is None:
        return None
    if setting.type is bool:
        lowered = text.lower()
        if lowered in ("true", "yes", "on", "1"):
            return True
        if lowered in ("false", "no", "off", "0"):
            return False
        raise UsageError(f"{key} takes true or false, not {quote(text)}")
    if setting.type is int:
        try:
            value: Any = int(text)
        except ValueError:
            raise UsageError(f"{key} takes a whole number, not {quote(text)}") from None
    elif setting.type is float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{key} takes a number, not {quote(text)}") from None
    else:
        value = text
    value = check_value(key, value)
    if key == "search.model":
        _check_model_folder(value)
    return value


def _check_model_folder(value: str) -> None:
    """`engram config set search.model PATH` checks the folder on this machine (a file read from
    git is only checked for its shape: the folder may exist on another machine only)."""
    from .models import ModelFolderError, describe_folder, is_local_model

    if is_local_model(value):
        try:
            describe_folder(Path(value).expanduser())
        except ModelFolderError as exc:
            raise UsageError(f"search.model: {exc}") from None


def check_value(key: str, value: Any) -> Any:
    setting = _setting(key)
    if value is None and setting.default is None:
        return None
    if setting.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, setting.type) or (
        isinstance(value, bool) and setting.type is not bool
    ):
        raise UsageError(f"{key} must be {_KINDS[setting.type]}, not {quote(value)}")
    value = setting.type(value)  # plain Python values, not ruamel's round-trip scalars
    if setting.type is float and not math.isfinite(value):
        raise UsageError(f"{key} must be a finite number, not {value}")
    if setting.type is str:
        _check_text_setting(key, value)
    if key == "actor":
        from .validation import name_form

        value = name_form(value, key)
    if key == "search.model":
        from .models import check_model_setting

        try:
            check_model_setting(value)
        except ValueError as exc:
            raise UsageError(f"{key}: {exc}") from None
    if setting.minimum is not None and not setting.minimum <= value <= setting.maximum:
        raise UsageError(f"{key} must be from {setting.bounds}, not {_number(value)}")
    return value


def check_count(value: int | None, what: str, most: int) -> int | None:
    """A count a caller asks for (`k`, a listing's limit; None: all): from 1 to `most`."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 1 <= value <= most):
        shown = _number(value) if isinstance(value, int) else quote(value)
        raise UsageError(f"{what} must be a whole number from 1 to {most}, not {shown}")
    return value


def _check_text_setting(key: str, value: str) -> None:
    """A text setting is one short line of valid UTF-8 (it ends up in commits and events)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{key} is not valid UTF-8; re-encode it as UTF-8") from None
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise UsageError(f"{key} must be one line without control characters")
    if len(value) > TEXT_SETTING_CHARS:
        raise UsageError(f"{key} is longer than {TEXT_SETTING_CHARS} characters")


def _setting(key: str) -> Setting:
    try:
        return SETTINGS[key]
    except (KeyError, TypeError):
        raise UsageError(
            f"unknown setting {quote(key)}; see every setting with `engram config list`"
        ) from None


def _yaml() -> YAML:
    from ruamel.yaml import YAML  # ~35 ms to import: only when a file must be parsed

    yaml = YAML()  # round-trip: keeps comments, order and style
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def default_config_text() -> str:
    """The commented config.yaml a new store starts with (every setting at its default)."""
    lines = [_TEMPLATE_HEADER]
    groups: dict[str, list[Setting]] = {}
    for setting in SETTINGS.values():
        head, _, _ = setting.key.rpartition(".")
        groups.setdefault(head, []).append(setting)
    for head, settings in groups.items():
        indent = ""
        if head:
            lines.append(f"{head}:\n")
            indent = "  "
        for setting in settings:
            name = setting.key.rpartition(".")[2]
            bounds = f" ({setting.bounds})" if setting.minimum is not None else ""
            lines.append(f"{indent}# {setting.help}{bounds}\n")
            lines.append(f"{indent}{name}: {_yaml_scalar(setting.default)}\n")
    return "".join(lines)


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) pairs. A mapping goes deeper only where settings do, so that an
    unknown key is reported as such (and an alias that refers to itself ends)."""
    for name, value in tree.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and any(k.startswith(key + ".") for k in SETTINGS):
            yield from _flatten(value, key + ".")
        else:
            yield key, value


class ConfigFile:
    """One store's config.yaml."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, cache: Path | None = None, *, project: bool = False) -> ConfigRead:
        """The settings this file sets, flattened to dotted keys and checked (`read_config`).

        `cache`: a file (per clone, never committed) keeping the settings parsed from these exact
        bytes, so that most commands need not load the YAML parser at all.
        """
        if self.path.is_symlink():
            return ConfigRead({})  # never followed out of the store; `verify` and `doctor` say so
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return ConfigRead({})
        if cache is None:
            return read_config(data, where=str(self.path), project=project)
        digest = hashlib.blake2b(data + str(self.path).encode(), digest_size=16).hexdigest()
        key = f"{_SCHEMA}:{int(project)}:{digest}"
        try:
            kept = orjson.loads(cache.read_bytes())
            if kept.get("key") == key:
                return ConfigRead(kept["values"], tuple(kept["warnings"]))
        except (OSError, orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            pass
        read = read_config(data, where=str(self.path), project=project)
        try:
            text = orjson.dumps({"key": key, "values": read.values,
                                 "warnings": list(read.warnings)})
            if orjson.loads(text)["values"] == read.values:  # only what JSON keeps as it is
                atomic_write(cache, text, durable=False)
        except (OSError, TypeError):
            pass  # only a cache
        return read

    def set(self, key: str, value: Any) -> None:
        value = check_value(key, value)
        yaml = _yaml()
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        try:
            tree = yaml.load(text) if text.strip() else None
        except Exception as exc:  # ruamel raises many types; all mean the same to a user
            raise UsageError(f"{self.path} is not valid YAML ({exc.__class__.__name__}); fix "
                             "it by hand or restore it with git, then set it again") from None
        if tree is None:
            tree = yaml.load(default_config_text())
        if not isinstance(tree, MutableMapping):
            raise UsageError(f"{self.path} must hold a mapping of settings; fix it by hand or "
                             "restore it with git, then set it again")
        node = tree
        *parents, leaf = key.split(".")
        for name in parents:
            if name not in node or not isinstance(node[name], MutableMapping):
                node[name] = {}
            node = node[name]
        node[leaf] = value
        out = io.StringIO()
        yaml.dump(tree, out)
        atomic_write(self.path, out.getvalue(), durable=False,
                     temp=self.path.with_suffix(".yaml.tmp"))


@dataclass(frozen=True)
class ConfigRead:
    """What one config.yaml sets, and a line for each setting in it that is left out."""

    values: dict[str, Any]
    warnings: tuple[str, ...] = ()


def read_config(data: bytes, *, where: str = CONFIG_FILE, project: bool = False) -> ConfigRead:
    """The settings a config.yaml's bytes set, flattened to dotted keys, each checked as
    `engram config set` checks it. A committed file is input from whoever pushed it: a value
    that fails (an unknown key, the wrong type, out of its range, a model of the wrong shape)
    is left out with a one-line warning that names the setting, its range and the fix, and so
    is, in a project's file (`project`), a setting only the user's own configuration may set
    (`personal_only`). A file that is not YAML is left out whole, with a warning. Never fatal:
    the other settings, and every command, go on."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ConfigRead({}, (f"{where} is not valid UTF-8, so its settings are ignored; fix "
                               "it by hand or restore it with git",))
    try:
        with warnings.catch_warnings():  # e.g. a reused anchor: the errors below say enough
            warnings.simplefilter("ignore")
            tree = _yaml().load(text) or {}
    except Exception as exc:  # ruamel raises many types; all mean the same to a user
        return ConfigRead({}, (f"{where} is not valid YAML ({exc.__class__.__name__}), so its "
                               "settings are ignored; fix it by hand or restore it with git",))
    if not isinstance(tree, Mapping):
        return ConfigRead({}, (f"{where} must hold a mapping of settings, so its settings are "
                               "ignored; fix it by hand or restore it with git",))
    values: dict[str, Any] = {}
    problems: list[str] = []
    fix = "engram config set --project" if project else "engram config set"
    for key, value in _flatten(tree):
        if key not in SETTINGS:
            problems.append(f"{where}: unknown setting {quote(key)} is ignored; see every "
                            "setting with `engram config list`")
        elif project and personal_only(key, value):
            problems.append(f"{where}: {key} is ignored in a project's configuration (anyone "
                            f"who can push could set it); set it in yours: engram config set "
                            f"{key} VALUE")
        else:
            try:
                values[key] = check_value(key, value)
            except UsageError as exc:
                problems.append(f"{where}: {exc}; the value is ignored (fix: {fix} {key} "
                                "VALUE)")
    return ConfigRead(values, tuple(problems))


def parse_config(data: bytes, *, where: str = CONFIG_FILE) -> dict[str, Any]:
    """The settings a config.yaml's bytes set, or a UsageError for the first one that is wrong
    (strict: for checking a file, not for reading a store, see `read_config`)."""
    read = read_config(data, where=where)
    if read.warnings:
        raise UsageError(read.warnings[0])
    return read.values


class Settings:
    """Effective settings: defaults, then each config file in order, later ones winning."""

    def __init__(self, *layers: Mapping[str, Any]) -> None:
        self._values = {key: s.default for key, s in SETTINGS.items()}
        self._origin = {key: "default" for key in SETTINGS}
        for layer in layers:
            origin = getattr(layer, "origin", "file")
            for key, value in layer.items():
                self._values[key] = value
                self._origin[key] = origin

    def __getitem__(self, key: str) -> Any:
        return self._values[_setting(key).key]

    def origin(self, key: str) -> str:
        return self._origin[key]

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self._values.items())


# Settings that protect the user or decide what runs and what is downloaded. A project's
# config.yaml is written by whoever can push to the repository: these are read only from the
# user's own (personal) configuration and the environment, never from a project store.
PERSONAL_ONLY = frozenset({"actor", "search.model", "limits.import_line_bytes",
                           "limits.import_bytes", "clock.max_skew"}
                          | {k for k in SETTINGS if k.startswith("secrets.")})
SAFE_MODELS = ("builtin", "off")  # what a project may choose: nothing downloaded or loaded


def personal_only(key: str, value: Any) -> bool:
    """May this setting, with this value, come only from the user's own configuration? (Its
    default, as every new store's config.yaml lists it, weakens nothing.)"""
    return key in PERSONAL_ONLY and value != SETTINGS[key].default and \
        not (key == "search.model" and value in SAFE_MODELS)


class Layer(dict[str, Any]):
    """Settings from one file, remembering where they came from and what in the file was left
    out (one warning line each, see `read_config`)."""

    def __init__(self, values: Mapping[str, Any], origin: str,
                 warnings: tuple[str, ...] = ()) -> None:
        super().__init__(values)
        self.origin = origin
        self.warnings = warnings
