"""mco extender: Volcano and kube-scheduler extender HTTP service."""
