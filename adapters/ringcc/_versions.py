"""The framework versions ringcc is tested with (pyproject.toml's extras say
the same; tests/unit/test_packaging.py keeps them in step). Importing this module
imports no framework.

The lowest versions are tested by .ci/oldest-versions (docs/api.md,
"Supported versions"); the newest by the README's test command.
"""

from __future__ import annotations

import re

# torch: 2.5 (the first with the torch.backends entry point the backend
# registers through) and later.
LOWEST_TORCH = "2.5"
# jax: [low, high). ringcc.jax warns on a jax outside this range.
TESTED_JAX: tuple[str, str] = ("0.6", "0.13")


def version_tuple(text: str) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); '2.13.0+cpu' -> (2, 13, 0); '0.7.0rc1' -> (0, 7, 0)."""
    parts = []
    for part in text.split("+", 1)[0].split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        parts.append(int(match.group(0)))
        if match.group(0) != part:
            break
    return tuple(parts)


def in_range(version: str, low: str, high: str) -> bool:
    """low <= version < high, comparing release numbers."""
    return version_tuple(low) <= version_tuple(version) < version_tuple(high)
