"""Tests of the ringrun launcher (ringcc.launch, run as ringcc.launcher).

The launcher is run as `python -m ringcc.launcher` from the source tree; none
of these tests needs the compiled core, except that --check-build reports on it
when it is there.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ringcc.launch import agents, build_report, cli, errors, hosts, plan

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
RUN_TIMEOUT_S = 20
PREFIXED_LINE = re.compile(r"^\[(\d+)\]<(stdout|stderr)>: (.*)$")

JOB_VARIABLES = [
    "RINGCC_RANK",
    "RINGCC_SIZE",
    "RINGCC_LOCAL_RANK",
    "RINGCC_LOCAL_SIZE",
    "RINGCC_CROSS_RANK",
    "RINGCC_CROSS_SIZE",
    "RINGCC_HOSTNAME",
    "RINGCC_MASTER_ADDR",
    "RINGCC_MASTER_PORT",
    "RINGCC_SECRET",
    "RINGCC_JOB_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
]

# Prints the rank's environment as one JSON line.
PRINT_ENVIRONMENT = "import json, os; print(json.dumps(dict(os.environ)))"

# A rank that records its pid in PID_DIR, then sleeps; rank FAILING_RANK waits
# until every rank has recorded its pid and exits with EXIT_CODE.
# Arguments: PID_DIR FAILING_RANK EXIT_CODE [--ignore-sigterm]
SLEEPING_RANK = textwrap.dedent(
    """
    import os, signal, sys, time
    rank, size = int(os.environ["RINGCC_RANK"]), int(os.environ["RINGCC_SIZE"])
    pid_dir, failing_rank, exit_code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path = os.path.join(pid_dir, "%d.pid" % rank)
    with open(path + ".tmp", "w") as file:
        file.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    if rank == failing_rank:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len([n for n in os.listdir(pid_dir) if n.endswith(".pid")]) == size:
                break
            time.sleep(0.02)
        sys.exit(exit_code)
    time.sleep(60)
    """
)


def launcher_environment(**extra):
    """ringrun's environment: ours, the source tree on PYTHONPATH, `extra` set (None: removed)."""
    env = dict(os.environ)
    # The source tree only when it holds a built core; otherwise the
    # installed package (as in CI, after pip install .).
    source = [str(ADAPTERS_DIR)] if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")) else []
    paths = source + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def ringrun_command(*args):
    return [sys.executable, "-m", "ringcc.launcher", *map(str, args)]


def ringrun(*args, timeout=RUN_TIMEOUT_S, **extra_env):
    return subprocess.run(
        ringrun_command(*args),
        env=launcher_environment(**extra_env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def prefixed_lines(output, stream):
    """{rank: [lines]} of the `[rank]<stream>: text` lines of `output`."""
    lines = {}
    for line in output.splitlines():
        match = PREFIXED_LINE.match(line)
        assert match, f"line without a rank prefix: {line!r}"
        if match.group(2) == stream:
            lines.setdefault(int(match.group(1)), []).append(match.group(3))
    return lines


def rank_environments(result):
    """{rank: environment} from ranks that ran PRINT_ENVIRONMENT."""
    assert result.returncode == 0, result.stderr
    return {rank: json.loads(lines[0]) for rank, lines in prefixed_lines(result.stdout, "stdout").items()}


def process_is_running(pid):
    """True while `pid` exists and is not a zombie."""
    if Path("/proc/self/stat").exists():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return False
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def recorded_pids(pid_dir):
    return [int(path.read_text()) for path in Path(pid_dir).glob("*.pid")]


# --------------------------------------------------------------------------
# Environment of the ranks


def test_local_ranks_get_the_job_environment():
    result = ringrun(
        "-np",
        3,
        sys.executable,
        "-c",
        PRINT_ENVIRONMENT,
        RINGRUN_TEST_MARKER="forwarded",
        PYTHONUNBUFFERED=None,
        OMP_NUM_THREADS=None,
    )
    envs = rank_environments(result)
    assert sorted(envs) == [0, 1, 2]
    hostname = socket.gethostname()
    for rank, env in envs.items():
        expected = {
            "RINGCC_RANK": rank,
            "RINGCC_SIZE": 3,
            "RINGCC_LOCAL_RANK": rank,
            "RINGCC_LOCAL_SIZE": 3,
            "RINGCC_CROSS_RANK": 0,
            "RINGCC_CROSS_SIZE": 1,
            "RINGCC_HOSTNAME": hostname,
            "RINGCC_MASTER_ADDR": "127.0.0.1",
            "RANK": rank,
            "WORLD_SIZE": 3,
            "LOCAL_RANK": rank,
            "LOCAL_WORLD_SIZE": 3,
            "GROUP_RANK": 0,
            "MASTER_ADDR": "127.0.0.1",
            "HOROVOD_RANK": rank,
            "HOROVOD_SIZE": 3,
            "HOROVOD_LOCAL_RANK": rank,
            "HOROVOD_LOCAL_SIZE": 3,
            "HOROVOD_CROSS_RANK": 0,
            "HOROVOD_CROSS_SIZE": 1,
            "PYTHONUNBUFFERED": 1,
            "RINGRUN_TEST_MARKER": "forwarded",
            "OMP_NUM_THREADS": 1,
        }
        assert set(JOB_VARIABLES) <= set(env)
        assert {name: env.get(name) for name in expected} == {k: str(v) for k, v in expected.items()}
        assert re.fullmatch(r"[0-9a-f]{64}", env["RINGCC_SECRET"])
        assert int(env["RINGCC_MASTER_PORT"]) != int(env["MASTER_PORT"])
    for name in ("RINGCC_SECRET", "RINGCC_JOB_ID", "RINGCC_MASTER_PORT", "MASTER_PORT"):
        assert len({env[name] for env in envs.values()}) == 1, name


def test_omp_threads_follow_the_user_or_the_ranks_per_host():
    kept = rank_environments(ringrun("-np", 2, sys.executable, "-c", PRINT_ENVIRONMENT, OMP_NUM_THREADS="3"))
    assert {env["OMP_NUM_THREADS"] for env in kept.values()} == {"3"}
    alone = rank_environments(ringrun("-np", 1, sys.executable, "-c", PRINT_ENVIRONMENT, OMP_NUM_THREADS=None))
    assert "OMP_NUM_THREADS" not in alone[0]


def test_each_job_gets_a_new_secret_and_chosen_port_is_used():
    first = rank_environments(ringrun("-np", 1, sys.executable, "-c", PRINT_ENVIRONMENT))[0]
    second = rank_environments(
        ringrun("-np", 1, "--master-port", 23456, sys.executable, "-c", PRINT_ENVIRONMENT, PYTHONUNBUFFERED="")
    )[0]
    assert first["RINGCC_SECRET"] != second["RINGCC_SECRET"]
    assert re.fullmatch(r"[0-9a-f]{16}", first["RINGCC_JOB_ID"]) and first["RINGCC_JOB_ID"] != second["RINGCC_JOB_ID"]
    assert second["RINGCC_MASTER_PORT"] == "23456"
    assert second["MASTER_PORT"] != "23456"
    assert second["PYTHONUNBUFFERED"] == ""  # set by the user: kept


def test_hosts_through_an_agent_get_placement_and_cross_ranks():
    result = ringrun(
        "-H",
        "a:2,b:2",
        "--agent",
        "env RINGRUN_FAKE_HOST={host}",
        "-x",
        "EXPORTED=yes please",
        sys.executable,
        "-c",
        PRINT_ENVIRONMENT,
    )
    envs = rank_environments(result)
    assert sorted(envs) == [0, 1, 2, 3]
    table = [
        (
            env["RINGRUN_FAKE_HOST"],
            env["RINGCC_HOSTNAME"],
            env["RINGCC_LOCAL_RANK"],
            env["RINGCC_LOCAL_SIZE"],
            env["RINGCC_CROSS_RANK"],
            env["RINGCC_CROSS_SIZE"],
            env["GROUP_RANK"],
        )
        for _, env in sorted(envs.items())
    ]
    assert table == [
        ("a", "a", "0", "2", "0", "2", "0"),
        ("a", "a", "1", "2", "0", "2", "0"),
        ("b", "b", "0", "2", "1", "2", "1"),
        ("b", "b", "1", "2", "1", "2", "1"),
    ]
    for env in envs.values():
        assert set(JOB_VARIABLES) <= set(env)
        assert env["RINGCC_SIZE"] == env["WORLD_SIZE"] == env["HOROVOD_SIZE"] == "4"
        assert env["RINGCC_LOCAL_RANK"] == env["LOCAL_RANK"] == env["HOROVOD_LOCAL_RANK"]
        assert env["RINGCC_CROSS_RANK"] == env["HOROVOD_CROSS_RANK"]
        assert env["RINGCC_MASTER_ADDR"] == env["MASTER_ADDR"] == "a"
        assert env["EXPORTED"] == "yes please"


def test_remote_hosts_through_ssh(tmp_path):
    """A stand-in `ssh` runs the command line in a shell with an almost empty environment, as a login would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_ssh = bin_dir / "ssh"
    fake_ssh.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "env = {'PATH': os.environ['PATH'], 'FAKE_SSH_HOST': sys.argv[-2]}\n"
        "os.chdir('/')\n"
        "os.execve('/bin/sh', ['sh', '-c', sys.argv[-1]], env)\n"
    )
    fake_ssh.chmod(0o755)
    work_dir = tmp_path / "work dir"
    work_dir.mkdir()
    tricky = """a b 'c' "d" $HOME `x` ;"""
    show = "import json, os, sys; print(json.dumps([dict(os.environ), os.getcwd(), sys.argv[1:]]))"
    result = subprocess.run(
        ringrun_command(
            "-H",
            "node-a:1,node-b:1",
            "-x",
            "TRICKY=" + tricky,
            "-x",
            "RINGRUN_TEST_MARKER",
            sys.executable,
            "-c",
            show,
            "two words",
            tricky,
        ),
        env=launcher_environment(
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", RINGRUN_TEST_MARKER="m", NOT_EXPORTED="n"
        ),
        cwd=work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    outputs = {rank: json.loads(lines[0]) for rank, lines in prefixed_lines(result.stdout, "stdout").items()}
    assert sorted(outputs) == [0, 1]
    for rank, (env, cwd, argv) in outputs.items():
        assert env["FAKE_SSH_HOST"] == ["node-a", "node-b"][rank]
        assert env["RINGCC_RANK"] == str(rank) and env["RINGCC_HOSTNAME"] == env["FAKE_SSH_HOST"]
        assert env["RINGCC_MASTER_ADDR"] == "node-a"
        assert env["TRICKY"] == tricky and env["RINGRUN_TEST_MARKER"] == "m"
        assert "NOT_EXPORTED" not in env
        assert cwd == str(work_dir)
        assert argv == ["two words", tricky]


# A rank that records its RINGCC_SECRET in OUT_DIR/secret<rank>, then waits
# (at most 20 s) for OUT_DIR/done. Arguments: OUT_DIR
RECORD_SECRET_AND_WAIT = textwrap.dedent(
    """
    import os, sys, time
    out = sys.argv[1]
    rank = os.environ["RINGCC_RANK"]
    with open(os.path.join(out, "secret" + rank + ".tmp"), "w") as file:
        file.write(os.environ.get("RINGCC_SECRET", ""))
    os.replace(os.path.join(out, "secret" + rank + ".tmp"), os.path.join(out, "secret" + rank))
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(out, "done")) and time.monotonic() < deadline:
        time.sleep(0.02)
    """
)


def command_lines_holding(text):
    """The command lines of this host's processes (ps, /proc/*/cmdline) that contain `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(text.encode() in word for word in words):
            found.append(f"{entry.name}: {b' '.join(words).decode(errors='replace')}")
    return found


@pytest.mark.parametrize("agent", ["ssh", "executing-agent"])
def test_secret_never_on_a_command_line(tmp_path, agent):
    """Ranks through an agent get the job secret, and no process's command line shows it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Both stay alive while the rank runs, as ssh does: their own command
    # lines are visible for the life of the job.
    fake_ssh = bin_dir / "ssh"  # hands its last argument to a shell
    fake_ssh.write_text(
        f"#!{sys.executable}\n"
        "import os, subprocess, sys\n"
        "sys.exit(subprocess.call(['/bin/sh', '-c', sys.argv[-1]], env={'PATH': os.environ['PATH']}))\n"
    )
    fake_agent = bin_dir / "fake-agent"  # executes its arguments after the host, as ip netns exec
    fake_agent.write_text(f"#!{sys.executable}\nimport subprocess, sys\nsys.exit(subprocess.call(sys.argv[2:]))\n")
    for script in (fake_ssh, fake_agent):
        script.chmod(0o755)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    options = ["-H", "node-a:1,node-b:1"]
    if agent != "ssh":
        options += ["--agent", "fake-agent {host}"]
    process = subprocess.Popen(
        ringrun_command(*options, sys.executable, "-c", RECORD_SECRET_AND_WAIT, out_dir),
        env=launcher_environment(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        secret_files = [out_dir / "secret0", out_dir / "secret1"]
        assert wait_until(lambda: all(p.exists() for p in secret_files) or process.poll() is not None, RUN_TIMEOUT_S)
        secrets_seen = {p.read_text() for p in secret_files if p.exists()}
        assert len(secrets_seen) == 1 and all(p.exists() for p in secret_files), secrets_seen
        (secret,) = secrets_seen
        assert re.fullmatch(r"[0-9a-f]{64}", secret), f"the ranks got {secret!r} as the secret"
        leaks = command_lines_holding(secret)
        assert not leaks, f"the job secret is on a command line: {leaks}"
    finally:
        (out_dir / "done").touch()
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    assert process.returncode == 0, stderr


def test_fewer_ranks_than_slots_and_too_many_ranks():
    envs = rank_environments(
        ringrun(
            "-np",
            3,
            "-H",
            "a:2,b:2,c:2",
            "--agent",
            "env RINGRUN_FAKE_HOST={host}",
            sys.executable,
            "-c",
            PRINT_ENVIRONMENT,
        )
    )
    assert [envs[rank]["RINGRUN_FAKE_HOST"] for rank in range(3)] == ["a", "a", "b"]
    assert envs[2]["RINGCC_LOCAL_SIZE"] == "1"
    assert [envs[rank]["RINGCC_CROSS_SIZE"] for rank in range(3)] == ["2", "1", "2"]

    result = ringrun("-np", 5, "-H", "a:2,b:2", "--agent", "env", "true")
    assert result.returncode == 2
    assert "-np 5 is more than the 4 slots" in result.stderr


def agent_rank_words(launch):
    """The words after the agent's own: `env K=V ... COMMAND`, unquoted again for ssh."""
    if launch.argv[0] == "ssh":
        return shlex.split(launch.argv[-1].split("; exec ", 1)[1])
    return launch.argv[launch.argv.index("ringrun-rank") + 1 :]


def rank_variables(launch):
    if not launch.through_agent:
        return launch.env
    words = agent_rank_words(launch)
    return dict(word.split("=", 1) for word in words[1:] if "=" in word)


def test_remote_ranks_get_only_job_and_exported_variables():
    parser = cli.build_parser()
    environ = {"PATH": "/usr/bin", "SHELL_ONLY": "x", "HOSTNAME": "here", "EXPORTED": "a b"}
    args = parser.parse_args(["-H", "node-one:1,node-two:1", "-x", "EXPORTED", "-x", "SET=1"])
    launches = plan.plan_job(args, ["python3", "-c", "print('hi there')"], environ)
    assert [launch.through_agent for launch in launches] == [True, True]
    argv = launches[1].argv
    assert argv[:4] == ["ssh", "-o", "BatchMode=yes", "node-two"] and len(argv) == 5
    words = agent_rank_words(launches[1])
    assert words[0] == "env"
    assert words[-3:] == ["python3", "-c", "print('hi there')"]
    variables = rank_variables(launches[1])
    assert variables["EXPORTED"] == "a b" and variables["SET"] == "1"
    assert variables["RINGCC_RANK"] == "1" and variables["RINGCC_MASTER_ADDR"] == "node-one"
    assert variables["PYTHONUNBUFFERED"] == "1"
    assert "SHELL_ONLY" not in variables and "PATH" not in variables

    args = parser.parse_args(["-H", "node-one:1", "--env-all"])
    (launch,) = plan.plan_job(args, ["true"], environ)
    variables = rank_variables(launch)
    assert variables["SHELL_ONLY"] == "x" and variables["PATH"] == "/usr/bin"
    assert "HOSTNAME" not in variables


def test_master_address_choice():
    parser = cli.build_parser()

    def master_addresses(*options):
        launches = plan.plan_job(parser.parse_args(list(options)), ["true"], {})
        return {rank_variables(launch)["RINGCC_MASTER_ADDR"] for launch in launches}

    assert master_addresses("-np", "2") == {"127.0.0.1"}
    assert master_addresses("-H", "localhost:2") == {"127.0.0.1"}
    assert master_addresses("-H", "localhost:1,node-two:1") == {socket.gethostname()}
    assert master_addresses("-H", "ns0:1,ns1:1", "--agent", "ip netns exec {host}") == {"ns0"}
    assert master_addresses("-H", "ns0:1", "--agent", "x {host}", "--master-addr", "10.0.0.1") == {"10.0.0.1"}


def test_agent_command_forms():
    env = {"A": "x y", "RINGCC_SECRET": "never on a command line"}
    command = ["python3", "-c", "print('hi')"]
    netns = agents.agent_command("ip netns exec {host}", "ns1", env, command, "/w")
    assert netns[:6] == ["ip", "netns", "exec", "ns1", "sh", "-c"]
    assert netns[7:] == ["ringrun-rank", "env", "A=x y", *command]
    assert "read -r RINGCC_SECRET" in netns[6] and netns[6].endswith('exec "$@"')
    assert agents.agent_command("docker exec -i", "box", env, command, "/w")[:4] == ["docker", "exec", "-i", "box"]
    ssh = agents.agent_command("/usr/bin/ssh -p 2222 {host}", "n1", env, command, "/my dir")
    assert ssh[:4] == ["/usr/bin/ssh", "-p", "2222", "n1"] and len(ssh) == 5
    assert ssh[4].startswith("IFS= read -r RINGCC_SECRET ") and "; cd '/my dir' " in ssh[4]
    assert shlex.split(ssh[4].split("; exec ", 1)[1]) == ["env", "A=x y", *command]
    for argv in (netns, ssh):
        assert not any("never on a command line" in word for word in argv)


# --------------------------------------------------------------------------
# Hosts and placement


def test_host_lists(tmp_path):
    Host = hosts.Host
    assert hosts.parse_hosts("host1:4,host2") == [Host("host1", 4), Host("host2", 1)]
    assert hosts.parse_hosts("[fe80::1]:2,::1") == [Host("fe80::1", 2), Host("::1", 1)]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the cluster\nnode1 slots=2\nnode2:3  # comment\n\nnode3\n")
    assert hosts.parse_hostfile(str(hostfile)) == [Host("node1", 2), Host("node2", 3), Host("node3", 1)]
    for bad in ("a:0", "a:x", "a,a", ":2"):
        with pytest.raises(errors.LaunchError):
            hosts.parse_hosts(bad)
    hostfile.write_text("node1 max=2\n")
    with pytest.raises(errors.LaunchError, match="hosts:1"):
        hosts.parse_hostfile(str(hostfile))


def test_placement_fills_hosts_in_order():
    host_list = [hosts.Host("a", 3), hosts.Host("b", 1), hosts.Host("c", 2)]
    placements = hosts.place_ranks(host_list, 5)
    assert [(p.host, p.host_index, p.local_rank, p.local_size) for p in placements] == [
        ("a", 0, 0, 3),
        ("a", 0, 1, 3),
        ("a", 0, 2, 3),
        ("b", 1, 0, 1),
        ("c", 2, 0, 1),
    ]
    assert [(p.cross_rank, p.cross_size) for p in placements] == [(0, 3), (0, 1), (0, 1), (1, 3), (2, 3)]
    with pytest.raises(errors.LaunchError):
        hosts.place_ranks(host_list, 7)


def test_hostfile_from_the_command_line(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=1\nb:2\n")
    envs = rank_environments(
        ringrun(
            "--hostfile", hostfile, "--agent", "env RINGRUN_FAKE_HOST={host}", sys.executable, "-c", PRINT_ENVIRONMENT
        )
    )
    assert [envs[rank]["RINGRUN_FAKE_HOST"] for rank in range(3)] == ["a", "b", "b"]


# --------------------------------------------------------------------------
# Command line


def test_program_flags_belong_to_the_program():
    show_args = "import json, sys; print(json.dumps(sys.argv[1:]))"
    for options in (["-np", "2"], ["-np", "2", "--"], ["-np=2", "--timeout=30"]):
        result = ringrun(*options, sys.executable, "-c", show_args, "--foo", "-np", "7", "-x", "Y", "--", "-H")
        assert result.returncode == 0, result.stderr
        outputs = prefixed_lines(result.stdout, "stdout")
        assert sorted(outputs) == [0, 1]
        for lines in outputs.values():
            assert json.loads(lines[0]) == ["--foo", "-np", "7", "-x", "Y", "--", "-H"]


def test_split_command():
    parser = cli.build_parser()
    assert parser.split_command(["-np", "2", "-x", "A=1", "python", "t.py", "-np", "3"]) == (
        ["-np", "2", "-x", "A=1"],
        ["python", "t.py", "-np", "3"],
    )
    assert parser.split_command(["--no-prefix", "--", "-weird", "--x"]) == (["--no-prefix"], ["-weird", "--x"])
    assert parser.split_command(["--check-build"]) == (["--check-build"], [])


def test_usage_errors_help_and_version():
    result = ringrun("-np", 2)
    assert result.returncode == 2 and "no command given" in result.stderr
    result = ringrun("--agent", "env", "true")
    assert result.returncode == 2 and "--agent needs" in result.stderr
    result = ringrun("--help")
    assert result.returncode == 0
    assert "ringrun [options] [--] COMMAND" in result.stdout
    assert "EVERY listed host goes through it" in result.stdout
    result = ringrun("--version")
    assert result.returncode == 0 and result.stdout.startswith("ringrun (ringcc) ")


# --------------------------------------------------------------------------
# Output


def test_every_output_line_carries_the_rank_prefix():
    script = (
        "import sys; print('out one'); print('out two'); sys.stdout.write('out tail'); "
        "print('err one', file=sys.stderr); sys.stderr.write('err tail')"
    )
    result = ringrun("-np", 2, sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        assert prefixed_lines(result.stdout, "stdout")[rank] == ["out one", "out two", "out tail"]
        assert prefixed_lines(result.stderr, "stderr")[rank] == ["err one", "err tail"]
    assert "<stderr>" not in result.stdout and "<stdout>" not in result.stderr


def test_no_prefix_copies_output_unchanged():
    script = "import sys; print('plain'); print('e', file=sys.stderr)"
    result = ringrun("-np", 2, "--no-prefix", sys.executable, "-c", script)
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["plain", "plain"]
    assert result.stderr.splitlines() == ["e", "e"]


def test_traceback_is_held_whole_and_its_exception_found():
    from ringcc.launch import processes

    class Lines(processes.Console):
        def __init__(self):
            super().__init__()
            self.writes = []

        def write_line(self, stream_name, line):
            self.writes.append(line)

    console = Lines()
    holder = processes.TracebackHolder(console, "stderr")
    chained = [
        b"Traceback (most recent call last):\n",
        b'  File "a.py", line 1, in <module>\n',
        b"KeyError: 'x'\n",
        b"\n",
        b"During handling of the above exception, another exception occurred:\n",
        b"\n",
        b"Traceback (most recent call last):\n",
        b'  File "a.py", line 3, in <module>\n',
        b"ValueError: boom\n",
        b"  more of its message\n",
    ]
    assert not holder.offer(b"before\n", b"[1]<stderr>: before\n")
    assert all(holder.offer(line, b"[1]<stderr>: " + line) for line in chained)
    assert console.writes == []  # held until released
    holder.release(idle_only=True)
    assert console.writes == []  # not idle yet
    holder.release()
    assert console.writes == [b"".join(b"[1]<stderr>: " + line for line in chained)]
    assert holder.exception == "ValueError: boom"
    assert not holder.offer(b"after\n", b"after\n")

    group = [
        b"  + Exception Group Traceback (most recent call last):\n",
        b"  | ExceptionGroup: two (2 sub-exceptions)\n",
    ]
    assert processes.exception_line(group) == "ExceptionGroup: two (2 sub-exceptions)"
    assert processes.without_torch_prefix(b"[rank1]: Traceback\n", 1) == b"Traceback\n"
    assert processes.without_torch_prefix(b"[rank0]: Traceback\n", 1) == b"[rank0]: Traceback\n"


# --------------------------------------------------------------------------
# Failures, signals, timeouts


def test_failing_rank_stops_the_others(tmp_path):
    started = time.monotonic()
    result = ringrun("-np", 3, sys.executable, "-c", SLEEPING_RANK, tmp_path, 1, 3)
    elapsed = time.monotonic() - started
    assert result.returncode == 3
    assert re.search(
        r"^ringrun: rank 1 failed first \(exit code 3, host \S+, [^)]*\); stopped 2 other ranks$", result.stderr, re.M
    )
    assert elapsed < 8
    pids = recorded_pids(tmp_path)
    assert len(pids) == 3
    assert wait_until(lambda: not any(process_is_running(pid) for pid in pids), 3)


def test_rank_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    started = time.monotonic()
    result = ringrun(
        "-np", 2, "--grace-period", 0.5, sys.executable, "-c", SLEEPING_RANK, tmp_path, 0, 5, "--ignore-sigterm"
    )
    assert result.returncode == 5
    assert "ringrun: rank 0 failed first (exit code 5, host " in result.stderr
    assert time.monotonic() - started < 6
    pids = recorded_pids(tmp_path)
    assert len(pids) == 2
    assert wait_until(lambda: not any(process_is_running(pid) for pid in pids), 3)


def test_rank_killed_by_a_signal():
    result = ringrun(
        "-np",
        2,
        sys.executable,
        "-c",
        "import os, signal, time\n"
        "if os.environ['RINGCC_RANK'] == '1': os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(60)",
    )
    assert result.returncode == 128 + signal.SIGKILL
    assert "ringrun: rank 1 failed first (killed by signal SIGKILL, host " in result.stderr


def test_rank_that_cannot_start():
    result = ringrun("-np", 2, "/nonexistent/program")
    assert result.returncode == 127
    assert "cannot start rank 0" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_ringrun_stops_every_rank(tmp_path, signum):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        process = subprocess.Popen(
            ringrun_command("-np", 3, sys.executable, "-c", SLEEPING_RANK, pid_dir, -1, 0),
            env=launcher_environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        try:
            assert wait_until(lambda: len(recorded_pids(pid_dir)) == 3, 8)
            process.send_signal(signum)
            returncode = process.wait(timeout=8)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=5)
    assert returncode == 128 + signum
    said = "interrupted" if signum == signal.SIGINT else f"received {signal.Signals(signum).name}"
    assert f"ringrun: {said}; stopping 3 ranks\n" in (tmp_path / "err").read_text()
    pids = recorded_pids(pid_dir)
    assert wait_until(lambda: not any(process_is_running(pid) for pid in pids), 3)


def test_timeout_stops_the_job(tmp_path):
    started = time.monotonic()
    result = ringrun("-np", 2, "--timeout", 0.5, sys.executable, "-c", SLEEPING_RANK, tmp_path, -1, 0)
    assert result.returncode == 124
    assert "ringrun: timed out after 0.5 s" in result.stderr
    assert time.monotonic() - started < 6
    assert wait_until(lambda: not any(process_is_running(pid) for pid in recorded_pids(tmp_path)), 3)


# --------------------------------------------------------------------------
# --check-build


def test_check_build_reports_the_core_or_its_absence():
    result = ringrun("--check-build")
    if result.returncode == 0:
        assert re.match(r"ringcc v\S+:\n", result.stdout)
        for heading in ("Available frameworks:", "Available controllers:", "Available transports:"):
            assert heading in result.stdout
        assert "[X] TCP store" in result.stdout
    else:
        assert result.returncode == 1
        assert "cannot load the ringcc core (ringcc._core)" in result.stderr


def test_a_script_without_its_interpreter_is_named(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    result = ringrun("-np", 1, script)
    assert result.returncode == errors.EXIT_CANNOT_START, result.stderr
    assert f"{script} is not executable; did you mean ringrun ... python {script}?" in result.stderr
    missing = ringrun("-np", 1, "no-such-command-here")
    assert "no-such-command-here: no such command on PATH" in missing.stderr, missing.stderr


def test_python_m_ringcc_prints_the_version_and_the_build_report():
    result = subprocess.run(
        [sys.executable, "-m", "ringcc"], capture_output=True, text=True, timeout=60, env=launcher_environment()
    )
    assert result.returncode == 0, result.stderr
    import ringcc

    assert result.stdout.startswith(f"ringcc v{ringcc.__version__}:\n"), result.stdout
    assert result.stdout == ringrun("--check-build").stdout


def test_check_build_text(monkeypatch, capsys):
    class FakeCore:
        @staticmethod
        def build_info():
            return {"version": "0.1.0", "transports": {"shm": True, "tcp": True, "mpi": False, "nccl": False}}

    monkeypatch.setitem(sys.modules, "ringcc._core", FakeCore)
    monkeypatch.setattr(build_report, "_find_spec", lambda module: module == "torch" or None)
    monkeypatch.setattr(build_report, "_framework_version", lambda module: "2.13.0")
    assert build_report.check_build() == 0
    assert capsys.readouterr().out == textwrap.dedent(
        """\
        ringcc v0.1.0:

        Available frameworks:
            [X] PyTorch 2.13.0
            [ ] JAX
            [ ] MXNet

        Available controllers:
            [X] TCP store

        Available transports:
            [X] Shared memory
            [X] TCP
            [ ] MPI
            [ ] NCCL
        """
    )

    monkeypatch.setitem(sys.modules, "ringcc._core", None)  # makes the import fail
    assert build_report.check_build() == 1
    assert "cannot load the ringcc core" in capsys.readouterr().err


def test_job_options_after_the_command_are_warned_about():
    show_args = "import json, sys; print(json.dumps(sys.argv[1:]))"
    result = ringrun(sys.executable, "-c", show_args, "-np", "2", "--hostfile=h")
    assert result.returncode == 0, result.stderr
    # One rank ran, and the options went to the command ...
    assert prefixed_lines(result.stdout, "stdout") == {0: [json.dumps(["-np", "2", "--hostfile=h"])]}
    # ... and ringrun said so.
    warning = [line for line in result.stderr.splitlines() if line.startswith("ringrun: warning:")]
    assert len(warning) == 1, result.stderr
    assert "-np, --hostfile came after the command, so the command gets them" in warning[0]
    # Given to ringrun too: the command's own -np is its business.
    result = ringrun("-np", 2, sys.executable, "-c", show_args, "-np", "7")
    assert result.returncode == 0 and "ringrun: warning" not in result.stderr, result.stderr


def test_misplaced_options():
    parser = cli.build_parser()
    args = parser.parse_args(["-H", "a:2"])
    assert cli.misplaced_options(args, ["python", "t.py", "-np", "2", "-H", "b", "--num-proc=3"]) == [
        "-np",
        "--num-proc",
    ]
    assert cli.misplaced_options(args, ["-np", "t.py"]) == []  # the command itself is not an option


def test_ringrun_removes_segments_of_ranks_that_died(tmp_path):
    """Segments whose creator has exited go; a live process's, another
    namespace's and another user's stay (ringrun's sweep after a job)."""
    from ringcc.launch.processes import remove_stale_segments

    namespace = os.stat("/proc/self/ns/pid").st_ino
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    made = {
        "dead": f"ringcc-p{dead.pid}-n{namespace}-ringcc-test-0",
        "alive": f"ringcc-p{os.getpid()}-n{namespace}-ringcc-test-1",
        "other_namespace": f"ringcc-p{dead.pid}-n{namespace + 1}-ringcc-test-2",
        "not_ours": f"ringcc-p{dead.pid}-n{namespace}-ringcc-test-3",
    }
    for name in made.values():
        (tmp_path / name).write_bytes(b"")
    if os.geteuid() == 0:
        os.chown(tmp_path / made["not_ours"], 65534, 65534)
    removed = remove_stale_segments(str(tmp_path))
    expected = ["dead"] if os.geteuid() == 0 else ["dead", "not_ours"]
    assert sorted(removed) == sorted(made[k] for k in expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(made[k] for k in made if k not in expected)
