"""Horovod's basics, once for ringcc's Horovod-style APIs (ringcc.torch,
ringcc.tensorflow, ringcc.mxnet): joining and leaving the job with its
process sets, rank and size, and the timeline (HorovodBasics); the
reduction operators, and the build queries whose answer is the same for
every framework.

Each API makes one HorovodBasics, naming itself, the error its calls raise
before init() and what it does once the job is joined, and exports its
methods as its functions (as Horovod's frameworks export those of their
HorovodBasics), and the build queries as they are. What an API answers
for its own tensors (NCCL, CUDA, MPI) it writes itself.

Framework-free: it imports ringcc and ringcc.process_sets only.
"""

from __future__ import annotations

from collections.abc import Callable

import ringcc
from ringcc import _core
from ringcc import process_sets as _process_sets

# Horovod's reduction operators: ringcc's values (Horovod scripts only
# compare them). Horovod's Adasum is not implemented by ringcc: the name
# exists so that scripts which mention it import; using it raises
# NotImplementedError.
Sum = ringcc.Sum
Average = ringcc.Average
Min = ringcc.Min
Max = ringcc.Max
Product = ringcc.Product
Adasum = 5

# What init() says when comm lists some of the job's ranks only.
COMM_NOT_EVERY_RANK = (
    "{api}.init: comm={ranks} must list every rank of the job (0..{last}); use process sets for subsets"
)


class HorovodBasics:
    """Horovod's basics for one API of ringcc.

    `api`: the API's name in messages ("ringcc.torch"). `not_initialized`:
    the class of the error raised by the queries that need init() first,
    and its message; None: they ask ringcc, which raises its own.
    `mpi_communicators`: whether init(comm) takes an mpi4py communicator
    (else comm may only list ranks). `on_join(first)`: called once the job
    is joined, `first` False when init() had been called already.
    `comm_not_every_rank`: the message of a comm that does not list every
    rank ({api}, {ranks}, {last})."""

    def __init__(
        self,
        api: str,
        not_initialized: tuple[type[Exception], str] | None = None,
        *,
        mpi_communicators: bool = False,
        on_join: Callable[[bool], None] | None = None,
        comm_not_every_rank: str = COMM_NOT_EVERY_RANK,
    ) -> None:
        self.api = api
        self._not_initialized = not_initialized
        self._mpi_communicators = mpi_communicators
        self._on_join = on_join
        self._comm_not_every_rank = comm_not_every_rank

    # -- lifetime -------------------------------------------------------------

    def require_init(self) -> None:
        """Raises the API's NotInitializedError before init()."""
        if self._not_initialized is not None and not _core.is_initialized():
            error_class, message = self._not_initialized
            raise error_class(message)

    def init(self, comm=None, process_sets=None):
        """Joins the job (`ringcc.init()`: ringrun, torchrun, mpirun, PMI or
        SLURM variables; a lone process is rank 0 of 1). Calling it again is
        a no-op.

        `comm`: None, or a list of every rank of the job (ringcc cannot run
        Horovod on a subset of the job: use process sets); where the API
        takes one, an mpi4py communicator whose ranks form the job (as
        `ringcc.init(comm)`). `process_sets`: a list of ProcessSet to
        register (every rank passes the same list), or "dynamic" (accepted;
        ringcc always allows add_process_set)."""
        ranks, mpi_comm = self._comm_of(comm)
        first = not _core.is_initialized()
        ringcc.init(mpi_comm)
        if ranks is not None and ranks != list(range(ringcc.size())):
            raise ValueError(self._comm_not_every_rank.format(api=self.api, ranks=ranks, last=ringcc.size() - 1))
        _process_sets._on_init(ringcc.size())
        if self._on_join is not None:
            self._on_join(first)
        if process_sets is not None and process_sets != "dynamic":
            for ps in process_sets:
                if isinstance(ps, _process_sets.ProcessSet) and ps.process_set_id is not None:
                    continue  # registered by an earlier init()
                _process_sets.add_process_set(ps)

    def _comm_of(self, comm) -> tuple[list[int] | None, object]:
        """(the ranks `comm` lists or None, the mpi4py communicator for ringcc.init or None)."""
        if comm is None:
            return None, None
        if isinstance(comm, (list, tuple, range)):
            return sorted(int(r) for r in comm), None
        if self._mpi_communicators:
            return None, comm
        try:
            return sorted(int(r) for r in comm), None
        except TypeError:
            raise ValueError(
                f"{self.api}.init: comm must be None or a list of ranks (ringcc has no MPI communicators)"
            ) from None

    def shutdown(self):
        """Leaves the job (process sets first); `init()` may be called again."""
        _process_sets._on_shutdown()
        ringcc.shutdown()

    def is_initialized(self) -> bool:
        return bool(_core.is_initialized())

    # -- topology ---------------------------------------------------------------

    def rank(self) -> int:
        self.require_init()
        return ringcc.rank()

    def size(self) -> int:
        self.require_init()
        return ringcc.size()

    def local_rank(self) -> int:
        self.require_init()
        return ringcc.local_rank()

    def local_size(self) -> int:
        self.require_init()
        return ringcc.local_size()

    def cross_rank(self) -> int:
        self.require_init()
        return ringcc.cross_rank()

    def cross_size(self) -> int:
        self.require_init()
        return ringcc.cross_size()

    # -- the timeline ------------------------------------------------------------

    def start_timeline(self, file_path, mark_cycles=False):
        """Writes a Chrome-trace timeline of the engine's named collectives to
        `file_path` (rank 0). `mark_cycles` is accepted and ignored."""
        self.require_init()
        ringcc.start_timeline(str(file_path))

    def stop_timeline(self):
        self.require_init()
        ringcc.stop_timeline()


# --------------------------------------------------------------------------
# What the build has: the answers every framework shares. ringcc has no
# Gloo, oneCCL, DDL or ROCm code, and does not promise MPI's multi-threaded
# mode to the program (Horovod raises ValueError when MPI is not enabled;
# ringcc answers False so that scripts branching on it go on).


def mpi_threads_supported() -> bool:
    return False


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def rocm_built() -> bool:
    return False


def cuda_found() -> bool:
    """Whether ringcc found the CUDA driver (libcuda.so.1) at run time
    (ringcc.cuda_info()): collectives then take CUDA tensors."""
    return bool(ringcc.cuda_info()["found"])
