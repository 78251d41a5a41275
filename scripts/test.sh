#!/usr/bin/env bash
# Run every test tier that exists, each under a time budget, and print a summary.
# Select tiers with TIERS="ruff mypy pytest" (default: all). Exit 1 if any failed.
# The molecule scenarios (the booted-node ones are the longest tier) run in a second lane
# beside the other tiers (MCO_TEST_JOBS=1: one after the other, output shown
# as it comes). Each tier's output is in .run/test-logs/<tier>.log and is printed whole
# when the tier ends.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
ALL_TIERS="ruff mypy imports yamllint ansible-lint syntax go pytest vm hostile run cluster release molecule molecule-booted protection"
export TIERS=${TIERS:-$ALL_TIERS}  # exported: tiers that are shell functions run in a child bash
LANE2="release molecule molecule-booted protection"  # about as long as the rest (docs/benchmarks.md, "The test suite")
JOBS=${MCO_TEST_JOBS:-2}
export LOGS="$PWD/.run/test-logs"
rm -rf "$LOGS" && mkdir -p "$LOGS"
LIVE=$([ "$JOBS" -lt 2 ] && echo 1 || echo 0)

record() {  # name status seconds
  printf '%s\t%s\n' "$2" "$3" > "$LOGS/$1.result"
}

run_tier() {  # name budget_seconds command...
  local name=$1 budget=$2; shift 2
  local start=$SECONDS rc log="$LOGS/$name.log"
  [ "$LIVE" = 1 ] && printf '\n===== tier %s (budget %ss) =====\n' "$name" "$budget"
  if declare -F "$1" >/dev/null; then  # `timeout` cannot run a shell function: hand it to a child bash
    set -- bash -c "$(declare -f); $*"
  fi
  if [ "$LIVE" = 1 ]; then timeout --kill-after=30 "$budget" "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  else timeout --kill-after=30 "$budget" "$@" > "$log" 2>&1; rc=$?; fi
  local used=$((SECONDS - start)) status
  if [ $rc -eq 0 ]; then status=passed
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="FAILED (over ${budget}s budget)"
  else status="FAILED (exit $rc)"; fi
  record "$name" "$status" "$used"
  if [ "$LIVE" != 1 ]; then  # one tier's output at a time, whole
    { flock 9; printf '\n===== tier %s (budget %ss): %s in %ss =====\n' "$name" "$budget" "$status" "$used"
      cat "$log"; } 9> "$LOGS/.print-lock"
  fi
}

skip_tier() {  # name reason
  record "$1" "skipped: $2" 0
  { flock 9; printf '\n===== tier %s: SKIPPED — %s =====\n' "$1" "$2"; } 9> "$LOGS/.print-lock"
}

playbooks() { find playbooks -maxdepth 1 -name '*.yml' | sort; [ -f site.yml ] && echo site.yml; }

with_mitogen() {  # command...: its playbooks under Mitogen (when MCO_TEST_MITOGEN_PLUGINS is set)
  if [ -z "$MCO_TEST_MITOGEN_PLUGINS" ]; then "$@"; return; fi
  ANSIBLE_STRATEGY_PLUGINS=$MCO_TEST_MITOGEN_PLUGINS ANSIBLE_STRATEGY=mitogen_linear "$@"
}

tier_syntax() {
  local rc=0 pb
  for pb in $(playbooks); do
    ansible-playbook --syntax-check -i inventory/local.yml "$pb" >/dev/null || { echo "syntax-check failed: $pb"; rc=1; }
    echo "syntax ok: $pb"
  done
  return $rc
}

can_boot() {  # booted test nodes need root, systemd-nspawn and network namespaces
  [ "$(id -u)" -eq 0 ] && command -v systemd-nspawn >/dev/null && command -v debootstrap >/dev/null && ip netns list >/dev/null 2>&1
}

stamp() {  # molecule's step lines (`scenario ➜ step: ...`) with the seconds since the scenario began
  local start=$SECONDS line
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in *➜*) printf '[%4ss] %s\n' $((SECONDS - start)) "$line" ;; *) printf '%s\n' "$line" ;; esac
  done
}

tier_go() {  # the scheduler plugins' module: format, vet, and the tests with the race detector
  cd scheduler || return 1
  export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
  local unformatted
  unformatted=$(gofmt -l .) || return 1
  if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted (run gofmt -w scheduler)"; return 1; fi
  go vet ./... || return 1
  CGO_ENABLED=1 go test -race -count=1 ./...
}

tier_molecule() {  # local|booted|protection: the scenarios of that kind (`# mco-testbed: KIND`, first line)
  local rc=0 dir scenario kind
  for dir in molecule/*/; do
    scenario=$(basename "$dir")
    [ -f "$dir/molecule.yml" ] || continue
    kind=$(sed -n '1s/^# mco-testbed: \([a-z]*\)$/\1/p' "$dir/molecule.yml")
    kind=${kind:-local}
    [ "$kind" = "$1" ] || continue
    if [ "$kind" != local ] && ! can_boot; then  # no tier passes by skipping (docs/development.md)
      if [ "${MCO_TEST_SKIP_BOOTED:-}" = 1 ]; then
        echo "!!!!! molecule $scenario SKIPPED (MCO_TEST_SKIP_BOOTED=1): booted test nodes cannot run here !!!!!"
        continue
      fi
      echo "molecule scenario $scenario FAILED: booted test nodes need root, systemd-nspawn, debootstrap and ip netns" \
        "(make setup as root installs them); MCO_TEST_SKIP_BOOTED=1 skips these scenarios instead"
      rc=1; continue
    fi
    echo "--- molecule test -s $scenario"
    # Over budget, `timeout` sends TERM: still run the scenario's destroy (booted nodes outlive molecule).
    trap 'molecule destroy -s "$scenario" >/dev/null 2>&1; exit 124' TERM
    local began=$SECONDS
    molecule test -s "$scenario" 2>&1 | stamp
    if [ "${PIPESTATUS[0]}" -eq 0 ]; then echo "--- molecule $scenario passed in $((SECONDS - began))s"
    else echo "molecule scenario $scenario FAILED (after $((SECONDS - began))s)"; rc=1; fi
    trap - TERM
  done
  return $rc
}

tier() {
  case $1 in
    ruff) run_tier ruff 120 bash -c 'ruff check . && ruff format --check .' ;;
    mypy) run_tier mypy 300 mypy --strict mco_py testbed ;;
    imports) run_tier imports 120 lint-imports ;;
    yamllint) run_tier yamllint 120 yamllint --strict . ;;
    ansible-lint)
      if [ -n "$(ls roles playbooks 2>/dev/null)" ]; then run_tier ansible-lint 420 ansible-lint --offline
      else skip_tier ansible-lint "no roles or playbooks yet"; fi ;;
    syntax)
      if [ -n "$(playbooks)" ]; then run_tier syntax 180 tier_syntax
      else skip_tier syntax "no playbooks yet"; fi ;;
    # scheduler/ (Go): a cold race build of the Kubernetes and Volcano packages takes minutes, then cached
    go) run_tier go 900 tier_go ;;
    pytest) run_tier pytest 1200 pytest -p no:cacheprovider --durations=20 -m "not cluster and not hostile and not run and not vm and not release" ;;
    # The guard's cgroup v2 writers on a pure-v2 kernel of its own (QEMU TCG; docs/vm-node.md).
    vm) run_tier vm 420 pytest -p no:cacheprovider --durations=20 -m vm tests/vm ;;
    # Attacks on a running service, each with a memory, fd and log budget (docs/security.md).
    hostile) run_tier hostile 300 pytest -p no:cacheprovider -m hostile tests/hostile ;;
    # `make run` on this host and the docs' host commands on it, then the runbook's uninstall.
    # Needs root: without it the tests fail (tests/conftest.py), unless MCO_TEST_ALLOW_SKIP=1.
    run) run_tier run 600 pytest -p no:cacheprovider --durations=10 -m run tests/run ;;
    # The real control plane (the build step above made it from tests/cluster/go.mod: 9-13
    # minutes on 2 cores the first time, then cached outside the clone) running MCO.
    cluster) run_tier cluster 1500 with_mitogen pytest -p no:cacheprovider --durations=20 -m cluster tests/cluster_tests ;;
    # The collection as shipped: `make collection` in a copy, the tarball installed and its site playbook
    # run, two releases cut and the runbooks' upgrade and rollback between them (lane 2, beside pytest).
    release) run_tier release 600 pytest -p no:cacheprovider --durations=10 -m release ;;
    # Scenarios against a real API server on loopback (each starts one with tests.cluster).
    molecule) run_tier molecule 900 tier_molecule local ;;
    # Booted test nodes (docs/testbed.md); mco-cluster runs every command of the user guide and
    # the runbooks that needs a cluster.
    molecule-booted) run_tier molecule-booted 3900 tier_molecule booted ;;
    # MCO protecting real pods on kubelet nodes it installed itself (site.yml: Volcano, Kata, MCO's
    # schedulers): the guard within seconds, the report and the scheduler within a minute.
    protection) run_tier protection 1200 tier_molecule protection ;;
    *) echo "unknown tier '$1' (known: $ALL_TIERS)"; return 2 ;;
  esac
}

for t in $TIERS; do  # refuse a typo before anything runs
  case " $ALL_TIERS " in *" $t "*) ;; *) echo "unknown tier '$t' (known: $ALL_TIERS)"; exit 2 ;; esac
done
wants() { for w in "$@"; do case " $TIERS " in *" $w "*) return 0 ;; esac; done; return 1; }
# Mitogen's strategy runs the playbook runs that dominate the suite's time: the cluster tier's
# and the docs' commands in mco-cluster (its group_vars read this variable). The same tasks and
# results in about half the time and CPU; everything else runs plain Ansible, the engine
# operators use (docs/development.md, "Two Ansible engines"). MCO_TEST_MITOGEN=0: plain only.
MCO_TEST_MITOGEN_PLUGINS=""
if [ "${MCO_TEST_MITOGEN:-1}" != 0 ] && wants cluster molecule-booted protection; then
  if ! mitogen=$(python -c 'import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))' 2>&1); then
    echo "mitogen (requirements/dev.txt) is not importable: run make setup, or MCO_TEST_MITOGEN=0 for plain Ansible: $mitogen"
    exit 2
  fi
  MCO_TEST_MITOGEN_PLUGINS=$mitogen/plugins/strategy
fi
export MCO_TEST_MITOGEN_PLUGINS
# What the tiers share and a fresh machine must build first, before the lanes split (a
# scenario waiting on a server would otherwise time out while the other lane compiles it):
# the real control plane for cluster, molecule and the booted scenarios, and the node image.
tier_build() {
  local rc=0 image=""
  if wants molecule-booted protection && can_boot; then
    python -m testbed image > "$LOGS/build-image.log" 2>&1 &
    image=$!
  fi
  if wants pytest cluster molecule molecule-booted protection; then
    python scripts/build_images.py || rc=1  # test pods' images: pytest's containerd test, the kubelet nodes
  fi
  if wants vm; then
    python -m testbed vm build >/dev/null || rc=1  # the TCG node (kernel, initramfs, root disk from the image)
  fi
  if wants cluster molecule molecule-booted protection; then
    python -m tests.cluster.build || rc=1
    python scripts/build_schedulers.py || rc=1  # MCO's vc-scheduler and kube-scheduler (cluster tier)
    python -m tests.node.build || rc=1  # the booted Kubernetes nodes' CNI plugins
  fi
  if [ -n "$image" ]; then
    wait "$image" || { echo "node image build FAILED:"; rc=1; }
    cat "$LOGS/build-image.log"
  fi
  return $rc
}
began=$SECONDS
# stopped from outside: stop the running tiers too (`timeout` passes TERM on; molecule destroys)
trap '[ -n "${lane2_pid:-}" ] && pkill -TERM -P "$lane2_pid"; pkill -TERM -P $$; wait; exit 130' INT TERM
if wants pytest vm cluster molecule molecule-booted protection; then
  # cold: 9-13 min for the Go binaries (2 cores) beside the debootstrap image; warm: seconds
  run_tier build 1800 tier_build
fi

lane1=(); lane2=()
for t in $TIERS; do
  case " $LANE2 " in *" $t "*) lane2+=("$t") ;; *) lane1+=("$t") ;; esac
done
if [ "$JOBS" -ge 2 ] && [ ${#lane1[@]} -gt 0 ] && [ ${#lane2[@]} -gt 0 ]; then
  ( for t in "${lane2[@]}"; do tier "$t"; done ) &
  lane2_pid=$!
  for t in "${lane1[@]}"; do tier "$t"; done
  wait "$lane2_pid"
else
  for t in "${lane1[@]}" "${lane2[@]}"; do tier "$t"; done
fi

printf '\n===== summary (%ss) =====\n' $((SECONDS - began))
passed=0; failed=0; skipped=0
for name in $([ -f "$LOGS/build.result" ] && echo build) $TIERS; do
  status="FAILED (no result: see $LOGS/$name.log)"; used=0
  [ -f "$LOGS/$name.result" ] && IFS=$'\t' read -r status used < "$LOGS/$name.result"
  printf '  %-13s %5ss  %s\n' "$name" "$used" "$status"
  case $status in passed) passed=$((passed + 1)) ;; skipped*) skipped=$((skipped + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
# What failed, again at the very end (a CI page may show only the last lines of a long run):
# pytest's short summary and molecule's failed tasks (name, assertion, msg) of each failed tier.
for name in $TIERS; do
  status=""; [ -f "$LOGS/$name.result" ] && IFS=$'\t' read -r status _ < "$LOGS/$name.result"
  case $status in passed|skipped*) continue ;; esac
  printf '  %s failures:\n' "$name"
  awk -f scripts/tier_failures.awk "$LOGS/$name.log" 2>/dev/null | cut -c1-400 | tail -n 20 | sed 's/^/    /'
done
printf 'tiers: %d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
