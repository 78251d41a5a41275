"""The collector daemon renews in a short-lived child and never loads cryptography itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mco_py.collector.renewal import finish_interrupted_renewal, renew_in_child
from mco_py.config.collector import StreamSettings
from mco_py.obs.pki import key_pem, load_chain, new_key
from mco_py.obs.renewal import RenewalError, pending_key_path
from tests.analyzer.certs import TestCA
from tests.cluster.cluster import free_port


def settings(tmp_path: Path, *analyzers: str) -> StreamSettings:
    ca = TestCA(tmp_path)
    issued = ca.issue("collector", "node-1", ["node-1"], server=False)
    return StreamSettings(
        analyzers=analyzers, tls_ca=ca.path, tls_cert=issued.cert, tls_key=issued.key, tls_server_name="localhost"
    )


def test_a_renewal_no_analyzer_answers_fails_naming_each_analyzer(tmp_path: Path) -> None:
    port = free_port()
    config = settings(tmp_path, f"127.0.0.1:{port}")
    before = config.tls_cert.read_bytes()  # type: ignore[union-attr]
    with pytest.raises(RenewalError, match=rf"no analyzer renewed the client certificate: 127\.0\.0\.1:{port}: "):
        renew_in_child(config)
    assert config.tls_cert.read_bytes() == before  # type: ignore[union-attr]


def test_a_renewal_cut_short_is_finished_before_the_streams_start(tmp_path: Path) -> None:
    config = settings(tmp_path, "127.0.0.1:1")
    assert config.tls_key is not None
    assert not finish_interrupted_renewal(config)  # nothing pending: no child at all
    stale = key_pem(new_key())
    pending_key_path(config.tls_key).write_bytes(stale)
    assert not finish_interrupted_renewal(config)  # a key of no installed certificate: dropped
    assert not pending_key_path(config.tls_key).exists()
    # the certificate renamed in, the key not yet
    key = config.tls_key.read_bytes()
    config.tls_key.write_bytes(stale)
    pending_key_path(config.tls_key).write_bytes(key)
    assert finish_interrupted_renewal(config)
    assert config.tls_key.read_bytes() == key
    assert load_chain(config.tls_cert.read_bytes())  # type: ignore[union-attr]


def test_the_daemon_side_of_renewal_imports_no_x509_library() -> None:
    code = (
        "import sys, mco_py.collector.main, mco_py.collector.renewal, mco_py.obs.renewal; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography' or m == 'mco_py.obs.pki'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
