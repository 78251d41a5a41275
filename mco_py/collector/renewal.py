"""The collector renews its stream client certificate through an analyzer (``Analyzer.Renew``).

A new key is made on this host and never leaves it: only its signing request goes out, over a
connection authenticated with the current certificate. The first analyzer that signs wins; the
answer is checked (this key, the same subject and names, a chain to the trust bundle) before it
replaces the files (mco_py.obs.pki.install_pair), and the streams use it from their next
connection on (ChannelTLS), the open ones staying up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from mco_py.collector.stream import channel_credentials, metadata
from mco_py.config.collector import StreamSettings
from mco_py.errors import ConfigError
from mco_py.obs.pki import RenewalError, install_pair, load_chain, new_key, signing_request, verify_renewed
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
