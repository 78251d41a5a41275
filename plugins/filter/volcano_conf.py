# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""Minimal text edits of Volcano's ``volcano-scheduler.conf``: MCO's ``extender`` or ``mco-plugin`` entry only.

Approach: the text is parsed with PyYAML's ``compose`` (node tree with line/column
marks), which tells where each tier and plugin entry sits. Only the lines of our
entry are replaced, or new lines are inserted after the last plugin of the target
tier (the one with ``predicates``/``nodeorder``); every other byte of the text is kept
as it was (comments, quoting, ordering, blank lines). Flow-style plugin lists
(``plugins: [...]``) have no lines to edit; for those the whole document is
re-serialised (comments are lost).

An ``extender`` entry is ours when its ``extender.urlPrefix`` starts with our prefix, the
scheme (http or https) and any ``user:password@`` aside (Volcano allows one extender, and it
may be someone else's); an ``mco-plugin`` entry is ours by its name (the plugin compiled into
MCO's vc-scheduler). What the find filter returns carries no password (``***`` instead).

Filters:
  volcano_extender_find(conf, ours_prefix='') -> where the extender entry is, its arguments, whether ours
  volcano_extender_url(scheme, host, port, path, user='', password='') -> extender.urlPrefix (userinfo escaped)
  volcano_extender_set(conf, args, ours_prefix, replace_foreign=False) -> new conf text
  volcano_extender_remove(conf, ours_prefix) -> conf without our entry (a foreign one is kept)
  volcano_plugin_find(conf, name='mco-plugin') -> where the plugin entry is and its arguments
  volcano_plugin_set(conf, args, name='mco-plugin') -> new conf text
  volcano_plugin_remove(conf, name='mco-plugin') -> conf without the plugin entry
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

import yaml

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - only outside Ansible
    AnsibleFilterError = ValueError  # type: ignore[misc,assignment]

TARGET_PLUGINS = ("predicates", "nodeorder")
#: The name MCO's plugin registers in its vc-scheduler build (scheduler/volcano: ``Name``).
PLUGIN = "mco-plugin"


class VolcanoConfError(ValueError):
    """The scheduler configuration cannot be edited safely."""


def _plain(value: Any) -> Any:
    """Plain Python types (Ansible passes tagged str/dict subclasses that PyYAML cannot represent)."""
    for plain in (bool, int, float, str):  # bool before int: bool is an int subclass
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _scalar(node: yaml.Node) -> Any:
    return yaml.safe_load(yaml.serialize(node)) if node is not None else None


def _mapping_get(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node
    return None


def _compose(conf: str) -> yaml.Node:
    try:
        root = yaml.compose(conf, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise VolcanoConfError(f"volcano-scheduler.conf is not valid YAML: {exc}") from exc
    if root is None or not isinstance(root, yaml.MappingNode):
        raise VolcanoConfError("volcano-scheduler.conf must be a YAML mapping with a 'tiers' list")
    return root


def _tiers(root: yaml.Node) -> list[yaml.Node]:
    tiers = _mapping_get(root, "tiers")
    if not isinstance(tiers, yaml.SequenceNode) or not tiers.value:
        raise VolcanoConfError("volcano-scheduler.conf has no 'tiers' list; add at least one tier with plugins")
    return list(tiers.value)


def _plugins(tier: yaml.Node) -> yaml.SequenceNode | None:
    plugins = _mapping_get(tier, "plugins")
    return plugins if isinstance(plugins, yaml.SequenceNode) else None


def _plugin_name(item: yaml.Node) -> str | None:
    name = _mapping_get(item, "name")
    return name.value if isinstance(name, yaml.ScalarNode) else None


def _find(conf: str, name: str) -> dict[str, Any]:
    """Where the entry called ``name`` is (tier/index) and its arguments; the target tier."""
    conf = _plain(conf)
    root = _compose(conf)
    tiers = _tiers(root)
    found: list[dict[str, Any]] = []
    target = None
    for tier_index, tier in enumerate(tiers):
        plugins = _plugins(tier)
        if plugins is None:
            continue
        names = [_plugin_name(item) for item in plugins.value]
        if target is None and any(n in TARGET_PLUGINS for n in names):
            target = tier_index
        for plugin_index, plugin_name in enumerate(names):
            if plugin_name == name:
                arguments = _scalar(_mapping_get(plugins.value[plugin_index], "arguments")) or {}
                found.append({"tier": tier_index, "index": plugin_index, "arguments": arguments})
    if target is None:
        target = 1 if len(tiers) > 1 else 0
    if len(found) > 1:
        places = ", ".join(f"tier {f['tier']} entry {f['index']}" for f in found)
        why = "Volcano allows one" if name == "extender" else "keep one"
        raise VolcanoConfError(
            f"volcano-scheduler.conf has {len(found)} '{name}' entries ({places}); {why}, remove the extras"
        )
    entry = found[0] if found else None
    return {
        "found": entry is not None,
        "tier": entry["tier"] if entry else None,
        "index": entry["index"] if entry else None,
        "arguments": entry["arguments"] if entry else {},
        "target_tier": target,
    }


def _find_extender(conf: str) -> dict[str, Any]:
    find = _find(conf, "extender")
    find["url_prefix"] = str(find["arguments"].get("extender.urlPrefix", "")) if find["found"] else ""
    return find


def _without_credentials(url: str) -> str:
    """``url`` without its scheme and ``user:password@`` (``//host:port/path``), to tell whose it is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return url
    return "//" + parts.netloc.rpartition("@")[2] + url[len(parts.scheme) + 3 + len(parts.netloc) :]


def redact(url: str) -> str:
    """``url`` with the password of its ``user:password@`` as ``***`` (for messages and facts)."""
    parts = urlsplit(url)
    userinfo, at, _host = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    start = len(parts.scheme) + 3
    return url[:start] + f"{user}:***" + url[start + len(userinfo) :]


def is_ours(url_prefix: str, ours_prefix: str) -> bool:
    """Whether ``url_prefix`` (an entry's) is MCO's: it starts with ``ours_prefix``, scheme and credentials aside."""
    return _without_credentials(url_prefix).startswith(_without_credentials(ours_prefix))


def find_extender(conf: str, ours_prefix: str = "") -> dict[str, Any]:
    """Where the ``extender`` entry is (tier/index) and its arguments (the password of ``extender.urlPrefix``
    as ``***``); the target tier; ``ours`` when ``ours_prefix`` is given and the entry is MCO's."""
    find = _find_extender(conf)
    find["url_prefix"] = redact(find["url_prefix"])
    if "extender.urlPrefix" in find["arguments"]:
        find["arguments"] = {**find["arguments"], "extender.urlPrefix": find["url_prefix"]}
    find["ours"] = bool(find["found"] and ours_prefix and is_ours(find["url_prefix"], _plain(ours_prefix)))
    return find


def extender_url(  # noqa: PLR0917 - a Jinja filter takes its arguments by position
    scheme: str, host: str, port: int, path: str, user: str = "", password: str = ""
) -> str:
    """The ``extender.urlPrefix`` Volcano calls: ``scheme://[user:password@]host:port/path``, the user and
    password percent-escaped (Go's net/http sends them as ``Authorization: Basic``)."""
    scheme, host, path, user, password = (str(_plain(v)) for v in (scheme, host, path, user, password))
    if scheme not in ("http", "https"):
        raise VolcanoConfError(f"the extender's scheme is http or https, not {scheme!r}")
    if bool(user) != bool(password):
        raise VolcanoConfError("give the basic auth user and its password together (or neither)")
    userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}@" if user else ""
    return f"{scheme}://{userinfo}{host}:{int(port)}/{path.lstrip('/')}"


def find_plugin(conf: str, name: str = PLUGIN) -> dict[str, Any]:
    """Where the plugin entry ``name`` is (tier/index) and its arguments; the target tier."""
    return _find(conf, _plain(name))


def _render_scalar(value: Any) -> str:
    """One YAML value on one line (mappings and lists in flow style, keys in the given order)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()
    return text.removesuffix("\n...").strip()


def render_entry(arguments: dict[str, Any], dash_column: int, item_column: int, name: str = "extender") -> list[str]:
    """Lines of the plugin list item ``name``, dash at ``dash_column``; no ``arguments:`` when there are none."""
    first = " " * dash_column + "-" + " " * (item_column - dash_column - 1) + f"name: {name}\n"
    lines = [first]
    if arguments:
        lines.append(" " * item_column + "arguments:\n")
    for key, value in arguments.items():
        lines.append(" " * (item_column + 2) + f"{key}: {_render_scalar(value)}\n")
    return lines


def _item_lines(lines: list[str], item: yaml.Node) -> tuple[int, int, int, int]:
    """(first line, last line inclusive, dash column, item column) of a block list item."""
    start_line = item.start_mark.line
    item_column = item.start_mark.column
    dash_column = lines[start_line].rfind("-", 0, item_column)
    if dash_column < 0:
        raise VolcanoConfError("unexpected layout of a plugin entry (no '-' before it)")
    last_line = _last_content_line(item)
    return start_line, last_line, dash_column, item_column


def _last_content_line(node: yaml.Node) -> int:
    """Last line holding a character of ``node`` (scalar end marks are exact, collection ones are not)."""
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        end = node.end_mark
        return end.line if end.column > 0 else end.line - 1
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            children.extend((key_node, value_node))
    elif isinstance(node, yaml.SequenceNode):
        children.extend(node.value)
    if not children:
        return node.start_mark.line
    return max(_last_content_line(child) for child in children)


def _block_layout(plugins: yaml.SequenceNode) -> bool:
    return not plugins.flow_style and all(
        isinstance(item, yaml.MappingNode) and not item.flow_style for item in plugins.value
    )


def _redump(conf: str, name: str, find: dict[str, Any], arguments: dict[str, Any]) -> str:
    data = yaml.safe_load(conf)
    tiers = data["tiers"]
    if find["found"]:
        del tiers[find["tier"]]["plugins"][find["index"]]
    entry: dict[str, Any] = {"name": name, "arguments": dict(arguments)} if arguments else {"name": name}
    tiers[find["target_tier"]].setdefault("plugins", []).append(entry)
    return str(yaml.safe_dump(data, default_flow_style=False, sort_keys=False))


def _check_foreign(find: dict[str, Any], ours_prefix: str, replace_foreign: bool) -> None:
    if find["found"] and not is_ours(find["url_prefix"], ours_prefix) and not replace_foreign:
        raise VolcanoConfError(
            f"volcano-scheduler.conf already has another extender (extender.urlPrefix={redact(find['url_prefix'])!r}); "
            "Volcano allows only one. Remove it, or set volcano_extender_replace_existing: true to replace it"
        )


def _edit_lines(
    lines: list[str],
    find: dict[str, Any],
    target: yaml.SequenceNode,
    old: yaml.SequenceNode | None,
    arguments: dict[str, Any],
    *,
    name: str,
) -> None:
    """Replace the entry in place, or insert after the target tier's last plugin (and drop the old one)."""
    if old is not None and find["tier"] == find["target_tier"]:
        first, last, dash, column = _item_lines(lines, target.value[find["index"]])
        lines[first : last + 1] = render_entry(arguments, dash, column, name)
        return
    _, anchor_last, dash, column = _item_lines(lines, target.value[-1])
    edits: list[tuple[int, int, list[str]]] = [
        (anchor_last + 1, anchor_last + 1, render_entry(arguments, dash, column, name))
    ]
    if old is not None:
        if len(old.value) == 1:
            raise VolcanoConfError(
                f"the {name} entry is the only plugin of tier {find['tier']}; "
                f"move it to tier {find['target_tier']} by hand"
            )
        first, last, _, _ = _item_lines(lines, old.value[find["index"]])
        edits.append((first, last + 1, []))
    # Edit from the bottom up so earlier line numbers stay valid.
    for start, stop, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start:stop] = replacement


def _set_entry(conf: str, name: str, find: dict[str, Any], arguments: dict[str, Any]) -> str:
    """``conf`` with exactly one entry ``name`` carrying ``arguments`` in the target tier."""
    if find["found"] and find["tier"] == find["target_tier"] and find["arguments"] == dict(arguments):
        return conf
    tiers = _tiers(_compose(conf))
    target = _plugins(tiers[find["target_tier"]])
    old = _plugins(tiers[find["tier"]]) if find["found"] else None
    if target is None or not target.value or not _block_layout(target) or (old is not None and not _block_layout(old)):
        return _redump(conf, name, find, arguments)
    had_newline = conf.endswith("\n")
    lines = (conf if had_newline else conf + "\n").splitlines(keepends=True)
    _edit_lines(lines, find, target, old, arguments, name=name)
    result = "".join(lines)
    if not had_newline:
        result = result[:-1]
    # Safety net: the edit must parse and carry exactly our arguments in the target tier.
    check = _find(result, name)
    if check["arguments"] != dict(arguments) or check["tier"] != check["target_tier"]:
        raise VolcanoConfError(f"internal error: the edited volcano-scheduler.conf lost the {name} entry")
    return result


def _remove_entry(conf: str, name: str, find: dict[str, Any]) -> str:
    """``conf`` without the entry ``find`` located: only its lines go, every other byte stays."""
    plugins = _plugins(_tiers(_compose(conf))[find["tier"]])
    if plugins is None or not _block_layout(plugins):
        data = yaml.safe_load(conf)
        del data["tiers"][find["tier"]]["plugins"][find["index"]]
        return str(yaml.safe_dump(data, default_flow_style=False, sort_keys=False))
    if len(plugins.value) == 1:
        raise VolcanoConfError(f"the {name} entry is the only plugin of tier {find['tier']}; remove that tier by hand")
    had_newline = conf.endswith("\n")
    lines = (conf if had_newline else conf + "\n").splitlines(keepends=True)
    first, last, _, _ = _item_lines(lines, plugins.value[find["index"]])
    del lines[first : last + 1]
    result = "".join(lines)
    if not had_newline:
        result = result[:-1]
    if _find(result, name)["found"]:
        raise VolcanoConfError(f"internal error: the {name} entry is still in the edited volcano-scheduler.conf")
    return result


def _text(conf: Any) -> str:
    if not isinstance(conf, str):
        raise VolcanoConfError(f"volcano-scheduler.conf must be text, got {type(conf).__name__}")
    return str(_plain(conf))


def set_extender(conf: str, arguments: dict[str, Any], ours_prefix: str, replace_foreign: bool = False) -> str:
    """Return ``conf`` with exactly one ``extender`` entry carrying ``arguments`` in the target tier.

    An existing entry whose ``extender.urlPrefix`` does not start with ``ours_prefix`` is
    foreign: raise unless ``replace_foreign``. Unchanged input is returned as the same object.
    """
    original = conf
    conf, arguments, ours_prefix = _text(conf), _plain(arguments), _plain(ours_prefix)
    find = _find_extender(conf)
    _check_foreign(find, ours_prefix, replace_foreign)
    result = _set_entry(conf, "extender", find, arguments)
    return original if result == conf else result


def remove_extender(conf: str, ours_prefix: str) -> str:
    """Return ``conf`` without our ``extender`` entry: only its lines go, every other byte stays.

    No entry, or a foreign one (``extender.urlPrefix`` not starting with ``ours_prefix``):
    ``conf`` is returned as the same object. So ``remove_extender(set_extender(c, ...), ...)``
    gives back ``c`` for a block-style ``c`` that had no extender.
    """
    original = conf
    conf, ours_prefix = _text(conf), _plain(ours_prefix)
    find = _find_extender(conf)
    if not find["found"] or not is_ours(find["url_prefix"], ours_prefix):
        return original
    return _remove_entry(conf, "extender", find)


def set_plugin(conf: str, arguments: dict[str, Any], name: str = PLUGIN) -> str:
    """Return ``conf`` with exactly one entry ``name`` (MCO's ``mco-plugin``) carrying ``arguments``
    (none: an entry without ``arguments:``, the plugin's defaults) in the target tier. An entry
    elsewhere moves there. Unchanged input is returned as the same object."""
    original = conf
    conf, arguments, name = _text(conf), _plain(arguments or {}), _plain(name)
    if not isinstance(arguments, dict):
        raise VolcanoConfError(f"the {name} arguments must be a mapping, got {type(arguments).__name__}")
    result = _set_entry(conf, name, _find(conf, name), arguments)
    return original if result == conf else result


def remove_plugin(conf: str, name: str = PLUGIN) -> str:
    """Return ``conf`` without the entry ``name``: only its lines go, every other byte stays.
    No entry: ``conf`` is returned as the same object."""
    original = conf
    conf, name = _text(conf), _plain(name)
    find = _find(conf, name)
    if not find["found"]:
        return original
    return _remove_entry(conf, name, find)


def _wrap(func: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except VolcanoConfError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return wrapper


class FilterModule:
    """volcano_extender_find/_url/_set/_remove and volcano_plugin_find/_set/_remove."""

    def filters(self) -> dict[str, Any]:
        return {
            "volcano_extender_find": _wrap(find_extender),
            "volcano_extender_url": _wrap(extender_url),
            "volcano_extender_set": _wrap(set_extender),
            "volcano_extender_remove": _wrap(remove_extender),
            "volcano_plugin_find": _wrap(find_plugin),
            "volcano_plugin_set": _wrap(set_plugin),
            "volcano_plugin_remove": _wrap(remove_plugin),
        }
