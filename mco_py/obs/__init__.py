"""Observability helpers: logging set-up and Prometheus registries."""
