"""When and how often a service renews one of its certificates: :class:`CertRenewer`.

No X.509 library here (the term is read with :func:`mco_py.obs.credentials.read_validity`): the
collector schedules its renewal in the daemon and makes the key and request in a short-lived
child (mco_py/collector/renew_worker.py), so the daemon never loads ``cryptography``.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from mco_py.errors import ConfigError, MCOError
from mco_py.obs.credentials import CredentialError, read_validity
from mco_py.obs.files import file_stamps

log = logging.getLogger(__name__)

#: Renew when this share (about 2/3) of a certificate's lifetime has passed (the controller reissues at 2/3).
DEFAULT_RENEW_AT = 0.67
#: Each renewal starts up to this share of the lifetime earlier, at random (hosts do not renew in step).
JITTER = 0.05
#: A failed renewal is retried after a minute, then twice as long each time up to an hour.
BACKOFF_FIRST = 60.0
BACKOFF_MAX = 3600.0


def pending_key_path(key: Path) -> Path:
    """Where a renewal keeps the new key until its certificate is in place (mco_py.obs.pki.install_pair)."""
    return key.with_name(f"{key.name}.next")


class RenewalError(MCOError):
    """A renewal failed this time (no analyzer answered, the answer was unusable); the old certificate
    still serves and the renewal is retried."""


class CertRenewer:
    """Renews one certificate at ``renew_at`` of its lifetime, in its own thread.

    ``renew`` does it (raises RenewalError or ConfigError to fail this attempt; any other error fails it
    too, logged with its traceback, so a bug never ends renewal for good); ``on_result``
    hears ``renewed`` or ``error`` for the renewals counter. A failed attempt is retried with
    doubling backoff (:meth:`backoff`, a minute up to an hour), also after the certificate expired
    (a renewal the analyzer then refuses, counted, until a playbook run replaces it); a
    certificate replaced from outside is scheduled anew.
    """

    def __init__(
        self,
        name: str,
        cert: Path,
        renew: Callable[[], None],
        *,
        renew_at: float = DEFAULT_RENEW_AT,
        on_result: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        poll: float = 60.0,
    ) -> None:
        self.name = name
        self.cert = cert
        self._renew = renew
        self.renew_at = renew_at
        self._on_result = on_result
        self._clock = clock
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._poll = poll
        self._jitter: tuple[tuple[float, float], float] | None = None  # (the certificate's validity, its draw)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"renew-{name}", daemon=True)

    def start(self) -> CertRenewer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def due(self, not_before: float, not_after: float) -> float:
        """When to renew a certificate valid from ``not_before`` to ``not_after`` (jittered earlier).

        The jitter is drawn once per certificate (its validity) and kept while it stays: the loop asks
        at every poll, and a fresh draw each time would renew at the first early one.
        """
        if self._jitter is None or self._jitter[0] != (not_before, not_after):
            self._jitter = ((not_before, not_after), self._rng.uniform(0, JITTER))
        lifetime = max(0.0, not_after - not_before)
        return not_before + lifetime * max(0.0, self.renew_at - self._jitter[1])

    def _run(self) -> None:
        failures = 0
        retry_at = 0.0
        while not self._stop.is_set():
            try:
                validity = read_validity("certificate", self.cert)
            except CredentialError as exc:
                log.warning("certificate %s: cannot schedule its renewal: %s", self.name, exc)
                self._stop.wait(self._poll)
                continue
            now = self._clock()
            due = max(self.due(validity.not_before, validity.not_after), retry_at)
            if due > now:
                self._stop.wait(min(due - now, self._poll))
                continue  # the file may have been replaced meanwhile: read it again
            stamp = file_stamps((self.cert,))
            try:
                self._renew()
            except Exception as exc:  # the last resort: a bug must not end renewal for good
                failures += 1
                if not isinstance(exc, RenewalError | ConfigError | OSError):
                    log.exception("renewing certificate %s failed unexpectedly", self.name)
                self._report("error")
                left = validity.not_after - self._clock()
                log.warning(
                    "renewing certificate %s failed (attempt %d; it is valid %s more), retrying: %s",
                    self.name,
                    failures,
                    f"{left:.0f} s" if left > 0 else "no",
                    exc,
                    extra={"credential": self.name, "attempt": failures},
                )
                if file_stamps((self.cert,)) != stamp:  # replaced from outside meanwhile: schedule it afresh
                    failures, retry_at = 0, 0.0
                else:
                    retry_at = self._clock() + self.backoff(validity.lifetime, failures)
                continue
            failures, retry_at = 0, 0.0
            self._report("renewed")
            log.info("renewed certificate %s", self.name, extra={"credential": self.name})

    def backoff(self, lifetime: float, failures: int) -> float:
        """Seconds before retry number ``failures``: doubling from a minute (or a hundredth of a shorter
        lifetime, at least half a second) up to an hour (or a tenth of a shorter lifetime, at least a
        second), jittered between half and all of it."""
        lifetime = lifetime if math.isfinite(lifetime) else 0.0
        first = max(0.5, min(BACKOFF_FIRST, lifetime / 100))
        longest = max(1.0, min(BACKOFF_MAX, lifetime / 10))
        delay = min(longest, first * 2 ** min(failures - 1, 30))
        return self._rng.uniform(delay / 2, delay)

    def _report(self, result: str) -> None:
        if self._on_result is not None:
            self._on_result(result)


def stop_all(renewers: Iterable[CertRenewer]) -> None:
    """Stop each of ``renewers``."""
    for renewer in renewers:
        renewer.stop()
