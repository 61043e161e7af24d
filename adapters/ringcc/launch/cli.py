"""ringrun: start the ranks of a ringcc job, locally or across hosts.

    ringrun -np 4 python train.py --epochs 3
    ringrun -np 8 -H host1:4,host2:4 python train.py
    ringrun --mpi -np 4 python train.py          (through mpirun)
    ringrun --check-build

The command line: ringrun's options, its help, and which mode runs the job
(ringcc.launch.processes, .mpirun, .elastic_driver or .build_report). The
launcher is plain standard-library Python: it never imports the compiled
core except for ``--check-build``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from ringcc.launch import elastic_driver
from ringcc.launch.build_report import check_build
from ringcc.launch.errors import EXIT_USAGE, LaunchError
from ringcc.launch.horovodrun_options import add_horovodrun_arguments, horovodrun_settings
from ringcc.launch.hosts import BIND_CHOICES
from ringcc.launch.mpirun import run_mpi
from ringcc.launch.plan import plan_job
from ringcc.launch.processes import JobRunner, prepare_output_files
from ringcc.launch.unknown_options import unknown_option_message

DEFAULT_GRACE_PERIOD_S = 3.0


def ringcc_version() -> str:
    package = sys.modules.get("ringcc")
    version = getattr(package, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("ringcc")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


DESCRIPTION = """\
Start COMMAND as the ranks of a ringcc job. Options come first; the first
word that is not an option (or everything after "--") is the command, and all
words after it belong to the command (ringrun warns when -np, -H, --hosts or
--hostfile follow the command and were not given to ringrun itself)."""

EPILOG = """\
hosts:
  Without -H or --hostfile every rank runs on this machine. With them, ranks
  fill the hosts' slots in the order given (-np may be less than the slots).
  Hosts named localhost, 127.0.0.1 or this machine's hostname are started
  directly; other hosts through the agent, by default
  "ssh -o BatchMode=yes {host}".
  Inside a SLURM allocation (salloc, sbatch) without -H or --hostfile, the
  host list is the allocation's (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE)
  and ranks on other nodes start through "srun --nodes=1 --ntasks=1
  --overlap --nodelist={host} ..." instead of ssh (docs/launchers.md).

agent:
  --agent TEMPLATE replaces ssh; {host} is replaced by the host name as given
  in the host list (without {host} the name is appended). When --agent is
  given, EVERY listed host goes through it, local names included, so that
  e.g. --agent 'ip netns exec {host}' can name network namespaces. The rank's
  command is appended as "env K=V ... COMMAND": under "sh -c", or, for ssh
  and rsh, as one shell-quoted command line run in the current directory.
  Ranks started through an agent get the job's variables, PYTHONUNBUFFERED and
  the -x variables (all of ringrun's environment with --env-all) on that
  command line, except RINGCC_SECRET: the agent gets it on standard input
  (the rank's shell reads it from there), so it never shows in ps; agents
  must pass standard input on (docker exec -i, kubectl exec -i). Ranks
  started directly get all of ringrun's environment.
  --ssh-connect-timeout N makes ssh give up on a host it cannot connect to
  within N seconds (-o ConnectTimeout=N; the job then fails, naming the
  rank); it applies to the default agent and to --agent 'ssh ...'.

network:
  Hosts may be names, IPv4 or IPv6 addresses (-H '[fd00::2]:4'), and so may
  --master-addr. By default the ranks of different hosts connect over the
  address that reaches rank 0's store. --network-interface IFACES chooses
  the interface instead, the same on every host: an interface name (eth1;
  a prefix such as "eth" takes the first eth* interface, "=eth1" only eth1),
  an address of the host, a subnet (10.1.0.0/16, fd00:1::/64) that the
  hosts' addresses on that network share, a comma-separated list tried in
  order, or "^docker,lo" for any interface but these. It sets
  RINGCC_SOCKET_IFNAME in every rank; without the flag ranks also read
  HOROVOD_GLOO_IFACE, GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, and
  RINGCC_SOCKET_FAMILY=ipv4|ipv6 narrows the address taken. A rank whose
  host has no such interface fails at init, listing the host's interfaces.
  Ranks that all run on one host use 127.0.0.1 whatever the interface.

environment of each rank:
  RINGCC_RANK, RINGCC_SIZE, RINGCC_LOCAL_RANK, RINGCC_LOCAL_SIZE,
  RINGCC_CROSS_RANK, RINGCC_CROSS_SIZE (among the ranks with the same local
  rank), RINGCC_HOSTNAME, RINGCC_MASTER_ADDR, RINGCC_MASTER_PORT,
  RINGCC_SECRET and RINGCC_JOB_ID (new for each job); for torch: RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, GROUP_RANK (the host's index), MASTER_ADDR and
  MASTER_PORT (a second port, for torch's own store); for Horovod scripts:
  HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE,
  HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE. PYTHONUNBUFFERED=1 unless set;
  OMP_NUM_THREADS=1 unless set when a host runs several ranks (as torchrun).
  The master address is 127.0.0.1 when every rank runs here, else the first
  host's name (or --master-addr).

output:
  Every line of a rank's stdout and stderr is copied to ringrun's stdout and
  stderr as "[RANK]<stdout>: line" and "[RANK]<stderr>: line"
  (--no-prefix: unchanged). --output-filename DIR writes each rank's lines,
  unprefixed, to DIR/rank.N/stdout and DIR/rank.N/stderr as well (N padded
  with zeros to the width of the last rank, as horovodrun does: rank.03 of
  12), a line at a time; DIR and its rank directories are created.

exit status:
  0 when every rank succeeds. When a rank fails, ringrun names the rank that
  failed first (the first to log that it aborted the job, which ringcc does
  for an uncaught exception; else the first to end with an error, not a
  rank that only failed because of it), stops the other ranks (SIGTERM to
  each rank's process group, SIGKILL after the grace period) and exits with
  that rank's code (128 + N for signal N). A rank's traceback is shown
  whole, as one block; the last line names the rank that failed first, its
  exception, exit status, host and time.
  SIGINT, SIGTERM or SIGHUP to ringrun sends SIGINT to the ranks, then
  escalates; the exit status is 128 + the signal (130 for Ctrl-C). ringrun
  says so in one line; ranks using ringcc print no KeyboardInterrupt.
  --timeout expiry: 124. A rank that cannot be started: 127.

through MPI (--mpi):
  ringrun --mpi runs mpirun (RINGCC_MPIRUN, else the one next to this Python,
  else PATH) with -np, the hosts (-H host:slots), --bind-to none, and -x for
  PATH, PYTHONPATH, LD_LIBRARY_PATH and every RINGCC_*, HOROVOD_*, OMPI_MCA_*
  and UCX_* variable plus the -x ones (MPICH: -genvlist); as root it adds
  --allow-run-as-root, and --oversubscribe for more ranks than cores on this
  host. The ranks find the job through MPI. --timeout applies;
  --network-interface is passed as RINGCC_SOCKET_IFNAME, --output-filename
  to Open MPI's mpirun (its own layout, DIR/1/rank.N/stdout); --agent,
  --master-addr, --ssh-connect-timeout and the output prefix do not apply
  (mpirun starts and copies the ranks).

elastic mode (--host-discovery-script, --min-np or --max-np):
  Horovod's elastic mode: the driver runs the discovery script every second
  (lines "host:slots"), starts workers on free slots of hosts that are not
  blacklisted, up to --max-np, and tells each worker's ringcc.init() its
  rank in the next membership; scripts use hvd.elastic.run (see
  docs/elastic.md). A host whose worker fails is blacklisted (for good, or
  for --blacklist-cooldown-range MIN MAX seconds, doubling); its running
  workers stay. The job succeeds when a worker exits with 0.

horovodrun's options:
  horovodrun's command line works: --fusion-threshold-mb (RINGCC_FUSION_THRESHOLD
  in bytes), --cycle-time-ms, --cache-capacity, --[no-]hierarchical-allreduce,
  --timeline-filename, --log-level, --gloo-timeout-seconds (RINGCC_TIMEOUT_S),
  the stall-check options and --tcp set the ranks' variables as -x would;
  -p/--ssh-port and -i/--ssh-identity-file go to ssh (with --mpi: Open MPI's
  plm_rsh_args), --start-timeout becomes --ssh-connect-timeout, --gloo is the
  default mode, --config-file reads Horovod's YAML file (needs PyYAML). Options
  with no meaning here (--autotune*, --jsrun, --disable-cache, ...) are
  accepted with one warning each. docs/migrating.md has the whole table. An
  unknown option is named with the closest one, or the RINGCC_* variable.

examples:
  ringrun -np 4 python train.py --epochs 3
  ringrun -np 8 -H host1:4,host2:4 python train.py
  ringrun -H ns0:2,ns1:2 --agent 'ip netns exec {host}' python train.py
  ringrun -np 8 -H '[fd00::1]:4,[fd00::2]:4' --network-interface ib0 python train.py
  ringrun -np 4 --output-filename logs python train.py     (logs/rank.0/stdout ...)
  ringrun --mpi -np 4 -H host1:2,host2:2 python train.py
  ringrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh python train.py
"""


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text}")
    return value


class CommandLineParser(argparse.ArgumentParser):
    """ringrun's options; the command starts at the first word that is not an option."""

    def split_command(self, argv: Sequence[str]) -> tuple[list[str], list[str]]:
        """Splits argv into ringrun's options and the rank command, so the command's own flags stay its own."""
        values_of = {  # how many words follow each option
            option: (action.nargs if isinstance(action.nargs, int) else 1)
            for action in self._actions
            if action.nargs != 0
            for option in action.option_strings
        }
        index = 0
        while index < len(argv):
            word = argv[index]
            if word == "--":
                return list(argv[:index]), list(argv[index + 1 :])
            if not word.startswith("-") or word == "-":
                break
            index += 1 + values_of.get(word, 0)
        return list(argv[:index]), list(argv[index:])

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown option is named with the closest known one."""
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            known = [option for action in self._actions for option in action.option_strings]
            self.error(unknown_option_message(unknown[0], known))
        return parsed


class JoinedValues(argparse.Action):
    """A repeatable option whose values join with commas (--network-interface eth0 --network-interface eth1)."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if not earlier else f"{earlier},{values}")


# Options that shape the job; after the command they go to the command, and a
# job that was meant to have several ranks quietly gets one.
MISPLACED_OPTIONS = ("-np", "--num-proc", "-H", "--hosts", "--hostfile")


def misplaced_options(args: argparse.Namespace, command: Sequence[str]) -> list[str]:
    """MISPLACED_OPTIONS that follow the command while ringrun itself lacks them."""
    given = {
        "-np": args.num_proc,
        "--num-proc": args.num_proc,
        "-H": args.hosts,
        "--hosts": args.hosts,
        "--hostfile": args.hostfile,
    }
    found: list[str] = []
    for word in command[1:]:
        name = word.split("=", 1)[0]
        if name in given and given[name] is None and name not in found:
            found.append(name)
    return found


# Horovod's elastic options (ringcc.launch.elastic_driver runs the job).


def add_elastic_arguments(parser) -> None:
    """Horovod's elastic options, on ringrun's parser."""
    group = parser.add_argument_group(
        "elastic mode", "given --host-discovery-script, --min-np or --max-np (see docs/elastic.md)"
    )
    group.add_argument(
        "--host-discovery-script",
        metavar="SCRIPT",
        help="prints the available hosts, one 'host:slots' (or 'host') a line; run every second. Enables elastic mode",
    )
    group.add_argument(
        "--min-np",
        "--min-num-proc",
        dest="min_np",
        type=int,
        metavar="N",
        help="fewest workers to train with; below it the job waits for hosts (default: -np)",
    )
    group.add_argument(
        "--max-np", "--max-num-proc", dest="max_np", type=int, metavar="N", help="most workers to run (default: -np)"
    )
    group.add_argument(
        "--slots-per-host",
        "--slots",
        dest="slots_per_host",
        type=int,
        default=1,
        metavar="N",
        help="slots of a host the discovery script lists without a count (default: 1)",
    )
    group.add_argument(
        "--elastic-timeout",
        type=float,
        metavar="SECONDS",
        help="how long to wait for enough workers (RINGCC_ELASTIC_TIMEOUT_S, HOROVOD_ELASTIC_TIMEOUT; default: 600)",
    )
    group.add_argument(
        "--reset-limit",
        type=int,
        metavar="N",
        help="stop the job after this many changes of membership (default: no limit)",
    )
    group.add_argument(
        "--blacklist-cooldown-range",
        type=int,
        nargs=2,
        metavar=("MIN", "MAX"),
        help="seconds a host whose worker failed stays blacklisted: MIN, doubling with "
        "every failure, at most MAX (default: for good)",
    )


def is_elastic(args) -> bool:
    return (
        getattr(args, "host_discovery_script", None) is not None
        or getattr(args, "min_np", None) is not None
        or getattr(args, "max_np", None) is not None
    )


def elastic_only_options(args) -> list[str]:
    """Elastic options given to a job that is not elastic."""
    given = [
        ("--blacklist-cooldown-range", args.blacklist_cooldown_range is not None),
        ("--reset-limit", args.reset_limit is not None),
        ("--elastic-timeout", args.elastic_timeout is not None),
        ("--slots-per-host", args.slots_per_host != 1),
    ]
    return [name for name, present in given if present]


def build_parser() -> CommandLineParser:
    parser = CommandLineParser(
        prog="ringrun",
        usage="ringrun [options] [--] COMMAND [ARGS ...]",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "-np",
        "-n",
        "--num-proc",
        dest="num_proc",
        type=int,
        metavar="N",
        help="number of ranks (default: the slots of the host list, or 1)",
    )
    parser.add_argument(
        "-H", "--hosts", metavar="HOSTS", help="hosts and their slots, e.g. host1:4,host2:4 (a host alone has 1 slot)"
    )
    parser.add_argument(
        "-hostfile", "--hostfile", metavar="FILE", help='file with one host a line: "host slots=N", "host:N" or "host"'
    )
    parser.add_argument(
        "--agent", metavar="TEMPLATE", help="command that starts ranks on a host, {host} replaced (see 'agent' below)"
    )
    parser.add_argument(
        "--master-addr", metavar="ADDR", help="address of the job's rendezvous store (a name, IPv4 or IPv6 address)"
    )
    parser.add_argument(
        "--master-port", type=_port, metavar="PORT", help="port of the job's rendezvous store (default: a free port)"
    )
    parser.add_argument(
        "-x",
        dest="export",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="pass this variable to every rank, also those started through the agent; repeatable",
    )
    parser.add_argument(
        "--env-all",
        action="store_true",
        help="pass all of ringrun's environment to ranks started through the agent too",
    )
    parser.add_argument(
        "--no-prefix", action="store_true", help="copy the ranks' output without the [RANK]<stream>: prefix"
    )
    parser.add_argument(
        "--output-filename",
        metavar="DIR",
        help="also write each rank's output, unprefixed, to DIR/rank.N/stdout and "
        "DIR/rank.N/stderr (N zero-padded; see 'output' below)",
    )
    parser.add_argument(
        "--network-interface",
        "--network-interfaces",
        dest="network_interface",
        action=JoinedValues,
        metavar="IFACES",
        help="the interface ranks on different hosts connect over: a name (eth1), an address, "
        "a subnet (10.1.0.0/16), a comma-separated list of these, or ^excluded,names; sets "
        "RINGCC_SOCKET_IFNAME in every rank (see 'network' below); repeated, the values join with commas",
    )
    parser.add_argument(
        "--ssh-connect-timeout",
        type=_positive_int,
        metavar="SECONDS",
        help="give up on a host whose ssh connection is not made within this long "
        "(ssh -o ConnectTimeout; default: ssh's own)",
    )
    parser.add_argument("-p", "--ssh-port", type=_port, metavar="PORT", help="ssh's port on every host (ssh -p)")
    parser.add_argument(
        "-i", "--ssh-identity-file", metavar="FILE", help="the private key ssh uses for every host (ssh -i)"
    )
    parser.add_argument(
        "--timeout", type=_positive_float, metavar="SECONDS", help="stop every rank and exit 124 after this long"
    )
    parser.add_argument(
        "--grace-period",
        type=_non_negative_float,
        default=DEFAULT_GRACE_PERIOD_S,
        metavar="SECONDS",
        help="time ranks get to exit after each stop signal (default: %(default)g)",
    )
    parser.add_argument(
        "--bind-to",
        choices=BIND_CHOICES,
        default="none",
        help="none (default): ranks run on any CPU ringrun may use; core: local rank i "
        "runs on core i of those (its hardware threads), round robin when ranks "
        "outnumber cores; threads the rank starts (ringcc's engine thread "
        "included) share its core. Ranks started through an agent are not bound. "
        "With --mpi, passed to mpirun's own --bind-to",
    )
    parser.add_argument(
        "--mpi",
        action="store_true",
        help="start the ranks through mpirun (Open MPI or MPICH) instead of directly; "
        "-np, -H/--hostfile and -x carry over, ringcc finds the job through MPI",
    )
    parser.add_argument(
        "--mpi-args", metavar="ARGS", help="extra options for mpirun with --mpi, e.g. '--mca btl self,sm'"
    )
    parser.add_argument(
        "-cb",
        "--check-build",
        action="store_true",
        help="show the frameworks, controllers and transports available, and exit",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="say where each rank runs, its command and the settings given to it"
    )
    parser.add_argument("-v", "--version", action="version", version=f"ringrun (ringcc) {ringcc_version()}")
    add_elastic_arguments(parser)
    add_horovodrun_arguments(parser)
    return parser


@dataclass
class CommandLine:
    """ringrun's command line, parsed: its options, the rank command, the
    variables horovodrun's options give every rank (also in args.export) and
    the warnings about options that have no effect here."""

    args: argparse.Namespace
    command: list[str]
    variables: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_command_line(parser: CommandLineParser, argv: Sequence[str]) -> CommandLine:
    """Parses argv and maps horovodrun's options (LaunchError: a bad --config-file, --gloo with --mpi)."""
    options, command = parser.split_command(argv)
    args = parser.parse_args(options)
    settings = horovodrun_settings(args)
    # Before -x's, so that -x NAME=VALUE wins; ranks started through an agent
    # or mpirun get them as they get -x's.
    args.export = [f"{name}={value}" for name, value in settings.variables.items()] + list(args.export)
    return CommandLine(args, command, settings.variables, settings.warnings)


def describe_job(command_line: CommandLine, launches=()) -> list[str]:
    """--verbose: the settings horovodrun's options gave, and where each rank runs."""
    lines = [f"ringrun: {name}={value} for every rank" for name, value in command_line.variables.items()]
    for launch in launches:
        p = launch.placement
        how = "through the agent" if launch.through_agent else "directly"
        command = shlex.join(command_line.command)
        lines.append(f"ringrun: rank {p.rank} on {p.host} (local rank {p.local_rank}), started {how}: {command}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        command_line = parse_command_line(parser, sys.argv[1:] if argv is None else argv)
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    args, command = command_line.args, command_line.command
    for warning in command_line.warnings:
        print(f"ringrun: warning: {warning}", file=sys.stderr)
    if args.check_build:
        return check_build()
    if not command:
        parser.error("no command given")
    misplaced = misplaced_options(args, command)
    if misplaced:
        print(
            f"ringrun: warning: {', '.join(misplaced)} came after the command, so the command gets "
            f"{'them' if len(misplaced) > 1 else 'it'}, not ringrun; put ringrun's options before the "
            f"command (ringrun -np 2 python train.py)",
            file=sys.stderr,
        )
    if args.mpi and is_elastic(args):
        print("ringrun: elastic mode does not start workers through mpirun (--mpi)", file=sys.stderr)
        return EXIT_USAGE
    if args.mpi:
        if args.verbose:
            print("\n".join(describe_job(command_line)), file=sys.stderr)
        return run_mpi(args, command)
    if is_elastic(args):
        if args.verbose:
            print("\n".join(describe_job(command_line)), file=sys.stderr)
        return elastic_driver.run_elastic(args, command)
    misused = elastic_only_options(args)
    if misused:
        print(
            f"ringrun: {', '.join(misused)} applies to elastic mode (--host-discovery-script, --min-np or --max-np)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.mpi_args:
        parser.error("--mpi-args needs --mpi")
    try:
        launches = plan_job(args, command, os.environ)
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.verbose:
        print("\n".join(describe_job(command_line, launches)), file=sys.stderr)
    try:
        if args.output_filename is not None:
            prepare_output_files(args.output_filename, len(launches))
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    runner = JobRunner(
        prefix_output=not args.no_prefix,
        grace_period=args.grace_period,
        output_dir=args.output_filename,
        timestamps=bool(getattr(args, "prefix_output_with_timestamp", False)),
    )
    try:
        return runner.run(launches, args.timeout)
    except KeyboardInterrupt:  # Ctrl-C after the ranks were stopped, while their last output drained
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
