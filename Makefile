# Many-Core Orchestrator — developer and user entry points.
# `make run` and `make test` set everything up first (idempotent, seconds when done).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help setup test proto run stop report lint clean

help:
	@echo "make run    - set up, deploy MCO to this host (standalone) and show the report"
	@echo "make stop   - stop the standalone deployment"
	@echo "make test   - set up, then run every test tier (TIERS='ruff pytest' to pick)"
	@echo "make setup  - create .venv, install pinned packages and Ansible collections"
	@echo "make proto  - regenerate the gRPC stubs from proto/"

setup:
	@scripts/setup.sh

test: setup
	@scripts/test.sh

# Generated stubs are committed; tests/contracts/test_proto.py fails when they drift.
proto: setup
	@$(PY) scripts/gen_proto.py

clean:
	rm -rf $(VENV) collections/ansible_collections collections/.installed .pytest_cache .mypy_cache .ruff_cache
