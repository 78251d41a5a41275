"""Report stores: one interface, Kubernetes and file implementations."""
