"""python -m ringcc: ringcc's version and what this installation can do
(the same report as `ringrun --check-build`)."""

from __future__ import annotations

import sys

from ringcc.launch.build_report import check_build

if __name__ == "__main__":
    sys.exit(check_build())
