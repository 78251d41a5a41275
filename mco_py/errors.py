"""The MCO error hierarchy.

Every adapter raises one of these (``raise ... from`` the library error), so no
library exception escapes its adapter, and each adapter maps them to its
protocol's status in one place.
"""

from __future__ import annotations


class MCOError(Exception):
    """Base of every error MCO raises on purpose."""


class ConfigError(MCOError):
    """A configuration document or flag is invalid. The message says how to fix it."""


class RulesError(ConfigError):
    """A detection-rules document is invalid.

    ``problems`` lists one human-readable line per problem, each naming the
    field (dotted path) and what to do about it.
    """

    def __init__(self, problems: list[str], *, source: str = "rules") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(f"{source}: " + "; ".join(self.problems))


class SignalUnavailable(MCOError):
    """A host signal cannot be read; the message is the absence reason."""


class ReportError(MCOError):
    """A report document cannot be read, decoded or written."""


class ReportNotFound(ReportError):
    """The report does not exist (yet)."""


class ReportConflict(ReportError):
    """The report changed underneath a write (resourceVersion conflict)."""


class StoreUnavailable(ReportError):
    """The report store (API server, file system) cannot be reached right now."""


class GenerationTaken(ReportError):
    """A sharded report's new generation is not above the one the report object names (another
    writer's clock ran ahead): write again, numbered ``floor`` or above."""

    def __init__(self, message: str, floor: int) -> None:
        super().__init__(message)
        self.floor = floor


def error_for_status(status: int, text: str) -> ReportError:
    """The store error for an API reply with HTTP ``status`` (404: not found, 409: conflict, else unavailable)."""
    if status == 404:
        return ReportNotFound(text)
    if status == 409:
        return ReportConflict(text)
    return StoreUnavailable(text)


class DecodeError(MCOError):
    """A request or message from a peer cannot be decoded."""


class TransportError(MCOError):
    """A network peer (analyzer, API server) failed or cannot be reached."""
