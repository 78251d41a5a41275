"""Real control-plane binaries (etcd, Kubernetes, Volcano) built from Go modules: see build.py."""
