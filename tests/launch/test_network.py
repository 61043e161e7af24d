"""Network conventions: IPv6 for the rendezvous store and the mesh of links;
the interface the links use, chosen by name, address or subnet
(RINGCC_SOCKET_IFNAME, else HOROVOD_GLOO_IFACE, GLOO_SOCKET_IFNAME,
NCCL_SOCKET_IFNAME; ringrun --network-interface), and RINGCC_LISTEN_ADDR and
RINGCC_ADVERTISE_ADDR over that choice (ranks on "hosts" named apart on this
machine, at 127.0.0.x); ringrun's --output-filename and
--ssh-connect-timeout.

The cross-host cases run two network namespaces joined by two links: "rcv6"
carries IPv6 only and "rcv4" IPv4 only, so a job succeeds over a link only
when ringcc speaks that link's protocol, and the links' byte counters show
which one the data took. They need root and `ip netns` and are skipped
otherwise; the rest runs anywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rank_groups import rank_environment, ringcc, ringrun_command, run_at_once, run_command

from ringcc.launch import cli, errors, mpirun, processes
from ringcc.launch.plan import plan_job

HERE = Path(__file__).resolve().parent

IP_TIMEOUT_S = 20
JOB_TIMEOUT_S = 90
BULK_BYTES = 15 << 20  # a rank's 5 allreduces of 4 MiB send 20 MiB over the link they use
STRAY_BYTES = 2 << 20  # the store's traffic and IPv6 housekeeping stay far below this


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


class TwoLinks:
    """Namespaces a and b joined by rcv6 (IPv6 only) and rcv4 (IPv4 only)."""

    def __init__(self, ns_a: str, ns_b: str, v6_prefix: str, v4_prefix: str) -> None:
        self.ns_a, self.ns_b = ns_a, ns_b
        self.v6_a, self.v6_b = f"{v6_prefix}::1", f"{v6_prefix}::2"
        self.v6_subnet = f"{v6_prefix}::/64"
        self.v4_a, self.v4_b = f"{v4_prefix}.1", f"{v4_prefix}.2"
        self.v4_subnet = f"{v4_prefix}.0/24"

    def tx_bytes(self, link: str) -> int:
        """Bytes sent over `link` by both ends."""
        total = 0
        for ns in (self.ns_a, self.ns_b):
            stats = json.loads(ip("-n", ns, "-s", "-j", "link", "show", "dev", link).stdout)
            total += int(stats[0]["stats64"]["tx"]["bytes"])
        return total

    def run_job(self, master_addr: str, options=(), exported=None):
        """The 2-rank job (one rank per namespace); returns (completed, bytes sent on rcv6, on rcv4)."""
        exported = dict(exported or {})
        env = rank_environment({"RINGCC_TIMEOUT_S": "20", **exported})
        command = [
            sys.executable,
            "-m",
            "ringcc.launcher",
            "-H",
            f"{self.ns_a}:1,{self.ns_b}:1",
            "--agent",
            "ip netns exec {host}",
            "--master-addr",
            master_addr,
            "--timeout",
            str(JOB_TIMEOUT_S),
            "--no-prefix",
            "-x",
            "PYTHONPATH",
            "-x",
            "RINGCC_TIMEOUT_S",
            *[word for name in exported for word in ("-x", name)],
            *options,
            "--",
            sys.executable,
            str(HERE / "network_job.py"),
        ]
        before = {link: self.tx_bytes(link) for link in ("rcv6", "rcv4")}
        done = run_command(command, env, JOB_TIMEOUT_S + 30)
        return done, self.tx_bytes("rcv6") - before["rcv6"], self.tx_bytes("rcv4") - before["rcv4"]


@pytest.fixture(scope="module")
def two_links():
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    pid = os.getpid()
    ns_a, ns_b = f"ringcc-net-{pid}-a", f"ringcc-net-{pid}-b"
    links = TwoLinks(ns_a, ns_b, f"fd00:{pid % 65000 + 1:x}:6:1", f"10.{pid % 250 + 1}.4")
    created = []
    try:
        try:
            ip("netns", "add", ns_a)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            pytest.skip(f"cannot create a network namespace here: {error}")
        created.append(ns_a)
        ip("netns", "add", ns_b)
        created.append(ns_b)
        for link in ("rcv6", "rcv4"):  # the same name at both ends: namespaces have names of their own
            try:
                ip("link", "add", link, "netns", ns_a, "type", "veth", "peer", "name", link, "netns", ns_b)
            except RuntimeError as error:
                pytest.skip(f"cannot create veth pairs between network namespaces here: {error}")
        for ns, v6, v4 in ((ns_a, links.v6_a, links.v4_a), (ns_b, links.v6_b, links.v4_b)):
            # nodad: usable at once, not after duplicate address detection.
            ip("-n", ns, "-6", "addr", "add", f"{v6}/64", "dev", "rcv6", "nodad")
            ip("-n", ns, "addr", "add", f"{v4}/24", "dev", "rcv4")
            for link in ("lo", "rcv6", "rcv4"):
                ip("-n", ns, "link", "set", link, "up")
        if shutil.which("ping"):
            for args in (["-6", links.v6_b], ["-4", links.v4_b]):
                ping = subprocess.run(
                    ["ip", "netns", "exec", ns_a, "ping", *args[:1], "-c", "1", "-W", "5", args[1]],
                    capture_output=True,
                    text=True,
                    timeout=IP_TIMEOUT_S,
                )
                if ping.returncode != 0:
                    pytest.skip(f"the namespaces cannot reach each other: {ping.stdout}{ping.stderr}")
        yield links
    finally:
        for ns in reversed(created):  # deleting a namespace deletes its ends of the veth pairs
            ip("netns", "del", ns, check=False)


def assert_job_ok(done) -> None:
    lines = sorted(line.split() for line in done.stdout.splitlines() if line.startswith("JOB "))
    assert done.returncode == 0 and lines == [["JOB", "0", "2", "tcp", "ok"], ["JOB", "1", "2", "tcp", "ok"]], (
        done.describe()
    )


def test_ipv6_store_and_mesh(two_links):
    """The store at an IPv6 address (bracketed, as URLs write it) on the IPv6-only link: the store and
    every link between the ranks go over IPv6."""
    done, v6_bytes, v4_bytes = two_links.run_job(f"[{two_links.v6_a}]")
    assert_job_ok(done)
    assert v6_bytes > BULK_BYTES and v4_bytes < STRAY_BYTES, (v6_bytes, v4_bytes, done.describe())


def test_network_interface_by_name_takes_the_mesh_elsewhere(two_links):
    """Store on the IPv4 link, --network-interface rcv6: the data goes over the IPv6 link."""
    done, v6_bytes, v4_bytes = two_links.run_job(two_links.v4_a, ["--network-interface", "rcv6"])
    assert_job_ok(done)
    assert v6_bytes > BULK_BYTES and v4_bytes < STRAY_BYTES, (v6_bytes, v4_bytes, done.describe())


def test_interface_by_subnet_from_gloo_variable(two_links):
    """GLOO_SOCKET_IFNAME as a subnet (each host's address differs, the subnet is shared)."""
    done, v6_bytes, v4_bytes = two_links.run_job(two_links.v6_a, exported={"GLOO_SOCKET_IFNAME": two_links.v4_subnet})
    assert_job_ok(done)
    assert v4_bytes > BULK_BYTES and v6_bytes < STRAY_BYTES, (v6_bytes, v4_bytes, done.describe())


def test_horovod_variable_before_nccl_variable(two_links):
    """HOROVOD_GLOO_IFACE=rcv4 wins over NCCL_SOCKET_IFNAME=rcv6 (RINGCC_SOCKET_IFNAME over both)."""
    done, v6_bytes, v4_bytes = two_links.run_job(
        two_links.v6_a, exported={"HOROVOD_GLOO_IFACE": "rcv4", "NCCL_SOCKET_IFNAME": "rcv6"}
    )
    assert_job_ok(done)
    assert v4_bytes > BULK_BYTES and v6_bytes < STRAY_BYTES, (v6_bytes, v4_bytes, done.describe())
    done, v6_bytes, v4_bytes = two_links.run_job(
        two_links.v6_a, ["--network-interface", "^rcv4"], exported={"HOROVOD_GLOO_IFACE": "rcv4"}
    )
    assert_job_ok(done)
    assert v6_bytes > BULK_BYTES and v4_bytes < STRAY_BYTES, (v6_bytes, v4_bytes, done.describe())


def test_an_interface_no_host_has_is_a_clear_error(two_links):
    done, _, _ = two_links.run_job(two_links.v4_a, ["--network-interface", "ib7"])
    assert done.returncode not in (0, None), done.describe()
    output = done.stdout + done.stderr
    assert "RINGCC_SOCKET_IFNAME=ib7 matches no interface of ringcc-net-" in output, done.describe()
    assert "rcv4 " + two_links.v4_a in output or "rcv4 " + two_links.v4_b in output, done.describe()


# --------------------------------------------------------------------------
# Choosing the interface (this host's interfaces)


def choose(monkeypatch, **variables):
    for name in (
        "RINGCC_SOCKET_IFNAME",
        "HOROVOD_GLOO_IFACE",
        "GLOO_SOCKET_IFNAME",
        "NCCL_SOCKET_IFNAME",
        "RINGCC_SOCKET_FAMILY",
        "NCCL_SOCKET_FAMILY",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return ringcc._core._socket_interface()


def test_tcp_congestion_control():
    """RINGCC_TCP_CONGESTION, the congestion control of the one-way streams' sockets: auto keeps
    the kernel's default unless it paces (bbr), and then takes reno (debug log of each rank); a
    name the kernel refuses is a warning on every rank, and the job runs on with the default. The
    shared stream keeps the kernel's default."""
    kernel_default = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    cases = {
        "auto": "reno" if kernel_default.startswith("bbr") else kernel_default,
        "no-such-congestion-control": kernel_default,
    }
    for setting, in_use in cases.items():
        env = rank_environment(
            {"RINGCC_TRANSPORT": "tcp", "RINGCC_TCP_CONGESTION": setting, "RINGCC_LOG_LEVEL": "debug"}
        )
        done = run_command(ringrun_command(2, [str(HERE / "network_job.py")], ["--no-prefix"]), env, JOB_TIMEOUT_S)
        assert_job_ok(done)
        used = [line for line in done.stderr.splitlines() if "TCP links: congestion control" in line]
        assert logging_ranks(used) == {"0", "1"}, done.describe()
        expected = (
            f"congestion control {in_use} on the one-way streams (RINGCC_TCP_CONGESTION={setting}), "
            f"{kernel_default} on the shared one"
        )
        assert all(expected in line for line in used), used
        refused = [line for line in done.stderr.splitlines() if "the kernel refused congestion control" in line]
        if setting == "auto":
            assert not refused, refused
        else:
            assert logging_ranks(refused) == {"0", "1"}, done.describe()
            assert all(f"keeping '{kernel_default}'" in line for line in refused), refused


def logging_ranks(lines: list[str]) -> set[str]:
    """The ranks that logged these lines ("... rank 1 pid 123] ...")."""
    return {match.group(1) for line in lines if (match := re.search(r" rank (\d+) pid ", line))}


def test_interface_choice_rules(monkeypatch):
    assert choose(monkeypatch)["variable"] == ""  # nothing set: nothing chosen
    loopback = {"interface": "lo", "address": "127.0.0.1"}
    for variables in (
        {"RINGCC_SOCKET_IFNAME": "lo"},
        {"RINGCC_SOCKET_IFNAME": "=lo"},
        {"RINGCC_SOCKET_IFNAME": "127.0.0.1"},
        {"RINGCC_SOCKET_IFNAME": "127.0.0.0/8"},
        {"RINGCC_SOCKET_IFNAME": "no-such-if, lo"},
        {"HOROVOD_GLOO_IFACE": "lo"},
        {"GLOO_SOCKET_IFNAME": "lo"},
        {"NCCL_SOCKET_IFNAME": "lo"},
        {"RINGCC_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "no-such-if"},
        {"RINGCC_SOCKET_IFNAME": "lo", "RINGCC_SOCKET_FAMILY": "ipv4"},
    ):
        chosen = choose(monkeypatch, **variables)
        assert {k: chosen[k] for k in loopback} == loopback, (variables, chosen)
        assert chosen["variable"] == next(iter(variables)), (variables, chosen)
    # Loopback is taken when named, never by an exclusion or a prefix; a name
    # that is no interface's is taken as a prefix (NCCL's rule).
    other = choose_or_error(monkeypatch, NCCL_SOCKET_IFNAME="^lo")
    if other:
        assert other["interface"] != "lo", other
        prefix = other["interface"][:-1] or other["interface"]
        assert choose(monkeypatch, RINGCC_SOCKET_IFNAME=prefix)["interface"].startswith(prefix)
        # "=name" takes that exact name only: the prefix alone matches nothing, the list goes on to lo.
        if prefix != other["interface"]:
            assert choose(monkeypatch, RINGCC_SOCKET_IFNAME=f"={prefix},lo")["interface"] == "lo"
    with pytest.raises(ringcc.InvalidArgumentError) as error:
        choose(monkeypatch, GLOO_SOCKET_IFNAME="no-such-if")
    assert "GLOO_SOCKET_IFNAME=no-such-if matches no interface of" in str(error.value)
    assert "lo 127.0.0.1" in str(error.value)  # this host's interfaces are listed
    with pytest.raises(ringcc.InvalidArgumentError, match="is not a subnet"):
        choose(monkeypatch, RINGCC_SOCKET_IFNAME="10.0.0.0/99")
    with pytest.raises(ringcc.InvalidArgumentError, match="RINGCC_SOCKET_FAMILY must be ipv4 or ipv6"):
        choose(monkeypatch, RINGCC_SOCKET_IFNAME="lo", RINGCC_SOCKET_FAMILY="ipx")
    if Path("/proc/net/if_inet6").exists() and " lo" in Path("/proc/net/if_inet6").read_text():
        for variables in ({"RINGCC_SOCKET_FAMILY": "ipv6"}, {"NCCL_SOCKET_FAMILY": "AF_INET6"}):
            chosen = choose(monkeypatch, RINGCC_SOCKET_IFNAME="lo", **variables)
            assert chosen["address"] == "::1", (variables, chosen)
        assert choose(monkeypatch, RINGCC_SOCKET_IFNAME="[::1]")["address"] == "::1"


def choose_or_error(monkeypatch, **variables):
    try:
        return choose(monkeypatch, **variables)
    except ringcc.InvalidArgumentError as error:  # a host with loopback only
        assert "matches no interface" in str(error)
        return {}


# --------------------------------------------------------------------------
# RINGCC_LISTEN_ADDR and RINGCC_ADVERTISE_ADDR over the chosen interface


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def three_hosts_job(overrides: dict[int, dict[str, str]]) -> list[tuple[int | None, str]]:
    """network_job.py --sockets, 3 ranks on 3 "hosts" by name (so that the links
    go over TCP and take the interface), the interface lo for every rank,
    each rank's own variables from `overrides` (by rank) on top."""
    port = free_port()
    commands = []
    for rank in range(3):
        env = rank_environment(
            {
                "RANK": str(rank),
                "WORLD_SIZE": "3",
                "RINGCC_MASTER_ADDR": socket.gethostname(),  # not a loopback name: the job may span hosts
                "RINGCC_MASTER_PORT": str(port),
                "RINGCC_SECRET": "a secret of the test's",
                "RINGCC_HOSTNAME": f"host-{rank}",
                "RINGCC_SOCKET_IFNAME": "lo",
                "RINGCC_TIMEOUT_S": "20",
                **overrides.get(rank, {}),
            }
        )
        commands.append(([sys.executable, str(HERE / "network_job.py"), "--sockets"], env))
    return run_at_once(commands, JOB_TIMEOUT_S)


def sockets_of(output: str) -> dict:
    (line,) = [line for line in output.splitlines() if line.startswith("SOCKETS ")]
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the ranks' sockets from /proc (Linux)")
@pytest.mark.parametrize(
    ("overrides", "rank0_listens", "rank1_listens", "rank1_reached_at"),
    [
        # Neither set: the interface (lo) gives both.
        ({}, None, "127.0.0.1", "127.0.0.1"),
        (
            {1: {"RINGCC_LISTEN_ADDR": "127.0.0.2", "RINGCC_ADVERTISE_ADDR": "127.0.0.2"}},
            None,
            "127.0.0.2",
            "127.0.0.2",
        ),
        # Each apart; rank 0's store listens where RINGCC_LISTEN_ADDR says too.
        (
            {
                0: {"RINGCC_LISTEN_ADDR": "0.0.0.0"},
                1: {"RINGCC_LISTEN_ADDR": "0.0.0.0", "RINGCC_ADVERTISE_ADDR": "127.0.0.3"},
            },
            "0.0.0.0",
            "0.0.0.0",
            "127.0.0.3",
        ),
    ],
    ids=["interface", "both-127.0.0.2", "listen-any-advertise-127.0.0.3"],
)
def test_listen_and_advertise_addresses_override_the_interface(
    overrides, rank0_listens, rank1_listens, rank1_reached_at
):
    """RINGCC_LISTEN_ADDR and RINGCC_ADVERTISE_ADDR win over RINGCC_SOCKET_IFNAME
    (README.md, docs/api.md "Networks"): rank 1 listens only where it is told,
    says it is reached there, and rank 2 (which connects to rank 1: the higher
    rank of a pair connects) is connected to that address. 127.0.0.2 and
    127.0.0.3 are this machine's loopback addresses too, but no interface's
    own address: only the variables can have put them there."""
    results = three_hosts_job(overrides)
    everything = "\n".join(f"rank {rank}: exit {code}\n{output[-3000:]}" for rank, (code, output) in enumerate(results))
    for rank, (code, output) in enumerate(results):
        assert code == 0 and f"JOB {rank} 3 tcp ok" in output, everything
    found = [sockets_of(output) for _, output in results]
    assert {address for address, _ in found[1]["listen"]} == {rank1_listens}, everything
    assert f"this rank at {rank1_reached_at} (RINGCC_SOCKET_IFNAME=lo)" in found[1]["describe"], everything
    rank1_ports = {port for _, port in found[1]["listen"]}
    rank2_peers = {(address.removeprefix("::ffff:"), port) for address, port in found[2]["peers"]}
    assert any((rank1_reached_at, port) in rank2_peers for port in rank1_ports), everything
    if rank0_listens:
        assert {address for address, _ in found[0]["listen"]} == {rank0_listens}, everything


def test_a_listen_address_not_of_this_host_fails_the_job_naming_it():
    results = three_hosts_job({1: {"RINGCC_LISTEN_ADDR": "203.0.113.7"}})  # TEST-NET-3: no host's address
    everything = "\n".join(f"rank {rank}: exit {code}\n{output[-3000:]}" for rank, (code, output) in enumerate(results))
    assert all(code not in (0, None) for code, _ in results), everything
    refused = ("cannot listen on 203.0.113.7:0", "Cannot assign requested address", "RINGCC_LISTEN_ADDR=203.0.113.7")
    for fragment in refused:
        assert fragment in results[1][1], everything
    for rank in (0, 2):
        assert "rank 1 failed while the ranks met: cannot listen on 203.0.113.7" in results[rank][1], everything


def test_a_store_address_not_of_this_host_fails_rank_0_naming_it():
    # Rank 0 serves the rendezvous store there; the others, with no store to
    # meet at, fail at their (short) timeout.
    short = {"RINGCC_TIMEOUT_S": "3"}
    results = three_hosts_job({0: {"RINGCC_LISTEN_ADDR": "203.0.113.7"}, 1: short, 2: short})
    everything = "\n".join(f"rank {rank}: exit {code}\n{output[-3000:]}" for rank, (code, output) in enumerate(results))
    assert all(code not in (0, None) for code, _ in results), everything
    for fragment in ("InvalidArgumentError", "cannot listen on 203.0.113.7", "RINGCC_LISTEN_ADDR=203.0.113.7"):
        assert fragment in results[0][1], everything


# --------------------------------------------------------------------------
# ringrun: the flags


def plan(*options, environ=None):
    parser = cli.build_parser()
    return plan_job(parser.parse_args(list(options)), ["python3", "t.py"], environ or {})


def variables_of(launch):
    if not launch.through_agent:
        return launch.env
    words = launch.argv[-1].split("; exec ", 1)[1].split() if launch.argv[0] == "ssh" else launch.argv
    return dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))


def test_network_interface_reaches_every_rank():
    for launch in plan("-np", "2", "--network-interface", "eth1,10.1.0.0/16"):
        assert launch.env["RINGCC_SOCKET_IFNAME"] == "eth1,10.1.0.0/16"
    for launch in plan("-H", "ns0:1,ns1:1", "--agent", "ip netns exec {host}", "--network-interface", "^docker"):
        assert "RINGCC_SOCKET_IFNAME=^docker" in launch.argv, launch.argv


def test_ipv6_hosts_and_master_address():
    launches = plan("-H", "[fd00::2]:2,[fd00::3]:1")
    assert [launch.placement.host for launch in launches] == ["fd00::2", "fd00::2", "fd00::3"]
    for launch in launches:
        assert launch.argv[:4] == ["ssh", "-o", "BatchMode=yes", launch.placement.host]
        assert "RINGCC_MASTER_ADDR=fd00::2" in launch.argv[-1] and "MASTER_ADDR=fd00::2" in launch.argv[-1]
    (launch,) = plan("-np", "1", "--master-addr", "[fd00::9]")
    assert launch.env["RINGCC_MASTER_ADDR"] == "fd00::9" and launch.env["MASTER_ADDR"] == "fd00::9"


def test_ssh_connect_timeout():
    for launch in plan("-H", "n1:1,n2:1", "--ssh-connect-timeout", "7"):
        assert launch.argv[:6] == ["ssh", "-o", "ConnectTimeout=7", "-o", "BatchMode=yes", launch.placement.host]
    (launch,) = plan("-H", "n1:1", "--agent", "/usr/bin/ssh -p 2222 {host}", "--ssh-connect-timeout", "3")
    assert launch.argv[:6] == ["/usr/bin/ssh", "-o", "ConnectTimeout=3", "-p", "2222", "n1"]
    with pytest.raises(errors.LaunchError, match="--ssh-connect-timeout applies to ssh"):
        plan("-H", "n1:1", "--agent", "ip netns exec {host}", "--ssh-connect-timeout", "3")
    for bad in ("0", "1.5", "x"):
        done = subprocess.run(
            [sys.executable, "-m", "ringcc.launcher", "--ssh-connect-timeout", bad, "true"],
            env=rank_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "--ssh-connect-timeout" in done.stderr, done.stderr


def test_mpi_command_carries_the_network_flags():
    parser = cli.build_parser()
    args = parser.parse_args(["--mpi", "-np", "2", "--network-interface", "ib0", "--output-filename", "out"])
    cmd = mpirun.plan_mpi_command(args, ["python", "t.py"], {}, "mpirun", "openmpi")
    assert cmd[cmd.index("--output-filename") + 1] == "out"
    assert "RINGCC_SOCKET_IFNAME=ib0" in [cmd[i + 1] for i, word in enumerate(cmd) if word == "-x"]
    args = parser.parse_args(["--mpi", "-np", "2", "--network-interface", "ib0"])
    cmd = mpirun.plan_mpi_command(args, ["python", "t.py"], {}, "mpiexec", "mpich")
    assert cmd[cmd.index("-genv") + 1 : cmd.index("-genv") + 3] == ["RINGCC_SOCKET_IFNAME", "ib0"]
    for options, flavour in ((["--output-filename", "out"], "mpich"), (["--ssh-connect-timeout", "3"], "openmpi")):
        with pytest.raises(errors.LaunchError):
            mpirun.plan_mpi_command(parser.parse_args(["--mpi", *options]), ["python"], {}, "m", flavour)


def test_output_filename_writes_one_file_per_rank_and_stream(tmp_path):
    script = (
        "import os, sys; r = os.environ['RINGCC_RANK']; print('out', r); print('second', r); "
        "print('err', r, file=sys.stderr); sys.stdout.write('tail ' + r)"
    )
    out_dir = tmp_path / "logs"
    done = run_command(
        [
            sys.executable,
            "-m",
            "ringcc.launcher",
            "-np",
            "3",
            "--output-filename",
            str(out_dir),
            "--",
            sys.executable,
            "-c",
            script,
        ],
        rank_environment(),
        60,
    )
    assert done.returncode == 0, done.describe()
    assert sorted(p.name for p in out_dir.iterdir()) == ["rank.0", "rank.1", "rank.2"]
    for rank in range(3):
        assert (out_dir / f"rank.{rank}" / "stdout").read_text() == f"out {rank}\nsecond {rank}\ntail {rank}"
        assert (out_dir / f"rank.{rank}" / "stderr").read_text() == f"err {rank}\n"
        assert f"[{rank}]<stdout>: out {rank}" in done.stdout  # the console copy stays
    assert processes.rank_output_paths("d", 3, 12) == ("d/rank.03/stdout", "d/rank.03/stderr")
    assert processes.rank_output_paths("d", 7, 8) == ("d/rank.7/stdout", "d/rank.7/stderr")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_command(
        [
            sys.executable,
            "-m",
            "ringcc.launcher",
            "-np",
            "2",
            "--output-filename",
            str(blocker / "logs"),
            "--",
            sys.executable,
            "-c",
            "print(1)",
        ],
        rank_environment(),
        60,
    )
    assert done.returncode == 2 and "--output-filename:" in done.stderr and not done.stdout, done.describe()


def test_help_documents_every_network_flag():
    done = subprocess.run(
        [sys.executable, "-m", "ringcc.launcher", "--help"],
        env=rank_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    for text in (
        "--network-interface IFACES",
        "--output-filename DIR",
        "--ssh-connect-timeout SECONDS",
        "RINGCC_SOCKET_IFNAME",
        "HOROVOD_GLOO_IFACE",
        "GLOO_SOCKET_IFNAME",
        "NCCL_SOCKET_IFNAME",
        "[fd00::2]:4",
        "DIR/rank.N/stdout",
    ):
        assert text in done.stdout, text
