"""`python -m ringcc.launcher` and the `ringrun` entry point: ringrun,
whose code is the package ringcc.launch (its command line:
ringcc/launch/cli.py)."""

import sys

from ringcc.launch.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
