#!/usr/bin/env bash
# Run every test tier that exists, each under a time budget, and print a summary.
# Select tiers with TIERS="ruff mypy pytest" (default: all). Exit 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
ALL_TIERS="ruff mypy imports yamllint ansible-lint syntax pytest hostile cluster molecule"
TIERS=${TIERS:-$ALL_TIERS}

declare -A RESULT SECONDS_USED
ORDER=()
passed=0; failed=0; skipped=0

run_tier() {  # name budget_seconds command...
  local name=$1 budget=$2; shift 2
  ORDER+=("$name")
  printf '\n===== tier %s (budget %ss) =====\n' "$name" "$budget"
  local start=$SECONDS rc
  if declare -F "$1" >/dev/null; then  # `timeout` cannot run a shell function: hand it to a child bash
    timeout --kill-after=30 "$budget" bash -c "$(declare -f); $*"; rc=$?
  else timeout --kill-after=30 "$budget" "$@"; rc=$?; fi
  SECONDS_USED[$name]=$((SECONDS - start))
  if [ $rc -eq 0 ]; then RESULT[$name]=passed; passed=$((passed + 1))
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then RESULT[$name]="FAILED (over ${budget}s budget)"; failed=$((failed + 1))
  else RESULT[$name]="FAILED (exit $rc)"; failed=$((failed + 1)); fi
}

skip_tier() {  # name reason
  ORDER+=("$1"); RESULT[$1]="skipped: $2"; SECONDS_USED[$1]=0; skipped=$((skipped + 1))
  printf '\n===== tier %s: SKIPPED — %s =====\n' "$1" "$2"
}

playbooks() { find playbooks -maxdepth 1 -name '*.yml' | sort; [ -f site.yml ] && echo site.yml; }

tier_syntax() {
  local rc=0 pb
  for pb in $(playbooks); do
    ansible-playbook --syntax-check -i inventory/local.yml "$pb" >/dev/null || { echo "syntax-check failed: $pb"; rc=1; }
    echo "syntax ok: $pb"
  done
  return $rc
}

tier_cluster() {
  python -m tests.cluster.build && pytest -p no:cacheprovider -m cluster tests/cluster_tests
}

can_boot() {  # booted test nodes need root, systemd-nspawn and network namespaces
  [ "$(id -u)" -eq 0 ] && command -v systemd-nspawn >/dev/null && command -v debootstrap >/dev/null && ip netns list >/dev/null 2>&1
}

tier_molecule() {
  local rc=0 dir scenario
  for dir in molecule/*/; do
    scenario=$(basename "$dir")
    [ -f "$dir/molecule.yml" ] || continue
    if grep -q '^# mco-testbed: booted' "$dir/molecule.yml" && ! can_boot; then
      echo "!!!!! molecule $scenario SKIPPED: needs root, systemd-nspawn, debootstrap and ip netns (booted test nodes) !!!!!"
      continue
    fi
    echo "--- molecule test -s $scenario"
    # Over budget, `timeout` sends TERM: still run the scenario's destroy (booted nodes outlive molecule).
    trap 'molecule destroy -s "$scenario" >/dev/null 2>&1; exit 124' TERM
    molecule test -s "$scenario" || { echo "molecule scenario $scenario FAILED"; rc=1; }
    trap - TERM
  done
  return $rc
}

for tier in $TIERS; do
  case $tier in
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
    pytest) run_tier pytest 900 pytest -p no:cacheprovider -m "not cluster and not hostile" ;;
    # Attacks on a running service, each with a memory, fd and log budget (docs/security.md).
    hostile) run_tier hostile 300 pytest -p no:cacheprovider -m hostile tests/hostile ;;
    # The real control plane: built from tests/cluster/go.mod on first use (about 7 minutes on
    # 2 cores, then cached outside the clone), then the tests that run MCO against it.
    cluster) run_tier cluster 1500 tier_cluster ;;
    molecule)
      if ls molecule/*/molecule.yml >/dev/null 2>&1; then run_tier molecule 1500 tier_molecule
      else skip_tier molecule "no scenarios yet"; fi ;;
    *) echo "unknown tier '$tier' (known: $ALL_TIERS)"; exit 2 ;;
  esac
done

printf '\n===== summary =====\n'
for name in "${ORDER[@]}"; do printf '  %-13s %5ss  %s\n' "$name" "${SECONDS_USED[$name]}" "${RESULT[$name]}"; done
printf 'tiers: %d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
