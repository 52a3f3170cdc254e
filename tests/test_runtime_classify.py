"""The runtime harness's error -> rule class mapping (hp_invariants.runtime.classify), without torch.

One test per class with torch's real message (and the seed incident's), and the near misses that
must not be classified; the harness's own check failures carry their rule; the signatures name the
registry's symbols; the static finding is the one `hp-invariants check` reports on the script.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hp_invariants.registry import get_rule
from hp_invariants.runtime import classify

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "runtime"


def error(type_name: str, message: str, mro: tuple[str, ...] = (), module_receiver: str | None = None) -> dict:
    """A rank's recorded exception, as hp_invariants.runtime.rank.describe writes it."""
    return {"type": type_name, "mro": [type_name, *mro, "Exception", "BaseException", "object"],
            "message": message, "module_receiver": module_receiver}


def rule_of(record: dict) -> str | None:
    signature = classify.classify(record)
    return signature.rule_id if signature else None


def test_e9501_the_view_modified_inplace_runtime_error():
    message = ("A view was created in no_grad mode and its base or another view of its base has been modified "
               "inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is "
               "forbidden. You can clarify your code by moving both the view and the inplace either both inside "
               "the no_grad block (if you don't want the inplace to be tracked) or both outside.")
    assert rule_of(error("RuntimeError", message)) == "E9501"
    # the same message in another type is not the signature
    assert rule_of(error("ValueError", message)) is None


@pytest.mark.parametrize("type_name, mro, message", [
    ("RuntimeError", (), "Tensor on device meta is not on the expected device cpu!"),  # a forward on meta
    ("NotImplementedError", ("RuntimeError",), "Cannot copy out of meta tensor; no data!"),  # .to() / .tolist()
    ("RuntimeError", (), "Expected all tensors to be on the same device, but found at least two devices, "
                         "meta and cpu!"),
    ("AssertionError", (), "HSDP params still on meta device"),  # the seed's wording
])
def test_e9502_meta_device_errors(type_name, mro, message):
    assert rule_of(error(type_name, message, mro)) == "E9502"


def test_e9503_attribute_error_on_a_module():
    message = "'Qwen3VLMoeModel' object has no attribute 'get_input_embeddings'"
    assert rule_of(error("AttributeError", message, module_receiver="Qwen3VLMoeModel")) == "E9503"
    # an AttributeError on anything but an nn.Module (a config, None) is not this class
    assert rule_of(error("AttributeError", "'NoneType' object has no attribute 'shape'")) is None
    assert rule_of(error("AttributeError", message, module_receiver=None)) is None


def test_e9504_already_wrapped_refusal():
    message = ("Submodule 'MultiModalRotaryEmbedding' of 'Qwen3VLMoeTextDecoder' is already wrapped. "
               "Wrapping overlapping module regions is not allowed.")
    assert rule_of(error("ValueError", message)) == "E9504"
    assert rule_of(error("ValueError", "the wrapper got an unexpected keyword 'wrapped'")) is None


@pytest.mark.parametrize("record", [
    error("RuntimeError", "the metadata of the checkpoint is missing"),  # 'metadata' is not 'meta'
    error("RuntimeError", "CUDA out of memory. Tried to allocate 2.00 GiB"),
    error("KeyError", "'model.layers.0.weight'"),
    error("ZeroDivisionError", "division by zero"),
    {},
    None,
])
def test_near_misses_have_no_class(record):
    assert classify.classify(record) is None


def test_a_failed_check_of_the_harness_carries_its_rule():
    record = error("InvariantViolation", "hp-invariants E9502 at first forward: ...", ("RuntimeError",))
    record["violation"] = {"rule": "E9502", "check": "first forward", "detail": "..."}
    assert rule_of(record) == "E9502"
    record["violation"]["rule"] = None  # a check without a class (an unused parameter)
    assert rule_of(record) is None


def test_signatures_name_the_registry_rules_and_their_explain_command():
    assert [s.rule_id for s in classify.SIGNATURES] == ["E9501", "E9502", "E9503", "E9504"]
    for signature in classify.SIGNATURES:
        assert get_rule(signature.rule_id).symbol == signature.symbol
        assert signature.explain == f"hp-invariants explain {signature.rule_id}"


def test_static_finding_names_the_line_check_reports(tmp_path: Path):
    for name in ("e9502_broken.py", "e9502_fixed.py", "common.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("")
    broken = str(tmp_path / "e9502_broken.py")
    frames = [{"file": broken, "line": 95, "function": "main"}]
    finding, note = classify.static_finding("E9502", [broken, str(tmp_path / "common.py")], frames, cwd=str(tmp_path))
    assert finding is not None, note
    assert (finding.path, finding.rule_id, finding.symbol) == ("e9502_broken.py", "E9502", "shard-gated-reset")
    assert "self.is_shard" in finding.message
    assert finding.render().startswith(f"e9502_broken.py:{finding.line}:{finding.column}: E9502 shard-gated-reset: ")
    finding, note = classify.static_finding("E9502", [str(tmp_path / "e9502_fixed.py")], cwd=str(tmp_path))
    assert finding is None and "no E9502 finding in the script's 1 file(s)" in note
    assert classify.static_finding("E9502", [str(tmp_path / "missing.py")]) == (None, "no file of the script to check")
