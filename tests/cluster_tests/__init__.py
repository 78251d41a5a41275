"""The `cluster` tier: MCO against the real control plane (tests/cluster)."""
