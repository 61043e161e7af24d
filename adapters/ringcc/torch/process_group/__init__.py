"""The parts of backend "ring"'s process group, ProcessGroupRing
(ringcc/torch/backend.py composes them and registers the backend), one
module per concept, lowest first:

- tensors.py: tensors as the core wants them (core units), and the device
  of a call's tensors;
- reduce_ops.py: torch's reductions as the core's, and the reductions the
  core lacks, done locally;
- base.py: the group's state, its identity, and the machinery every
  operation goes through (issue, timeouts, streams, failures on one rank,
  coalescing, works made of works);
- reductions.py: allreduce, reduce and reduce_scatter in their forms;
- data_movement.py: broadcast, allgather, gather, scatter, alltoall,
  barrier;
- point_to_point.py: send, recv and recv_anysource over channels of their
  own.
"""
