"""The collector's certificate renewal itself, run as a short-lived child of the daemon
(``python -m mco_py.collector.renew_worker``, the stream settings as JSON on stdin; see
:mod:`mco_py.collector.renewal`), so the daemon never loads ``cryptography``.

A new key is made on this host and never leaves it: only its signing request goes out
(``Analyzer.Renew``), over a connection authenticated with the current certificate. The first
analyzer that signs wins; the answer is checked (this key, the same subject and names, a chain to
the trust bundle) before it replaces the files (mco_py.obs.pki.install_pair), and the streams use
it from their next connection on (ChannelTLS), the open ones staying up.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import msgspec

from mco_py.collector.stream import channel_credentials, metadata
from mco_py.config.collector import StreamSettings
from mco_py.errors import ConfigError
from mco_py.obs.pki import finish_interrupted, install_pair, load_chain, new_key, signing_request, verify_renewed
from mco_py.obs.renewal import RenewalError
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc

#: Longest one analyzer may take to answer a renewal, seconds.
RENEW_TIMEOUT_S = 10.0


def renew_client_certificate(config: StreamSettings, *, clock: Callable[[], float] = time.time) -> str:
    """Renew ``stream.tlsCert``/``tlsKey`` through the first analyzer that signs; returns its address.
    Raises RenewalError naming every analyzer's answer when none did."""
    if config.tls_cert is None or config.tls_key is None or config.tls_ca is None:
        raise ConfigError("certificate renewal needs stream.tlsCa, stream.tlsCert and stream.tlsKey")
    try:
        current = load_chain(config.tls_cert.read_bytes())[0]
        trust = config.tls_ca.read_bytes()
    except (OSError, ValueError) as exc:
        raise RenewalError(f"cannot read the client certificate or the trust bundle: {exc}") from exc
    key = new_key()
    request = pb.RenewRequest(csr_pem=signing_request(current, key))
    credentials = channel_credentials(config)
    assert credentials is not None  # tlsCa is set
    options = [("grpc.ssl_target_name_override", config.tls_server_name)] if config.tls_server_name else []
    problems = []
    for target in dict.fromkeys(config.analyzers):
        with grpc.secure_channel(target, credentials, options=options) as channel:
            try:
                reply = pb_grpc.AnalyzerStub(channel).Renew(request, timeout=RENEW_TIMEOUT_S, metadata=metadata(config))
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                problems.append(f"{target}: {code.name if code else '?'}: {details}")
                continue
        chain = bytes(reply.certificate_chain_pem)
        try:
            verify_renewed(chain, key, current, trust, at=clock())
        except RenewalError as exc:
            problems.append(f"{target}: {exc}")
            continue
        install_pair(config.tls_cert, config.tls_key, chain, key)
        return target
    raise RenewalError("no analyzer renewed the client certificate: " + "; ".join(problems or ["no analyzers"]))


def _paths(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError


def main() -> int:
    """Read the stream settings (JSON) from stdin, renew, print the analyzer that signed; exit 1 with
    the reason on stderr when no analyzer did. With ``--finish``: only complete a renewal a crash cut
    short (mco_py.obs.pki.finish_interrupted) and print ``finished`` or ``nothing``."""
    try:
        config = msgspec.json.decode(sys.stdin.buffer.read(), type=StreamSettings, dec_hook=_paths)
        if sys.argv[1:] == ["--finish"]:
            if config.tls_cert is None or config.tls_key is None:
                raise ConfigError("stream.tlsCert and stream.tlsKey are not set")
            print("finished" if finish_interrupted(config.tls_cert, config.tls_key) else "nothing")
            return 0
        print(renew_client_certificate(config))
    except (RenewalError, ConfigError, OSError, msgspec.DecodeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
