"""Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (=, ==, !=)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.kubeapi.errors import bad_request

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

# ---------------------------------------------------------------------------- label selectors
# A port of k8s.io/apimachinery/pkg/labels (selector.go: Lexer, Parser, NewRequirement): the same
# accepted syntax (also `gt`/`lt` as `>`/`<`, `in ()`, `(a,,b)`) and the same error messages.

_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation "
    "is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def subdomain_errors(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    errs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _SUBDOMAIN.match(value):
        errs.append(SUBDOMAIN_MSG)
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: a label key (optional DNS subdomain prefix and '/')."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            f"a qualified name {_QNAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in subdomain_errors(parts[0])]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME.match(name):
        errs.append("name part " + _QNAME_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        errs.append(LABEL_VALUE_MSG)
    return errs


_SPECIAL = "=!(),><"
_OPERATORS = {")": "CLOSE", ",": "COMMA", "!": "NOT", "==": "==", "=": "=", ">": "gt", "in": "in", "<": "lt"}
_OPERATORS.update({"!=": "!=", "notin": "notin", "(": "OPEN"})
_BINARY = "in, notin, =, ==, !=, gt, lt"


def _lex(selector: str) -> list[tuple[str, str]]:
    """Tokens as (type, literal): types are those of _OPERATORS, ID, END and ERROR."""
    out: list[tuple[str, str]] = []
    pos, n = 0, len(selector)
    while True:
        while pos < n and selector[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            out.append(("END", ""))
            return out
        if selector[pos] in _SPECIAL:
            buffer, last = "", ("", "")
            while pos < n and selector[pos] in _SPECIAL:
                buffer += selector[pos]
                if buffer in _OPERATORS:
                    last = (_OPERATORS[buffer], buffer)
                elif last[0]:
                    break
                pos += 1
            out.append(last if last[0] else ("ERROR", f"error expected: keyword found '{buffer}'"))
        else:
            start = pos
            while pos < n and selector[pos] not in _SPECIAL and selector[pos] not in " \t\r\n":
                pos += 1
            word = selector[start:pos]
            out.append((word if word in ("in", "notin") else "ID", word))


class _Parser:
    def __init__(self, selector: str) -> None:
        self.items = _lex(selector)
        self.pos = 0

    def _token(self, index: int, values: bool) -> tuple[str, str]:
        tok, lit = self.items[index]
        return ("ID", lit) if values and tok in ("in", "notin") else (tok, lit)

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._token(self.pos, values)

    def consume(self, values: bool = True) -> tuple[str, str]:
        self.pos += 1
        return self._token(self.pos - 1, values)

    def parse(self) -> list[tuple[str, str, list[str]]]:
        requirements = []
        while True:
            tok, lit = self.lookahead()
            if tok in ("ID", "NOT"):
                try:
                    requirements.append(self.requirement())
                except ValueError as e:
                    raise ValueError(f"unable to parse requirement: {e}") from None
                tok, lit = self.consume()
                if tok == "END":
                    return requirements
                if tok == "COMMA":
                    t2, l2 = self.lookahead()
                    if t2 not in ("ID", "NOT"):
                        raise ValueError(f"found '{l2}', expected: identifier after ','")
                else:
                    raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok == "END":
                return requirements
            else:
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> tuple[str, str, list[str]]:
        operator = ""
        tok, key = self.consume()
        if tok == "NOT":
            operator = "!"
            tok, key = self.consume()
        if tok != "ID":
            raise ValueError(f"found '{key}', expected: identifier")
        if errs := qualified_name_errors(key):
            raise ValueError(f"<nil>: Invalid value: {_quote(key)}: {'; '.join(errs)}")
        if self.lookahead()[0] in ("END", "COMMA"):
            return (key, operator or "exists", [])
        if operator == "!":
            return (key, "!", [])
        tok, lit = self.consume(values=False)
        if tok not in ("in", "notin", "=", "==", "!=", "gt", "lt"):
            raise ValueError(f"found '{lit}', expected: {_BINARY}")
        values = self.values() if tok in ("in", "notin") else self.exact_value()
        return _requirement(key, tok, sorted(set(values)))

    def values(self) -> list[str]:
        tok, lit = self.consume()
        if tok != "OPEN":
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in ("ID", "COMMA"):
            found = self.identifiers()
            if self.consume()[0] != "CLOSE":
                raise ValueError(f"found '{lit}', expected: ')'")
            return found
        if tok == "CLOSE":
            self.consume()
            return [""]
        raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> list[str]:
        found: list[str] = []
        while True:
            tok, lit = self.consume()
            if tok == "ID":
                found.append(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == "CLOSE":
                    return found
                if tok2 != "COMMA":
                    raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == "COMMA":
                if not found:
                    found.append("")
                tok2, _ = self.lookahead()
                if tok2 == "CLOSE":
                    found.append("")
                    return found
                if tok2 == "COMMA":
                    self.consume()
                    found.append("")
            else:
                raise ValueError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.lookahead()[0] in ("END", "COMMA"):
            return [""]
        tok, lit = self.consume()
        if tok == "ID":
            return [lit]
        raise ValueError(f"found '{lit}', expected: identifier")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _requirement(key: str, op: str, values: list[str]) -> tuple[str, str, list[str]]:
    """labels.NewRequirement's value checks (the key was checked by the parser)."""
    errs = []
    if op in ("gt", "lt"):
        for i, value in enumerate(values):
            if not re.fullmatch(r"[+-]?[0-9]+", value) or not -(2**63) <= int(value) < 2**63:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                errs.append(f"values[{i}]: Invalid value: {_quote(value)}: {detail}")
    for i, value in enumerate(values):
        if bad := label_value_errors(value):
            errs.append(f"values[{i}][{key}]: Invalid value: {_quote(value)}: {'; '.join(bad)}")
    if errs:
        raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return (key, op, values)


def _label_test(key: str, op: str, values: list[str]) -> Callable[[dict[str, str]], bool]:
    """labels.Requirement.Matches."""
    if op in ("in", "=", "=="):
        return lambda labels: key in labels and labels[key] in values
    if op in ("notin", "!="):
        return lambda labels: key not in labels or labels[key] not in values
    if op == "exists":
        return lambda labels: key in labels
    if op == "!":
        return lambda labels: key not in labels
    bound = int(values[0])

    def compare(labels: dict[str, str]) -> bool:
        have = labels.get(key)
        if have is None or not re.fullmatch(r"[+-]?[0-9]+", have):
            return False
        return int(have) > bound if op == "gt" else int(have) < bound

    return compare


def label_matcher(selector: str | None) -> Matcher:
    """A predicate on objects for a labelSelector query value; bad syntax is 400 BadRequest."""
    if not selector:
        return lambda _obj: True
    try:
        requirements = [_label_test(*r) for r in _Parser(selector).parse()]
    except ValueError as e:
        raise bad_request(str(e)) from None

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return match


# ---------------------------------------------------------------------------- field selectors
# k8s.io/apimachinery/pkg/fields.ParseSelector (terms split on unescaped ',', values unescaped) and
# the kinds' field label conversions (their own set and wording, or the default metadata one).

#: Field label -> (path in the object, value when absent), where the label is not the path.
_FIELD_PATHS = {
    "spec.unschedulable": ("spec.unschedulable", "false"),
    "spec.hostNetwork": ("spec.hostNetwork", "false"),
    "spec.host": ("spec.nodeName", ""),
    "status.successful": ("status.succeeded", "0"),
}
DEFAULT_FIELD_ERROR = '{label} is not a known field selector: only "metadata.name", "metadata.namespace"'
OWN_FIELD_ERROR = "field label not supported: {bare}"


def field_value(obj: Obj, label: str) -> str:
    path, absent = _FIELD_PATHS.get(label, (label, ""))
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return absent
    if isinstance(value, bool):
        return "true" if value else "false"
    if label == "status.podIPs" and isinstance(value, list):
        return ",".join(str(ip.get("ip", "")) for ip in value if isinstance(ip, dict))
    return str(value)


def _split_terms(selector: str) -> list[str]:
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(selector):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    if not any(c in value for c in "\\,="):
        return value
    out, escaped = "", False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out += ch
    if escaped:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return out


def field_matcher(
    selector: str | None,
    supported: frozenset[str],
    unsupported: str = DEFAULT_FIELD_ERROR,
    stored: Callable[[str], str] = lambda label: label,
) -> Matcher:
    """A predicate for a fieldSelector. A label outside ``supported`` is a 400 with ``unsupported``
    (``{label}`` is the label quoted, ``{bare}`` as given), as the kind's real conversion answers;
    ``stored`` maps a label to its path in the stored object."""
    if not selector:
        return lambda _obj: True
    checks: list[tuple[str, bool, str]] = []
    for term in sorted(_split_terms(selector)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        label, op, value = split
        checks.append((label, op != "!=", _unescape(value)))
    for label, _, _ in checks:
        if label not in supported:
            raise bad_request(unsupported.format(label=json.dumps(label), bare=label))

    paths = [(stored(label), eq, value) for label, eq, value in checks]  # matched on the stored object

    def match(obj: Obj) -> bool:
        return all((field_value(obj, f) == v) == eq for f, eq, v in paths)

    return match
