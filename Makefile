# Many-Core Orchestrator — developer and user entry points.
# `make run` and `make test` set everything up first (idempotent, seconds when done).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help setup test proto run stop report diagnostics clean collection release schedulers images

help:
	@echo "make run    - set up, deploy MCO to this host (standalone) and show the report"
	@echo "make stop   - stop the standalone deployment"
	@echo "make diagnostics - check MCO on this host (mco doctor): a verdict and a next step per check"
	@echo "make test   - set up, then run every test tier (TIERS='ruff pytest' to pick)"
	@echo "make setup  - create .venv, install pinned packages and Ansible collections"
	@echo "make proto  - regenerate the gRPC stubs from proto/"
	@echo "make collection - build the Ansible collection manycore.mco into dist/"
	@echo "make release VERSION=X.Y.Z - check the CHANGELOG and versions, tag vX.Y.Z, build its collection"
	@echo "make schedulers - build vc-scheduler and kube-scheduler with mco-plugin, and their image archives"
	@echo "make images - build the test pods' image archives (docs/images.md)"

setup:
	@scripts/setup.sh

test: setup
	@scripts/test.sh

# Generated stubs are committed; tests/contracts/test_proto.py fails when they drift.
proto: setup
	@$(PY) scripts/gen_proto.py

# The Ansible collection manycore.mco (the mco_py wheel and its runtime locks) for ansible-galaxy.
# Needs only the build packages (setup.sh --build), not the test tools.
collection:
	@scripts/setup.sh --build
	@$(PY) scripts/build_collection.py

# A release (scripts/release.py: `prepare` first, commit, then this): the checks, the annotated tag
# vX.Y.Z, and dist/manycore-mco-X.Y.Z.tar.gz built from the tagged tree. Pushes nothing.
release:
	@test -n "$(VERSION)" || { echo "make release VERSION=X.Y.Z (scripts/release.py prepare X.Y.Z first)" >&2; exit 2; }
	@scripts/setup.sh --build
	@$(PY) scripts/release.py tag $(VERSION)
	@$(PY) scripts/build_collection.py

# Volcano's vc-scheduler and kube-scheduler with mco-plugin (scheduler/), and an image archive of each;
# cached in ~/.cache/mco/scheduler-bin/<key>/ (docs/scheduling.md).
schedulers: setup
	@$(PY) scripts/build_schedulers.py --print

# pause, redis, stress-ng and memcached image archives for the test nodes' containerd (docs/images.md).
images: setup
	@$(PY) scripts/build_images.py --print

clean:
	rm -rf $(VENV) dist collections/ansible_collections collections/.installed .pytest_cache .mypy_cache .ruff_cache

# Standalone MCO on this host: deploy with Ansible, wait for the first report, show it.
ANSIBLE_PLAYBOOK := $(VENV)/bin/ansible-playbook
MCO_OFF := '{"mco_collector_enabled": false, "mco_analyzer_enabled": false, "mco_scheduler_plugin_enabled": false}'

run: setup
	@$(ANSIBLE_PLAYBOOK) -i inventory/local.yml playbooks/site.yml
	@/opt/mco/venv/bin/mco report --file /var/lib/mco/report.json --wait 60

report:
	@/opt/mco/venv/bin/mco report --file /var/lib/mco/report.json

# What the runbooks check by hand, on this host (exit code: 0 ok, 1 warn, 2 fail).
diagnostics:
	@/opt/mco/venv/bin/mco doctor

stop: setup
	@$(ANSIBLE_PLAYBOOK) -i inventory/local.yml playbooks/mco.yml -e $(MCO_OFF)
	@if [ -S /run/mco-supervisor.sock ]; then supervisorctl -c /etc/mco/supervisord.conf shutdown; fi
