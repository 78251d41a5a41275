"""mco collector: host signal sources, Prometheus exporter, gRPC stream to the analyzer."""
