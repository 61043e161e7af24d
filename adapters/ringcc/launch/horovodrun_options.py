"""horovodrun's options on ringrun: the ones Horovod job scripts pass that
ringrun has no option of its own for, what each becomes here (a variable the
ranks' core reads, or one of ringrun's own settings), and Horovod's YAML
--config-file. Options without an equivalent are accepted with one warning
line that says what to use instead (docs/migrating.md, "horovodrun's options").
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from ringcc.launch.agents import is_ssh_agent
from ringcc.launch.errors import LaunchError

# Horovod's --log-level choices (RINGCC_LOG_LEVEL takes them in lower case).
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")

MIB = 1024 * 1024


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(LOG_LEVELS)}, got {text}")
    return level


def _non_negative(kind):
    def parse(text: str):
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
        return value

    return parse


def _switch(group, on: str, off: str, dest: str, help: str, off_help: str | None = None) -> None:
    """A pair --X / --no-X (as Horovod's): True, False, or None when neither is given."""
    group.add_argument(on, dest=dest, action="store_const", const=True, default=None, help=help)
    group.add_argument(off, dest=dest, action="store_const", const=False, help=off_help or argparse.SUPPRESS)


def add_horovodrun_arguments(parser: argparse.ArgumentParser) -> None:
    """horovodrun's options that ringrun has no option of its own for."""
    group = parser.add_argument_group(
        "horovodrun's options", "accepted so that Horovod job scripts run unchanged (see docs/migrating.md)"
    )
    add = group.add_argument
    add("--config-file", metavar="FILE", help="Horovod's YAML config file (params, timeline, stall_check, ...)")
    add("--gloo", action="store_true", help="start the ranks directly (ringrun's default); not with --mpi")
    add("--fusion-threshold-mb", type=_non_negative(int), metavar="MB", help="RINGCC_FUSION_THRESHOLD (in bytes)")
    add("--cycle-time-ms", type=_non_negative(float), metavar="MS", help="RINGCC_CYCLE_TIME_MS")
    add("--cache-capacity", type=_non_negative(int), metavar="N", help="RINGCC_CACHE_CAPACITY")
    _switch(
        group,
        "--hierarchical-allreduce",
        "--no-hierarchical-allreduce",
        "hierarchical_allreduce",
        "RINGCC_HIERARCHICAL_ALLREDUCE=1 (ringcc's default); --no-hierarchical-allreduce: 0",
    )
    _switch(
        group,
        "--hierarchical-allgather",
        "--no-hierarchical-allgather",
        "hierarchical_allgather",
        "the same switch: RINGCC_HIERARCHICAL_ALLREDUCE covers allreduce, allgather and broadcast",
    )
    add("--timeline-filename", metavar="FILE", help="RINGCC_TIMELINE")
    add("--log-level", type=_log_level, metavar="LEVEL", help="RINGCC_LOG_LEVEL (TRACE ... FATAL)")
    add("--gloo-timeout-seconds", type=_non_negative(int), metavar="SECONDS", help="RINGCC_TIMEOUT_S")
    _switch(
        group,
        "--no-stall-check",
        "--stall-check",
        "no_stall_check",
        "RINGCC_STALL_CHECK_S=0 and RINGCC_STALL_SHUTDOWN_S=0",
    )
    add("--stall-check-warning-time-seconds", type=_non_negative(int), metavar="SECONDS", help="RINGCC_STALL_CHECK_S")
    add(
        "--stall-check-shutdown-time-seconds",
        type=_non_negative(int),
        metavar="SECONDS",
        help="RINGCC_STALL_SHUTDOWN_S (0: never)",
    )
    add("--tcp", dest="tcp_flag", action="store_true", help="NCCL_IB_DISABLE=1, as horovodrun sets")
    add("--start-timeout", type=_non_negative(int), metavar="SECONDS", help="--ssh-connect-timeout, unless given")
    add("--binding-args", metavar="ARGS", help="with --mpi: mpirun's binding options, instead of --bind-to")

    # Accepted, no effect here: each warns once (NO_EFFECT says why).
    hidden = argparse.SUPPRESS
    add("--disable-cache", action="store_true", help=hidden)
    add("--jsrun", action="store_true", help=hidden)
    _switch(group, "--torus-allreduce", "--no-torus-allreduce", "torus_allreduce", hidden)
    _switch(group, "--autotune", "--no-autotune", "autotune", hidden)
    add("--autotune-log-file", help=hidden)
    add("--autotune-warmup-samples", type=_non_negative(int), help=hidden)
    add("--autotune-steps-per-sample", type=_non_negative(int), help=hidden)
    add("--autotune-bayes-opt-max-samples", type=_non_negative(int), help=hidden)
    add("--autotune-gaussian-process-noise", type=float, help=hidden)
    _switch(group, "--timeline-mark-cycles", "--no-timeline-mark-cycles", "timeline_mark_cycles", hidden)
    _switch(group, "--mpi-threads-disable", "--no-mpi-threads-disable", "mpi_threads_disable", hidden)
    add("--num-nccl-streams", type=_non_negative(int), help=hidden)
    add("--thread-affinity", type=_non_negative(int), help=hidden)
    _switch(group, "--log-with-timestamp", "--log-without-timestamp", "log_with_timestamp", hidden)
    add("--log-hide-timestamp", dest="log_with_timestamp", action="store_const", const=False, help=hidden)
    add("--no-log-hide-timestamp", dest="log_with_timestamp", action="store_const", const=True, help=hidden)
    add(
        "-prefix-timestamp",
        "--prefix-output-with-timestamp",
        action="store_true",
        help="put the local time before each line's [RANK]<stream>: prefix (horovodrun's option)",
    )


NO_AUTOTUNER = "ringcc has no autotuner; set --fusion-threshold-mb and --cycle-time-ms yourself"

# dest -> (the option, the value that has no effect here, why and what to use instead). A value
# that asks for what ringcc does anyway (--no-autotune, --log-with-timestamp) passes silently.
NO_EFFECT: dict[str, tuple[str, Any, str]] = {
    "disable_cache": ("--disable-cache", True, "ringrun keeps no cache of host checks"),
    "jsrun": (
        "--jsrun",
        True,
        "ringrun does not start ranks through jsrun; it starts them directly (-H, --hostfile), "
        "or through mpirun with --mpi",
    ),
    "torus_allreduce": (
        "--torus-allreduce",
        True,
        "ringcc has no torus allreduce; its hierarchical allreduce (RINGCC_HIERARCHICAL_ALLREDUCE, on by "
        "default) also splits the work between and inside hosts",
    ),
    "autotune": ("--autotune", True, NO_AUTOTUNER),
    "autotune_log_file": ("--autotune-log-file", "any", NO_AUTOTUNER),
    "autotune_warmup_samples": ("--autotune-warmup-samples", "any", NO_AUTOTUNER),
    "autotune_steps_per_sample": ("--autotune-steps-per-sample", "any", NO_AUTOTUNER),
    "autotune_bayes_opt_max_samples": ("--autotune-bayes-opt-max-samples", "any", NO_AUTOTUNER),
    "autotune_gaussian_process_noise": ("--autotune-gaussian-process-noise", "any", NO_AUTOTUNER),
    "timeline_mark_cycles": (
        "--timeline-mark-cycles",
        True,
        "ringcc's timeline (--timeline-filename, RINGCC_TIMELINE) records collectives, not engine cycles",
    ),
    "mpi_threads_disable": (
        "--mpi-threads-disable",
        True,
        "ringcc always asks MPI for MPI_THREAD_MULTIPLE (its engine thread calls MPI); there is no setting",
    ),
    "num_nccl_streams": (
        "--num-nccl-streams",
        "any",
        "ringcc's NCCL backend runs on the caller's CUDA stream (docs/gpu.md)",
    ),
    "thread_affinity": (
        "--thread-affinity",
        "any",
        "ringcc's engine thread shares its rank's CPUs; use --bind-to core to pin each rank",
    ),
    "log_with_timestamp": (
        "--log-without-timestamp",
        False,
        "ringcc's log lines always carry their UTC time (RINGCC_LOG_LEVEL sets what is logged)",
    ),
}

# Horovod's --config-file: section -> {key: dest}, the keys horovodrun reads
# (horovod/runner/common/util/config_parser.py). "enabled" keys are handled apart.
CONFIG_KEYS: dict[str, dict[str, str]] = {
    "params": {
        "fusion_threshold_mb": "fusion_threshold_mb",
        "cycle_time_ms": "cycle_time_ms",
        "cache_capacity": "cache_capacity",
        "hierarchical_allreduce": "hierarchical_allreduce",
        "hierarchical_allgather": "hierarchical_allgather",
        "torus_allreduce": "torus_allreduce",
    },
    "autotune": {
        "log_file": "autotune_log_file",
        "warmup_samples": "autotune_warmup_samples",
        "steps_per_sample": "autotune_steps_per_sample",
        "bayes_opt_max_samples": "autotune_bayes_opt_max_samples",
        "gaussian_process_noise": "autotune_gaussian_process_noise",
    },
    "timeline": {"filename": "timeline_filename", "mark_cycles": "timeline_mark_cycles"},
    "stall_check": {
        "warning_time_seconds": "stall_check_warning_time_seconds",
        "shutdown_time_seconds": "stall_check_shutdown_time_seconds",
    },
    "library_options": {
        "mpi_threads_disable": "mpi_threads_disable",
        "num_nccl_streams": "num_nccl_streams",
        "thread_affinity": "thread_affinity",
        "ccl_bgt_affinity": "thread_affinity",  # its name before Horovod 0.28
        "gloo_timeout_seconds": "gloo_timeout_seconds",
    },
    "logging": {"level": "log_level", "with_timestamp": "log_with_timestamp"},
}


def read_config_file(path: str) -> dict:
    """The YAML file's contents (a mapping)."""
    try:
        import yaml
    except ImportError:
        raise LaunchError(
            f"--config-file {path}: reading YAML needs PyYAML, which is not installed (pip install pyyaml)"
        ) from None
    try:
        with open(path, encoding="utf-8") as file:
            config = yaml.safe_load(file)
    except OSError as error:
        raise LaunchError(f"--config-file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise LaunchError(f"--config-file {path}: not YAML: {error}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise LaunchError(f"--config-file {path}: expected a mapping of sections (params, timeline, ...)")
    return config


def apply_config(args: argparse.Namespace, config: dict, path: str = "--config-file") -> None:
    """Fills the options the command line left unset from Horovod's config
    sections, as horovodrun does: options given on the command line win."""
    controller = config.get("controller")
    if controller and not args.gloo and not args.mpi:
        if str(controller).lower() == "gloo":
            args.gloo = True
        elif str(controller).lower() == "mpi":
            args.mpi = True
        else:
            raise LaunchError(f"{path}: controller must be gloo or mpi, not {controller!r}")
    for section, keys in CONFIG_KEYS.items():
        values = config.get(section)
        if not values:
            continue
        if not isinstance(values, dict):
            raise LaunchError(f"{path}: {section} must be a mapping")
        if section == "autotune" and args.autotune is None:
            args.autotune = bool(values.get("enabled", False))
        if section == "stall_check" and args.no_stall_check is None:
            args.no_stall_check = not values.get("enabled", True)
        for key, dest in keys.items():
            if values.get(key) is not None and getattr(args, dest) is None:
                setattr(args, dest, values[key])
    if args.log_level is not None:
        try:
            args.log_level = _log_level(str(args.log_level))
        except argparse.ArgumentTypeError as error:
            raise LaunchError(f"{path}: logging.level {error}") from None
    for dest in ("fusion_threshold_mb", "cycle_time_ms", "cache_capacity", "gloo_timeout_seconds"):
        value = getattr(args, dest)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
            raise LaunchError(f"{path}: {dest} must be a number, at least 0, not {value!r}")


@dataclass
class HorovodSettings:
    """What horovodrun's options come to: variables for every rank, and warnings."""

    variables: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(int(value))


def horovodrun_settings(args: argparse.Namespace) -> HorovodSettings:
    """Reads --config-file, then maps horovodrun's options: to variables for the
    ranks, to ringrun's own settings (args is updated), or to a warning."""
    if args.config_file is not None:
        apply_config(args, read_config_file(args.config_file), f"--config-file {args.config_file}")
    settings = HorovodSettings()
    variables, warn = settings.variables, settings.warnings.append
    if args.gloo and args.mpi:
        raise LaunchError("give --gloo or --mpi, not both")
    if args.fusion_threshold_mb is not None:
        variables["RINGCC_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * MIB))
    if args.cycle_time_ms is not None:
        variables["RINGCC_CYCLE_TIME_MS"] = _number(args.cycle_time_ms)
    if args.cache_capacity is not None:
        variables["RINGCC_CACHE_CAPACITY"] = _number(args.cache_capacity)
    hierarchical = args.hierarchical_allreduce
    if args.hierarchical_allgather is not None:
        if hierarchical is None:
            hierarchical = args.hierarchical_allgather
        elif bool(hierarchical) != bool(args.hierarchical_allgather):
            warn(
                "hierarchical allgather and allreduce share one switch in ringcc "
                f"(RINGCC_HIERARCHICAL_ALLREDUCE); it follows --{'' if hierarchical else 'no-'}hierarchical-allreduce"
            )
    if hierarchical is not None:
        variables["RINGCC_HIERARCHICAL_ALLREDUCE"] = "1" if hierarchical else "0"
    if args.timeline_filename:
        variables["RINGCC_TIMELINE"] = str(args.timeline_filename)
    if args.log_level is not None:
        variables["RINGCC_LOG_LEVEL"] = args.log_level.lower()
    if args.gloo_timeout_seconds is not None:
        variables["RINGCC_TIMEOUT_S"] = _number(args.gloo_timeout_seconds)
    if args.no_stall_check:  # Horovod then neither warns nor shuts down
        variables["RINGCC_STALL_CHECK_S"] = "0"
        variables["RINGCC_STALL_SHUTDOWN_S"] = "0"
    else:
        if args.stall_check_warning_time_seconds is not None:
            variables["RINGCC_STALL_CHECK_S"] = _number(args.stall_check_warning_time_seconds)
        if args.stall_check_shutdown_time_seconds is not None:
            variables["RINGCC_STALL_SHUTDOWN_S"] = _number(args.stall_check_shutdown_time_seconds)
    if args.tcp_flag:
        variables["NCCL_IB_DISABLE"] = "1"
    if args.start_timeout is not None:
        if args.mpi:
            warn("--start-timeout has no effect with --mpi (mpirun starts the ranks); give mpirun's own in --mpi-args")
        elif args.agent is not None and not is_ssh_agent(args.agent):
            warn(f"--start-timeout has no effect with --agent {args.agent!r}: it bounds ssh's connection")
        elif args.ssh_connect_timeout is None and args.start_timeout > 0:
            args.ssh_connect_timeout = args.start_timeout
    if args.binding_args is not None and not args.mpi:
        warn("--binding-args has no effect without --mpi (it is for mpirun); use --bind-to core to pin ranks")
    for dest, (option, value, why) in NO_EFFECT.items():
        given = getattr(args, dest)
        if given is None:
            continue
        if (given is not False) if value == "any" else (bool(given) == value):
            warn(f"{option} is accepted but has no effect: {why}")
    return settings
