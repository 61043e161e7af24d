"""python -m ringcc.compat install-horovod-alias | uninstall-horovod-alias [--target DIR]"""

from __future__ import annotations

import argparse
import sys

from ringcc.compat.horovod_alias import AliasError, install, site_packages, uninstall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ringcc.compat",
        description="Lets Horovod scripts run on ringcc unchanged: `import horovod.torch as hvd` is "
        "ringcc.torch, horovod.run is ringcc.run (docs/migrating.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("install-horovod-alias", "write the `horovod` alias package (refused where a real Horovod is importable)"),
        ("uninstall-horovod-alias", "remove the alias package (never a real Horovod)"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("--target", metavar="DIR", help=f"directory to write to (default: {site_packages()})")
    args = parser.parse_args(argv)
    try:
        if args.command == "install-horovod-alias":
            print(f"installed ringcc's horovod alias: {install(args.target)}")
        else:
            removed = uninstall(args.target)
            print(f"removed ringcc's horovod alias: {removed}" if removed else "ringcc's horovod alias was not there")
    except (AliasError, OSError) as error:
        print(f"python -m ringcc.compat: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
