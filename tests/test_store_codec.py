"""The store's codec of declared types (issue #25): a facts kind declares its summaries, built parts and
dependency records as plain types, and the store encodes them to JSON and checks them on the way back.

Properties: every value of every declared type survives the round trip with its exact types
(tuples stay tuples, frozensets frozensets, records records); data of any other shape is rejected
with :class:`~hp_invariants.store.Malformed` and nothing else; types without a stored form are
refused when the codec is built.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from typing import Any, NamedTuple, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hp_invariants.api import Plain
from hp_invariants.model import Applicability, Confidence, Edit, Fix
from hp_invariants.store import Codec, Malformed, Raw, codec

TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=12)  # lone surrogates included
FLOATS = st.floats(allow_nan=False)

LEAVES: list[tuple[Any, st.SearchStrategy]] = [
    (str, TEXT), (int, st.integers()), (float, FLOATS), (bool, st.booleans()), (bytes, st.binary(max_size=12)),
    (type(None), st.none()), (Confidence, st.sampled_from(Confidence)),
]
HASHABLE_LEAVES = [(t, s) for t, s in LEAVES if t is not float]  # -0.0 == 0.0 would merge set items


class Colour(enum.Enum):
    """An enum of int values."""

    RED = 1
    GREEN = 2


LEAVES.append((Colour, st.sampled_from(Colour)))

_RECORDS = [0]


def _record(fields: list[tuple[Any, st.SearchStrategy]], as_dataclass: bool) -> tuple[Any, st.SearchStrategy]:
    """A NamedTuple or dataclass record type of ``fields`` (made on the fly) and a strategy of its values."""
    _RECORDS[0] += 1
    names = [(f"f{i}", t) for i, (t, _) in enumerate(fields)]
    if as_dataclass:
        cls = dataclasses.make_dataclass(f"D{_RECORDS[0]}", names, frozen=True)
    else:
        cls = NamedTuple(f"R{_RECORDS[0]}", names)  # type: ignore[misc]
    return cls, st.tuples(*(s for _, s in fields)).map(lambda values: cls(*values))


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    hashable = st.sampled_from(HASHABLE_LEAVES) | st.lists(st.sampled_from(HASHABLE_LEAVES), min_size=1, max_size=3).map(
        lambda items: (tuple.__class_getitem__(tuple(t for t, _ in items)), st.tuples(*(s for _, s in items))))
    return st.one_of(
        children.map(lambda c: (tuple[c[0], ...], st.lists(c[1], max_size=4).map(tuple))),
        children.map(lambda c: (list[c[0]], st.lists(c[1], max_size=4))),
        st.lists(children, min_size=1, max_size=3).map(
            lambda cs: (tuple.__class_getitem__(tuple(t for t, _ in cs)), st.tuples(*(s for _, s in cs)))),
        hashable.map(lambda c: (frozenset[c[0]], st.frozensets(c[1], max_size=4))),
        hashable.map(lambda c: (set[c[0]], st.sets(c[1], max_size=4))),
        children.map(lambda c: (dict[str, c[0]], st.dictionaries(TEXT, c[1], max_size=4))),
        st.tuples(hashable, children).map(lambda kv: (dict[kv[0][0], kv[1][0]],
                                                      st.dictionaries(kv[0][1], kv[1][1], max_size=4))),
        children.filter(lambda c: c[0] is not type(None) and typing.get_origin(c[0]) is not Union).map(
            lambda c: (Optional[c[0]], st.none() | c[1])),
        st.tuples(st.lists(children, min_size=1, max_size=4), st.booleans()).map(lambda fb: _record(*fb)),
    )


TYPES = st.recursive(st.sampled_from(LEAVES), _extend, max_leaves=6)

PLAIN_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | FLOATS | TEXT,
                            lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=12)


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)):
        return a == b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b or (a != a and b != b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_declared_type_round_trips(data):
    declared, values = data.draw(TYPES)
    value = data.draw(values)
    stored = codec(declared)
    text = stored.dumps(value)
    assert text.isascii()
    assert _same(stored.loads(text), value)
    assert stored.dumps(stored.loads(text)) == text  # one text per value (sets sorted)


@settings(max_examples=200, deadline=None)
@given(PLAIN_VALUES)
def test_plain_data_round_trips(value):
    stored = codec(Plain)
    assert _same(stored.loads(stored.dumps(value)), value)
    # lists are taken where tuples are declared (a rule's normal forms are lists), read back as tuples
    assert stored.loads(stored.dumps(list(value) if isinstance(value, tuple) else value)) == value


def _paths(data: Any, path: tuple = ()) -> list[tuple]:
    """Every position in JSON data (dict values, list items), the root included."""
    out = [path]
    if isinstance(data, list):
        for i, item in enumerate(data):
            out.extend(_paths(item, (*path, i)))
    elif isinstance(data, dict):
        for key, item in data.items():
            out.extend(_paths(item, (*path, key)))
    return out


def _replace(data: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = list(data) if isinstance(data, list) else dict(data)
    copy[path[0]] = _replace(data[path[0]], path[1:], new)
    return copy


_OTHER_KIND = {list: "x", dict: [], str: 1, int: "1", float: "1.5", bool: 0, type(None): 0}


def _without_unions(declared: Any) -> bool:
    if typing.get_origin(declared) is Union:
        return False
    if isinstance(declared, type) and (hasattr(declared, "_fields") or dataclasses.is_dataclass(declared)):
        return all(_without_unions(t) for t in typing.get_type_hints(declared).values())
    return all(_without_unions(a) for a in typing.get_args(declared) if a is not Ellipsis)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_data_of_another_shape_is_rejected(data):
    declared, values = data.draw(TYPES.filter(lambda tv: _without_unions(tv[0])))
    stored = codec(declared)
    encoded = stored.encode(data.draw(values))
    path = data.draw(st.sampled_from(_paths(encoded)))
    node = encoded
    for step in path:
        node = node[step]
    with pytest.raises(Malformed):
        stored.decode(_replace(encoded, path, _OTHER_KIND[type(node)]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.recursive(st.none() | st.booleans() | st.integers() | FLOATS | TEXT,
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                               max_leaves=8))
def test_any_json_data_decodes_to_a_value_of_the_type_or_raises_malformed(data, junk):
    declared, _values = data.draw(TYPES)
    stored = codec(declared)
    try:
        value = stored.decode(junk)
    except Malformed:
        return
    assert _same(stored.decode(stored.encode(value)), value)


Nested = Union[str, int, tuple["Nested", ...]]


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.text(max_size=4) | st.integers(), lambda inner: st.lists(inner, max_size=4).map(tuple),
                    max_leaves=12))
def test_recursive_unions_of_scalars_and_tuples_round_trip(value):
    """A recursive union of scalars and tuples of itself (E9502's expression operands) has converters of
    its own; other scalars than the declared ones are refused both ways."""
    stored = codec(Nested, globals())
    assert _same(stored.loads(stored.dumps(value)), value)
    for bad in (None, 1.5, True, ("a", (None,))):
        with pytest.raises(TypeError):
            stored.encode(bad)
        with pytest.raises(Malformed):
            stored.decode(json.loads(json.dumps(bad)))


def test_malformed_text_and_deep_nesting_are_malformed():
    stored = codec(tuple[int, ...])
    for text in ("", "[1,", "{", "[1, 2]x", "nul", '"\\ud800"'):
        with pytest.raises(Malformed):
            stored.loads(text)
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(Malformed):
        codec(Plain).loads(deep)


def test_values_not_of_the_type_are_refused_on_the_way_in():
    with pytest.raises(TypeError):
        codec(tuple[int, ...]).encode((1, "2"))
    with pytest.raises(TypeError):
        codec(frozenset[str]).encode(frozenset({1}))
    with pytest.raises(TypeError):
        codec(Optional[Edit]).encode(Fix((), "safe", "x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codec(bool).encode(1)
    with pytest.raises(TypeError):
        codec(int).encode(True)
    with pytest.raises(TypeError):  # a record of another length
        codec(tuple[int, str]).encode((1, "a", 2))


@pytest.mark.parametrize("declared", [Any, object, list, tuple, dict[str, Any], Union[str, bytes],
                                      Union[tuple[int, ...], list[str]], Union[Confidence, str], complex])
def test_types_without_a_stored_form_are_refused(declared):
    with pytest.raises(TypeError):
        codec(declared)


def test_the_stored_forms_are_plain_json():
    """What the forms look like (so that they stay compact): records and tuples as lists, sets sorted,
    bytes as hex, enums as their values, dicts with other keys as lists of pairs."""
    assert codec(Fix).encode(Fix((Edit((1, 2), (1, 4), "x"),), Applicability.SAFE, "m")) == \
        [[[[1, 2], [1, 4], "x"]], "safe", "m"]
    assert codec(Optional[Fix]).encode(None) is None
    assert codec(frozenset[str]).encode(frozenset({"b", "a"})) == ["a", "b"]
    assert codec(dict[tuple[int, str], list[bytes]]).encode({(1, "a"): [b"\x01"]}) == [[[1, "a"], ["01"]]]
    assert codec(Confidence).encode(Confidence.HIGH) == "HIGH"
    assert codec(Raw).decode({"any": [1, None]}) == {"any": [1, None]}
    assert json.loads(codec(tuple[str, ...]).dumps(("\ud800", "é"))) == ["\ud800", "é"]


def test_a_bytes_text_has_one_form():
    stored = codec(bytes)
    assert stored.decode("00ff") == b"\x00\xff"
    for bad in ("00 ff", "0", "zz", 3):
        with pytest.raises(Malformed):
            stored.decode(bad)


def test_codecs_are_built_once():
    assert codec(tuple[str, ...]) is codec(tuple[str, ...])
    assert isinstance(codec(Plain), Codec)
