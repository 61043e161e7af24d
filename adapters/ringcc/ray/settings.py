"""The settings of a RayExecutor job: Horovod's `RayExecutor.create_settings`
and what RayExecutor accepts of a Horovod settings object."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

logger = logging.getLogger("ringcc")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_PLACEMENT_GROUP_TIMEOUT_S = 100.0


def _positive_seconds(name: str, value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return seconds


@dataclass
class RaySettings:
    """What a RayExecutor job needs to know besides its workers.

    timeout_s bounds every wait of the job: the ranks' rendezvous and
    collectives (it becomes RINGCC_TIMEOUT_S in the workers unless
    extra_env_vars sets that), how long run() and execute() wait for the other
    ranks once one has failed, and how long shutdown() waits for the ranks to
    leave. placement_group_timeout_s bounds the wait for the cluster to grant
    the workers' placement group. nics: network interfaces the ranks may use
    across hosts, tried in order (RINGCC_SOCKET_IFNAME). ssh_identity_file is
    kept for Horovod's scripts only: Ray starts the workers, ringcc.ray never
    runs ssh."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    placement_group_timeout_s: float = DEFAULT_PLACEMENT_GROUP_TIMEOUT_S
    nics: list[str] | None = field(default=None)
    verbose: int = 1
    ssh_identity_file: str | None = None

    def __post_init__(self) -> None:
        self.timeout_s = _positive_seconds("timeout_s", self.timeout_s)
        self.placement_group_timeout_s = _positive_seconds("placement_group_timeout_s", self.placement_group_timeout_s)
        if self.nics is not None:
            if isinstance(self.nics, str):
                self.nics = [self.nics]
            nics = [str(nic).strip() for nic in self.nics]
            if not nics or any(not nic or "," in nic for nic in nics):
                raise ValueError(f"nics must be a non-empty collection of interface names, got {self.nics!r}")
            self.nics = sorted(nics) if isinstance(self.nics, (set, frozenset)) else nics


def create_settings(
    timeout_s=DEFAULT_TIMEOUT_S,
    ssh_identity_file=None,
    ssh_str=None,
    placement_group_timeout_s=DEFAULT_PLACEMENT_GROUP_TIMEOUT_S,
    nics=None,
) -> RaySettings:
    """Horovod's RayExecutor.create_settings, with its arguments. ssh_str (a
    private key that Horovod writes to ssh_identity_file) is ignored and no key
    is written: ringcc.ray needs no ssh."""
    if ssh_str:
        logger.warning("ringcc.ray: ssh_str is ignored and no key file is written (Ray starts the workers, not ssh)")
    return RaySettings(
        timeout_s=timeout_s,
        placement_group_timeout_s=placement_group_timeout_s,
        nics=nics,
        ssh_identity_file=ssh_identity_file,
    )


def settings_of(settings) -> RaySettings:
    """RaySettings from what a RayExecutor was given: RaySettings itself,
    None (the defaults), or any object with Horovod's attributes (timeout_s,
    placement_group_timeout_s, nics, verbose), such as Horovod's MiniSettings."""
    if settings is None:
        return RaySettings()
    if isinstance(settings, RaySettings):
        return settings
    known = ("timeout_s", "placement_group_timeout_s", "nics")
    if not any(hasattr(settings, name) for name in known):
        raise TypeError(
            "RayExecutor: settings must come from RayExecutor.create_settings(...) "
            f"(or have Horovod's timeout_s, placement_group_timeout_s, nics), got {type(settings).__name__}"
        )
    return RaySettings(
        timeout_s=getattr(settings, "timeout_s", DEFAULT_TIMEOUT_S),
        placement_group_timeout_s=getattr(settings, "placement_group_timeout_s", DEFAULT_PLACEMENT_GROUP_TIMEOUT_S),
        nics=getattr(settings, "nics", None),
        verbose=getattr(settings, "verbose", 1),
        ssh_identity_file=getattr(settings, "ssh_identity_file", None),
    )
