"""Run the emulated API server standalone until SIGTERM/SIGINT.

    .venv/bin/python -m tests.kubeapi --port 0 --kubeconfig /tmp/kubeconfig [--host 10.213.0.2]

The kubeconfig is written (atomically) once the server accepts connections, so
waiting for the file is waiting for readiness.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from tests.kubeapi.server import start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kubeapi", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--kubeconfig", required=True, help="where to write a kubeconfig pointing at this server")
    parser.add_argument("--history", type=int, default=1000, help="watch events kept for resuming (default 1000)")
    parser.add_argument("--token", default=None, help="require this bearer token (default: no authentication)")
    args = parser.parse_args(argv)
    try:
        api = start(args.host, args.port, history=args.history, token=args.token)
    except OSError as e:
        print(f"kubeapi: cannot bind {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api.write_kubeconfig(args.kubeconfig)
    print(f"kubeapi: serving {api.url} (kubeconfig {args.kubeconfig})", flush=True)
    done.wait()
    api.stop()
    print("kubeapi: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
