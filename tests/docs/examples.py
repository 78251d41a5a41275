"""Example outputs in the docs, produced by running the command they show.

A fenced block that shows what a command prints is marked on the line above its fence::

    <!-- example: doctor-host -->
    ```text
    CHECK              VERDICT  DETAIL
    ...
    ```

:data:`EXAMPLES` says how each named example is produced (a function run here, or a test of
another tier that produces it and calls :func:`check`) and which parts of the output change from
run to run (PIDs, ports, ages, temporary paths): those are replaced by placeholders before the
output is compared with the block, or written into it. A diagram or a command synopsis in an
unlabelled or ``text`` block is marked ``<!-- figure -->`` instead (it is written, not produced).

    python -m tests.docs.examples list              # every marked block, where, produced by
    python -m tests.docs.examples write [NAME...]   # run the producers, rewrite their blocks
    python -m tests.docs.examples check [NAME...]   # run them, print the differences (exit 1)

Without NAMEs, the examples produced here; a NAME another tier checks runs its producer here too
when it has one (``make-schedulers``: a Go build unless cached).

tests/docs/test_examples.py checks every example produced here and that every output-looking
block is marked; the cluster tier checks ``doctor-cluster``
(tests/cluster_tests/test_mco_on_real_cluster.py). ``MCO_DOCS_WRITE=1`` makes :func:`check`
rewrite the block instead of failing (for the examples the cluster tier produces).
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The documents whose blocks are examples.
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_MARK = re.compile(r"^<!-- (?:example: (?P<name>[a-z0-9-]+)|(?P<figure>figure)) -->$")
#: Fences whose content is shown as printed (no language, or ``text``).
OUTPUT_LANGUAGES = ("", "text")


@dataclass(frozen=True)
class Block:
    """A fenced block of a document: its language, the lines between the fences, and its mark."""

    doc: Path
    line: int
    """Line number of the opening fence (1-based)."""
    language: str
    text: str
    example: str | None
    figure: bool

    def where(self) -> str:
        doc = self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc
        return f"{doc}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of ``doc``, with the mark on the line above its fence (if any)."""
    lines = doc.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        start, language = i, lines[i][3:].strip()
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        mark = _MARK.match(lines[start - 1]) if start > 0 else None
        found.append(
            Block(
                doc=doc,
                line=start + 1,
                language=language,
                text="".join(f"{line}\n" for line in lines[start + 1 : i]),
                example=mark["name"] if mark else None,
                figure=bool(mark and mark["figure"]),
            )
        )
        i += 1
    return found


def documented(name: str) -> Block:
    """The one block marked ``example: name``."""
    found = [b for doc in DOCS for b in blocks(doc) if b.example == name]
    if len(found) != 1:
        raise LookupError(f"example {name!r} is marked on {len(found)} blocks ({[b.where() for b in found]}), not 1")
    return found[0]


@dataclass(frozen=True)
class Example:
    produced_by: str
    """Where it is produced: ``here`` (by :attr:`produce`) or the test file that calls :func:`check`."""
    placeholders: tuple[tuple[str, str], ...]
    """(regular expression, replacement) pairs applied to the output, in order."""
    produce: Callable[[], str] | None = None
    """Runs the command (the ``write`` and ``check`` actions run it, also for an example another tier checks)."""

    def normalise(self, output: str) -> str:
        for pattern, replacement in self.placeholders:
            output = re.sub(pattern, replacement, output, flags=re.M)
        return "".join(f"{line.rstrip()}\n" for line in output.splitlines())


def _doctor_host() -> str:
    """``mco doctor`` on the test suite's three parts with the analyzer stopped, once the
    extender has fallen back (the report older than its 2 s TTL)."""
    from tests.mco_host import MCO, running_host

    with tempfile.TemporaryDirectory(prefix="mco-example-") as tmp, running_host(Path(tmp)) as host:
        command = [*MCO, "doctor", "--config-dir", str(host.etc)]
        deadline = time.monotonic() + 90

        def doctor_until(verdict: str, what: str) -> str:
            output = ""
            while time.monotonic() < deadline:
                output = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False).stdout
                if all(
                    re.search(rf"(?m)^{check} +{verdict} ", output) for check in ("extender mode", "collector stream")
                ):
                    return output
                time.sleep(0.3)
            raise TimeoutError(f"doctor never saw {what}:\n{output}")

        doctor_until("ok", "the report written and the stream up")
        host.stop("analyzer")
        return doctor_until("fail", "the analyzer stopped and the report stale").replace(tmp, "/tmp/mco-example")


def _report_standalone() -> str:
    """``mco report`` on the report file the test suite's standalone analyzer writes from the
    fixture host's frozen signals (node-1)."""
    from tests.mco_host import MCO, running_host

    with tempfile.TemporaryDirectory(prefix="mco-example-") as tmp, running_host(Path(tmp)) as host:
        report = host.etc.parent / "report.json"
        command = [*MCO, "report", "--file", str(report), "--wait", "60"]
        output, deadline = "", time.monotonic() + 90
        while time.monotonic() < deadline:
            output = subprocess.run(command, capture_output=True, text=True, timeout=90, check=True).stdout
            if re.search(r"(?m)^node-1 ", output):  # the collector's first samples are in
                return output.replace(tmp, "/tmp/mco-example")
            time.sleep(0.3)
        raise TimeoutError(f"the report never had node-1:\n{output}")


def render_kube_scheduler_entry(variables: dict[str, object]) -> str:
    """roles/mco_scheduler_extender's extender entry for the cluster's kube-scheduler, rendered by
    Ansible's template module with the role's defaults and vars and ``variables`` over them."""
    role = ROOT / "roles" / "mco_scheduler_extender"
    with tempfile.TemporaryDirectory(prefix="mco-example-") as tmp:
        dest = Path(tmp) / "kube-scheduler-extender.yaml"
        given = {"mco_common_setup": {"config_dir": "/etc/mco"}, **variables}
        run = subprocess.run(
            [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "ansible.builtin.template",
             "-a", f"src={role / 'templates' / 'kube-scheduler-extender.yaml.j2'} dest={dest}",
             "-e", f"@{role / 'defaults' / 'main.yml'}", "-e", f"@{role / 'vars' / 'main.yml'}",
             "-e", json.dumps(given)],
            cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if run.returncode != 0:
            raise RuntimeError(f"rendering the kube-scheduler entry failed:\n{run.stdout}{run.stderr}")
        return dest.read_text()


def _analyzer_reasons() -> str:
    """The reasons the scorer (default rules) gives a node whose CPU is pressed and whose I/O and steal
    are raised, once it has been High for a while (raised at 2026-12-01T06:40:08Z)."""
    from mco_py.analysis.rules import default_rules
    from mco_py.analysis.scoring import Scorer
    from mco_py.model import Sample

    raised = datetime.datetime(2026, 12, 1, 6, 40, 8, tzinfo=datetime.UTC).timestamp()
    first = raised - 7  # the eighth assessment above None raises it
    scorer = Scorer(default_rules())
    values = {"psiCpuSomeRate": 80.1, "psiIoSomeRate": 29.4, "cpuStealPercent": 7.2}
    for second in range(12):
        scorer.observe(Sample("worker-7", first + second, values), first + second)
    (node,), _ = scorer.assess(first + 12)
    return "".join(f"{reason}\n" for reason in node.reasons)


def _guard_event() -> str:
    """The Event the leader analyzer posts on a Node when the guard limits offline CPU: its type,
    reason, source and message (kubectl describe node's columns, but the age)."""
    from mco_py.analysis.guard import Action, GuardChange
    from mco_py.kube.events import NodeEvents

    change = GuardChange("node-1", 1_796_000_000.0, Action.THROTTLE, None, 0.5, 34.0, cpus=2)
    event = NodeEvents(None).body(change)
    return f"{event.type}  {event.reason}  {event.source.component}  {event.message}\n"


def make_schedulers_output() -> str:
    """What ``make schedulers`` prints: scripts/build_schedulers.py --print (a Go build of both
    schedulers unless the cache has them: run by the cluster tier, which builds them anyway)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_schedulers.py"), "--print"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600, check=True,
    )  # fmt: skip
    return run.stdout


#: The parts of a doctor table that change from run to run.
_DOCTOR_PLACEHOLDERS = (
    (r"\bpid \d+ \(\S+ -m mco_py\.cli ", "pid <pid> (python -m mco_py.cli "),
    (r"\b\d+/tcp\b", "<port>/tcp"),
    (r"\bport \d+\b", "port <port>"),
    (r"127\.0\.0\.1:\d+", "127.0.0.1:<port>"),
    (r"\b\d+ s ago\b", "<n> s ago"),
    (r"report age \d+ s\b", "report age <n> s"),
)

EXAMPLES: dict[str, Example] = {
    "report-standalone": Example(
        "here",
        (
            (r"updated \S+Z \(\d+s ago\)", "updated <time> (<n>s ago)"),
            (r"\b\d+s$", "<n>s"),
        ),
        _report_standalone,
    ),
    "doctor-host": Example("here", _DOCTOR_PLACEHOLDERS, _doctor_host),
    "kube-scheduler-extender": Example(
        "here",
        (),
        lambda: render_kube_scheduler_entry({"mco_mode": "cluster", "ansible_host": "10.0.0.11"}),
    ),
    "analyzer-reasons": Example("here", (), _analyzer_reasons),
    "guard-event": Example("here", (), _guard_event),
    "make-schedulers": Example(
        "tests/cluster_tests/test_scheduler_plugins.py",
        ((r"=\S*/scheduler-bin/[0-9a-f]+/", "=~/.cache/mco/scheduler-bin/<key>/"),),
        make_schedulers_output,
    ),
    "doctor-cluster": Example("tests/cluster_tests/test_mco_on_real_cluster.py", _DOCTOR_PLACEHOLDERS),
}


def difference(name: str, output: str) -> str:
    """The unified diff from the documented block to ``output`` normalised ('' when equal)."""
    block, produced = documented(name), EXAMPLES[name].normalise(output)
    return "".join(
        difflib.unified_diff(
            block.text.splitlines(keepends=True),
            produced.splitlines(keepends=True),
            fromfile=f"{block.where()} (documented)",
            tofile=f"{name} (produced)",
        )
    )


def write(name: str, output: str) -> bool:
    """Put ``output``, normalised, into the block marked ``name``; True when it changed."""
    block, produced = documented(name), EXAMPLES[name].normalise(output)
    if block.text == produced:
        return False
    lines = block.doc.read_text().splitlines(keepends=True)
    body_start = block.line  # the line after the fence (0-based index == 1-based fence line)
    body_end = body_start + len(block.text.splitlines())
    lines[body_start:body_end] = produced.splitlines(keepends=True)
    block.doc.write_text("".join(lines))
    return True


def check(name: str, output: str) -> None:
    """Fail with the difference when the docs show other output than ``output``
    (``MCO_DOCS_WRITE=1``: rewrite the block instead)."""
    if os.environ.get("MCO_DOCS_WRITE") == "1":
        write(name, output)
        return
    diff = difference(name, output)
    assert not diff, f"the docs' example {name!r} is not what the command prints " \
                     f"(python -m tests.docs.examples write {name}):\n{diff}"  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs.examples", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("list", "write", "check"))
    parser.add_argument("names", nargs="*", help="examples (default: every one produced here)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(EXAMPLES))
    if unknown:
        parser.error(f"no example named {unknown}; examples: {sorted(EXAMPLES)}")
    if args.action == "list":
        for name, example in EXAMPLES.items():
            print(f"{name}\t{documented(name).where()}\t{example.produced_by}")
        return 0
    chosen = args.names or [n for n, e in EXAMPLES.items() if e.produced_by == "here"]
    elsewhere = [n for n in chosen if EXAMPLES[n].produce is None]
    if elsewhere:
        parser.error(f"{elsewhere} are produced by {[EXAMPLES[n].produced_by for n in elsewhere]}: "
                     "run that with MCO_DOCS_WRITE=1")  # fmt: skip
    rc = 0
    for name in chosen:
        produce = EXAMPLES[name].produce
        assert produce is not None
        output = produce()
        if args.action == "write":
            print(f"{name}: {'rewritten' if write(name, output) else 'unchanged'} ({documented(name).where()})")
        elif diff := difference(name, output):
            print(diff)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
