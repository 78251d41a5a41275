"""``python -m testbed``: the node lifecycle CLI."""

from __future__ import annotations

import sys

from testbed.cli import main

sys.exit(main())
