"""Tests of the cost model (adapters/ringcc/bench/collective_costs.py, adapters/ringcc/bench/cost_fit.py,
adapters/ringcc/bench/cost_model.py) on synthetic data: the algorithms' step counts and
bytes are those of ringcc's code, the fit recovers the parameters the data
was made with, and the command prints the errors and projections."""

import json
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ringcc.bench import collective_costs as cc  # noqa: E402
from ringcc.bench.cost_fit import Point, fit, nonnegative_least_squares, points_from_json, stretched  # noqa: E402
from ringcc.bench.cost_model import main as cost_model_main  # noqa: E402

# Made-up parameters: TCP 30 us and 1.5 GB/s (4 GB/s on the one-way streams),
# the agreement's frames at 3 GB/s, shared memory 3 us and 6 GB/s (2 GB/s
# read from a peer) a rank, 8 GB/s of a host's memory for all its ranks'
# copies at once (it decides for two ranks' staged copies at 6 GB/s each,
# not for their slower reads of a peer), 3 GB/s of reduction, 4 us a call.
TRUTH = {
    "o": 4e-6,
    "alpha_net": 30e-6,
    "beta_net": 1 / 1.5e9,
    "alpha_loop": 30e-6,
    "beta_loop": 1 / 1.5e9,
    "beta_way": 1 / 4e9,
    "alpha_shm": 3e-6,
    "beta_shm": 1 / 6e9,
    "beta_read": 1 / 2e9,
    "beta_host": 1 / 8e9,
    "beta_frame": 1 / 3e9,
    "gamma": 1 / 3e9,
}
LAYOUTS = (cc.Layout(2, 2), cc.Layout(2, 1), cc.Layout(4, 1), cc.Layout(1, 2))
SIZES = (8, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
UNIT = {"o": 1.0}  # one of each term counts itself


def coefficient(cost, name):
    """The cost's coefficient of one parameter (the slowest alternative of
    each phase when every step costs the same, and the host's memory is no
    limit)."""
    terms = cc.linear_terms(cost, {**{n: 1.0 for n in cc.PARAMS}, "beta_host": 0.0})
    return terms.get(name, 0.0)


def alpha_steps(cost):
    return sum(coefficient(cost, f"alpha_{k}") for k in cc.KINDS)


@pytest.mark.parametrize("n,steps", [(2, 1), (4, 2), (8, 3), (5, 4), (6, 4), (12, 5), (1024, 10), (1000, 11)])
def test_agreement_steps_are_recursive_doubling(n, steps):
    # log2 n steps for a power of two; the ranks above it add one step each way.
    assert alpha_steps(cc.agreement(cc.Layout(n, 1))) == steps


def test_agreement_frames_carry_the_entries_known_and_the_rider():
    cost = cc.agreement(cc.Layout(4, 1), rider_bytes=100)
    frame_bytes = [phase[0]["beta_frame"] for phase in cost]
    # Step 1 sends the rank's own entry, step 2 the two it knows by then.
    assert frame_bytes == [24 + 224 + 100, 24 + 2 * 224 + 100]
    # The rider is reduced at every merge.
    assert coefficient(cost, "gamma") == 200


@pytest.mark.parametrize("layout", [cc.Layout(4, 1), cc.Layout(2, 2, "tcp"), cc.Layout(2, 2)])
def test_agreement_frames_have_a_bandwidth_of_their_own(layout):
    # Short writes between the ranks' sockets, not the rings' long streams.
    cost = cc.agreement(layout, rider_bytes=64)
    assert coefficient(cost, "beta_frame") > 0
    assert all(coefficient(cost, name) == 0 for name in ("beta_net", "beta_loop", "beta_way"))


def test_agreement_shares_the_host_link_across_hosts():
    # 2 hosts of 4, the flat agreement: steps 1 and 2 stay in a host (loop),
    # step 4 crosses with all four ranks of a host sending at once over its link.
    cost = cc.agreement(cc.Layout(2, 4), by_host=False)
    assert [sorted(alt_kind(t) for t in phase) for phase in cost] == [["loop"], ["loop"], ["net"]]
    assert cost[2][0]["beta_frame"] == 4 * (24 + 4 * 224)


def test_agreement_by_host_pools_in_shared_memory_then_crosses_hosts():
    # What the hierarchical backend runs: the 4 ranks of a host pool their
    # frames (one shared-memory allgather, the riders reduced), then one
    # step between the 2 hosts carries the host's 4 entries, each local rank
    # exchanging with its counterpart: 4 flows on each host's link.
    layout = cc.Layout(2, 4)
    assert cc.ringcc_pick("allreduce", layout, 8) == "recursive doubling (riding)"
    cost = cc.agreement(layout, rider_bytes=8)
    assert cc.agreement(layout, rider_bytes=8, by_host=True) == cost
    # The pool: each rank's copies, or the host's memory for all four.
    assert [sorted(alt_kind(t) for t in phase) for phase in cost] == [["shm", "shm"], ["net"]]
    # Each rank's frame into its area, then the four out of the areas.
    assert cost[0][0]["beta_shm"] == 5 * (24 + 224 + 8)
    assert cost[0][1]["beta_host"] == 4 * 5 * (24 + 224 + 8) and cost[0][1]["gamma"] == 3 * 8
    assert cost[0][0]["gamma"] == 3 * 8
    assert cost[1][0]["beta_frame"] == 4 * (24 + 4 * 224 + 8)
    # 8 hosts: log2 8 = 3 network steps against the flat agreement's 5 (of 32 ranks).
    wide = cc.Layout(8, 4)
    assert coefficient(cc.agreement(wide), "alpha_net") == 3
    flat = cc.agreement(wide, by_host=False)
    assert coefficient(flat, "alpha_net") + coefficient(flat, "alpha_loop") == 5
    # One rank per host: the same as the flat agreement.
    assert cc.agreement(cc.Layout(4, 1), by_host=True) == cc.agreement(cc.Layout(4, 1))


def alt_kind(terms):
    return next(name.partition("_")[2] for name in terms if name.startswith("alpha_"))


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_ring_allreduce_is_2_n_minus_1_steps_of_one_segment(n):
    layout = cc.Layout(n, 1)
    cost = cc.ring_allreduce(layout, list(range(n)), 1000.0)
    assert coefficient(cost, "alpha_net") == 2 * (n - 1)
    # Under ONE_WAY_BYTES the ring's bytes take the one-way streams.
    assert coefficient(cost, "beta_way") == pytest.approx(2 * (n - 1) * 1000.0 / n)
    assert coefficient(cost, "beta_net") == 0
    assert coefficient(cost, "gamma") == pytest.approx((n - 1) * 1000.0 / n)


def test_ring_allgather_is_n_minus_1_blocks():
    cost = cc.ring_allgather(cc.Layout(4, 1), 4000.0)
    assert coefficient(cost, "alpha_net") == 3
    assert coefficient(cost, "beta_way") == pytest.approx(3000.0)


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_ring_reduce_scatter_is_n_minus_1_blocks_each_reduced(n):
    cost = cc.ring_reduce_scatter(cc.Layout(n, 1), list(range(n)), 7000.0)
    assert coefficient(cost, "alpha_net") == n - 1
    assert coefficient(cost, "beta_way") == pytest.approx((n - 1) * 7000.0 / n)
    assert coefficient(cost, "gamma") == pytest.approx((n - 1) * 7000.0 / n)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reduce_scatter"])
def test_rings_take_the_one_way_streams_under_their_size(op):
    # RINGCC_TCP_ONE_WAY_BYTES: a ring of fewer bytes in all moves them on the
    # one-way streams (beta_way), a larger one on the shared stream (beta_net),
    # over TCP between ranks of one host (beta_loop) alike.
    for layout, tcp in ((cc.Layout(4, 1), "beta_net"), (cc.Layout(1, 4, "tcp"), "beta_loop")):
        for nbytes, stream in ((cc.ONE_WAY_BYTES - 4, "beta_way"), (cc.ONE_WAY_BYTES, tcp)):
            ring = {
                "allreduce": lambda: cc.ring_allreduce(layout, list(range(4)), nbytes),
                "allgather": lambda: cc.ring_allgather(layout, nbytes),
                "reduce_scatter": lambda: cc.ring_reduce_scatter(layout, list(range(4)), nbytes),
            }[op]()
            other = {"beta_net", "beta_loop", "beta_way"} - {stream}
            assert coefficient(ring, stream) > 0 and all(coefficient(ring, name) == 0 for name in other), (nbytes, ring)
    # The chain broadcast keeps the shared stream at every size.
    assert coefficient(cc.broadcast_chain(cc.Layout(4, 1), 1000.0), "beta_way") == 0


def test_hierarchical_reduce_scatter_crosses_hosts_with_host_sums():
    layout = cc.Layout(3, 4)
    nbytes = 12_000_000.0
    cost = cc.reduce_scatter_hierarchical(layout, nbytes)
    agreement = cc.agreement(layout)
    # The ring among one local rank per host: H-1 steps of one host sum's
    # block ((S/L)/H), the four rings of a host on its link.
    assert coefficient(cost, "alpha_net") - coefficient(agreement, "alpha_net") == 2
    # Each ring's data, 3 MB in all, takes the one-way streams.
    assert coefficient(cost, "beta_net") == coefficient(agreement, "beta_net")
    assert coefficient(cost, "beta_way") == pytest.approx(2 * (nbytes / 4 / 3) * 4)
    # Every host's piece (S/H) reduce-scattered in shared memory, one host after another.
    assert coefficient(cost, "beta_shm") - coefficient(agreement, "beta_shm") == pytest.approx(nbytes)
    assert coefficient(cost, "gamma") == pytest.approx(3 / 4 * nbytes + 2 * nbytes / 12)
    # Against the flat ring over all 12 ranks, a twelfth as many steps cross hosts per byte.
    flat = cc.reduce_scatter_ring(cc.Layout(3, 4, "tcp"), nbytes)
    assert coefficient(flat, "alpha_net") + coefficient(flat, "alpha_loop") > coefficient(cost, "alpha_net")


# Chunks of at most 1 MiB; a shorter message still in 4, none under 16 KiB.
@pytest.mark.parametrize(
    "nbytes,chunks", [(8, 1), (16 << 10, 1), (64 << 10, 4), (1 << 20, 4), (64 << 20, 64), ((4 << 20) + 1, 5)]
)
def test_chain_broadcast_pipelines_chunks(nbytes, chunks):
    n = 4
    cost = cc.chain_broadcast(cc.Layout(n, 1), nbytes)
    # A latency per hop, not per chunk: the chunks follow on the same stream.
    assert coefficient(cost, "alpha_net") == n - 1
    assert coefficient(cost, "beta_net") == pytest.approx((chunks + n - 2) * nbytes / chunks)


def test_hierarchical_broadcast_pipelines_chunks_across_hosts():
    hosts, nbytes = 3, 64 << 20  # 64 chunks
    cost = cc.broadcast_hierarchical(cc.Layout(hosts, 2), nbytes)
    chain, within = cost[-2], cost[-1]  # after the agreement: the chain, then shared memory
    # Longer than the area: the other reads half the host root's buffer
    # directly while the root writes it the other half.
    assert within[0].get("beta_read") == nbytes / 2 and "beta_shm" not in within[0]
    assert chain[0]["alpha_net"] == hosts - 1
    assert chain[0]["beta_net"] == pytest.approx((64 + hosts - 2) * nbytes / 64)


@pytest.mark.parametrize("ranks", [2, 4])
def test_shm_allgather_stages_blocks_then_reads_the_long_ones(ranks):
    layout = cc.Layout(1, ranks)
    # A block up to the area: into this rank's area, then all blocks out.
    staged = cc.allgather_ring(layout, 2 << 20)
    assert coefficient(staged, "beta_shm") == pytest.approx((2 << 20) * (1 + 1 / ranks))
    assert coefficient(staged, "beta_read") == 0
    # A block longer than the area: the peers' blocks read where they lie,
    # this rank's own copied across.
    direct = cc.allgather_ring(layout, 64 << 20)
    assert coefficient(direct, "beta_read") == pytest.approx((64 << 20) * (ranks - 1) / ranks)
    assert coefficient(direct, "beta_shm") == pytest.approx((64 << 20) / ranks)


@pytest.mark.parametrize("ranks", [2, 4])
def test_shm_copies_of_ranks_at_once_share_the_hosts_memory(ranks):
    nbytes = 2 << 20
    [[alone, shared]] = cc.shm_allgather(ranks, nbytes)
    # Every rank copies (1 + 1/n) S at once: n times that through the host.
    assert alone["beta_shm"] == pytest.approx(nbytes * (1 + 1 / ranks)) and "beta_host" not in alone
    assert shared["beta_host"] == pytest.approx(nbytes * (ranks + 1)) and "beta_shm" not in shared
    assert shared["alpha_shm"] == alone["alpha_shm"]
    # Reads of a peer count too.
    [[_, read]] = cc.shm_allgather(ranks, 64 << 20)
    assert read["beta_host"] == pytest.approx((64 << 20) * (ranks - 1) + (64 << 20))
    # An allreduce copies its own segments: each rank at its own speed.
    assert all(len(phase) == 1 for phase in cc.shm_allreduce(ranks, 1 << 20) + cc.shm_reduce_scatter(ranks, 1 << 20))
    # A staged broadcast: the root's copy, then the others' at once.
    [[_, broadcast]] = cc.shm_broadcast(ranks, 1 << 20)
    assert broadcast["beta_host"] == pytest.approx(ranks * (1 << 20))
    # Which one decides: the host's memory when it is slower than the
    # ranks' copies together, each rank's own speed otherwise.
    slow_host = dict(TRUTH, beta_shm=1 / 10e9, beta_host=1 / 10e9)
    fast_host = dict(TRUTH, beta_shm=1 / 10e9, beta_host=1 / 100e9)
    staged = cc.shm_allgather(ranks, nbytes)
    assert cc.time_of(staged, slow_host) == pytest.approx(3e-6 * 2 + nbytes * (ranks + 1) / 10e9)
    assert cc.time_of(staged, fast_host) == pytest.approx(3e-6 * 2 + nbytes * (1 + 1 / ranks) / 10e9)


@pytest.mark.parametrize("ranks", [2, 4])
def test_shm_broadcast_stages_through_the_roots_area_up_to_its_size(ranks):
    layout = cc.Layout(1, ranks)
    # The root's copy in, then the others' copies out, one after the other.
    assert coefficient(cc.broadcast_chain(layout, 1 << 20), "beta_shm") == 2 * (1 << 20)
    # Longer: each side copies all blocks but one at once (the root writes
    # one into each reader, the reader reads the others).
    assert coefficient(cc.broadcast_chain(layout, 64 << 20), "beta_read") == pytest.approx(
        (64 << 20) * (ranks - 1) / ranks
    )


def test_hierarchical_allgather_reads_peers_outputs_sooner_when_crowded():
    nbytes = 2 << 20  # 1 MiB gathered by each local rank: under the area
    roomy, crowded = cc.Layout(2, 2), cc.Layout(2, 2, crowding=2.0)
    assert coefficient(cc.allgather_hierarchical(roomy, nbytes), "beta_read") == 0
    assert coefficient(cc.allgather_hierarchical(roomy, nbytes), "beta_shm") > 1.5 * nbytes
    assert coefficient(cc.allgather_hierarchical(crowded, nbytes), "beta_read") > 0
    # Each rank's own blocks lie in its output already.
    assert coefficient(cc.allgather_hierarchical(crowded, nbytes), "beta_shm") < 0.01 * nbytes


def test_hierarchical_rings_share_the_host_link():
    layout = cc.Layout(3, 4)
    nbytes = 12_000_000.0
    cost = cc.allreduce_hierarchical(layout, nbytes)
    agreement = cc.agreement(layout)
    # The cross-host ring: 2(H-1) steps of (S/L)/H bytes, four rings on each host's link.
    net_alpha = coefficient(cost, "alpha_net") - coefficient(agreement, "alpha_net")
    assert net_alpha == 2 * 2
    assert coefficient(cost, "beta_way") == pytest.approx(2 * 2 * (nbytes / 4 / 3) * 4)
    # Reduce-scatter in; allgather out: each rank's shard into its area, then all shards out.
    assert coefficient(cost, "beta_shm") - coefficient(agreement, "beta_shm") == pytest.approx((2 + 1 / 4) * nbytes)


@pytest.mark.parametrize(
    "op,layout,nbytes,pick",
    [
        ("allreduce", cc.Layout(2, 2), 64 << 10, "recursive doubling (riding)"),
        ("allreduce", cc.Layout(2, 2), (64 << 10) + 4, "hierarchical"),
        ("allreduce", cc.Layout(4, 1), 1 << 20, "ring"),
        ("allreduce", cc.Layout(2, 2, "tcp"), 1 << 20, "ring"),
        ("allgather", cc.Layout(2, 2), 8, "riding"),
        ("allgather", cc.Layout(4, 1), 64 << 10, "riding"),
        ("allgather", cc.Layout(2, 2), (64 << 10) + 16, "hierarchical"),
        ("allgather", cc.Layout(4, 1), 1 << 20, "ring"),
        ("allgather", cc.Layout(1, 4), 8, "ring"),  # one host: shared memory
        ("broadcast", cc.Layout(2, 2), 8, "riding"),
        ("broadcast", cc.Layout(4, 1), 64 << 10, "riding"),
        ("broadcast", cc.Layout(2, 2), 1 << 20, "hierarchical chain"),
        ("broadcast", cc.Layout(4, 1), 1 << 20, "chain"),
        ("broadcast", cc.Layout(1, 4), 8, "chain"),
        ("reduce_scatter", cc.Layout(2, 2), 64 << 10, "riding"),
        ("reduce_scatter", cc.Layout(2, 2), (64 << 10) + 4, "hierarchical"),
        ("reduce_scatter", cc.Layout(4, 1), 1 << 20, "ring"),
        ("reduce_scatter", cc.Layout(2, 2, "tcp"), 1 << 20, "ring"),
        ("reduce_scatter", cc.Layout(1, 4), 1 << 20, "riding"),  # one host: shared memory
    ],
)
def test_ringcc_pick(op, layout, nbytes, pick):
    assert cc.ringcc_pick(op, layout, nbytes) == pick


def test_ring_bound():
    assert cc.ring_bound("allreduce", 4, 1e9, 1e9) == pytest.approx(1.5)
    assert cc.ring_bound("broadcast", 4, 1e9, 1e9) == pytest.approx(1.0)
    assert cc.ring_bound("reduce_scatter", 4, 1e9, 1e9) == pytest.approx(0.75)


def synthetic_points(params):
    return [
        Point(layout, op, n, cc.time_of(cc.cost_of(op, layout, n), params))
        for layout in LAYOUTS
        for op in cc.ALGORITHMS
        for n in SIZES
    ]


def test_fit_recovers_the_parameters_the_data_was_made_with():
    fitted = fit(synthetic_points(TRUTH))
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6), name


def test_fit_recovers_other_parameters_too():
    # Not a fit that returns one answer whatever the data.
    other = dict(TRUTH, alpha_net=80e-6, alpha_loop=80e-6, beta_shm=1 / 2e9, beta_host=1 / 3e9, o=1e-6)
    fitted = fit(synthetic_points(other))
    assert fitted["alpha_net"] == pytest.approx(80e-6, rel=1e-6)
    assert fitted["beta_shm"] == pytest.approx(1 / 2e9, rel=1e-6)
    assert fitted["beta_host"] == pytest.approx(1 / 3e9, rel=1e-6)
    assert fitted["o"] == pytest.approx(1e-6, rel=1e-6)


def test_nonnegative_least_squares_keeps_parameters_nonnegative():
    import numpy as np

    a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    b = np.array([3.0, 2.0, 1.0])  # the unconstrained slope is -1
    x = nonnegative_least_squares(a, b)
    assert np.all(x >= 0)
    assert x[1] == 0 and x[0] == pytest.approx(2.0)


def bench_json(path, layout, params):
    results = [
        {
            "impl": "ringcc",
            "op": op,
            "nbytes": n,
            "time_us": cc.time_of(cc.cost_of(op, layout, n), params) * 1e6,
        }
        for op in cc.ALGORITHMS
        for n in SIZES
    ]
    results.append({"impl": "gloo", "op": "allreduce", "nbytes": 8, "time_us": 1.0})  # not ringcc: not fitted
    meta = {"ranks": layout.ranks, "ranks_per_host": layout.per_host, "hosts": layout.hosts, "transport": "shm+tcp"}
    path.write_text(json.dumps({"meta": meta, "results": results}))
    return str(path)


def test_points_from_bench_json(tmp_path):
    path = bench_json(tmp_path / "2x2.json", cc.Layout(2, 2), TRUTH)
    points = points_from_json(path)
    assert len(points) == len(cc.ALGORITHMS) * len(SIZES)
    assert {p.layout for p in points} == {cc.Layout(2, 2)}


def test_ranks_that_outnumber_the_machines_cpus_stretch_every_latency(tmp_path):
    path = bench_json(tmp_path / "2x2.json", cc.Layout(2, 2), TRUTH)
    doc = json.loads(Path(path).read_text())
    doc["meta"]["machine"] = {"cpus": 2}
    Path(path).write_text(json.dumps(doc))
    # Namespace hosts of one 2-CPU machine: 4 ranks, 2 per CPU.
    assert {p.layout.crowding for p in points_from_json(path, one_machine=True)} == {2.0}
    # Real hosts, or enough CPUs: no stretch.
    assert {p.layout.crowding for p in points_from_json(path)} == {1.0}
    doc["meta"]["machine"] = {"cpus": 8}
    Path(path).write_text(json.dumps(doc))
    assert {p.layout.crowding for p in points_from_json(path, one_machine=True)} == {1.0}

    plain = cc.cost_of("allreduce", cc.Layout(2, 2), 1 << 20)
    stretched = cc.cost_of("allreduce", cc.Layout(2, 2, crowding=2.0), 1 << 20)
    for name in cc.PARAMS:
        factor = 2.0 if name.startswith("alpha_") or name in ("beta_shm", "gamma") else 1.0
        assert coefficient(stretched, name) == pytest.approx(factor * coefficient(plain, name)), name
    assert alpha_steps(plain) > 0


def test_fit_recovers_the_parameters_of_crowded_layouts():
    layouts = (cc.Layout(2, 2, crowding=2.0), cc.Layout(2, 1), cc.Layout(4, 1, crowding=2.0), cc.Layout(1, 2))
    points = [
        Point(layout, op, n, cc.time_of(cc.cost_of(op, layout, n), TRUTH))
        for layout in layouts
        for op in cc.ALGORITHMS
        for n in SIZES
    ]
    fitted = fit(points)
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6), name


def test_fit_finds_how_much_crowding_stretches():
    # Crowded ranks slower than a fair share of the CPUs: s = 2.5.
    truth = dict(TRUTH, crowd_stretch=2.5)
    layouts = (cc.Layout(2, 2, crowding=2.0), cc.Layout(2, 1), cc.Layout(4, 1, crowding=2.0), cc.Layout(1, 2))
    points = [
        Point(layout, op, n, cc.time_of(cc.cost_of(op, stretched(layout, truth), n), truth))
        for layout in layouts
        for op in cc.ALGORITHMS
        for n in SIZES
    ]
    fitted = fit(points)
    assert fitted["crowd_stretch"] == pytest.approx(2.5)
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6), name
    # The stretch applies to crowded layouts only.
    assert stretched(cc.Layout(2, 1), truth) == cc.Layout(2, 1)
    assert stretched(cc.Layout(2, 2, crowding=2.0), truth).crowding == pytest.approx(3.5)


def test_command_prints_errors_and_projections(tmp_path, capsys):
    paths = [bench_json(tmp_path / f"{i}.json", layout, TRUTH) for i, layout in enumerate(LAYOUTS)]
    out_json = tmp_path / "model.json"
    assert cost_model_main([*paths, "--ranks", "8,1024", "--sizes", "8,64M", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    n_points = len(LAYOUTS) * len(cc.ALGORITHMS) * len(SIZES)
    assert f"{n_points}/{n_points} points within 25%" in text
    doc = json.loads(out_json.read_text())
    assert max(abs(e["error"]) for e in doc["errors"]) < 1e-6
    row = next(
        r
        for r in doc["projections"]
        if r["network"] == "25G" and r["op"] == "allreduce" and r["nbytes"] == 64 << 20 and r["ranks"] == 1024
    )
    assert row["pick"] == "hierarchical" and row["hosts"] == 128
    # The bound: 2(n-1)/n * 64 MiB at 25 Gb/s.
    assert row["bound_us"] == pytest.approx(2 * 1023 / 1024 * (64 << 20) / (25e9 / 8) * 1e6)
    assert math.isclose(row["pick_of_bound"], row["bound_us"] / row["times_us"]["hierarchical"])


def test_pipelined_hierarchical_overlaps_the_helper_with_the_ring():
    layout = cc.Layout(4, 2, cpus_per_rank=4)
    nbytes = 8e6
    piece = nbytes / 4  # one piece per host
    reduce_piece = cc.time_of(cc.shm_reduce_scatter(2, piece), TRUTH)
    gather_piece = cc.time_of(cc.shm_allgather(2, piece), TRUTH)
    ring = cc.time_of(cc.ring_allreduce(layout, [0, 2, 4, 6], nbytes / 2, flows_per_host=2), TRUTH)
    opening = cc.time_of(cc.call() + cc.agreement(layout), TRUTH)
    expected = opening + reduce_piece + max(ring, 3 * (reduce_piece + gather_piece)) + gather_piece
    pipelined = cc.time_of(cc.allreduce_hierarchical_pipelined(layout, nbytes), TRUTH)
    assert pipelined == pytest.approx(expected)
    # The same ring steps as the plain hierarchical allreduce; less time.
    cost = cc.allreduce_hierarchical_pipelined(layout, nbytes)
    plain = cc.allreduce_hierarchical(layout, nbytes)
    ring_alternative, *helper_alternatives = cost[-2]
    assert ring_alternative["alpha_net"] == 2 * 3 and len(helper_alternatives) == 2  # 1 x 2 of the pieces' phases
    assert not any("alpha_net" in t for t in helper_alternatives)
    assert pipelined < cc.time_of(plain, TRUTH)
    # With shared memory free, nothing is left to hide: the two are one.
    free_shm = {**TRUTH, "alpha_shm": 0.0, "beta_shm": 0.0, "beta_host": 0.0, "gamma": 0.0}
    assert cc.time_of(cost, free_shm) == pytest.approx(cc.time_of(plain, free_shm))


def test_pipelined_hierarchical_reduce_scatter_hides_all_but_the_first_piece():
    layout = cc.Layout(4, 2, cpus_per_rank=4)
    nbytes = 8e6
    reduce_piece = cc.time_of(cc.shm_reduce_scatter(2, nbytes / 4), TRUTH)
    ring = cc.time_of(cc.ring_reduce_scatter(layout, [0, 2, 4, 6], nbytes / 2, flows_per_host=2), TRUTH)
    opening = cc.time_of(cc.call() + cc.agreement(layout), TRUTH)
    cost = cc.reduce_scatter_hierarchical_pipelined(layout, nbytes)
    assert cc.time_of(cost, TRUTH) == pytest.approx(opening + reduce_piece + max(ring, 3 * reduce_piece))
    # The plain one runs the four pieces, then the ring: the same steps.
    plain = cc.reduce_scatter_hierarchical(layout, nbytes)
    assert cc.time_of(plain, TRUTH) == pytest.approx(opening + 4 * reduce_piece + ring)
    ring_alternative, *helper_alternatives = cost[-1]
    assert ring_alternative["alpha_net"] == 3 and len(helper_alternatives) == 1
    assert not any("alpha_net" in t for t in helper_alternatives)
    assert cc.ringcc_pick("reduce_scatter", layout, 4 << 20) == "pipelined hierarchical"
    assert cc.ringcc_pick("reduce_scatter", cc.Layout(4, 2, cpus_per_rank=1), 64 << 20) == "hierarchical"


@pytest.mark.parametrize(
    "layout,nbytes,pick",
    [
        (cc.Layout(4, 2, cpus_per_rank=2), 4 << 20, "pipelined hierarchical"),
        (cc.Layout(4, 2, cpus_per_rank=2), (4 << 20) - 4, "hierarchical"),
        (cc.Layout(4, 2, cpus_per_rank=1.5), 64 << 20, "hierarchical"),  # no CPU for the helper
        (cc.Layout(4, 2), 64 << 20, "hierarchical"),  # CPUs not known
        (cc.Layout(4, 1, cpus_per_rank=8), 64 << 20, "ring"),
    ],
)
def test_ringcc_pipelines_with_a_cpu_for_the_helper(layout, nbytes, pick):
    assert cc.ringcc_pick("allreduce", layout, nbytes) == pick


def test_one_machine_flows_share_its_cpus():
    # Two namespace hosts exchanging in both directions: two flows' bytes per step.
    apart = cc.ring_allgather(cc.Layout(2, 1), 2000.0)
    together = cc.ring_allgather(cc.Layout(2, 1, one_machine=True), 2000.0)
    assert coefficient(apart, "beta_way") == pytest.approx(1000.0)
    assert coefficient(together, "beta_way") == pytest.approx(2000.0)
    # A chain of one chunk: one hop at a time, nothing shared.
    chain = cc.chain_broadcast(cc.Layout(4, 1, one_machine=True), 1000.0)
    assert coefficient(chain, "beta_net") == pytest.approx(3 * 1000.0)


def test_projection_has_no_network_bound_within_one_host(tmp_path):
    path = bench_json(tmp_path / "2x2.json", cc.Layout(2, 2), TRUTH)
    out_json = tmp_path / "model.json"
    args = [path, "--ranks", "8,16", "--sizes", "64M", "--shm-gbps", "20", "--json", str(out_json)]
    assert cost_model_main(args) == 0
    rows = [r for r in json.loads(out_json.read_text())["projections"] if r["op"] == "allreduce"]
    one_host = [r for r in rows if r["ranks"] == 8]
    assert one_host and all(r["bound_us"] is None and r["pick_of_bound"] is None for r in one_host)
    # --shm-gbps changes what a one-host allreduce costs: 2 bytes of copies per byte.
    fitted = cc.time_of(cc.shm_allreduce(8, 64 << 20), TRUTH)
    # A server's memory is no limit then, unless --host-gbps says so.
    faster = cc.time_of(cc.shm_allreduce(8, 64 << 20), dict(TRUTH, beta_shm=1 / 20e9, beta_host=0.0))
    assert one_host[0]["times_us"]["hierarchical"] < fitted * 1e6
    assert one_host[0]["times_us"]["hierarchical"] == pytest.approx(faster * 1e6, rel=1e-2)
    # An allgather's ranks read one another's blocks at once: with
    # --host-gbps, at the host's memory's speed.
    server = dict(TRUTH, beta_shm=1 / 20e9, beta_read=1 / 20e9, beta_host=0.0)
    free = cc.time_of(cc.shm_allgather(8, 64 << 20), server)
    shared = cc.time_of(cc.shm_allgather(8, 64 << 20), dict(server, beta_host=1 / 5e9))
    assert shared > 1.5 * free
    for host_gbps, want in ((None, free), ("5", shared)):
        assert cost_model_main(args + (["--host-gbps", host_gbps] if host_gbps else [])) == 0
        doc = json.loads(out_json.read_text())["projections"]
        row = next(r for r in doc if r["op"] == "allgather" and r["ranks"] == 8 and r["nbytes"] == 64 << 20)
        assert row["times_us"][row["pick"]] == pytest.approx(want * 1e6, rel=1e-2), host_gbps


def test_riding_candidates_carry_their_payload_in_the_agreement():
    layout = cc.Layout(4, 1)
    # Allgather: each entry carries its block; step 1 one entry, step 2 two.
    cost = cc.allgather_riding(layout, 400.0)
    assert [phase[0]["beta_frame"] for phase in cost[1:]] == [24 + 224 + 100, 24 + 2 * (224 + 100)]
    # Broadcast: the root's data in every frame, and nothing reduced.
    cost = cc.broadcast_riding(layout, 1000.0)
    assert [phase[0]["beta_frame"] for phase in cost[1:]] == [24 + 224 + 1000, 24 + 2 * 224 + 1000]
    assert coefficient(cost, "gamma") == 0


def test_agreement_frames_when_ranks_sit_above_the_power_of_two():
    # 6 ranks: 4 and 5 hand their entry to 0 and 1, which then send 2 and 4
    # entries in the doubling and finally all 6 back.
    cost = cc.agreement(cc.Layout(6, 1))
    entries = [(phase[0]["beta_frame"] - 24) / 224 for phase in cost]
    assert entries == [1, 2, 4, 6]
