"""Kubernetes API adapter (the only module that imports the kubernetes client)."""
