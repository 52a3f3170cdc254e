"""What every example training of this folder shares: start-up, device, logging, shutdown.

Each example is an ordinary torchrun script: ``torchrun --nproc-per-node 2 e9503_fixed.py`` and
``hp-invariants run --world-sizes 1,2 -- e9503_fixed.py`` run it unchanged. :func:`start` reads
``--device`` (default ``$HP_INVARIANTS_DEVICE``, else cpu) and ``--steps`` (default 2), creates the
default process group from torchrun's environment with the device's backend (gloo on CPU, nccl on
CUDA, hccl on Ascend NPU through torch_npu) and picks this rank's device.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}


@dataclass
class Run:
    """This rank's place in the run: rank, world size, device, number of steps, all parsed flags."""

    rank: int
    world_size: int
    device: torch.device
    steps: int
    args: argparse.Namespace = field(repr=False, default_factory=argparse.Namespace)

    def log(self, step: int, loss: torch.Tensor) -> None:
        """Print the step's global loss (the mean over the ranks) on rank 0."""
        value = loss.detach().clone()
        dist.all_reduce(value)
        if self.rank == 0:
            print(f"step {step}: loss {value.item() / self.world_size:.6f}", flush=True)


def start(description: str, configure: Callable[[argparse.ArgumentParser], None] | None = None) -> Run:
    """Parse the common flags (and the script's own, added by ``configure``), create the default
    process group, choose the device."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default=os.environ.get("HP_INVARIANTS_DEVICE", "cpu"),
                        choices=sorted(BACKENDS), help="cpu, cuda or npu (default: $HP_INVARIANTS_DEVICE or cpu)")
    parser.add_argument("--steps", type=int, default=2, help="training steps (default 2)")
    if configure is not None:
        configure(parser)
    args = parser.parse_args()
    if args.device == "npu":
        import torch_npu  # noqa: F401 - registers the npu device and the hccl backend
    dist.init_process_group(BACKENDS[args.device])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cpu":
        device = torch.device("cpu")
    else:
        device = torch.device(args.device, local_rank)
        getattr(torch, args.device).set_device(device)
    return Run(dist.get_rank(), dist.get_world_size(), device, args.steps, args)


def end() -> None:
    """Destroy the default process group."""
    dist.destroy_process_group()
