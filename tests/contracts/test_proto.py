"""The committed gRPC stubs match a fresh generation from proto/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from mco_py.rpc.analyzer.v1 import analyzer_pb2

ROOT = Path(__file__).resolve().parents[2]


def _gen_proto() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stubs(root: Path, tree: Path) -> dict[Path, bytes]:
    """The stub files under ``tree`` (as the generator finds them), by path from ``root``."""
    return {p.relative_to(root): p.read_bytes() for p in _gen_proto().stub_files(tree)}


def test_committed_stubs_match_fresh_generation(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)], check=True)
    fresh = _stubs(tmp_path, tmp_path / "mco_py" / "rpc")
    committed = _stubs(ROOT, ROOT / "mco_py" / "rpc")
    assert fresh.keys() == committed.keys(), "stub files differ; run `make proto` and commit"
    stale = sorted(str(k) for k in fresh if fresh[k] != committed[k])
    assert not stale, f"stubs out of date: {stale}; run `make proto` and commit"


def test_signal_presence_is_explicit() -> None:
    absent = analyzer_pb2.Signal(
        name="llcMissRate",
        backend="perf",
        absent=analyzer_pb2.Absence(kind=analyzer_pb2.ABSENCE_KIND_UNSUPPORTED, reason="no PMU"),
    )
    zero = analyzer_pb2.Signal(name="psiIoSomeAvg10", backend="procfs", value=0.0)
    # A zero value is present; an absent signal is not a zero.
    assert zero.WhichOneof("value_or_absence") == "value"
    assert absent.WhichOneof("value_or_absence") == "absent"
    decoded = analyzer_pb2.Signal.FromString(zero.SerializeToString())
    assert decoded.WhichOneof("value_or_absence") == "value"
    assert decoded.value == 0.0
    assert not decoded.HasField("events")
    batch = analyzer_pb2.SampleBatch(
        collector="n1", sequence=7, samples=[analyzer_pb2.Sample(node="n1", signals=[absent, zero])]
    )
    again = analyzer_pb2.SampleBatch.FromString(batch.SerializeToString())
    assert again.samples[0].signals[0].absent.reason == "no PMU"


def test_control_carries_ack() -> None:
    msg = analyzer_pb2.Control(ack=analyzer_pb2.Ack(sequence=3, accepted=2, rejected=1, reject_reasons=["nan"]))
    assert analyzer_pb2.Control.FromString(msg.SerializeToString()).WhichOneof("kind") == "ack"
