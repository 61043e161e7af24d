"""The job of tests/launch/test_network.py: five allreduces of 4 MiB per rank (enough
bytes to tell on a link's counters which link carried them), checked, then
one line per rank. With --sockets, a second line per rank, "SOCKETS {json}":
where this process's TCP sockets listen and the peers they are connected to
(read from /proc, Linux only), and the rank's own description of the job
(its "this rank at <address>"). tcp_sockets() serves slurm_job.py as well."""

import json
import os
import socket
import sys


def _address(text: str, family: int) -> list:
    """/proc/net/tcp's "0100007F:1F90" as ["127.0.0.1", 8080]."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word in host order
    return [socket.inet_ntop(family, raw), int(port, 16)]


def tcp_sockets() -> dict:
    """This process's TCP sockets: {"listen": [[address, port], ...], "peers": [[address, port], ...]}."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    found = {"listen": [], "peers": []}
    for path, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(path) as table:
            for line in table.read().splitlines()[1:]:
                fields = line.split()
                if fields[9] not in inodes:
                    continue
                if fields[3] == "0A":  # TCP_LISTEN
                    found["listen"].append(_address(fields[1], family))
                elif fields[3] == "01":  # TCP_ESTABLISHED
                    found["peers"].append(_address(fields[2], family))
    return found


def main() -> None:
    import numpy as np

    import ringcc

    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    data = np.full(1 << 20, rank + 1, dtype=np.float32)
    ok = True
    for _ in range(5):
        total = ringcc.allreduce(data)
        ok &= bool(np.all(total == size * (size + 1) / 2))
    print("JOB", rank, size, ringcc.transport_name(), "ok" if ok else "WRONG", flush=True)
    if "--sockets" in sys.argv:
        described = ringcc._core.global_communicator().describe()
        print("SOCKETS " + json.dumps({"rank": rank, **tcp_sockets(), "describe": described}), flush=True)
    ringcc.shutdown()


if __name__ == "__main__":
    main()
