"""Installs and removes ringcc's opt-in `horovod` package: a directory
`horovod/` in site-packages (or `target`) whose __init__ binds ringcc under
Horovod's names (ringcc.compat.horovod_names), so that Horovod scripts run
unchanged. It never goes over a real Horovod: installing refuses when one
is importable, and uninstalling removes only a package carrying the alias's
marker."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig

from ringcc.compat.horovod_names import MARKER, is_alias, real_horovod_on_path

PACKAGE_TEXT = f'''"""ringcc under Horovod's name: `import horovod.torch as hvd` is ringcc.torch,
horovod.run is ringcc.run (docs/migrating.md in ringcc). Written by
`python -m ringcc.compat install-horovod-alias`; removed by
`python -m ringcc.compat uninstall-horovod-alias`."""

{MARKER}

from ringcc.compat.horovod_names import bind as _bind

_bind(globals())
'''


class AliasError(Exception):
    """The alias cannot be installed or removed here (a real Horovod is in the way)."""


def site_packages() -> str:
    """The current environment's site-packages (purelib)."""
    return sysconfig.get_paths()["purelib"]


def real_horovod(target: str) -> str | None:
    """Where a real Horovod is importable from (`target`, then sys.path and import hooks), or None."""
    found = real_horovod_on_path([target, *sys.path])
    if found is not None:
        return found
    try:
        spec = importlib.util.find_spec("horovod") if "horovod" not in sys.modules else sys.modules["horovod"].__spec__
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or []) or [os.path.dirname(spec.origin or "")]
    if any(is_alias(location) for location in locations):
        return None
    return spec.origin or (locations[0] if locations else "horovod")


def install(target: str | None = None) -> str:
    """Writes the alias package into `target` (default: site-packages); returns its directory."""
    target = os.path.abspath(target or site_packages())
    real = real_horovod(target)
    if real is not None:
        raise AliasError(
            f"a real Horovod is importable here ({real}); ringcc's horovod alias would hide it, so it was not "
            "installed. Use Horovod as it is, or `pip uninstall horovod` first and install the alias again"
        )
    package_dir = os.path.join(target, "horovod")
    os.makedirs(package_dir, exist_ok=True)
    partial = os.path.join(package_dir, f".__init__.py.{os.getpid()}")
    with open(partial, "w", encoding="utf-8") as file:
        file.write(PACKAGE_TEXT)
    os.replace(partial, os.path.join(package_dir, "__init__.py"))
    return package_dir


def uninstall(target: str | None = None) -> str | None:
    """Removes the alias package from `target` (default: site-packages); returns what was removed, or None."""
    package_dir = os.path.join(os.path.abspath(target or site_packages()), "horovod")
    if not os.path.exists(package_dir):
        return None
    if not is_alias(package_dir):
        raise AliasError(f"{package_dir} is not ringcc's horovod alias (a real Horovod?); left as it is")
    shutil.rmtree(package_dir)
    return package_dir
