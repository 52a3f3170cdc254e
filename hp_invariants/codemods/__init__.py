"""libcst codemods, one per rule, each a thin command over the shared detection and fixes.

=====================================  =======  =====================================
command                                rule     fix
=====================================  =======  =====================================
``DetachLocalTensorViewCommand``       E9501    append ``.detach()`` at the view
``RemoveShardGateCommand``             E9502    drop the shard-degree gate
``AddEmbeddingAccessorsCommand``       E9503    add the accessor pair
``SkipWrappedSubmoduleCommand``        E9504    ``raise`` -> ``continue``
``FixAllCommand``                      all      every fix
=====================================  =======  =====================================

With ``modules: [hp_invariants.codemods]`` in ``.libcst.codemod.yaml``:
``python -m libcst.tool codemod local_tensor_view_not_detached.DetachLocalTensorViewCommand --no-format PATH``;
without a config file: ``python -m libcst.tool codemod -x hp_invariants.codemods.DetachLocalTensorViewCommand --no-format PATH``.
"""

from hp_invariants.codemods.fix_all import FixAllCommand
from hp_invariants.codemods.local_tensor_view_not_detached import DetachLocalTensorViewCommand
from hp_invariants.codemods.shard_gated_reset import RemoveShardGateCommand
from hp_invariants.codemods.undefined_method_call import AddEmbeddingAccessorsCommand
from hp_invariants.codemods.wrap_overlap_hard_raise import SkipWrappedSubmoduleCommand

__all__ = [
    "AddEmbeddingAccessorsCommand",
    "DetachLocalTensorViewCommand",
    "FixAllCommand",
    "RemoveShardGateCommand",
    "SkipWrappedSubmoduleCommand",
]
