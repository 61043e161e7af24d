"""How ringrun fails: a LaunchError (a problem with the command line or
the host list, reported without a traceback) and ringrun's own exit statuses.
"""

from __future__ import annotations

EXIT_TIMEOUT = 124
EXIT_CANNOT_START = 127
EXIT_USAGE = 2


class LaunchError(Exception):
    """A problem with the command line or the host list, reported without a traceback."""
