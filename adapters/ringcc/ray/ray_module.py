"""Ray itself, imported when ringcc.ray first needs it: `import ringcc` and
`import ringcc.ray` work without Ray installed."""

from __future__ import annotations

INSTALL_HINT = "pip install 'ray[train]'"


def import_ray():
    """The `ray` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(f"ringcc.ray needs Ray, which could not be imported ({error}): {INSTALL_HINT}") from error
    return ray


def require_ray_running(ray) -> None:
    """Ray must be connected before workers are placed: ringcc.ray never starts a
    cluster behind the caller's back (ray.init() would start a local one)."""
    if not ray.is_initialized():
        raise RuntimeError(
            "RayExecutor.start(): Ray is not initialised; call ray.init() first "
            "(ray.init(address='auto') joins a running cluster, ray.init() starts a local one)"
        )
