"""Regression 2 (E9502): ``reset_sharded_param()`` gated on the shard degree.

Shape of ``TorchHSDPStateV2.lazy_init``: ``is_shard`` is False when the shard degree is 1 (world
size 1), so the reset is skipped, the parameters stay on the meta device and the leaf invariant of
regression 1 is never established.
"""


class HSDPState:
    """Per-module fully-sharded state: owns the HSDP parameters of one module."""

    def __init__(self, hsdp_params, shard_size: int):
        self.hsdp_params = list(hsdp_params)
        self.is_shard = shard_size > 1
        self._reset_sharded_params = False

    def lazy_init(self) -> None:
        """Re-wrap every sharded parameter once, after meta materialization."""
        if self.is_shard and not self._reset_sharded_params:
            for hsdp_param in self.hsdp_params:
                hsdp_param.reset_sharded_param()
            self._reset_sharded_params = True
