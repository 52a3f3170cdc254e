"""The FSDP2 training of ``fsdp2_train.py`` with its loss averaged over the ranks twice.

The author divides the loss by the world size before ``backward``, "to average over the ranks",
but FSDP2's reduce-scatter already averages the gradients. Nothing crashes and no rule of
``hp-invariants check`` applies: the loss it reports and its gradients are ``world_size`` times too
small (AdamW, scale-invariant up to its ``eps``, hides most of it in the weights; SGD, clipping by
gradient norm and loss-driven schedules do not), so the run depends on the number of ranks. ``hp-invariants run --world-sizes 1,2`` passes each world
size on its own and FAILs the consistency check: at step 0 the global loss at world size 2 is half
the loss at world size 1.

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/loss_averaged_twice.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import common
from fsdp2_train import build, local_batch


def main() -> None:
    """Build the FSDP2 transformer, then train with the loss divided by the world size."""
    run = common.start(__doc__.splitlines()[0])
    model = build(run)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(run.steps):
        tokens, labels = local_batch(run, step)
        loss = F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten())
        loss = loss / run.world_size  # averaged "over the ranks": FSDP2 averages the gradients already
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(step, loss)
    common.end()


if __name__ == "__main__":
    main()
