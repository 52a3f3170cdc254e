"""A real FSDP2 training: a small transformer, meta-device init, layout-independent init, 2 steps.

torch's ``fully_shard`` shards every block and the root over a one-dimensional mesh of all ranks
(also at world size 1: FSDP2 handles one rank). The model is built on the meta device, sharded,
allocated with ``to_empty`` and initialised by :func:`init_weights`: each parameter's *full*
value comes from a generator seeded by the parameter's name and is scattered to the ranks
(``distribute_tensor``), so every world size starts from the same weights. Each rank trains on
its slice of the global batch; FSDP2 averages the gradients, so the global loss (the mean of the
rank losses) is the same at every world size. ``hp-invariants run --world-sizes 1,2`` passes and
compares the losses.

``--init per-shard`` initialises the local shards instead, from one seed on every rank: the
classic layout-dependent initialisation (each rank's shard gets the first values of the same
stream); ``hp-invariants run`` then says that the initialisation depends on the layout.

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/fsdp2_train.py`` (or torchrun).
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor

import common

VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 64, 32, 4, 2, 16, 8


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head attention and an MLP, both residual."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, HEADS, HIDDEN // HEADS).unbind(2)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, HIDDEN))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyTransformer(nn.Module):
    """Token and position embeddings, transformer blocks, final norm, LM head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Parameter(torch.empty(SEQ, HIDDEN))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _full_value(name: str, shape: torch.Size) -> torch.Tensor:
    """A parameter's full initial value, from a generator seeded by its name (layout-independent)."""
    generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    if name.endswith("bias"):
        return torch.zeros(shape)
    if "norm" in name:
        return torch.ones(shape)
    fan_in = shape[-1] if len(shape) > 1 else shape[0]
    return torch.randn(shape, generator=generator) / math.sqrt(fan_in)


@torch.no_grad()
def init_weights(model: nn.Module, mode: str) -> None:
    """Initialise the sharded parameters: ``full`` (scatter full values) or ``per-shard`` (local)."""
    torch.manual_seed(0)
    for name, param in model.named_parameters():
        if mode == "full":
            full = _full_value(name, param.shape).to(param.device)
            param.copy_(distribute_tensor(full, param.device_mesh, param.placements))
        else:  # per-shard: the same seed on every rank fills each local shard
            local = param.to_local()
            local.copy_(torch.randn(local.shape) / math.sqrt(param.shape[-1]))


def build(run: common.Run) -> TinyTransformer:
    """Meta-init the model, shard it with FSDP2 (blocks, then the root), allocate, initialise."""
    mesh = init_device_mesh(run.device.type, (run.world_size,))
    with torch.device("meta"):
        model = TinyTransformer()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device=run.device)
    init_weights(model, getattr(run.args, "init", "full"))
    return model


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s global batch of token sequences and their next-token labels."""
    generator = torch.Generator().manual_seed(100 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


def local_batch(run: common.Run, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the global batch."""
    return tuple(t.chunk(run.world_size)[run.rank].to(run.device) for t in global_batch(step))


def main() -> None:
    """Build, then train ``--steps`` AdamW steps."""
    run = common.start(__doc__.splitlines()[0], lambda parser: parser.add_argument(
        "--init", choices=("full", "per-shard"), default="full", help="initialisation (default: full)"))
    model = build(run)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(run.steps):
        tokens, labels = local_batch(run, step)
        loss = F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(step, loss)
    common.end()


if __name__ == "__main__":
    main()
