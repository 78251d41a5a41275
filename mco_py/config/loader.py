"""One way to read a service's settings: defaults < YAML file < environment < flags.

A setting's key is its Struct field's camelCase name, dotted where the Struct nests
(``stream.flushInterval``). Its environment variable is ``MCO_<SERVICE>_`` and the key in upper
snake case (``MCO_COLLECTOR_STREAM_FLUSH_INTERVAL``); its flag is the key in kebab case
(``--stream-flush-interval``). Lists take several comma-separated values (or a repeated flag);
booleans take true/false, yes/no, on/off, 1/0. Keys whose value is a mapping (rules,
constraints) are read from the file only.

Every problem found is reported at once, one line each: ``SOURCE: key: what is wrong``, SOURCE
being the file, ``environment VARIABLE`` or ``--flag``. Keys a service renamed are still read,
with a warning naming the new key (:attr:`Loaded.notes`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import logging
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec
import yaml

from mco_py.errors import ConfigError
from mco_py.obs.logging import setup_logging

S = TypeVar("S", bound=msgspec.Struct)

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
_FLAG_DEST = "config:"
_NOTES_DEST = "config_notes"


class Section(msgspec.Struct, rename="camel", frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every settings Struct: camelCase keys, immutable, built by keyword (subclasses repeat
    ``frozen=True`` for the type checker)."""


class Problem(NamedTuple):
    """What is wrong with one key (the source is looked up by the loader)."""

    key: str
    what: str


@dataclasses.dataclass(frozen=True, slots=True)
class Leaf:
    """One setting: its key, where it lives in the Struct, its type, default and help."""

    key: str
    attrs: tuple[str, ...]
    kind: Any
    """The field's type with its constraints (``Annotated[float, Meta(ge=0)]``)."""
    base: Any
    """The field's type without them."""
    default: Any
    help: str

    @property
    def flag(self) -> str:
        return "--" + "-".join(_words(part) for part in self.key.split("."))

    def env(self, prefix: str) -> str:
        return prefix + "_".join(_words(part) for part in self.key.split(".")).replace("-", "_").upper()

    @property
    def choices(self) -> tuple[str, ...]:
        """A text key's (or a list's items') allowed values; empty: any."""
        inner = _without_none(self.base)
        if self.is_list:
            inner = typing.get_args(inner)[0]
        return tuple(str(c) for c in typing.get_args(inner)) if typing.get_origin(inner) is typing.Literal else ()

    @property
    def is_bool(self) -> bool:
        return _without_none(self.base) is bool

    @property
    def is_list(self) -> bool:
        return typing.get_origin(_without_none(self.base)) in (tuple, list)

    @property
    def is_mapping(self) -> bool:
        return typing.get_origin(_without_none(self.base)) in (dict, Mapping)


def _words(camel: str) -> str:
    """``crStatusTTLSeconds`` → ``cr-status-ttl-seconds``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", camel).lower()


def _without_none(kind: Any) -> Any:
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        rest = [a for a in typing.get_args(kind) if a is not type(None)]
        return rest[0] if len(rest) == 1 else kind
    return kind


def _is_section(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


_LEAVES: dict[type[msgspec.Struct], tuple[Leaf, ...]] = {}


def leaves(settings: type[msgspec.Struct]) -> tuple[Leaf, ...]:
    """Every setting of ``settings``, nested sections flattened, in declaration order."""
    found = _LEAVES.get(settings)
    if found is None:
        found = _LEAVES[settings] = tuple(_leaves(settings, "", ()))
    return found


def _fields(cls: type[Any]) -> list[tuple[msgspec.structs.FieldInfo, Any, Any]]:
    """``cls``'s fields with their declared type (constraints included) and that type without them."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for info in msgspec.structs.fields(cls):
        kind = hints[info.name]
        out.append((info, kind, typing.get_args(kind)[0] if typing.get_origin(kind) is typing.Annotated else kind))
    return out


def _leaves(cls: type[msgspec.Struct], prefix: str, attrs: tuple[str, ...]) -> list[Leaf]:
    out: list[Leaf] = []
    for info, kind, base in _fields(cls):
        key = prefix + info.encode_name
        if _is_section(base):
            out += _leaves(base, key + ".", (*attrs, info.name))
            continue
        default = info.default_factory() if info.default is msgspec.NODEFAULT else info.default
        metas = [m for m in typing.get_args(kind)[1:] if isinstance(m, msgspec.Meta)]
        text = next((m.description for m in metas if m.description), "")
        out.append(Leaf(key, (*attrs, info.name), kind, base, default, text))
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Spec(Generic[S]):
    """How one service's settings are read."""

    service: str
    """``collector``, ``analyzer`` or ``extender``: names the environment prefix and messages."""
    settings: type[S]
    check: Callable[[S], Sequence[Problem]] = lambda _settings: ()
    """Rules across keys, run once every key has a valid value."""
    renamed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Old key → new key, applied in order; an old key that names a section of the new layout
    (``guard: on`` → ``guard.mode``) is taken as old only when its value is not a mapping."""
    renamed_flags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Old flag → new flag (``--no-stream`` → ``--no-stream-enabled``)."""
    retired: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Keys still accepted that no longer mean anything → why."""
    env_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Further variables for a key, below its own (``NODE_NAME`` → ``nodeName``)."""
    reference: str = ""
    """Where the settings are documented, named when a key is unknown."""

    @property
    def env_prefix(self) -> str:
        return f"MCO_{self.service.upper()}_"

    def leaf(self, key: str) -> Leaf | None:
        return next((leaf for leaf in leaves(self.settings) if leaf.key == key), None)


@dataclasses.dataclass(frozen=True, slots=True)
class Loaded(Generic[S]):
    """Valid settings and the warnings to log once logging is set up."""

    settings: S
    notes: tuple[str, ...] = ()


class _Reading:
    """The merged values of every layer, where each came from, and what is wrong so far."""

    def __init__(self, spec: Spec[Any], *, strict: bool = False) -> None:
        self.spec = spec
        self.strict = strict
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.problems: list[str] = []
        self.notes: list[str] = []

    def set(self, key: str, value: Any, source: str) -> None:
        self.values[key] = value
        self.sources[key] = source

    def problem(self, source: str, key: str, what: str) -> None:
        self.problems.append(f"{source}: {key}: {what}")


def read_document(path: Path, *, required: bool) -> Mapping[str, Any] | None:
    """The YAML mapping in ``path``; None when it does not exist and is not ``required``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path}: does not exist; create it or pass --config with an existing file") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return parse_document(text, str(path))


def parse_document(text: str, source: str) -> Mapping[str, Any]:
    """The YAML mapping in ``text`` (empty: no settings)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(doc).__name__}")
    return doc


def load(
    spec: Spec[S],
    *,
    document: Mapping[str, Any] | None = None,
    source: str = "config",
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    flag_notes: Sequence[str] = (),
    strict: bool = False,
) -> Loaded[S]:
    """Defaults < ``document`` (from ``source``) < ``env`` < ``flags`` (key → value, None: not given).

    ``strict``: the document's values must have their keys' types as they are (no text for a
    number, no null for a default), as Go reads the same keys (mco-plugin's arguments).
    Raises :class:`ConfigError` with one line per problem.
    """
    reading = _Reading(spec, strict=strict)
    reading.notes += flag_notes
    if document:
        _read_document(reading, _renamed(reading, copy.deepcopy(dict(document)), source), source)
    _read_env(reading, env or {})
    for key, value in (flags or {}).items():
        leaf = spec.leaf(key)
        if leaf is None:
            raise ConfigError(f"internal: {spec.service} has no setting {key}")
        if value is not None:
            reading.set(key, _from_text(reading, leaf, value, leaf.flag), leaf.flag)
    converted = _convert(reading)
    if reading.problems:
        raise _error(spec, reading.problems)
    settings = _build(spec.settings, converted)
    for problem in spec.check(settings):
        below = (where for key, where in reading.sources.items() if key.startswith(problem.key + "."))
        where = reading.sources.get(problem.key) or next(below, None) or (source if document else "settings")
        reading.problem(where, problem.key, problem.what)
    if reading.problems:
        raise _error(spec, reading.problems)
    return Loaded(settings, tuple(reading.notes))


def _error(spec: Spec[Any], problems: list[str]) -> ConfigError:
    if len(problems) == 1:
        return ConfigError(problems[0])
    return ConfigError(f"{len(problems)} problems in the {spec.service} settings:\n" + "\n".join(problems))


def _renamed(reading: _Reading, doc: dict[str, Any], source: str) -> dict[str, Any]:
    def section(key: str) -> bool:  # an old key with the name of a new section: only its scalar form is old
        return reading.spec.leaf(key) is None and _has_section(reading, key)

    renamed = []
    for old, new in sorted(reading.spec.renamed.items(), key=lambda item: not section(item[0])):
        found, value = _pop(doc, old, scalar_only=section(old))
        if not found:
            continue
        renamed.append(f"{old} → {new}")
        there, _ = _pop(doc, new, scalar_only=False, peek=True)
        if there:
            reading.problem(source, new, f"given twice, also as the old key {old}; keep {new} only")
        else:
            _put(doc, new, value)
    if renamed:
        reading.notes.append(
            f"{source}: old keys read: {', '.join(renamed)}; rename them (docs: {reading.spec.reference})"
        )
    for key, why in reading.spec.retired.items():
        if key in doc:
            del doc[key]
            reading.notes.append(f"{source}: {key}: {why}; remove it from the file")
    return doc


def _has_section(reading: _Reading, key: str) -> bool:
    return any(leaf.key.startswith(key + ".") for leaf in leaves(reading.spec.settings))


def _pop(doc: dict[str, Any], key: str, *, scalar_only: bool, peek: bool = False) -> tuple[bool, Any]:
    *parents, last = key.split(".")
    node: Any = doc
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or last not in node:
        return False, None
    if scalar_only and isinstance(node[last], Mapping):
        return False, None
    return True, node[last] if peek else node.pop(last)


def _put(doc: dict[str, Any], key: str, value: Any) -> None:
    """``value`` at ``key``, sections made as needed (an old scalar standing where a section now is
    was moved first: ``stream: false`` → ``stream.enabled``)."""
    *parents, last = key.split(".")
    node = doc
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _read_document(reading: _Reading, doc: Mapping[str, Any], source: str, prefix: str = "") -> None:
    known = {leaf.key for leaf in leaves(reading.spec.settings)}
    for raw_key, value in doc.items():
        key = prefix + str(raw_key)
        if "." in str(raw_key):  # a dotted name is a path in messages, not a key of the file
            reading.problem(source, key, f"unknown key; nest it: {' → '.join(str(raw_key).split('.'))}")
        elif key in known:
            leaf = reading.spec.leaf(key)
            if value is not None:
                reading.set(key, value, source)
            elif leaf is not None and (leaf.is_list or leaf.is_mapping):
                reading.set(key, {} if leaf.is_mapping else [], source)  # null: none at all
            elif reading.strict:
                reading.problem(source, key, "expected a value, got null")
        elif _has_section(reading, key) and isinstance(value, Mapping):
            _read_document(reading, value, source, key + ".")
        elif _has_section(reading, key) and value is None:
            continue  # an empty section: its defaults
        else:
            reading.problem(source, key, _unknown(reading.spec, key, prefix, known))


def _unknown(spec: Spec[Any], key: str, prefix: str, known: set[str]) -> str:
    if key in spec.renamed.values() or any(k.startswith(key + ".") for k in known):
        return "expected a mapping of settings"
    here = sorted({k[len(prefix) :].split(".")[0] for k in known if k.startswith(prefix)})
    close = difflib.get_close_matches(key[len(prefix) :], here, n=1)
    fix = f"did you mean {close[0]!r}?" if close else f"known here: {', '.join(here)}"
    reference = f" (see {spec.reference})" if spec.reference else ""
    return f"unknown key; {fix}{reference}"


def _read_env(reading: _Reading, env: Mapping[str, str]) -> None:
    spec = reading.spec
    every = {leaf.env(spec.env_prefix): leaf for leaf in leaves(spec.settings)}
    by_name = {name: leaf for name, leaf in every.items() if not leaf.is_mapping}
    old_names = {spec.env_prefix + old.replace(".", "_").upper(): new for old, new in spec.renamed.items()}
    for name, key in spec.env_aliases.items():
        if env.get(name) and (leaf := spec.leaf(key)) is not None and leaf.env(spec.env_prefix) not in env:
            reading.set(key, _from_text(reading, leaf, env[name], f"environment {name}"), f"environment {name}")
    # old names first, so that a key's own variable wins when both are set
    for name in sorted((n for n in env if n.startswith(spec.env_prefix)), key=lambda n: n in by_name):
        where = f"environment {name}"
        leaf = by_name.get(name)
        if leaf is None and name in old_names and (leaf := spec.leaf(old_names[name])) is not None:
            reading.notes.append(f"{where} is now {leaf.env(spec.env_prefix)}; rename it (the old name is still read)")
            if leaf.env(spec.env_prefix) in env:
                continue
        if leaf is None:  # e.g. Kubernetes' service links (MCO_ANALYZER_SERVICE_HOST): not ours to refuse
            reading.notes.append(f"{where}: ignored, {_not_a_variable(spec, name, every, by_name)}")
            continue
        reading.set(leaf.key, _from_text(reading, leaf, env[name], where), where)


def _not_a_variable(spec: Spec[Any], name: str, every: Mapping[str, Leaf], by_name: Mapping[str, Leaf]) -> str:
    if name in every:
        return f"{every[name].key} is read from the file only"
    close = difflib.get_close_matches(name, list(by_name), n=1)
    return f"no {spec.service} setting has this name" + (f"; did you mean {close[0]}?" if close else "")


def _from_text(reading: _Reading, leaf: Leaf, value: Any, where: str) -> Any:
    """An environment or flag value (text, or a list of texts from a repeated flag) as the key's type."""
    if leaf.is_bool and isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        reading.problem(where, leaf.key, f"expected true or false, got {value!r}")
        return None
    if leaf.is_list:
        texts = value if isinstance(value, list | tuple) else [value]
        return [item.strip() for text in texts for item in str(text).split(",") if item.strip()]
    return value


def _convert(reading: _Reading) -> dict[str, Any]:
    """Each given value as its key's type; the problems noted."""
    out: dict[str, Any] = {}
    for key, given in reading.values.items():
        leaf = reading.spec.leaf(key)
        if leaf is None or given is None:
            continue
        where = reading.sources[key]
        value = given if reading.strict else _as_meant(leaf, given)
        if leaf.is_mapping and isinstance(value, Mapping):
            entries = {k: _convert_one(reading, leaf, f"{key}.{k}", v, where) for k, v in value.items()}
            if all(entry is not _BAD for entry in entries.values()):
                out[key] = entries
            continue
        converted = _convert_one(reading, leaf, key, value, where)
        if converted is not _BAD:
            out[key] = converted
    return out


_BAD = object()
"""A value that could not be converted (its problem is noted)."""


def _convert_one(reading: _Reading, leaf: Leaf, key: str, value: Any, where: str) -> Any:
    """``value`` as ``leaf``'s type (a mapping's entry as the entries' type), or _BAD."""
    kind = typing.get_args(_without_none(leaf.base))[1] if leaf.is_mapping and key != leaf.key else leaf.kind
    choices = leaf.choices
    wrong = [v for v in value if v not in choices] if leaf.is_list and isinstance(value, list | tuple) else []
    if choices and (wrong or (not leaf.is_list and value not in choices)):
        some = "some" if leaf.is_list else "one"
        shown = ", ".join(map(repr, wrong)) if wrong else repr(value)
        reading.problem(where, key, f"expected {some} of {', '.join(choices)}, got {shown}")
        return _BAD
    if value == "" and _without_none(leaf.base) is Path:
        if _without_none(leaf.base) is not leaf.base:
            return None  # an empty path: none given
        reading.problem(where, key, "expected a path, got ''")
        return _BAD
    try:
        converted = msgspec.convert(value, kind, strict=reading.strict, dec_hook=_dec_hook)
    except msgspec.ValidationError as exc:
        reading.problem(where, key, _what(exc, value))
        return _BAD
    if isinstance(converted, float) and not math.isfinite(converted):
        reading.problem(where, key, f"expected a finite number, got {value!r}")
        return _BAD
    return converted


def _as_meant(leaf: Leaf, value: Any) -> Any:
    """What the author of a YAML file meant: YAML 1.1 reads an unquoted ``on``/``off`` as a
    boolean and ``1.9`` as a number (text keys take them as written); a list may be written as
    comma-separated text, as in the environment."""
    if isinstance(value, bool) and ("on" if value else "off") in leaf.choices:
        return "on" if value else "off"
    if _without_none(leaf.base) is str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if leaf.is_list and isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _dec_hook(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str | Path):
        return Path(value)
    raise NotImplementedError


def _what(exc: msgspec.ValidationError, value: Any) -> str:
    text, _, where = str(exc).partition(" - at `$")
    text = text.replace("`", "")
    inner = where.rstrip("`")
    at = f" (at {inner.lstrip('.')})" if inner else ""
    text = text[:1].lower() + text[1:]
    return f"{text} {value!r}{at}" if ", got " in text else f"{text}, got {value!r}{at}"


def _build(cls: type[S], values: Mapping[str, Any]) -> S:
    """``cls`` with ``values`` (key → converted value) over its defaults, sections built bottom-up."""
    built: S = _section(cls, values, "")
    return built


def _section(cls: type[Any], values: Mapping[str, Any], prefix: str) -> Any:
    kwargs: dict[str, Any] = {}
    for info, _kind, base in _fields(cls):
        key = prefix + info.encode_name
        if _is_section(base):
            kwargs[info.name] = _section(base, values, key + ".")
        elif key in values:
            kwargs[info.name] = values[key]
    return cls(**kwargs)


# --- flags -------------------------------------------------------------------------------


class _OldFlag(argparse.Action):
    """A renamed flag: sets what the new one sets and leaves a note naming it."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, const: Any = None, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0 if const is not None else None, const=const, **kwargs)
        self.new = new

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        notes = getattr(namespace, _NOTES_DEST, None) or []
        notes.append(f"{option} is now {self.new}; rename it (the old flag is still read)")
        setattr(namespace, _NOTES_DEST, notes)
        if self.const is not None:
            setattr(namespace, self.dest, self.const)
        elif self.metavar == "LIST":
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        else:
            setattr(namespace, self.dest, values)


def add_flags(parser: argparse.ArgumentParser, spec: Spec[Any]) -> None:
    """One flag per setting (and its old names, hidden); read them back with :func:`flag_values`."""
    for leaf in leaves(spec.settings):
        if leaf.is_mapping:
            continue
        dest = _FLAG_DEST + leaf.key
        default = f"default {_shown(leaf.default)}; " if leaf.default not in (None, "", ()) else ""
        # argparse formats help with %: a description's own "80 %" is text
        text = f"{leaf.help} ({default}env {leaf.env(spec.env_prefix)})".replace("%", "%%")
        if leaf.is_bool:
            parser.add_argument(leaf.flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif leaf.is_list:
            parser.add_argument(leaf.flag, dest=dest, action="append", metavar="LIST", help=text + "; repeatable")
        else:
            metavar = "{" + ",".join(leaf.choices) + "}" if leaf.choices else _metavar(leaf)
            parser.add_argument(leaf.flag, dest=dest, metavar=metavar, help=text)
    for old, new in spec.renamed_flags.items():
        key = new.removeprefix("--no-").removeprefix("--")
        target = next((item for item in leaves(spec.settings) if item.flag == "--" + key), None)
        if target is None:
            raise ValueError(f"{spec.service}: renamed flag {old} names {new}, which is no setting's flag")
        const = False if new.startswith("--no-") else None
        parser.add_argument(
            old,
            dest=_FLAG_DEST + target.key,
            action=_OldFlag,
            new=new,
            const=const,
            metavar="LIST" if target.is_list else None,
            help=argparse.SUPPRESS,
        )


def _metavar(leaf: Leaf) -> str:
    base = _without_none(leaf.base)
    return {float: "SECONDS" if "econd" in leaf.help else "NUMBER", int: "N", Path: "PATH"}.get(base, "TEXT")


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


def flag_values(args: argparse.Namespace) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The settings given as flags (key → value) and the notes about old flags."""
    values = {k[len(_FLAG_DEST) :]: v for k, v in vars(args).items() if k.startswith(_FLAG_DEST) and v is not None}
    return values, tuple(getattr(args, _NOTES_DEST, None) or ())


def load_with_args(
    spec: Spec[S],
    args: argparse.Namespace,
    *,
    default_file: Path,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
) -> Loaded[S]:
    """``--config`` (else ``default_file`` when it exists), the environment, the flags, then ``overrides``."""
    path: Path | None = getattr(args, "config", None)
    document = read_document(path or default_file, required=path is not None)
    flags, notes = flag_values(args)
    return load(
        spec,
        document=document,
        source=str(path or default_file),
        env=env,
        flags={**flags, **(overrides or {})},
        flag_notes=notes,
    )


def settings_for_main(service: str, read: Callable[[], Loaded[S]]) -> S | None:
    """What a service's ``main`` starts with: its settings, logging set up at their ``logLevel``
    and the warnings logged; None (the problems on stderr, for exit status 2) when they are wrong."""
    try:
        loaded = read()
    except ConfigError as exc:
        print(f"mco {service}: {exc}", file=sys.stderr)
        return None
    setup_logging(loaded.settings.log_level)  # type: ignore[attr-defined]  # every service has logLevel
    for note in loaded.notes:
        logging.getLogger(f"mco_py.{service}").warning("config: %s", note)
    return loaded.settings
