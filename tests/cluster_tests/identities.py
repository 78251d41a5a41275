"""What each MCO ServiceAccount may and may not do, as ``kubectl auth can-i`` rows: checked against
the real kube-apiserver (test_mco_on_real_cluster.py) and shown in docs/security.md (tests/docs).

The table itself is ``mco doctor --cluster``'s (:data:`mco_py.doctor.cluster_checks.ACCESS`), so
what the doctor asks is what the roles are tested to grant.
"""

from __future__ import annotations

from mco_py.doctor.cluster_checks import ACCESS
from mco_py.doctor.cluster_view import NAMESPACE

NS = NAMESPACE

#: (expected answer, verb, resource[/name][#subresource], namespace) per ServiceAccount.
IDENTITIES: dict[str, list[tuple[str, str, str, str]]] = {}
for _q in ACCESS:
    IDENTITIES.setdefault(_q.identity, []).append(("yes" if _q.expected else "no", _q.verb, _q.resource, _q.namespace))
