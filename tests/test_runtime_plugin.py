"""The ``world_size`` pytest marker in a fresh project: a project of one test file, run by pytest.

The plugin is found through its ``pytest11`` entry point (nothing in the project loads it). A
data-parallel step passes at world sizes 1 and 2 with its losses compared; fixtures reach the
ranks (forked, and spawned: pickled); a loss averaged twice fails the consistency check; a meta
parameter fails as E9502 at world size 1; a hang ends at the marker's timeout naming the waiting
rank; an unmarked test is untouched. No process of the run is left.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from runtime_support import processes_with_marker

pytest.importorskip("torch")

PROJECT_TEST = '''\
import time

import pytest
import torch
import torch.distributed as dist


@pytest.fixture
def batch():
    return torch.arange(16.0).reshape(8, 2)


def _train(rank, world_size, batch, scale=1.0):
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        loss = model(batch.chunk(world_size)[rank]).square().mean() * scale
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
            param.grad /= world_size
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.world_size(1, 2, expect_steps=2)
def test_data_parallel_step(rank, world_size, batch):
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world_size)
    _train(rank, world_size, batch)


@pytest.mark.world_size(1, 2)
def test_loss_averaged_twice(rank, world_size, batch):
    _train(rank, world_size, batch, scale=1.0 / world_size)


@pytest.mark.world_size(1)
def test_meta_parameters():
    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    torch.optim.SGD(model.parameters(), lr=0.1)


@pytest.mark.world_size(2, timeout=4)
def test_hang(rank):
    if rank == 1:
        dist.all_reduce(torch.ones(1))
    time.sleep(60)


@pytest.mark.world_size(1, start_method="spawn")
def test_spawned_ranks_get_the_fixtures(rank, world_size, batch):
    assert batch.sum().item() == 120.0 and (world_size, rank) == (1, dist.get_rank()) == (1, 0)


def test_unmarked(rank, world_size):
    assert (rank, world_size) == (0, 1)
'''


def test_the_marker_in_a_fresh_project(tmp_path: Path):
    (tmp_path / "test_fresh.py").write_text(PROJECT_TEST)
    marker = f"hp-test-{uuid.uuid4().hex}"
    junit = tmp_path / "junit.xml"
    env = dict(os.environ, HP_TEST_MARKER=marker)
    env.pop("HP_INVARIANTS_DEVICE", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
                           "test_fresh.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert not processes_with_marker(marker), "a rank of the pytest run was left behind"
    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    failures = {name: (case.find("failure").get("message", "") + (case.find("failure").text or ""))
                for name, case in cases.items() if case.find("failure") is not None}
    assert set(cases) - set(failures) == {"test_data_parallel_step", "test_spawned_ranks_get_the_fixtures",
                                          "test_unmarked"}, proc.stdout
    assert "consistency: FAIL  the global loss drifts at step 0: world size 2" in failures["test_loss_averaged_twice"]
    assert "world size 1: FAIL  E9502 shard-gated-reset: rank 0, at optimizer construction: 2 parameter(s) on the " \
           "meta device: weight, bias" in failures["test_meta_parameters"]
    assert "world size 2: FAIL  hang: rank(s) 1 waiting in a collective at the timeout (4 s)" in failures["test_hang"]
    assert "rank 1 was waiting in all_reduce" in failures["test_hang"]
    assert proc.returncode == 1
