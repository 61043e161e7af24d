"""Remote agents: the command that starts a rank on another host (ssh by
default, or --agent's template), with the job secret passed on standard input.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from ringcc.launch.errors import LaunchError
from ringcc.launch.variables import SECRET_VARIABLE

DEFAULT_AGENT = "ssh -o BatchMode=yes {host}"

# Agents that hand the command to a shell on the other side, as ssh does: the
# rank's command is passed to them as one shell command line.
REMOTE_SHELL_AGENTS = ("ssh", "rsh")

# The job secret reaches ranks started through an agent on their standard
# input, read by the shell into the rank's environment: never on a command
# line, which every user of either host can read (ps, /proc/*/cmdline).
_READ_SECRET = (
    f"IFS= read -r {SECRET_VARIABLE} || {{ echo 'ringrun: no job secret arrived on standard input "
    f"(the agent must pass standard input on, e.g. docker exec -i, kubectl exec -i)' >&2; exit 127; }}; "
    f"export {SECRET_VARIABLE}"
)


def agent_command(
    template: str, host: str, environment: Mapping[str, str], command: Sequence[str], cwd: str
) -> list[str]:
    """The command that starts one rank on `host` through the agent.

    `{host}` in the template is replaced by the host name (without the
    placeholder the host is appended). The rank's command follows as
    `env K=V ... COMMAND`: for ssh and rsh, which hand their arguments to a
    shell on the remote host, as one shell command line, quoted with shlex and
    preceded by a `cd` to the current directory; for other agents (ip netns
    exec, docker exec -i ...), which execute their arguments, under `sh -c`.
    Either way the shell first reads RINGCC_SECRET from standard input (the
    first line ringrun writes there); one in `environment` is left out.
    """
    words = shlex.split(template)
    if not words:
        raise LaunchError("--agent: empty command")
    if any("{host}" in word for word in words):
        words = [word.replace("{host}", host) for word in words]
    else:
        words.append(host)
    rank_words = [
        "env",
        *(f"{name}={value}" for name, value in environment.items() if name != SECRET_VARIABLE),
        *command,
    ]
    if os.path.basename(words[0]) in REMOTE_SHELL_AGENTS:
        shell_line = f"{_READ_SECRET}; cd {shlex.quote(cwd)} >/dev/null 2>&1; exec {shlex.join(rank_words)}"
        return [*words, shell_line]
    return [*words, "sh", "-c", f'{_READ_SECRET}; exec "$@"', "ringrun-rank", *rank_words]


def is_ssh_agent(template: str) -> bool:
    words = shlex.split(template)
    return bool(words) and os.path.basename(words[0]) == "ssh"


def with_ssh_connect_timeout(template: str, seconds: int | None) -> str:
    """The agent template with `-o ConnectTimeout=N` after `ssh` (an agent that is not ssh: LaunchError)."""
    if seconds is None:
        return template
    if not is_ssh_agent(template):
        raise LaunchError(f"--ssh-connect-timeout applies to ssh; the agent is {template!r}")
    words = shlex.split(template)
    return shlex.join([words[0], "-o", f"ConnectTimeout={seconds}", *words[1:]])


def with_ssh_options(
    template: str, connect_timeout: int | None, port: int | None = None, identity_file: str | None = None
) -> str:
    """The agent template with ssh's options of ringrun's command line after `ssh`:
    -o ConnectTimeout=N, -p PORT and -i FILE (an agent that is not ssh: LaunchError)."""
    template = with_ssh_connect_timeout(template, connect_timeout)
    given = [("--ssh-port", "-p", port), ("--ssh-identity-file", "-i", identity_file)]
    given = [(option, flag, value) for option, flag, value in given if value is not None]
    if not given:
        return template
    if not is_ssh_agent(template):
        raise LaunchError(f"{given[0][0]} applies to ssh; the agent is {template!r}")
    words = shlex.split(template)
    options = [word for _, flag, value in given for word in (flag, str(value))]
    return shlex.join([words[0], *options, *words[1:]])
