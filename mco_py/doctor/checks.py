"""What ``mco doctor`` concludes from what it saw on a host: pure functions, no I/O.

The probe (:mod:`mco_py.doctor.probe`) gathers a :class:`PartView` per MCO part installed on
the host (its configuration, process, port owner and ``/metrics`` text); :func:`judge` turns
them into :class:`Check` results, each with a verdict and, when not ok, the next step.
"""

from __future__ import annotations

import enum
import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from mco_py.obs.credentials import Validity


class Verdict(enum.IntEnum):
    """Ordered: the worst verdict of a run is its exit code."""

    OK = 0
    WARN = 1
    FAIL = 2

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: ``name`` (``collector stream``), verdict, what was seen, what to do."""

    name: str
    verdict: Verdict
    detail: str
    next_step: str = ""


@dataclass(frozen=True, slots=True)
class CredentialView:
    """One credential a part loads, as the probe read its file at ``read_at`` (epoch seconds)."""

    name: str
    """Its ``credential`` label on ``mco_<part>_credential_expiry_timestamp_seconds``."""
    path: str
    read_at: float
    validity: Validity | None = None
    error: str = ""
    """Why the file gave no expiry (unreadable, not a certificate or token)."""


@dataclass(frozen=True, slots=True)
class PartView:
    """What the probe saw of one part (collector, analyzer or extender) on this host."""

    part: str
    port: int
    process: str = ""
    """``pid N (command line)`` of the part's process; empty when none runs."""
    port_owner: str = ""
    """``pid N (name)`` listening on ``port``; empty when nobody listens."""
    port_is_own: bool = False
    """The listener is the part's own process."""
    port_owner_hidden: bool = False
    """Something listens, but this user may not see which process (not root)."""
    metrics: str | None = None
    """``/metrics`` text; None when it did not answer."""
    metrics_error: str = ""
    metrics_protected: str = ""
    """Why ``/metrics`` was not read although the port asks for credentials (client certificate, basic auth)."""
    ready: tuple[int, str] | None = None
    """Extender: (HTTP status, body) of ``/readyz``; None when it did not answer."""
    settings: Mapping[str, object] = field(default_factory=dict)
    """Settings from its configuration file (the extender's ``crStatusTTLSeconds``)."""
    credentials: tuple[CredentialView, ...] = ()
    """The certificates and tokens it loads (:func:`mco_py.config.analyzer.credential_files`)."""


Samples = dict[str, list[tuple[dict[str, str], float]]]

#: How a part runs, for the next steps (systemd unit or MCO's supervisord program).
SERVICE_HINT = (
    "`systemctl status mco-{part}` and `journalctl -u mco-{part}` (without systemd: "
    "`supervisorctl -c /etc/mco/supervisord.conf status` and /var/log/mco/mco-{part}.log)"
)


def parse_metrics(text: str) -> Samples:
    """Sample name -> [(labels, value)] of a Prometheus text exposition."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def _one(samples: Samples, name: str, default: float | None = None) -> float | None:
    rows = samples.get(name, [])
    return rows[0][1] if rows else default


def judge(views: list[PartView], config_dir: Path = Path("/etc/mco")) -> list[Check]:
    """Every check for the parts seen, in a stable order (parts, then their checks); ``config_dir``:
    where their files were looked for."""
    if not views:
        return [
            Check(
                "installed parts",
                Verdict.FAIL,
                f"no MCO configuration found ({config_dir}/collector.yaml, analyzer.yaml or extender.yaml)",
                "deploy MCO (`make run`, or `ansible-playbook ... playbooks/site.yml`), or pass --config-dir",
            )
        ]
    out: list[Check] = []
    for view in views:
        samples = _parsed(view)
        out += list(_process_checks(view, samples))
        out += [
            credential_check(view.part, c, samples if samples and _is_from(view, samples) else None)
            for c in view.credentials
        ]
        if samples is None or not _is_from(view, samples):
            continue
        if view.part == "collector":
            out += list(_collector_checks(samples))
            out += list(_stream_auth(view))
        elif view.part == "analyzer":
            out += list(_analyzer_checks(samples))
            out += list(_stream_auth(view))
        elif view.part == "extender":
            out += list(_extender_checks(view, samples))
    return out


def _parsed(view: PartView) -> Samples | None:
    """The part's /metrics parsed; None when it did not answer or answered something else."""
    if view.metrics is None:
        return None
    try:
        return parse_metrics(view.metrics)
    except ValueError:
        return None


def _is_from(view: PartView, samples: Samples) -> bool:
    """The metrics are this part's: its process holds the port, or (owner hidden from this
    user) they carry ``mco_build_info{component=<part>}``."""
    built = any(labels.get("component") == view.part for labels, _ in samples.get("mco_build_info", []))
    return view.port_is_own or (view.port_owner_hidden and built)


def _process_checks(view: PartView, samples: Samples | None) -> Iterator[Check]:
    part, hint = view.part, SERVICE_HINT.format(part=view.part)
    if view.process:
        yield Check(f"{part} process", Verdict.OK, view.process)
    else:
        yield Check(f"{part} process", Verdict.FAIL, f"no mco {part} process runs", f"start it; see {hint}")
    # without its process, the port and /metrics fail as a consequence: one next step is enough
    then = f"follows from `{part} process` above" if not view.process else f"see {hint}"
    if view.port_is_own:
        yield Check(f"{part} port", Verdict.OK, f"{view.port}/tcp held by it")
    elif view.port_owner_hidden and samples is not None and _is_from(view, samples):
        yield Check(f"{part} port", Verdict.OK, f"{view.port}/tcp answers with mco {part}'s metrics (owner hidden)")
    elif view.port_owner_hidden:
        yield Check(
            f"{part} port",
            Verdict.WARN,
            f"{view.port}/tcp is held by {view.port_owner}",
            "run mco doctor as root",
        )
    elif view.port_owner:
        yield Check(
            f"{part} port",
            Verdict.FAIL,
            f"{view.port}/tcp is held by {view.port_owner}, not by this mco {part}",
            f"stop that program or move mco {part} to a free port (docs/configuration.md)",
        )
    else:
        yield Check(f"{part} port", Verdict.FAIL, f"nothing listens on {view.port}/tcp", then)
    if view.metrics_protected:
        yield Check(
            f"{part} metrics",
            Verdict.WARN,
            f"/metrics on port {view.port} not read: {view.metrics_protected}",
            "scrape it with Prometheus' credentials (docs/security.md#https-and-basic-auth-on-the-http-ports)",
        )
    elif view.metrics is None:
        error = view.metrics_error or "no answer"
        yield Check(f"{part} metrics", Verdict.FAIL, f"/metrics on port {view.port} does not answer: {error}", then)
    elif samples is None:
        yield Check(f"{part} metrics", Verdict.FAIL, f"/metrics on port {view.port} is not Prometheus text", then)
    elif not _is_from(view, samples):
        yield Check(
            f"{part} metrics",
            Verdict.FAIL,
            f"/metrics on port {view.port} answers, but not as this mco {part}",
            "see the port check above",
        )
    else:
        yield Check(f"{part} metrics", Verdict.OK, f"/metrics answers on port {view.port}")


def _collector_checks(samples: Samples) -> Iterator[Check]:
    backends = sorted(
        f"{lb.get('signal', '?')}={lb.get('backend', '?')}" for lb, _ in samples.get("mco_collector_backend_info", [])
    )
    absent = sorted(
        (lb.get("signal", "?"), lb.get("kind", "?")) for lb, v in samples.get("mco_collector_signal_absent", []) if v
    )
    lost = [f"{signal} ({kind})" for signal, kind in absent if kind in ("permission", "read_error")]
    missing = [f"{signal} ({kind})" for signal, kind in absent if kind not in ("permission", "read_error")]
    detail = "backends " + (", ".join(backends) or "none yet")
    if missing:
        detail += "; not measured here: " + ", ".join(missing)
    if lost:
        yield Check(
            "collector signals",
            Verdict.WARN,
            detail + "; cannot read: " + ", ".join(lost),
            "`mco collector --once -o json` on this host names each signal's backend and the reason",
        )
    else:
        yield Check("collector signals", Verdict.OK, detail)
    streams = samples.get("mco_collector_stream_connected", [])
    down = sorted(lb.get("analyzer", "?") for lb, v in streams if not v)
    if not streams:
        yield Check("collector stream", Verdict.OK, "not streaming (exporter only: no analyzers configured)")
    elif down:
        yield Check(
            "collector stream",
            Verdict.FAIL,
            "not connected to " + ", ".join(down),
            "is the analyzer up at that address and port? The collector's log says why "
            "(TLS: the address it dials must be in the analyzer's certificate)",
        )
    else:
        connected = ", ".join(sorted(lb.get("analyzer", "?") for lb, _ in streams))
        yield Check("collector stream", Verdict.OK, "connected to " + connected)
    yield from _guard_checks(samples)


def _guard_checks(samples: Samples) -> Iterator[Check]:
    modes = [lb.get("mode", "?") for lb, v in samples.get("mco_guard_mode", []) if v]
    if not modes:
        return  # off
    limit = _one(samples, "mco_guard_offline_cpu_limit_ratio", 1.0) or 1.0
    errors = int(_one(samples, "mco_guard_write_errors_total", 0.0) or 0)
    would = "would be limited" if modes[0] == "dry-run" else "limited"
    state = "offline CPU unlimited" if limit >= 1.0 else f"offline CPU {would} to {limit:.0%} of the node"
    if _one(samples, "mco_guard_failing", 0.0):
        yield Check(
            "collector guard",
            Verdict.WARN,
            f"{modes[0]}; {state}; cgroup writes or restores fail ({errors} since the collector started)",
            "the collector's log names each file; with the guard on, the unit needs a writable cgroup tree "
            "(the role sets it: mco_collector_guard)",
        )
    else:
        yield Check("collector guard", Verdict.OK, f"{modes[0]}; {state}")


_LOOPBACK = re.compile(r"^(localhost|127(\.\d+){3}|\[?::1\]?)$")


def _loopback(address: str) -> bool:
    """``127.0.0.1:9876``, ``localhost:9876``, ``[::1]:9876`` (not ``:9876``, which is every address)."""
    host = address.rpartition(":")[0] if ":" in address else address
    return bool(_LOOPBACK.match(host))


def _stream_auth(view: PartView) -> Iterator[Check]:
    """How the gRPC stream is protected, from the part's configuration (docs/security.md)."""
    s = view.settings
    if view.part == "collector" and not (s.get("stream") and s.get("analyzers")):
        return
    name = f"{view.part} stream auth"
    configured = s.get("analyzers")
    analyzers = [str(a) for a in configured] if isinstance(configured, list) else []
    addresses = [str(s.get("listen", ""))] if view.part == "analyzer" else analyzers
    local = all(_loopback(a) for a in addresses)
    cert, token = bool(s.get("tls_cert")), bool(s.get("token_file"))
    if view.part == "analyzer":  # serves TLS with a certificate; asks clients for one with a CA
        tls, client_cert = cert, bool(s.get("tls_ca"))
    else:  # dials TLS with a CA or a certificate; presents the certificate
        tls, client_cert = cert or bool(s.get("tls_ca")), cert
    if tls and client_cert:
        yield Check(name, Verdict.OK, "mutual TLS (client certificates)" + (" and a bearer token" if token else ""))
    elif tls and token:
        yield Check(name, Verdict.OK, "TLS and a bearer token")
    elif local:
        yield Check(name, Verdict.OK, "loopback only (" + ("TLS, " if tls else "plaintext, ") + "no client identity)")
    else:
        what = (
            "TLS without client authentication: anyone who reaches it can send samples"
            if tls
            else "a bearer token in plaintext: anyone on the path can read and reuse it"
            if token
            else "plaintext and unauthenticated (mco_insecure_plaintext_grpc)"
        )
        yield Check(
            name,
            Verdict.WARN,
            f"{what}; {', '.join(addresses)}",
            "give it certificates: rerun the playbook without mco_insecure_plaintext_grpc (docs/security.md)",
        )


def _analyzer_checks(samples: Samples) -> Iterator[Check]:
    leader = _one(samples, "mco_analyzer_leader", 0.0)
    if leader:
        yield Check("analyzer leader", Verdict.OK, "this analyzer holds the Lease and writes the report")
    else:
        yield Check(
            "analyzer leader",
            Verdict.WARN,
            "this analyzer stands by: it does not hold the Lease",
            "fine when another replica leads (`kubectl -n mco-system get lease mco-analyzer`); "
            "otherwise its log says why it cannot take the Lease",
        )
    collectors = int(_one(samples, "mco_analyzer_connected_collectors", 0.0) or 0)
    if collectors:
        yield Check("analyzer collectors", Verdict.OK, f"{collectors} collector(s) streaming")
    else:
        yield Check(
            "analyzer collectors",
            Verdict.WARN,
            "no collector streams to it",
            "run `mco doctor` on a node: its `collector stream` check says why",
        )
    info = samples.get("mco_analyzer_rules_info", [])
    version = info[0][0].get("version", "?") if info else "?"
    rejected = sum(v for lb, v in samples.get("mco_analyzer_rules_reload_total", []) if lb.get("result") == "invalid")
    valid = _one(samples, "mco_analyzer_rules_source_valid")
    if valid == 0 or (valid is None and rejected):  # older analyzers: only the count since start
        yield Check(
            "analyzer rules",
            Verdict.WARN,
            f"rules version {version} in force; the document in place is invalid and refused"
            if valid == 0
            else f"rules version {version} in force; {int(rejected)} reload(s) since the analyzer started "
            "rejected an invalid document",
            "`mco rules validate` the document in place; the analyzer's log (or the ConfigMap's Event) "
            "names each problem",
        )
    elif rejected:
        yield Check(
            "analyzer rules",
            Verdict.OK,
            f"rules version {version} in force (an invalid document was refused earlier; fixed since)",
        )
    else:
        yield Check("analyzer rules", Verdict.OK, f"rules version {version} in force")
    errors = _one(samples, "mco_analyzer_report_write_errors_total", 0.0) or 0.0
    writes = _one(samples, "mco_analyzer_report_writes_total", 0.0) or 0.0
    if errors:
        yield Check(
            "analyzer report",
            Verdict.WARN,
            f"{int(errors)} report write(s) failed, {int(writes)} succeeded, since the analyzer started",
            "the analyzer's log says why (file permissions, or RBAC and the API server in a cluster)",
        )
    else:
        yield Check("analyzer report", Verdict.OK, f"{int(writes)} report(s) written")


def _extender_checks(view: PartView, samples: Samples) -> Iterator[Check]:
    if view.ready is None:
        yield Check("extender ready", Verdict.FAIL, "/readyz does not answer", SERVICE_HINT.format(part="extender"))
    elif view.ready[0] == 200:
        yield Check("extender ready", Verdict.OK, "/readyz answers 200")
    else:
        yield Check("extender ready", Verdict.FAIL, f"/readyz answers {view.ready[0]}: {view.ready[1][:200]}")
    ttl = view.settings.get("crStatusTTLSeconds")
    age = _one(samples, "mco_extender_report_age_seconds")
    age_text = "no report" if age is None or math.isnan(age) else f"report age {age:.0f} s"
    ttl_text = f" (TTL {ttl} s)" if ttl is not None else ""
    fallback = samples.get("mco_extender_fallback", [])
    reasons = [lb.get("reason", "?") for lb, v in fallback if v and lb.get("reason") != "none"]
    if not _one(samples, "mco_extender_basic_mode", 0.0):
        if _one(samples, "mco_extender_report_outdated_in_use", 0.0):
            yield Check(
                "extender mode",
                Verdict.WARN,
                f"report mode with an outdated report (fallbackWhenCROutdated is false); {age_text}{ttl_text}",
                "is the analyzer running and leading? (runbooks: Degrade / fallback)",
            )
            return
        yield Check("extender mode", Verdict.OK, f"report mode: scores nodes by the report; {age_text}{ttl_text}")
        return
    why = reasons[0] if reasons else "unknown"
    steps = {
        "stale": "the report is older than its TTL: is the analyzer running and leading? "
        "(runbooks: Degrade / fallback)",
        "missing": "no report yet: is the analyzer running? Standalone: both must use the same report file",
        "unreadable": "the report cannot be read or decoded: the extender's log says why",
        "future": "the report is dated in the future: check the clocks of the analyzer's and this host (NTP)",
    }
    yield Check(
        "extender mode",
        Verdict.FAIL,
        f"basic mode ({why}): every node passes and scores the same; {age_text}{ttl_text}",
        steps.get(why, "the extender's log says why"),
    )


#: A credential warns when less than this is left ...
WARN_SECONDS_LEFT = 14 * 86400
#: ... or less than this share of its lifetime, whichever comes first.
WARN_LIFETIME_LEFT = 0.1

#: What renews each kind of credential (docs/runbooks.md, Credentials expire).
_RENEW = {
    "kubeconfig": "the {part} renews its own token at 80 % of its lifetime; if it cannot (its log says why), "
    "renew it from the controller: `ansible-playbook -i $INV playbooks/mco.yml -e mco_service_token_renew=true` "
    "(docs/runbooks.md, Renew tokens)",
    "certificate": "with host renewal (mco_pki_host_renewal) the {part} renews its certificate itself at 2/3 of its "
    "term (a collector through an analyzer, an analyzer with its signing CA); left this close to expiry, renewal "
    "fails: its log says why (`renewing certificate ... failed`; mco_{part}_credential_renewals_total"
    '{{result="error"}} counts it; an analyzer logs `certificate renewal refused`). Then, or without host renewal, '
    "`ansible-playbook -i $INV playbooks/mco.yml --limit <this host>` reissues a certificate with less than a third "
    "of its term left; `-e mco_pki_rotate=true` reissues it now (docs/runbooks.md, Credentials expire)",
    "signer": "the signing CA is reissued by `ansible-playbook -i $INV playbooks/mco.yml --limit <this host>` once a "
    "third of its term (mco_pki_signer_days) is left; with less than a tenth of a renewal's term left it signs nothing "
    "(`certificate renewal refused`) (docs/runbooks.md, Credentials expire)",
    "ca": "rotate the CA: docs/runbooks.md, Rotate the CA (new CA trusted everywhere first, then new "
    "certificates, then the old CA dropped)",
}


def warn_before(validity: Validity) -> float:
    """Seconds before expiry a credential turns to warn: 14 days, or a tenth of its lifetime when
    that is longer (a ten-year CA warns a year ahead, time enough to rotate it)."""
    lifetime = validity.lifetime
    return max(WARN_SECONDS_LEFT, WARN_LIFETIME_LEFT * lifetime) if not math.isnan(lifetime) else WARN_SECONDS_LEFT


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _left(seconds: float) -> str:
    return f"{seconds / 86400:.1f} days" if abs(seconds) >= 86400 else f"{seconds / 3600:.1f} h"


def _from_metrics(part: str, name: str, samples: Samples | None) -> Validity | None:
    """The running part's own reading, when this user cannot read the file."""
    if samples is None:
        return None
    found = {}
    for which in ("expiry", "issued"):
        for labels, value in samples.get(f"mco_{part}_credential_{which}_timestamp_seconds", []):
            if labels.get("credential") == name:
                found[which] = value
    return Validity(found.get("issued", math.nan), found["expiry"]) if "expiry" in found else None


def credential_check(part: str, cred: CredentialView, samples: Samples | None = None) -> Check:
    """ok, warn (:func:`warn_before`) or fail (expired, or no expiry to read) for one credential, and
    what renews it."""
    name = f"{part} credential {cred.name}"
    kind = (
        cred.name
        if cred.name == "kubeconfig"
        else "signer"
        if cred.name == "signing_ca"
        else "ca"
        if cred.name.endswith("ca")
        else "certificate"
    )
    renew = _RENEW[kind].format(part=part)
    validity = cred.validity or _from_metrics(part, cred.name, samples)
    if validity is None:
        return Check(
            name,
            Verdict.FAIL,
            f"{cred.path}: no expiry read ({cred.error or 'unreadable'})",
            "run mco doctor as root; if the file is missing or damaged, " + renew,
        )
    left = validity.not_after - cred.read_at
    source = "" if cred.validity else " (as the running service reports it)"
    if left <= 0:
        return Check(name, Verdict.FAIL, f"{cred.path} expired at {_when(validity.not_after)}{source}", renew)
    detail = f"{cred.path} expires at {_when(validity.not_after)}, in {_left(left)}{source}"
    if left < warn_before(validity):
        return Check(name, Verdict.WARN, detail, renew)
    return Check(name, Verdict.OK, detail)
