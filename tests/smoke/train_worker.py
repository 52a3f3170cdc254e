"""Train the integration model for N steps in WORLD processes (gloo on CPU, 127.0.0.1 only).

Usage: ``python train_worker.py MODULE_PATH WORLD STEPS OUT_JSON``. MODULE_PATH is the
integration module rewritten by ``hp-invariants fix``. Every process builds the same model
(same seed), checkpoint-wraps each decoder layer, applies FSDP2 ``fully_shard`` (also at world
size 1: that is the fixed E9502 idiom), builds AdamW (the fixed E9501 idiom keeps the norm
weight a leaf) and trains on its equal slice of the same global batch; the loss of a step is the
mean of the rank losses. Rank 0 writes ``{"world_size", "losses", "fsdp_layers", "wrapped"}`` to
OUT_JSON. Threads are limited to one per process so that four processes fit on two cores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import FSDPModule  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smoke_support import free_port, load_module  # noqa: E402


def train(rank: int, world_size: int, port: int, module_path: str, steps: int, out: str) -> None:
    """One rank of the run; see the module docstring."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world_size)
    try:
        module = load_module(Path(module_path))
        mesh = init_device_mesh("cpu", (world_size,))
        model = module.build_model(seed=0)
        module.apply_ac(model)
        module.apply_fully_shard(model, mesh)
        layers = model.language_model.layers
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for step in range(steps):
            input_ids, pixel_values, labels = module.make_batch(step % 4)  # 4 batches, cycled
            input_ids = input_ids.chunk(world_size)[rank]
            pixel_values = pixel_values.chunk(world_size)[rank]
            labels = labels.chunk(world_size)[rank]
            logits = model(input_ids, pixel_values)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            loss.backward()
            module.sync_replicated_grads(model, world_size)
            optimizer.step()
            optimizer.zero_grad()
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            losses.append(mean_loss.item() / world_size)
        if rank == 0:
            result = {
                "world_size": world_size,
                "losses": losses,
                "fsdp_layers": all(isinstance(layer, FSDPModule) for layer in layers),
                "fsdp_root": isinstance(model, FSDPModule),
                "wrapped": all(isinstance(layer, module.CheckpointWrapper) for layer in layers),
            }
            Path(out).write_text(json.dumps(result), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    """Run WORLD ranks of :func:`train` (child processes when WORLD > 1); 0 when all succeed."""
    module_path, world_size, steps, out = argv[0], int(argv[1]), int(argv[2]), argv[3]
    port = free_port()
    if world_size == 1:  # no child process needed: saves a second torch import
        train(0, 1, port, module_path, steps, out)
        return 0
    # fork (Linux) saves each rank a torch import; the parent has run no torch op nor started
    # threads yet. Elsewhere spawn.
    start_method = "fork" if sys.platform.startswith("linux") else "spawn"
    mp.start_processes(train, args=(world_size, port, module_path, steps, out),
                       nprocs=world_size, join=True, start_method=start_method)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
