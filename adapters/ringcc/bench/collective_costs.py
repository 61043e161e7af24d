"""The algorithms ringcc can pick, as the steps and bytes they cost.

Each algorithm is written as the code in core/algorithms and
core/backends/hierarchical runs it, on a layout of `hosts` hosts with
`per_host` ranks each (ranks placed host by host, as ringrun places them),
and returns a Cost: a sequence of phases that run one after the other, each
phase a list of alternatives that run at the same time (different ranks on
different links), of which the slowest decides. An alternative is a linear
combination of the model's parameters:

    o           seconds per call: the Python call, the dispatch, the bench's loop
    alpha_K     seconds per step over a link of kind K (a message's latency)
    beta_K      seconds per byte over a link of kind K (1 / bandwidth)
    beta_way    seconds per byte of a ring under ONE_WAY_BYTES over TCP (net
                or loop): its data takes the one-way streams, sockets with a
                congestion control of their own (RINGCC_TCP_CONGESTION)
    beta_frame  seconds per byte of the agreement's frames over TCP (net or
                loop): short writes each step, copied within the caches,
                where a ring's long stream pays for memory and the stream's
                congestion control
    beta_read   seconds per byte a rank reads straight out of a peer's memory
                on its host (process_vm_readv: ShmCollectives reads the
                peers' buffers so when a block is longer than its area)
    beta_host   seconds per byte of the host's memory, which the ranks of a
                host copying one another's data at once share: an allgather's
                or a broadcast's shared-memory phase takes the longer of each
                rank's own copies (beta_shm, beta_read) and all the host's
                copies at this rate (host_copies)
    gamma       seconds per byte reduced (an elementwise sum, in memory)

Link kinds: "net" (TCP between hosts), "loop" (TCP between ranks of one
host: the world's links are all TCP, and the agreement and the flat rings
use them between neighbours on one host too) and "shm" (ringcc's
shared-memory collectives inside a host). Ranks of one host that send to
other hosts at the same time share the host's link: their bytes count
`share` times (the host's link carries them all).

The constants below are ringcc's defaults (RINGCC_INLINE_BYTES,
RINGCC_CHUNK_BYTES, RINGCC_SHM_AREA_BYTES, RINGCC_SHM_SMALL_BYTES,
RINGCC_SHM_ALLREDUCE_PIECE_BYTES, RINGCC_TCP_ONE_WAY_BYTES); OpHeader is
216 bytes, each entry adds an 8-byte prefix and each frame a 24-byte one
(collective_agreement.cc).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

INLINE_BYTES = 64 << 10
CHUNK_BYTES = 1 << 20
# A piece shorter than a chunk is still cut in PIPELINE_DEPTH chunks, none
# under MIN_CHUNK_BYTES (pipeline_chunk_elems in ring_algorithms.h).
PIPELINE_DEPTH = 4
MIN_CHUNK_BYTES = 16 << 10


def pipeline_chunks(nbytes: float) -> int:
    """How many chunks the chain broadcast cuts a message of nbytes into."""
    chunk = min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, math.ceil(nbytes / PIPELINE_DEPTH)))
    return max(1, math.ceil(nbytes / chunk))


SHM_AREA_BYTES = 4 << 20
SHM_SMALL_BYTES = 64 << 10
SHM_ALLREDUCE_PIECE_BYTES = 512 << 10
FRAME_PREFIX_BYTES = 24
ENTRY_BYTES = 8 + 216

# A ring's data (allreduce, allgather, reduce-scatter) under this many bytes
# in all takes the one-way streams (transport.h, one_way_for).
ONE_WAY_BYTES = 8 << 20

KINDS = ("net", "loop", "shm")
PARAMS = (
    "o",
    "alpha_net",
    "beta_net",
    "alpha_loop",
    "beta_loop",
    "beta_way",
    "alpha_shm",
    "beta_shm",
    "beta_read",
    "beta_host",
    "beta_frame",
    "gamma",
)
# ringcc reads peers' memory directly where the host allows it
# (RINGCC_SHM_CMA=1, the same user): the model assumes it does. With the
# ranks of a machine outnumbering its CPUs, the hierarchical allgather
# reads the peers' outputs from READ_PEERS_FROM_BYTES of a local rank's
# gathered set on (kReadPeersFromBytes, hierarchical_backend.cc), and
# otherwise from a set longer than the area.
READ_PEERS_FROM_BYTES = 512 << 10

Terms = dict  # parameter name -> coefficient
Cost = list  # [phase], phase = [Terms]: alternatives at the same time


@dataclass(frozen=True)
class Layout:
    hosts: int
    per_host: int
    transport: str = "shm+tcp"  # bench meta's transport: "tcp" forces TCP between ranks of one host too
    # The hosts are network namespaces of one machine: every TCP byte costs
    # the same few CPUs, so all the flows of a step share them, not one link per host.
    one_machine: bool = False
    # The fewest CPUs per rank on any machine (Topology::cpus_per_rank): the
    # pipelined hierarchical allreduce needs 2 (a helper thread per rank).
    cpus_per_rank: float = 0.0
    # Ranks per CPU where the ranks outnumber the machine's CPUs (the
    # namespace hosts of one machine): a waiting rank's peer is running
    # only that share of the time, so every step's latency stretches by it,
    # and so do a rank's shared-memory copies and reductions (crowded()).
    crowding: float = 1.0

    @property
    def ranks(self) -> int:
        return self.hosts * self.per_host

    def host_of(self, rank: int) -> int:
        return rank // self.per_host

    def link(self, a: int, b: int) -> str:
        return "loop" if self.host_of(a) == self.host_of(b) else "net"

    def hierarchical(self) -> bool:
        """ringcc's hierarchical allreduce runs (hierarchical_backend.cc refuses())."""
        return self.hosts > 1 and self.per_host > 1 and self.transport != "tcp"

    def shm_only(self) -> bool:
        return self.hosts == 1 and self.transport != "tcp"

    def crowded(self) -> bool:
        """The ranks of a machine outnumber its CPUs (HierarchicalBackend's crowded_)."""
        return self.crowding > 1.0 or 0.0 < self.cpus_per_rank < 1.0


def step(kind: str, nbytes: float, share: int = 1) -> Terms:
    """One message exchange over a link: its latency and its bytes."""
    return {f"alpha_{kind}": 1.0, f"beta_{kind}": float(nbytes) * share}


def scaled(terms: Terms, k: float) -> Terms:
    return {name: c * k for name, c in terms.items()}


def added(*terms: Terms) -> Terms:
    out: Terms = {}
    for t in terms:
        for name, c in t.items():
            out[name] = out.get(name, 0.0) + c
    return out


def time_of(cost: Cost, params: Mapping[str, float]) -> float:
    """Seconds: the phases in turn, the slowest alternative of each."""
    return sum(max(sum(c * params.get(n, 0.0) for n, c in alt.items()) for alt in phase) for phase in cost)


def on_one_way(cost: Cost, total_bytes: float) -> Cost:
    """A ring's cost with its TCP bytes on the one-way streams (beta_way)
    when its data in all is under ONE_WAY_BYTES."""
    if total_bytes >= ONE_WAY_BYTES:
        return cost
    tcp = ("beta_net", "beta_loop")
    return [[added(*({"beta_way" if n in tcp else n: c} for n, c in alt.items())) for alt in phase] for phase in cost]


def linear_terms(cost: Cost, params: Mapping[str, float]) -> Terms:
    """The cost as one linear combination: each phase's alternative that is
    slowest under `params` (a fit uses its current or reference values)."""
    chosen = [max(phase, key=lambda alt: sum(c * params.get(n, 0.0) for n, c in alt.items())) for phase in cost]
    return added(*chosen)


# -- the agreement (collective_agreement.cc) ---------------------------------


def pairs_phase(layout: Layout, pairs, nbytes: float, reduce_bytes: float = 0.0, frames: bool = False) -> list[Terms]:
    """One step in which every (a, b) pair exchanges nbytes: one alternative
    per link kind used, with the host's link shared by its ranks that cross it.
    frames: the bytes are the agreement's frames (beta_frame)."""
    crossing: dict[int, int] = {}
    kinds = set()
    for a, b in pairs:
        kind = layout.link(a, b)
        kinds.add(kind)
        if kind == "net":
            crossing[layout.host_of(a)] = crossing.get(layout.host_of(a), 0) + 1
    share = max(crossing.values(), default=1)
    extra = {"gamma": reduce_bytes} if reduce_bytes else {}
    shares = {k: len(pairs) if layout.one_machine else share if k == "net" else 1 for k in kinds}
    steps = [added(step(k, nbytes, shares[k]), extra) for k in sorted(kinds)]
    if frames:
        steps = [{"beta_frame" if name.startswith("beta_") else name: c for name, c in t.items()} for t in steps]
    return steps


def agreement(
    layout: Layout,
    rider_bytes: float = 0.0,
    entry_payload: float = 0.0,
    reduces: bool = True,
    by_host: bool | None = None,
) -> Cost:
    """Recursive doubling over the largest power of two p <= n; the ranks
    above p hand their entry to rank - p first and get the whole set back at
    the end. A rider (a small allreduce) travels in every frame and is
    reduced at every merge. entry_payload: bytes each entry carries beside
    its header (an allgather's block riding along); reduces=False: the rider
    is carried, not reduced (a broadcast riding along).

    by_host (the hierarchical backend's, host_agreement.h; None: where ringcc
    runs it): the L ranks of a host first pool their frames in one
    shared-memory phase, then the doubling runs over the hosts, every local
    rank exchanging its host's set with its counterparts, L flows sharing
    each host's link."""
    if by_host is None:
        by_host = layout.hierarchical()
    if layout.ranks < 2:
        return []
    L = layout.per_host if by_host else 1
    n = layout.ranks // L  # the doubling's members: hosts, or ranks
    p = 1 << (n.bit_length() - 1)
    extra = n > p

    def frame(entries: int) -> float:
        return FRAME_PREFIX_BYTES + (ENTRY_BYTES + entry_payload) * entries + rider_bytes

    def counterparts(pairs):
        return [(a * L + local, b * L + local) for a, b in pairs for local in range(L)]

    merged = rider_bytes if reduces else 0.0
    cost: Cost = []
    if L > 1:
        pool = shm_allgather(L, L * frame(1), direct=False)[0]
        cost.append([added(t, {"gamma": merged * (L - 1)}) if merged else t for t in pool])
    if n < 2:
        return cost
    if extra:
        cost.append(pairs_phase(layout, counterparts([(r, r - p) for r in range(p, n)]), frame(L), merged, frames=True))
    known = 2 if extra else 1
    bit = 1
    while bit < p:
        pairs = counterparts([(r, r ^ bit) for r in range(p)])
        cost.append(pairs_phase(layout, pairs, frame(min(n, known) * L), merged, frames=True))
        known *= 2
        bit *= 2
    if extra:
        cost.append(pairs_phase(layout, counterparts([(r - p, r) for r in range(p, n)]), frame(n * L), frames=True))
    return cost


# -- rings and chains over TCP (ring_allreduce.cc, ring_allgather.cc, chain_broadcast.cc) --


def ring_links(layout: Layout, members: list[int]) -> list[tuple[int, int]]:
    return [(members[i], members[(i + 1) % len(members)]) for i in range(len(members))]


def ring_step(layout: Layout, members: list[int], nbytes: float, flows_per_host: int = 1) -> list[Terms]:
    """One step of a ring: every member sends nbytes to its right neighbour.
    `flows_per_host`: rings running side by side that share each host's link."""
    phase = pairs_phase(layout, ring_links(layout, members), nbytes)
    if flows_per_host > 1:
        phase = [added(t, {"beta_net": t.get("beta_net", 0.0) * (flows_per_host - 1)}) for t in phase]
    return phase


def ring_allreduce(layout: Layout, members: list[int], nbytes: float, flows_per_host: int = 1) -> Cost:
    """Reduce-scatter then allgather: 2(n-1) steps, each one segment (nbytes/n)
    to the right neighbour; n-1 of them reduce the segment that arrives."""
    n = len(members)
    if n < 2 or nbytes <= 0:
        return []
    seg = nbytes / n
    phase = ring_step(layout, members, seg, flows_per_host)
    return on_one_way([[scaled(t, 2 * (n - 1)) for t in phase], [{"gamma": (n - 1) * seg}]], nbytes)


def ring_reduce_scatter(layout: Layout, members: list[int], nbytes: float, flows_per_host: int = 1) -> Cost:
    """The reduce-scatter half of the ring: n-1 steps, each one block
    (nbytes/n of the input) to the right neighbour, reduced where it arrives."""
    n = len(members)
    if n < 2 or nbytes <= 0:
        return []
    seg = nbytes / n
    phase = ring_step(layout, members, seg, flows_per_host)
    return on_one_way([[scaled(t, n - 1) for t in phase], [{"gamma": (n - 1) * seg}]], nbytes)


def ring_allgather(layout: Layout, nbytes: float) -> Cost:
    """n-1 steps, each passing one rank's block (nbytes/n of the output) on."""
    n = layout.ranks
    if n < 2:
        return []
    phase = pairs_phase(layout, ring_links(layout, list(range(n))), nbytes / n)
    return on_one_way([[scaled(t, n - 1) for t in phase]], nbytes)


def pipelined_hops(kind: str, hops: int, nbytes: float, share: int = 1) -> Terms:
    """A message cut in pipeline_chunks passing down `hops` links, each rank
    forwarding a chunk while the next arrives: m + hops - 1 chunk times for
    m chunks. Each hop pays its latency once: the chunks after the first
    follow on the same stream, and the rank that forwards them is already
    awake."""
    chunks = pipeline_chunks(nbytes)
    return {f"alpha_{kind}": float(hops), f"beta_{kind}": nbytes / chunks * share * (chunks + hops - 1)}


def chain_broadcast(layout: Layout, nbytes: float) -> Cost:
    """The root's message passes down the ring in chunks (pipelined_hops):
    n - 1 hops."""
    n = layout.ranks
    if n < 2 or nbytes <= 0:
        return []
    kinds = sorted({layout.link(a, b) for a, b in ring_links(layout, list(range(n)))[:-1]})
    # One link per hop; on one machine, the hops that carry a chunk at once
    # (at most `chunks` of them) share its CPUs.
    share = min(pipeline_chunks(nbytes), n - 1) if layout.one_machine else 1
    return [[pipelined_hops(k, n - 1, nbytes, share) for k in kinds]]


# -- shared memory inside a host (shm_collectives.cc) --------------------------


def host_copies(per_rank: Terms, copying: int) -> list[Terms]:
    """A shared-memory phase in which `copying` ranks of a host copy one
    another's data at once, each what `per_rank` says: each rank at its own
    copy speed (beta_shm, beta_read), or all their bytes through the host's
    memory (beta_host), the slower deciding. Two ranks copying at once on a
    small machine take about twice as long as one: a staged allgather of 2
    ranks, 1.5 S a rank, took 1.4-2 times a staged broadcast's 2 S in turn.
    Allgathers and broadcasts move every byte between ranks this way; an
    allreduce's copies are each rank's own segment in and out (its reading
    of the others' areas is its reduction), and charging them the host's
    memory too fitted worse (1x2's allreduces of 256 KiB-2 MiB +32 to +43%)."""
    if copying < 2:
        return [per_rank]
    copied = per_rank.get("beta_shm", 0.0) + per_rank.get("beta_read", 0.0)
    shared = {n: c for n, c in per_rank.items() if n not in ("beta_shm", "beta_read")}
    return [per_rank, {**shared, "beta_host": copied * copying}]


def shm_phases(nbytes: float, piece: int) -> int:
    """A header phase, then one per piece."""
    return 1 + max(1, math.ceil(nbytes / piece))


def shm_allreduce(ranks: int, nbytes: float) -> Cost:
    """Small: one phase, every rank publishes and reduces everything. Bulk:
    two phases per piece, each byte copied in and out once, each rank
    reducing its segment of every piece across the areas."""
    if ranks < 2:
        return []
    if nbytes <= SHM_SMALL_BYTES:
        return [[{"alpha_shm": 2.0, "beta_shm": nbytes, "gamma": (ranks - 1) * nbytes}]]
    phases = 1 + 2 * math.ceil(nbytes / SHM_ALLREDUCE_PIECE_BYTES)
    return [[{"alpha_shm": phases, "beta_shm": 2.0 * nbytes, "gamma": (ranks - 1) / ranks * nbytes}]]


def shm_reduce_scatter(ranks: int, nbytes: float) -> Cost:
    if ranks < 2:
        return []
    phases = shm_phases(nbytes, SHM_AREA_BYTES)
    return [[{"alpha_shm": phases, "beta_shm": nbytes, "gamma": (ranks - 1) / ranks * nbytes}]]


def shm_allgather(ranks: int, nbytes: float, direct: bool | None = None, in_place: bool = False) -> Cost:
    """Allgather inside a host of nbytes in all (ShmCollectives::allgather),
    each rank contributing nbytes/ranks. Staged: each rank copies its block
    into its area, then, once all have, every block out of the areas: two
    copies one after the other, (1 + 1/n) nbytes a rank. Direct (a block
    longer than the area, or as the caller decides): each rank reads the
    peers' blocks straight into its output, (n - 1)/n nbytes, and copies its
    own block there unless it lies there already (in_place), between two
    meetings."""
    if ranks < 2:
        return []
    block = nbytes / ranks
    if direct is None:
        direct = block > SHM_AREA_BYTES
    if direct:
        own = {} if in_place else {"beta_shm": block}
        return [host_copies({"alpha_shm": 2.0, "beta_read": nbytes - block, **own}, ranks)]
    return [host_copies({"alpha_shm": shm_phases(block, SHM_AREA_BYTES), "beta_shm": nbytes + block}, ranks)]


def shm_broadcast(ranks: int, nbytes: float) -> Cost:
    """Broadcast inside a host (ShmCollectives::broadcast). Up to the area:
    the root copies the message into its area, then the others copy it out,
    one after the other (2 nbytes; the others' copies share the host's
    memory). Longer, in place (the bench's broadcast_): the message in
    `ranks` blocks, the root writing one into each other rank while that
    rank reads the rest of the root's buffer, every rank copying
    (ranks - 1)/ranks nbytes at once."""
    if ranks < 2:
        return []
    if nbytes > SHM_AREA_BYTES:
        return [host_copies({"alpha_shm": 2.0, "beta_read": nbytes * (ranks - 1) / ranks}, ranks)]
    staged = {"alpha_shm": shm_phases(nbytes, SHM_AREA_BYTES), "beta_shm": 2.0 * nbytes}
    return [[staged, {"alpha_shm": staged["alpha_shm"], "beta_host": float(ranks) * nbytes}]]


# -- what ringcc runs ------------------------------------------------------------------


def call() -> Cost:
    return [[{"o": 1.0}]]


def allreduce_riding(layout: Layout, nbytes: float) -> Cost:
    """The agreement carries the whole allreduce (recursive doubling)."""
    if layout.shm_only():
        return call() + shm_allreduce(layout.ranks, nbytes)
    return call() + agreement(layout, nbytes)


def allreduce_ring(layout: Layout, nbytes: float) -> Cost:
    """The flat ring over every rank (RINGCC_HIERARCHICAL_ALLREDUCE=0)."""
    if layout.shm_only():
        return call() + shm_allreduce(layout.ranks, nbytes)
    return call() + agreement(layout, by_host=False) + ring_allreduce(layout, list(range(layout.ranks)), nbytes)


def allreduce_hierarchical(layout: Layout, nbytes: float) -> Cost:
    """Agreement, shm reduce-scatter, each rank's shard (nbytes/L) in a ring
    with its peers on the other hosts (L rings sharing each host's link),
    shm allgather."""
    if not layout.hierarchical():
        return allreduce_ring(layout, nbytes)
    L = layout.per_host
    cross = [h * L for h in range(layout.hosts)]
    return (
        call()
        + agreement(layout)
        + shm_reduce_scatter(L, nbytes)
        + ring_allreduce(layout, cross, nbytes / L, flows_per_host=L)
        + shm_allgather(L, nbytes, in_place=True)
    )


def reduce_scatter_riding(layout: Layout, nbytes: float) -> Cost:
    """ringcc's reduce-scatter up to INLINE_BYTES of input over TCP: the
    whole input is reduced along the agreement, each rank keeping its block."""
    if layout.shm_only():
        return call() + shm_reduce_scatter(layout.ranks, nbytes)
    return call() + agreement(layout, nbytes)


def reduce_scatter_ring(layout: Layout, nbytes: float) -> Cost:
    """The flat ring over every rank (ranks not placed host by host)."""
    if layout.shm_only():
        return call() + shm_reduce_scatter(layout.ranks, nbytes)
    return call() + agreement(layout, by_host=False) + ring_reduce_scatter(layout, list(range(layout.ranks)), nbytes)


def reduce_scatter_hierarchical(layout: Layout, nbytes: float) -> Cost:
    """ringcc's reduce-scatter with several ranks per host, placed host by
    host (hierarchical_backend.cc): for each host in turn an shm
    reduce-scatter of the piece holding that host's blocks (nbytes/H), then
    a ring among the ranks of one local rank (one per host) over their H
    host sums (nbytes/L in all), the L rings sharing each host's link."""
    if not layout.hierarchical():
        return reduce_scatter_ring(layout, nbytes)
    L, H = layout.per_host, layout.hosts
    cross = [h * L for h in range(H)]
    within = [scaled(t, H) for t in shm_reduce_scatter(L, nbytes / H)[0]]
    return call() + agreement(layout) + [within] + ring_reduce_scatter(layout, cross, nbytes / L, flows_per_host=L)


def allgather_ring(layout: Layout, nbytes: float) -> Cost:
    if layout.shm_only():
        return call() + shm_allgather(layout.ranks, nbytes)
    return call() + agreement(layout, by_host=False) + ring_allgather(layout, nbytes)


def broadcast_chain(layout: Layout, nbytes: float) -> Cost:
    if layout.shm_only():
        return call() + shm_broadcast(layout.ranks, nbytes)
    return call() + agreement(layout, by_host=False) + chain_broadcast(layout, nbytes)


# -- across hosts, with several ranks per host --------------------------------------


def allgather_hierarchical(layout: Layout, nbytes: float) -> Cost:
    """ringcc's allgather with several ranks per host: L rings among the
    hosts (H-1 steps of one rank's block, sharing each host's link), then an
    shm allgather of the gathered sets."""
    if not layout.hierarchical():
        return allgather_ring(layout, nbytes)
    L, H = layout.per_host, layout.hosts
    cross = [h * L for h in range(H)]
    phase = ring_step(layout, cross, nbytes / layout.ranks, flows_per_host=L)
    ring = on_one_way([[scaled(t, H - 1) for t in phase]], nbytes / L)  # each ring gathers H blocks of S/(HL)
    gathered = nbytes / L
    direct = gathered >= READ_PEERS_FROM_BYTES if layout.crowded() else gathered > SHM_AREA_BYTES
    return call() + agreement(layout) + ring + shm_allgather(L, nbytes, direct, in_place=True)


PIPELINE_BYTES = 4 << 20  # RINGCC_HIERARCHICAL_PIPELINE_BYTES when unset


def allreduce_hierarchical_pipelined(layout: Layout, nbytes: float) -> Cost:
    """ringcc's hierarchical allreduce from PIPELINE_BYTES on, when every
    machine has 2 CPUs per rank (pipelined_allreduce.cc): one piece per host;
    a helper thread reduce-scatters the pieces in shared memory in the order
    the ring consumes them and allgathers each piece the ring finished,
    while the ring (2(H - 1) steps of one rank's block of a piece) runs. The
    ring starts once a piece is reduce-scattered and the last piece's
    allgather follows it; in between, the ring and the helper's other
    pieces overlap, the slower deciding."""
    if not layout.hierarchical():
        return allreduce_ring(layout, nbytes)
    L, H = layout.per_host, layout.hosts
    cross = [h * L for h in range(H)]
    piece = nbytes / H
    # A piece's shared-memory phase: its alternatives (host_copies).
    reduce_piece = shm_reduce_scatter(L, piece)[0]
    gather_piece = shm_allgather(L, piece, in_place=True)[0]
    ring = linear_terms(ring_allreduce(layout, cross, nbytes / L, flows_per_host=L), {})
    helper = [scaled(added(r, g), H - 1) for r in reduce_piece for g in gather_piece]
    return call() + agreement(layout) + [reduce_piece, [ring, *helper], gather_piece]


def reduce_scatter_hierarchical_pipelined(layout: Layout, nbytes: float) -> Cost:
    """ringcc's hierarchical reduce-scatter from PIPELINE_BYTES on, when
    every machine has 2 CPUs per rank (pipelined_reduce_scatter.cc): a
    helper thread reduce-scatters the H host pieces in shared memory in the
    order the ring reads them, while the ring's H - 1 steps run; only the
    first piece is not hidden, then the ring and the helper's other pieces
    overlap, the slower deciding."""
    if not layout.hierarchical():
        return reduce_scatter_ring(layout, nbytes)
    L, H = layout.per_host, layout.hosts
    cross = [h * L for h in range(H)]
    reduce_piece = shm_reduce_scatter(L, nbytes / H)[0]
    ring = linear_terms(ring_reduce_scatter(layout, cross, nbytes / L, flows_per_host=L), {})
    return call() + agreement(layout) + [reduce_piece, [ring, *(scaled(r, H - 1) for r in reduce_piece)]]


def allgather_riding(layout: Layout, nbytes: float) -> Cost:
    """ringcc's allgather up to INLINE_BYTES in all over TCP: each rank's
    block (nbytes/n) travels with its agreement entry, so the agreement that
    every collective runs anyway gathers the data too."""
    if layout.shm_only():
        return allgather_ring(layout, nbytes)
    return call() + agreement(layout, entry_payload=nbytes / layout.ranks)


def broadcast_riding(layout: Layout, nbytes: float) -> Cost:
    """ringcc's broadcast up to INLINE_BYTES over TCP: the root's data rides
    the agreement (counted in every frame: the frames that do not hold it
    yet are no longer than the ones that do)."""
    if layout.shm_only():
        return broadcast_chain(layout, nbytes)
    return call() + agreement(layout, rider_bytes=nbytes, reduces=False)


def broadcast_hierarchical(layout: Layout, nbytes: float) -> Cost:
    """ringcc's broadcast with several ranks per host: the chain among the
    ranks of the root's local rank (one per host), then an shm broadcast."""
    if not layout.hierarchical():
        return broadcast_chain(layout, nbytes)
    L, H = layout.per_host, layout.hosts
    return call() + agreement(layout) + [[pipelined_hops("net", H - 1, nbytes)]] + shm_broadcast(L, nbytes)


def broadcast_tree(layout: Layout, nbytes: float) -> Cost:
    """Not in ringcc: a binomial tree over the ranks, log2 n rounds of the
    whole message (host-major: the first rounds cross hosts)."""
    n = layout.ranks
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    L = layout.per_host
    cost = call() + agreement(layout, by_host=False)
    for r in range(rounds):
        span = n >> (r + 1) or 1
        kind = "net" if span >= L and layout.hosts > 1 else ("shm" if not layout.transport == "tcp" else "loop")
        cost.append([step(kind, nbytes)])
    return cost


# op -> [(algorithm name, cost function, in ringcc)]
ALGORITHMS = {
    "allreduce": [
        ("recursive doubling (riding)", allreduce_riding, True),
        ("ring", allreduce_ring, True),
        ("hierarchical", allreduce_hierarchical, True),
        ("pipelined hierarchical", allreduce_hierarchical_pipelined, True),
    ],
    "allgather": [
        ("ring", allgather_ring, True),
        ("hierarchical", allgather_hierarchical, True),
        ("riding", allgather_riding, True),
    ],
    "reduce_scatter": [
        ("riding", reduce_scatter_riding, True),
        ("ring", reduce_scatter_ring, True),
        ("hierarchical", reduce_scatter_hierarchical, True),
        ("pipelined hierarchical", reduce_scatter_hierarchical_pipelined, True),
    ],
    "broadcast": [
        ("chain", broadcast_chain, True),
        ("binomial tree", broadcast_tree, False),
        ("hierarchical chain", broadcast_hierarchical, True),
        ("riding", broadcast_riding, True),
    ],
}


def ringcc_pick(op: str, layout: Layout, nbytes: float) -> str:
    """The algorithm ringcc runs for this call (its defaults)."""
    pipelined = nbytes >= PIPELINE_BYTES and layout.cpus_per_rank >= 2
    if op in ("allreduce", "reduce_scatter"):  # reduce_scatter: nbytes is each rank's input
        if nbytes <= INLINE_BYTES or layout.shm_only():
            return "recursive doubling (riding)" if op == "allreduce" else "riding"
        if not layout.hierarchical():
            return "ring"
        return "pipelined hierarchical" if pipelined else "hierarchical"
    if nbytes <= INLINE_BYTES and not layout.shm_only():  # allgather: nbytes is the whole output
        return "riding"
    if op == "allgather":
        return "hierarchical" if layout.hierarchical() else "ring"
    return "hierarchical chain" if layout.hierarchical() else "chain"


# What a rank's CPU does, at 1/crowding of its speed where the ranks
# outnumber the CPUs: its latencies (a waiting rank's peer runs only that
# share of the time), its shared-memory copies and its reductions. TCP's
# bytes on one machine already share the CPUs among the step's flows.
CROWDED_TERMS = ("beta_shm", "beta_read", "gamma")


def crowded(cost: Cost, crowding: float) -> Cost:
    """The cost with every step's latency, shared-memory copy and reduction
    stretched by `crowding`."""
    if crowding <= 1.0:
        return cost

    def stretched(name: str) -> bool:
        return name.startswith("alpha_") or name in CROWDED_TERMS

    return [[{n: c * crowding if stretched(n) else c for n, c in alt.items()} for alt in phase] for phase in cost]


def cost_of(op: str, layout: Layout, nbytes: float, algorithm: str | None = None) -> Cost:
    name = algorithm or ringcc_pick(op, layout, nbytes)
    for candidate, fn, _ in ALGORITHMS[op]:
        if candidate == name:
            return crowded(fn(layout, nbytes), layout.crowding)
    raise KeyError(f"{op}: no algorithm {name!r}")


BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def ring_bound(op: str, ranks: int, nbytes: float, link_bytes_per_s: float) -> float:
    """Seconds the busiest link needs at full speed (nccl-tests' bus factor):
    2(n-1)/n * bytes / bandwidth for allreduce."""
    return BUS_FACTOR[op](ranks) * nbytes / link_bytes_per_s
