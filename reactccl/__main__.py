"""``python -m reactccl``: the ``reactccl`` command line (same as the console script)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
