"""The collector renews its stream client certificate through an analyzer, at 2/3 of its lifetime.

The daemon only schedules it (:class:`mco_py.obs.renewal.CertRenewer`, no X.509 library); each
attempt runs in a short-lived child (:mod:`mco_py.collector.renew_worker`), which makes the key and
the request with ``cryptography``. The daemon never loads that library (about 10 MB of RSS on
every node, for an attempt a year).
"""

from __future__ import annotations

import subprocess
import sys

import msgspec

from mco_py.config.collector import StreamSettings
from mco_py.obs.renewal import RenewalError, pending_key_path

#: Longest one attempt may take (every analyzer tried, 10 s each at most, and the child's start).
ATTEMPT_TIMEOUT_S = 120.0


def renew_in_child(config: StreamSettings, *, timeout: float = ATTEMPT_TIMEOUT_S) -> str:
    """Renew ``stream.tlsCert`` in a child process; the analyzer that signed. Raises RenewalError with
    the child's reason."""
    return _child(config, [], timeout)


def finish_interrupted_renewal(config: StreamSettings) -> bool:
    """Complete a renewal a crash cut between its renames (``<tlsKey>.next`` left): True when one was.
    Run before the streams load their files; without a ``.next`` file no child is started."""
    if config.tls_key is None or not pending_key_path(config.tls_key).exists():
        return False
    return _child(config, ["--finish"], ATTEMPT_TIMEOUT_S) == "finished"


def _child(config: StreamSettings, args: list[str], timeout: float) -> str:
    argv = [sys.executable, "-m", "mco_py.collector.renew_worker", *args]
    try:
        done = subprocess.run(
            argv, input=msgspec.json.encode(config, enc_hook=str), capture_output=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RenewalError(f"the renewal child did not finish: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RenewalError(lines[-1][:1000] if lines else f"the renewal child exited with {done.returncode}")
    return done.stdout.decode("utf-8", "replace").strip()
