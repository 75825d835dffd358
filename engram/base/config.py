"""Where stores live and what their settings are.

One environment variable moves all personal state: `ENGRAM_HOME` (default `~/.engram`). A project
store is `.engram/` at the top of the git work tree that holds the current directory, found the way
git finds `.git`. Settings live in each store's `config.yaml`, which is committed with the store
and edited with ruamel.yaml so that comments survive `engram config set`. A project store's file
overrides the personal one, which overrides the defaults (`settings.py`). Every number setting has a
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
from typing import TYPE_CHECKING, Any, overload

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
from .places import project_store_at as project_store_at
from .settings import PERSONAL_ONLY as PERSONAL_ONLY
from .settings import SAFE_MODELS as SAFE_MODELS
from .settings import SETTINGS as SETTINGS
from .settings import Setting as Setting
from .settings import SettingValue as SettingValue
from .settings import number_text
from .settings import personal_only as personal_only

if TYPE_CHECKING:
    from ruamel.yaml import YAML

TEXT_SETTING_CHARS = 200
RECALL_K = 1_000  # the most results one recall returns (`k`)
LIST_LIMIT = 1_000_000  # the most records one listing (`engram list -n`, `log -n`) returns
PID_MOST = 2**31 - 1  # the largest process id (`engram session start --pid`) any system gives

_KINDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}


# What a cached parse of config.yaml was checked against: parsed again when the settings, or the
# form of its warnings (`_WARNINGS`), change.
_WARNINGS = 2  # 2: a setting's warning names its line
_SCHEMA = hashlib.blake2b(
    repr(
        [_WARNINGS, *[(s.key, s.type.__name__, s.minimum, s.maximum) for s in SETTINGS.values()]]
    ).encode(),
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
    return check_value(key, value)


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
        raise UsageError(f"{key} must be from {setting.bounds}, not {number_text(value)}")
    return value


@overload
def check_count(value: int, what: str, most: int) -> int: ...
@overload
def check_count(value: int | None, what: str, most: int) -> int | None: ...
def check_count(value: int | None, what: str, most: int) -> int | None:
    """A count a caller asks for (`k`, a listing's limit; None: all): from 1 to `most`."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most
    ):
        shown = number_text(value) if isinstance(value, int) else quote(value)
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


class AliasInConfig(Exception):
    """A config.yaml uses a YAML alias (`*name`). A settings file has no need of one, and a few
    nested aliases expand to billions of values (an alias bomb), so none is followed."""

    def __init__(self, name: str, line: int) -> None:
        super().__init__(name, line)
        self.name = name
        self.line = line

    def words(self, where: str) -> str:
        return (
            f"{where}:{self.line}: YAML alias {quote('*' + self.name)} is not allowed in a "
            "config file"
        )


def _yaml() -> YAML:
    from ruamel.yaml import YAML  # ~35 ms to import: only when a file must be parsed
    from ruamel.yaml.composer import Composer
    from ruamel.yaml.events import AliasEvent

    class NoAliases(Composer):
        """Refuses an alias where it meets it, before a value is built from it."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.parser.check_event(AliasEvent):
                event = self.parser.peek_event()
                raise AliasInConfig(str(event.anchor), event.start_mark.line + 1)
            return super().compose_node(parent, index)

    yaml = YAML()  # round-trip: keeps comments, order and style
    yaml.Composer = NoAliases
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


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any, int | None]]:
    """(dotted key, value, line from 1 or None) triples. A mapping goes deeper only where
    settings do, so that an unknown key is reported as such (and an alias that refers to itself
    ends)."""
    for name, value in tree.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and any(k.startswith(key + ".") for k in SETTINGS):
            yield from _flatten(value, key + ".")
        else:
            yield key, value, _line_of(tree, name)


def _line_of(tree: Mapping[str, Any], name: Any) -> int | None:
    """The line (from 1) of `name` in the file ruamel read `tree` from, if it says."""
    try:
        return int(tree.lc.key(name)[0]) + 1  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError, IndexError):
        return None


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
            text = orjson.dumps(
                {"key": key, "values": read.values, "warnings": list(read.warnings)}
            )
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
        except AliasInConfig as exc:
            raise UsageError(
                f"{exc.words(str(self.path))}; write the value out in full, then set it again"
            ) from None
        except Exception as exc:  # ruamel raises many types; all mean the same to a user
            raise UsageError(
                f"{self.path} is not valid YAML ({exc.__class__.__name__}); fix "
                "it by hand or restore it with git, then set it again"
            ) from None
        if tree is None:
            tree = yaml.load(default_config_text())
        if not isinstance(tree, MutableMapping):
            raise UsageError(
                f"{self.path} must hold a mapping of settings; fix it by hand or "
                "restore it with git, then set it again"
            )
        node = tree
        *parents, leaf = key.split(".")
        for name in parents:
            if name not in node or not isinstance(node[name], MutableMapping):
                node[name] = {}
            node = node[name]
        node[leaf] = value
        out = io.StringIO()
        yaml.dump(tree, out)
        atomic_write(
            self.path, out.getvalue(), durable=False, temp=self.path.with_suffix(".yaml.tmp")
        )


@dataclass(frozen=True)
class ConfigRead:
    """What one config.yaml sets, and a line for each setting in it that is left out."""

    values: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigProblem:
    """One thing in a config.yaml that is left out: what is wrong (`what`, and in `text` as the
    one line every command warns with, which also says where), the line it is on (from 1; None
    when unknown), and the `engram config set` command that puts a good value in its place (None
    when only an edit of the file will do)."""

    what: str
    where: str
    line: int | None = None
    command: str | None = None
    whole: bool = False  # the whole file is left out
    said: str | None = None  # the line, when it says where in its own words

    @property
    def text(self) -> str:
        if self.said:
            return self.said
        if self.whole:
            return f"{self.where} {self.what}"
        return (
            f"{self.where}: line {self.line}: {self.what}"
            if self.line
            else f"{self.where}: {self.what}"
        )


def read_config(data: bytes, *, where: str = CONFIG_FILE, project: bool = False) -> ConfigRead:
    """The settings a config.yaml's bytes set, flattened to dotted keys, each checked as
    `engram config set` checks it. A committed file is input from whoever pushed it: a value
    that fails (an unknown key, the wrong type, out of its range, a model of the wrong shape)
    is left out with a one-line warning that names the setting, its line, its range and the
    fix, and so is, in a project's file (`project`), a setting only the user's own configuration
    may set (`personal_only`). A file that is not YAML is left out whole, with a warning. Never
    fatal: the other settings, and every command, go on."""
    values, problems = _read(data, where, project)
    return ConfigRead(values, tuple(p.text for p in problems))


def config_problems(
    data: bytes, *, where: str = CONFIG_FILE, project: bool = False
) -> list[ConfigProblem]:
    """What `read_config` leaves out of a config.yaml, and where (`engram doctor` reports it)."""
    return _read(data, where, project)[1]


def _read(data: bytes, where: str, project: bool) -> tuple[dict[str, Any], list[ConfigProblem]]:
    ignored = "so its settings are ignored; fix it by hand or restore it with git"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {}, [ConfigProblem(f"is not valid UTF-8, {ignored}", where, whole=True)]
    try:
        with warnings.catch_warnings():  # e.g. a reused anchor: the errors below say enough
            warnings.simplefilter("ignore")
            tree = _yaml().load(text) or {}
    except AliasInConfig as exc:
        fix = (
            "so its settings are ignored; write the value out in full, or restore the file with git"
        )
        said = f"{exc.words(where)}, {fix}"
        return {}, [ConfigProblem(said, where, exc.line, whole=True, said=said)]
    except Exception as exc:  # ruamel raises many types; all mean the same to a user
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = getattr(mark, "line", None)
        if isinstance(line, int):  # a file cut short is found wrong past its last line
            line = min(line + 1, max(len(text.splitlines()), 1))
        at = f" at line {line}" if line else ""
        return {}, [
            ConfigProblem(
                f"is not valid YAML ({exc.__class__.__name__}{at}), {ignored}",
                where,
                line,
                whole=True,
            )
        ]
    if not isinstance(tree, Mapping):
        return {}, [
            ConfigProblem(f"must hold a mapping of settings, {ignored}", where, 1, whole=True)
        ]
    values: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    command = "engram config set --project" if project else "engram config set"
    for key, value, line in _flatten(tree):
        if key not in SETTINGS:
            problems.append(
                ConfigProblem(
                    f"unknown setting {quote(key)} is ignored; see every setting with "
                    "`engram config list`",
                    where,
                    line,
                )
            )
        elif project and personal_only(key, value):
            problems.append(
                ConfigProblem(
                    f"{key} is ignored in a project's configuration (anyone who can push could "
                    f"set it); set it in yours: engram config set {key} VALUE",
                    where,
                    line,
                    f"engram config set {key} VALUE",
                )
            )
        else:
            try:
                values[key] = check_value(key, value)
            except UsageError as exc:
                problems.append(
                    ConfigProblem(
                        f"{exc}; the value is ignored (fix: {command} {key} VALUE)",
                        where,
                        line,
                        f"{command} {key} VALUE",
                    )
                )
    return values, problems


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


class Layer(dict[str, Any]):
    """Settings from one file, remembering where they came from and what in the file was left
    out (one warning line each, see `read_config`)."""

    def __init__(
        self, values: Mapping[str, Any], origin: str, warnings: tuple[str, ...] = ()
    ) -> None:
        super().__init__(values)
        self.origin = origin
        self.warnings = warnings
