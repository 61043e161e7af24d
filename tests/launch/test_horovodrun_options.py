"""horovodrun's command line on ringrun (ringcc.launch.horovodrun_options).

Every option of Horovod's own parser is fed to ringrun's: Horovod is not
installed, so its sdist is downloaded at test time (pip download) and
horovod/runner/launch.py is read with `ast`, collecting the option strings of
each add_argument(...) call. Each option must be accepted and come out as
EXPECTED says: variables for the ranks, one of ringrun's settings, or one
warning line.
"""

import ast
import json
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ringcc.launch import cli, mpirun, plan
from ringcc.launch.errors import LaunchError

HOROVOD_VERSION = "0.28.1"
LAUNCH_PY = "horovod/runner/launch.py"
ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
PRINT_ENVIRONMENT = "import json, os; print(json.dumps(dict(os.environ)))"


@dataclass
class HorovodOption:
    flags: list  # option strings of one add_argument call
    values: int  # words that follow the option
    type: str | None  # "int", "float" or None
    choices: bool


# Horovod's actions by how many words follow them.
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "version", "count"}
NO_VALUE_FACTORIES = {"make_override_true_action", "make_override_false_action", "make_deprecated_bool_action"}
ONE_VALUE_FACTORIES = {"make_override_action", "make_nic_action"}


def option_of_call(call: ast.Call) -> HorovodOption | None:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
    if not flags:  # the positional command
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    type_name = keywords["type"].id if isinstance(keywords.get("type"), ast.Name) else None
    nargs = keywords.get("nargs")
    action = keywords.get("action")
    if isinstance(nargs, ast.Constant) and isinstance(nargs.value, int):
        values = nargs.value
    elif action is None or (isinstance(action, ast.Constant) and action.value == "store"):
        values = 1
    elif isinstance(action, ast.Constant) and action.value in NO_VALUE_ACTIONS:
        values = 0
    elif isinstance(action, ast.Call) and action.func.id in NO_VALUE_FACTORIES:
        values = 0
    elif isinstance(action, ast.Call) and action.func.id in ONE_VALUE_FACTORIES:
        values = 1
    else:
        raise AssertionError(f"{flags}: an action this test does not know: {ast.unparse(action)}")
    return HorovodOption(flags, values, type_name, "choices" in keywords)


@pytest.fixture(scope="module")
def horovod_options(tmp_path_factory):
    """Horovod's own options, from its sdist's launch.py."""
    target = tmp_path_factory.mktemp("horovod-sdist")
    pip = [sys.executable, "-m", "pip", "download", f"horovod=={HOROVOD_VERSION}", "--no-deps"]
    try:
        result = subprocess.run(
            [*pip, "--no-binary", ":all:", "-d", str(target)], capture_output=True, text=True, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"could not download Horovod {HOROVOD_VERSION}'s sdist to read its options: {error}")
    archives = list(target.glob("horovod-*.tar.gz"))
    if result.returncode != 0 or not archives:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"could not download Horovod {HOROVOD_VERSION}'s sdist to read its options (pip: {last})")
    with tarfile.open(archives[0]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/" + LAUNCH_PY))
        source = archive.extractfile(member).read().decode()
    options = [
        option
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"
        for option in [option_of_call(node)]
        if option is not None
    ]
    assert len(options) > 40, f"found only {len(options)} options in {LAUNCH_PY}"
    return options


# What each of horovodrun's options comes to on ringrun, given VALUES' value:
# {"VARIABLE": value}: variables for every rank (and no warning);
# ("arg", dest, value): one of ringrun's settings (no variable, no warning);
# "warn": accepted, one warning line, nothing else; "version": prints it, exits 0.
MIB = 1024 * 1024
EXPECTED = {
    "-v": "version",
    "--version": "version",
    "-np": ("arg", "num_proc", 2),
    "--num-proc": ("arg", "num_proc", 2),
    "-cb": ("arg", "check_build", True),
    "--check-build": ("arg", "check_build", True),
    "--disable-cache": "warn",
    "--start-timeout": ("arg", "ssh_connect_timeout", 2),
    "--network-interfaces": ("arg", "network_interface", "eth0"),
    "--network-interface": ("arg", "network_interface", "eth0"),
    "--output-filename": ("arg", "output_filename", "logs"),
    "--verbose": ("arg", "verbose", True),
    "--config-file": {
        "RINGCC_FUSION_THRESHOLD": str(8 * MIB),
        "RINGCC_TIMELINE": "config-timeline.json",
        "RINGCC_LOG_LEVEL": "info",
        "RINGCC_STALL_CHECK_S": "0",
        "RINGCC_STALL_SHUTDOWN_S": "0",
    },
    "-p": ("arg", "ssh_port", 2),
    "--ssh-port": ("arg", "ssh_port", 2),
    "-i": ("arg", "ssh_identity_file", "~/.ssh/id_ed25519"),
    "--ssh-identity-file": ("arg", "ssh_identity_file", "~/.ssh/id_ed25519"),
    "--fusion-threshold-mb": {"RINGCC_FUSION_THRESHOLD": str(2 * MIB)},
    "--cycle-time-ms": {"RINGCC_CYCLE_TIME_MS": "0.5"},
    "--cache-capacity": {"RINGCC_CACHE_CAPACITY": "2"},
    "--hierarchical-allreduce": {"RINGCC_HIERARCHICAL_ALLREDUCE": "1"},
    "--no-hierarchical-allreduce": {"RINGCC_HIERARCHICAL_ALLREDUCE": "0"},
    "--hierarchical-allgather": {"RINGCC_HIERARCHICAL_ALLREDUCE": "1"},
    "--no-hierarchical-allgather": {"RINGCC_HIERARCHICAL_ALLREDUCE": "0"},
    "--torus-allreduce": "warn",
    "--no-torus-allreduce": ("arg", "torus_allreduce", False),
    "--autotune": "warn",
    "--no-autotune": ("arg", "autotune", False),
    "--autotune-log-file": "warn",
    "--autotune-warmup-samples": "warn",
    "--autotune-steps-per-sample": "warn",
    "--autotune-bayes-opt-max-samples": "warn",
    "--autotune-gaussian-process-noise": "warn",
    "--min-np": ("arg", "min_np", 2),
    "--min-num-proc": ("arg", "min_np", 2),
    "--max-np": ("arg", "max_np", 2),
    "--max-num-proc": ("arg", "max_np", 2),
    "--slots-per-host": ("arg", "slots_per_host", 2),
    "--elastic-timeout": ("arg", "elastic_timeout", 2),
    "--reset-limit": ("arg", "reset_limit", 2),
    "--blacklist-cooldown-range": ("arg", "blacklist_cooldown_range", [2, 2]),
    "--timeline-filename": {"RINGCC_TIMELINE": "timeline.json"},
    "--timeline-mark-cycles": "warn",
    "--no-timeline-mark-cycles": ("arg", "timeline_mark_cycles", False),
    "--no-stall-check": {"RINGCC_STALL_CHECK_S": "0", "RINGCC_STALL_SHUTDOWN_S": "0"},
    "--stall-check": ("arg", "no_stall_check", False),
    "--stall-check-warning-time-seconds": {"RINGCC_STALL_CHECK_S": "2"},
    "--stall-check-shutdown-time-seconds": {"RINGCC_STALL_SHUTDOWN_S": "2"},
    "--mpi-threads-disable": "warn",
    "--no-mpi-threads-disable": ("arg", "mpi_threads_disable", False),
    "--mpi-args": ("arg", "mpi_args", "--map-by ppr:2:node"),
    "--tcp": {"NCCL_IB_DISABLE": "1"},
    "--binding-args": "warn",  # without --mpi; with it see test_mpirun_gets_ssh_and_binding_options
    "--num-nccl-streams": "warn",
    "--thread-affinity": "warn",
    "--gloo-timeout-seconds": {"RINGCC_TIMEOUT_S": "2"},
    "--log-level": {"RINGCC_LOG_LEVEL": "debug"},
    "--log-with-timestamp": ("arg", "log_with_timestamp", True),
    "--log-without-timestamp": "warn",
    "-prefix-timestamp": ("arg", "prefix_output_with_timestamp", True),
    "--prefix-output-with-timestamp": ("arg", "prefix_output_with_timestamp", True),
    "--log-hide-timestamp": "warn",
    "--no-log-hide-timestamp": ("arg", "log_with_timestamp", True),
    "-H": ("arg", "hosts", "localhost:2"),
    "--hosts": ("arg", "hosts", "localhost:2"),
    "-hostfile": ("arg", "hostfile", "hostfile.txt"),
    "--hostfile": ("arg", "hostfile", "hostfile.txt"),
    "--host-discovery-script": ("arg", "host_discovery_script", "./discover_hosts.sh"),
    "--gloo": ("arg", "gloo", True),
    "--mpi": ("arg", "mpi", True),
    "--jsrun": "warn",
}

# Plausible values of options that take text (the others: 2, 0.5, DEBUG).
TEXT_VALUES = {
    "--network-interfaces": "eth0",
    "--network-interface": "eth0",
    "--output-filename": "logs",
    "-i": "~/.ssh/id_ed25519",
    "--ssh-identity-file": "~/.ssh/id_ed25519",
    "--autotune-log-file": "autotune.csv",
    "--timeline-filename": "timeline.json",
    "--mpi-args": "--map-by ppr:2:node",
    "--binding-args": "--bind-to socket",
    "-H": "localhost:2",
    "--hosts": "localhost:2",
    "-hostfile": "hostfile.txt",
    "--hostfile": "hostfile.txt",
    "--host-discovery-script": "./discover_hosts.sh",
}

CONFIG_FILE = """\
params:
  fusion_threshold_mb: 8
timeline:
  filename: config-timeline.json
stall_check:
  enabled: false
logging:
  level: info
"""


def option_words(option: HorovodOption, flag: str, tmp_path: Path) -> list:
    if option.values == 0:
        return [flag]
    if flag == "--config-file":
        path = tmp_path / "horovod.yaml"
        path.write_text(CONFIG_FILE)
        return [flag, str(path)]
    if option.choices:
        value = "DEBUG"
    elif option.type == "int":
        value = "2"
    elif option.type == "float":
        value = "0.5"
    else:
        value = TEXT_VALUES.get(flag, "x")
    if option.values == 1:
        return [f"{flag}={value}"] if value.startswith("-") else [flag, value]
    return [flag, *[value] * option.values]


def parse(argv):
    return cli.parse_command_line(cli.build_parser(), [*argv, "python", "train.py"])


def test_every_horovodrun_option_is_accepted_and_mapped(horovod_options, tmp_path, capsys):
    baseline = parse([])
    flags = [flag for option in horovod_options for flag in option.flags]
    assert not set(flags) - set(EXPECTED), "options of horovodrun this test has no expectation for"
    checked = []
    for option in horovod_options:
        for flag in option.flags:
            words = option_words(option, flag, tmp_path)
            expected = EXPECTED[flag]
            if expected == "version":
                with pytest.raises(SystemExit) as stopped:
                    parse(words)
                assert stopped.value.code == 0
                assert "ringrun (ringcc)" in capsys.readouterr().out
                checked.append(flag)
                continue
            if flag == "--config-file":
                try:
                    import yaml  # noqa: F401
                except ImportError:
                    with pytest.raises(LaunchError, match="PyYAML"):
                        parse(words)
                    checked.append(flag)
                    continue
            try:
                result = parse(words)
            except SystemExit:
                pytest.fail(f"ringrun refused {' '.join(words)}: {capsys.readouterr().err}")
            where = f"{' '.join(words)}: variables {result.variables}, warnings {result.warnings}"
            if expected == "warn":
                assert result.variables == {}, where
                assert len(result.warnings) == 1, where
                assert "no effect" in result.warnings[0], where
            elif isinstance(expected, dict):
                assert result.variables == expected, where
                assert result.warnings == [], where
                for name, value in expected.items():  # handed to the ranks as -x NAME=VALUE
                    assert f"{name}={value}" in result.args.export, where
            else:
                _, dest, value = expected
                assert getattr(result.args, dest) == value, where
                assert getattr(baseline.args, dest) != value, f"{flag}: the default already is {value!r}"
                assert result.variables == {} and result.warnings == [], where
            checked.append(flag)
    assert sorted(checked) == sorted(flags)


def test_unknown_options_name_the_closest_option_or_variable(capsys):
    cases = {
        "--fusion-threshold-mbb": "did you mean --fusion-threshold-mb?",
        "--log-levl": "did you mean --log-level?",
        "--tcp-sockets": "-x RINGCC_TCP_SOCKETS=VALUE",
        "--shm-area-bytes": "-x RINGCC_SHM_AREA_BYTES=VALUE",
    }
    for word, hint in cases.items():
        with pytest.raises(SystemExit) as stopped:
            parse([word, "4"])
        assert stopped.value.code == 2
        error = capsys.readouterr().err
        assert f"unknown option {word}: " in error and hint in error, error
        assert "unrecognized arguments" not in error


def test_config_file_fills_what_the_command_line_left_unset(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "horovod.yaml"
    path.write_text(CONFIG_FILE + "controller: mpi\nautotune:\n  enabled: true\n")
    result = parse(["--config-file", str(path), "--fusion-threshold-mb", "32"])
    assert result.variables["RINGCC_FUSION_THRESHOLD"] == str(32 * MIB)  # the command line wins
    assert result.variables["RINGCC_TIMELINE"] == "config-timeline.json"
    assert result.args.mpi is True
    assert [w for w in result.warnings if w.startswith("--autotune ")], result.warnings
    path.write_text("controller: jsrun\n")
    with pytest.raises(LaunchError, match="controller must be gloo or mpi"):
        parse(["--config-file", str(path)])


def test_config_file_without_a_yaml_parser_says_so(tmp_path, monkeypatch):
    path = tmp_path / "horovod.yaml"
    path.write_text(CONFIG_FILE)
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    with pytest.raises(LaunchError) as error:
        parse(["--config-file", str(path)])
    message = str(error.value)
    assert "PyYAML" in message and "\n" not in message


def test_repeated_network_interfaces_join_and_gloo_excludes_mpi():
    assert parse(["--network-interface", "eth0", "--network-interface", "eth1"]).args.network_interface == "eth0,eth1"
    with pytest.raises(LaunchError, match="--gloo or --mpi"):
        parse(["--gloo", "--mpi"])


def test_hierarchical_switches_that_disagree_warn():
    result = parse(["--hierarchical-allreduce", "--no-hierarchical-allgather"])
    assert result.variables == {"RINGCC_HIERARCHICAL_ALLREDUCE": "1"}
    assert len(result.warnings) == 1 and "one switch" in result.warnings[0]


def test_ssh_options_reach_ssh():
    result = parse(["-H", "node-a:1", "-p", "2222", "-i", "/keys/id", "--start-timeout", "7"])
    (launch,) = plan.plan_job(result.args, result.command, {"PATH": os.environ.get("PATH", "")})
    assert launch.through_agent
    ssh_words = launch.argv[: launch.argv.index("node-a")]
    assert ssh_words[0] == "ssh", launch.argv
    for pair in (["-o", "ConnectTimeout=7"], ["-p", "2222"], ["-i", "/keys/id"]):  # --start-timeout: ConnectTimeout
        assert any(ssh_words[i : i + 2] == pair for i in range(len(ssh_words))), (pair, launch.argv)
    result = parse(["-H", "node-a:1", "--agent", "docker exec -i {host}", "-p", "2222"])
    with pytest.raises(LaunchError, match="--ssh-port applies to ssh"):
        plan.plan_job(result.args, result.command, {})


def test_mpirun_gets_ssh_and_binding_options():
    result = parse(["--mpi", "-np", "2", "-p", "2222", "--binding-args=--bind-to socket"])
    assert result.warnings == []
    cmd = mpirun.plan_mpi_command(result.args, result.command, {}, "mpirun", "openmpi", cpu_count=4)
    assert cmd[cmd.index("plm_rsh_args") + 1] == "-p 2222"
    assert cmd[cmd.index("--bind-to") + 1] == "socket" and cmd.count("--bind-to") == 1
    with pytest.raises(LaunchError, match="MPICH"):
        mpirun.plan_mpi_command(result.args, result.command, {}, "mpiexec", "mpich", cpu_count=4)


def test_fusion_threshold_mb_reaches_the_rank():
    env = dict(os.environ)
    if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")):
        env["PYTHONPATH"] = os.pathsep.join([str(ADAPTERS_DIR), *filter(None, env.get("PYTHONPATH", "").split(":"))])
    env.pop("RINGCC_FUSION_THRESHOLD", None)
    result = subprocess.run(
        [sys.executable, "-m", "ringcc.launcher", "-np", "1", "--fusion-threshold-mb", "32", "--verbose", "--"]
        + [sys.executable, "-c", PRINT_ENVIRONMENT],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    rank_env = json.loads(line.split(": ", 1)[1])
    assert rank_env["RINGCC_FUSION_THRESHOLD"] == "33554432"
    assert "ringrun: RINGCC_FUSION_THRESHOLD=33554432 for every rank" in result.stderr
    assert "rank 0 on " in result.stderr


def test_prefix_output_with_timestamp_puts_the_time_before_each_line():
    env = dict(os.environ)
    if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")):
        env["PYTHONPATH"] = os.pathsep.join([str(ADAPTERS_DIR), *filter(None, env.get("PYTHONPATH", "").split(":"))])
    result = subprocess.run(
        [sys.executable, "-m", "ringcc.launcher", "-np", "2", "-prefix-timestamp", "--"]
        + [sys.executable, "-c", "import os; print('line of', os.environ['RINGCC_RANK'])"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    stamp = r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \d{4}"
    lines = sorted(result.stdout.splitlines(), key=lambda line: line[-1])
    assert len(lines) == 2 and all(
        re.fullmatch(stamp + rf"\[{r}\]<stdout>: line of {r}", line) for r, line in enumerate(lines)
    ), lines
    assert "no effect" not in result.stderr
