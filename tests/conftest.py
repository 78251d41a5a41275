"""Shared fixtures: a running emulated Kubernetes API server (tests/kubeapi) and its kubeconfig."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.kubeapi import EmulatedAPI, start

# Property tests check results, never speed: no per-example deadline (a busy CI host
# turned the 200 ms default into "Flaky" failures), no "too slow" health check, and
# no example database written into the checkout. Examples stay random; a failure
# prints the seed to reproduce it (`--hypothesis-seed=N`).
settings.register_profile(
    "mco",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    print_blob=True,
)
settings.load_profile("mco")


@pytest.fixture
def kube_api() -> Iterator[EmulatedAPI]:
    """A fresh emulated API server on 127.0.0.1, port 0; stopped after the test."""
    api = start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def kubeconfig(kube_api: EmulatedAPI, tmp_path: Path) -> Path:
    """Path of a kubeconfig pointing at ``kube_api`` (namespace ``default``)."""
    return kube_api.write_kubeconfig(tmp_path / "kubeconfig")


# No tier passes by skipping. A test that cannot run here (no root, a tool, booted nodes, a VM)
# fails, naming why; it may skip only when a named environment variable asks for it: the one its
# reason names (``MCO_TEST_SKIP_<WHAT>=1``), or ``MCO_TEST_ALLOW_SKIP=1`` for every test.
_ASKED = re.compile(r"MCO_TEST_SKIP_[A-Z0-9_]+")


def skip_allowed(reason: str, env: Mapping[str, str]) -> bool:
    if env.get("MCO_TEST_ALLOW_SKIP") == "1":
        return True
    return any(env.get(name) == "1" for name in _ASKED.findall(reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if skip_allowed(reason, os.environ):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{reason}\nA test that cannot run here fails (no tier passes by skipping): provide what it needs, "
        "or set the variable its reason names (MCO_TEST_SKIP_...=1), or MCO_TEST_ALLOW_SKIP=1, to skip it."
    )
