"""Many-Core Orchestrator: interference-aware co-location for Kubernetes."""

__version__ = "0.1.0"
