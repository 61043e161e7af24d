"""torch's `torch.backends` entry point: registers backend "ring" when torch
is imported, so a script that never imports ringcc can still call
`dist.init_process_group(backend="ring")`.

torch calls `register()` from inside `import torch` (torch/__init__.py,
`_import_device_backends`), after torch.distributed has been imported and
before `import torch` returns; an exception here would make `import torch`
fail, so nothing escapes: a failure is logged and the backend is skipped.
Registration is light: it imports neither the core nor the backend module;
the creator imports them when the first "ring" group is made.

TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns off every such entry point (torch's
switch); RINGCC_TORCH_AUTOLOAD=0 turns off this one only. Under srun it
also lets env:// find the job from SLURM's variables (ringcc.slurm_torch).
"""

import logging
import os
import sys

_log = logging.getLogger("ringcc.torch")


def register() -> None:
    """Registers backend "ring" with torch.distributed; never raises."""
    try:
        if os.environ.get("RINGCC_TORCH_AUTOLOAD", "1") == "0":
            return
        _register()
    except Exception as error:  # noqa: BLE001 - must not break `import torch`
        _log.warning(
            "ringcc: could not register torch.distributed backend 'ring' (%s: %s); "
            "`import ringcc.torch` registers it explicitly",
            type(error).__name__,
            error,
        )


def _register() -> None:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        import torch.distributed as dist  # noqa: PLC0415 - torch imports it before its entry points
    if not dist.is_available():
        return
    if os.environ.get("SLURM_PROCID"):
        # Under srun, env:// finds the job from SLURM (ringcc.slurm_torch).
        from ringcc import slurm_torch  # noqa: PLC0415 - only under SLURM

        slurm_torch.install()
    plugins = getattr(dist.Backend, "_plugins", {})
    if "RING" in plugins:
        return
    dist.Backend.register_backend("ring", _create_process_group, devices=["cpu"])


def _create_process_group(store, rank, size, timeout):
    """The creator c10d calls for a "ring" group: loads the backend now."""
    from ringcc.torch.backend import create_process_group  # noqa: PLC0415

    return create_process_group(store, rank, size, timeout)
