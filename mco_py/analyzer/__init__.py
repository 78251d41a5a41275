"""mco analyzer: gRPC ingest, scoring loop, rules watcher, report writer."""
