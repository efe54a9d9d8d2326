"""Tensor parallelism: one model sharded over several ranks with MLX's own distributed backend.

``mlx.launch`` starts one process per rank (NCCL on one multi-GPU host, ring or JACCL across
Macs, ring between local processes on a CPU); each runs the same ``mlxctl`` command with
``--tensor-parallel N``. Every rank loads its slice of the weights (mlx-lm's ``Model.shard``)
and runs the same engine in lockstep; rank 0 alone listens for requests.

- ``group``: the process group, checked against ``--tensor-parallel``
- ``plan``: whether and how a model's layers split over N ranks (checked from its config)
- ``channel``: rank 0's per-step messages to the other ranks, over the group's collectives
- ``lockstep``: the leader and follower engines (see docs/distributed.md)
"""
