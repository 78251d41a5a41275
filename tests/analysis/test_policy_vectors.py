"""The policy's test vectors are today's Python policy: the Go plugins run the same file
(``scheduler/policy/vectors_test.go``), so a change to one policy without the other fails."""

from __future__ import annotations

import json

from tests.analysis import policy_vectors


def test_the_committed_vectors_are_what_the_python_policy_decides() -> None:
    committed = policy_vectors.PATH.read_text(encoding="utf-8")
    assert committed == policy_vectors.render(policy_vectors.build()), (
        "scheduler/policy/testdata/vectors.json is not what mco_py/analysis/policy.py decides: "
        "run `python -m tests.analysis.policy_vectors`, then `go test ./...` in scheduler/ "
        "and change the Go policy until it agrees"
    )


def test_the_vectors_reach_every_rule_fallback_and_score_scale() -> None:
    table = json.loads(policy_vectors.PATH.read_text(encoding="utf-8"))
    expects = [case["expect"] for case in table["cases"]]
    assert {e["rule"] for e in expects} == {"ok", "kata", "constraint", "fallback", "no-data", "labels-unknown"}
    assert {e["fallback"] for e in expects} == {"none", "missing", "unreadable", "stale", "future"}
    assert any(e["outdatedInUse"] for e in expects)
    assert {e["kubeExtender"] for e in expects} >= {0, 5, 10}
    assert any(e["raw"] % 1 == 0.5 for e in expects), "a half score: the rounding rule is exercised"
    texts = table["sensitivity"]
    assert any("error" in t for t in texts)
    assert any("weights" in t for t in texts)


def test_check_mode_says_when_the_file_is_stale(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "vectors.json"
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(policy_vectors, "PATH", stale)
    assert policy_vectors.main(["--check"]) == 1
    assert "python -m tests.analysis.policy_vectors" in capsys.readouterr().err
    assert policy_vectors.main([]) == 0
    assert policy_vectors.main(["--check"]) == 0
