"""Everything hp-invariants keeps on disk: the per-file project facts, the built project objects and
the per-file results, in one SQLite database per cache folder.

Nothing outside this module encodes, validates or versions what is stored: a rule's facts kind
(:class:`~hp_invariants.api.ProjectFacts`) declares the types of what it keeps (``summary_type``,
``built_parts``, ``record_type``), and :func:`codec` turns each declared type into an encoder and a
checking decoder.

Where: ``<cache folder>/hp-invariants.sqlite3`` (see :func:`default_cache_dir`; ``hp-invariants
cache dir|clear``), with SQLite's ``-wal``/``-shm`` files beside it; a folder the store creates gets
a ``.gitignore`` holding ``*`` and a ``CACHEDIR.TAG``. The database (WAL journal, a busy timeout,
one transaction per write, so concurrent runs and ``-j`` workers never see half a write) holds:

* ``spaces``: one row per project root and purpose (``results``, or the facts kinds a build
  summarizes joined by ``+``), stamped with the version tag (:func:`cache_tag`): the format, the
  package version, a digest of the package's own files and the Python version. A space of another
  tag reads as empty and is emptied by the next write: changed code never reads old facts;
* ``manifests``: per space, each file's ``stat`` key and content digest (one JSON text, written
  whole) and the time it was taken (git's racily-clean rule, see :mod:`hp_invariants.project`);
* ``summaries``: per space and file, its content digest, module name and the summaries of every
  facts kind (JSON text of their declared types; ``NULL``: the file does not parse);
* ``built`` and ``built_rows``: per space and facts kind, the built project object, stamped with
  the fingerprint of the file set and contents it was built from: a head row (the plain parts, and
  per table part its entry count and a digest of its keys) and one row per table entry, read when
  the object asks for it (:class:`KeyedTable`/:class:`ListTable` views);
* ``results``: per results space and file, the file's results and what they depend on
  (:class:`ResultsCache`).

Every row carries a CRC-32 of its content and of the space it belongs to, checked when it is read:
a damaged row, and a database SQLite itself finds damaged or that is not ours, reads as missing (a
row of facts is computed again, a database is replaced by the next write), never as other facts
and never as an error. Values are JSON text read by :func:`json.loads` and checked against their
declared type: loading the cache cannot run code (no pickle). A cache folder that cannot be
written only costs speed (nothing is raised to the user).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import sys
import threading
import types
import typing
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence, Union

from hp_invariants import api
from hp_invariants.api import KeyedTable, ListTable
from hp_invariants.model import Confidence, FileProblem, FileResult, Finding, Fix

if TYPE_CHECKING:  # pragma: no cover
    import sqlite3

    from hp_invariants.api import ProjectFacts
    from hp_invariants.config import Settings
    from hp_invariants.engine import _TrackingProject
    from hp_invariants.project import Project, Scan

# ====================================================================== the codec of declared types
_DECODE_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError)


class Malformed(ValueError):
    """Stored data that is not a value of the declared type (read as missing)."""


class Codec:
    """The encoder and checking decoder of one declared type (see :func:`codec`).

    :meth:`encode` gives the JSON data of a value and raises ``TypeError`` for a value that is not
    of the type (the caller then does not store it); :meth:`decode` gives the value back from JSON
    data and raises :class:`Malformed` for data of any other shape; :meth:`dumps` / :meth:`loads`
    do the same with JSON text (ASCII: a lone surrogate in a string survives)."""

    __slots__ = ("type", "encode_data", "decode_data")

    def __init__(self, declared: Any, encode: Callable[[Any], Any], decode: Callable[[Any], Any]):
        self.type = declared
        self.encode_data = encode
        self.decode_data = decode

    def encode(self, value: Any) -> Any:
        """The JSON data of ``value``; raises ``TypeError`` when it is not of the declared type."""
        try:
            return self.encode_data(value)
        except RecursionError:
            raise TypeError("nested too deep to store") from None

    def decode(self, data: Any) -> Any:
        """The value of the JSON data ``data``; raises :class:`Malformed` for anything else."""
        try:
            return self.decode_data(data)
        except _DECODE_ERRORS as exc:
            raise Malformed(f"not a {_type_name(self.type)}: {exc}") from None

    def dumps(self, value: Any) -> str:
        """The JSON text of ``value`` (raises ``TypeError`` as :meth:`encode`)."""
        return _dumps(self.encode(value))

    def loads(self, text: str | bytes) -> Any:
        """The value of the JSON text ``text``; raises :class:`Malformed` for anything else."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError, MemoryError) as exc:
            raise Malformed(f"not JSON: {exc}") from None
        return self.decode(data)


def _make_dumps() -> Callable[[Any], str]:
    """Compact ASCII JSON text of JSON data: the C encoder of :mod:`json`, made once (``json.dumps``
    and ``JSONEncoder.encode`` make one per call: most of the cost of a small value's text)."""
    from json import encoder  # noqa: PLC0415

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the C accelerator
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode

    def default(value: Any) -> Any:
        raise TypeError(f"not JSON data: {type(value).__name__}")

    one = make({}, default, encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    plain = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode

    def dumps(data: Any) -> str:
        if type(data) is str:  # the C encoder takes containers only
            return plain(data)
        return "".join(one(data, 0))

    return dumps


_dumps = _make_dumps()
"""Compact ASCII JSON text of JSON data."""

_CODECS: dict[Any, Codec] = {}
_BY_ID: dict[int, tuple[Any, Codec]] = {}


def codec(declared: Any, namespace: dict[str, Any] | None = None) -> Codec:
    """The :class:`Codec` of the type ``declared`` (memoized).

    Types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes`` (hex text), enums (their
    values), ``tuple[T, ...]``, ``tuple[A, B]``, ``list[T]``, ``frozenset[T]`` and ``set[T]``
    (sorted lists), ``dict[str, V]`` (a JSON object) and ``dict[K, V]`` (a list of pairs),
    ``Optional[T]`` and unions whose members have different JSON forms, :data:`~hp_invariants.api.Plain`,
    :class:`Raw` (JSON data passed through), and ``NamedTuple`` and dataclass records (lists of their fields, by their annotations; a
    ``NamedTuple`` record also takes a plain tuple of its fields). Names in string annotations are
    looked up in the record's module, then in :mod:`hp_invariants.api` (and first in ``namespace``, for
    a recursive alias declared elsewhere: ``codec(Tree, vars(module))``). Raises ``TypeError`` for any
    other type (``Any``, ``object``, a union whose members share a JSON form)."""
    found = _BY_ID.get(id(declared))
    if found is not None and found[0] is declared:  # hashing a typing alias is slow: the same object first
        return found[1]
    try:
        built = _CODECS[declared]
    except (KeyError, TypeError):
        built = _Builder().codec(declared, {**_namespace(None), **(namespace or {})})
        try:
            _CODECS[declared] = built
        except TypeError:  # an unhashable annotation: not memoized by value
            pass
    _BY_ID[id(declared)] = (declared, built)  # the annotation is kept: its id stays its own
    return built


def facts_codec(facts: Any, declared: Any) -> Codec:
    """:func:`codec` of a type ``declared`` by the facts kind ``facts``: names of its recursive aliases
    are looked up in the modules of the facts kind's classes (most derived first; those of its analysis,
    :meth:`~hp_invariants.api.ProjectFacts.analysis`, for a declaration). Memoized."""
    facts = facts.analysis() if isinstance(facts, api.ProjectFacts) else facts
    key = (type(facts), id(declared))
    found = _FACTS_CODECS.get(key)
    if found is not None and found[0] is declared:
        return found[1]
    space: dict[str, Any] = {}
    for cls in reversed(type(facts).__mro__):
        module = sys.modules.get(cls.__module__)
        if module is not None:
            space.update(vars(module))
    built = codec(declared, space)
    _FACTS_CODECS[key] = (declared, built)
    return built


_FACTS_CODECS: dict[tuple[type, int], tuple[Any, Codec]] = {}


def _type_name(declared: Any) -> str:
    return getattr(declared, "__name__", None) or repr(declared)


def _namespace(owner: Any) -> dict[str, Any]:
    """Where the names of ``owner``'s string annotations are looked up: its module, then the api."""
    space = dict(vars(api))
    module = sys.modules.get(getattr(owner, "__module__", "") or "")
    if module is not None:
        space.update(vars(module))
    return space


_STR = frozenset({str})
_NONE = type(None)
_UNION_TYPES = (Union, types.UnionType)


class _Slot:
    """A codec under construction (a recursive type refers to itself through its slot)."""

    __slots__ = ("encode", "decode", "forms", "accepts")

    def __init__(self) -> None:
        self.encode: Callable[[Any], Any] | None = None
        self.decode: Callable[[Any], Any] | None = None
        self.forms: frozenset[type] = frozenset({list})
        self.accepts: frozenset[type] = frozenset({tuple, list})

    def set(self, encode: Callable[[Any], Any] | None, decode: Callable[[Any], Any] | None,
            forms: frozenset[type] | None = None, accepts: frozenset[type] | None = None) -> None:
        """Fill the slot: converters (``None``: not yet), JSON types of the data, Python types of a value."""
        self.encode, self.decode = encode, decode
        if forms is not None:
            self.forms = forms
        if accepts is not None:
            self.accepts = accepts


class _Builder:
    """Builds the converters of one declared type, once (see :func:`codec`)."""

    def __init__(self) -> None:
        self.slots: dict[Any, _Slot] = {}

    def codec(self, declared: Any, space: dict[str, Any]) -> Codec:
        slot = self.slot(declared, space)
        return Codec(declared, slot.encode, slot.decode)  # type: ignore[arg-type]

    def slot(self, declared: Any, space: dict[str, Any]) -> _Slot:
        """The converters of ``declared``: ``encode``, ``decode``, the Python types a value may have
        (``accepts``) and the JSON types of its data (``forms``)."""
        if isinstance(declared, str):
            declared = typing.ForwardRef(declared)
        if isinstance(declared, typing.ForwardRef):
            try:
                declared = eval(declared.__forward_arg__, space)  # noqa: S307 - a type annotation of our own code
            except Exception as exc:  # noqa: BLE001
                raise TypeError(f"cannot resolve the annotation {declared.__forward_arg__!r}: {exc}") from None
        key = declared
        try:
            found = self.slots.get(key)
        except TypeError:
            key, found = id(declared), self.slots.get(id(declared))
        if found is not None:
            if found.encode is None:  # recursion: converters that look the finished ones up
                return _deferred(found)
            return found
        slot = self.slots[key] = _Slot()
        scalars = _nested_scalars(declared, space)
        if scalars is not None:  # a recursive union of scalars and tuples of itself: its own fast converters
            slot.set(*_nested_converters(scalars), frozenset({*scalars, list}), frozenset({*scalars, tuple, list}))
            return slot
        try:
            self.fill(slot, declared, space)
        except BaseException:
            del self.slots[key]
            raise
        return slot

    def fill(self, slot: _Slot, declared: Any, space: dict[str, Any]) -> None:  # noqa: C901 - one case per type
        origin, args = typing.get_origin(declared), typing.get_args(declared)
        if declared is None or declared is _NONE:
            slot.set(_none, _none, frozenset({_NONE}), frozenset({_NONE}))
        elif declared in (str, int, float, bool):
            slot.set(_scalar(declared), _interned if declared is str else _scalar(declared),
                     frozenset({declared}), frozenset({declared}))
        elif declared is Raw:
            kinds = frozenset({_NONE, str, int, float, bool, list, dict})
            slot.set(_same, _same, kinds, kinds)
        elif declared is bytes:
            slot.set(_bytes_encode, _bytes_decode, frozenset({str}), frozenset({bytes}))
        elif isinstance(declared, type) and issubclass(declared, enum.Enum):
            self.fill_enum(slot, declared)
        elif origin in _UNION_TYPES:
            self.fill_union(slot, declared, args, space)
        elif origin in (tuple, list, frozenset, set) or declared in (tuple, list, frozenset, set):
            self.fill_sequence(slot, declared, origin or declared, args, space)
        elif origin is dict:
            self.fill_dict(slot, declared, args, space)
        elif isinstance(declared, type) and issubclass(declared, tuple) and hasattr(declared, "_fields"):
            self.fill_record(slot, declared, declared._fields, space, named_tuple=True)
        elif isinstance(declared, type) and dataclasses.is_dataclass(declared):
            fields = tuple(f.name for f in dataclasses.fields(declared) if f.init)
            self.fill_record(slot, declared, fields, space, named_tuple=False)
        else:
            raise TypeError(f"no stored form for the type {_type_name(declared)}")

    def fill_enum(self, slot: _Slot, declared: type[enum.Enum]) -> None:
        kinds = {type(member.value) for member in declared}
        if not kinds or not kinds <= {str, int}:
            raise TypeError(f"no stored form for the enum {declared.__name__}: str or int values expected")

        def encode(value: Any) -> Any:
            if not isinstance(value, declared):
                raise TypeError(f"{declared.__name__} expected, got {type(value).__name__}")
            return value.value

        def decode(data: Any) -> Any:
            if type(data) not in kinds:
                raise TypeError(f"{declared.__name__} value expected")
            return declared(data)

        slot.set(encode, decode, frozenset(kinds), frozenset({declared, *declared.__subclasses__()}))

    def fill_union(self, slot: _Slot, declared: Any, args: tuple, space: dict[str, Any]) -> None:
        members = [self.slot(arg, space) for arg in args]
        encoders: dict[type, Callable[[Any], Any]] = {}
        decoders: dict[type, Callable[[Any], Any]] = {}
        for member in members:
            for form in member.forms:
                if form in decoders:
                    raise TypeError(f"the members of {declared!r} share a JSON form ({form.__name__})")
                decoders[form] = member.decode  # type: ignore[assignment]
            for kind in member.accepts:
                encoders.setdefault(kind, member.encode)
        get_encoder, get_decoder = encoders.get, decoders.get

        def encode(value: Any) -> Any:
            found = get_encoder(type(value))
            if found is None:
                raise TypeError(f"{_type_name(declared)} expected, got {type(value).__name__}")
            return found(value)

        def decode(data: Any) -> Any:
            found = get_decoder(type(data))
            if found is None:
                raise TypeError(f"{_type_name(declared)} expected, got JSON {type(data).__name__}")
            return found(data)

        slot.set(encode, decode, frozenset(decoders), frozenset(encoders))

    def fill_sequence(self, slot: _Slot, declared: Any, origin: type, args: tuple, space: dict[str, Any]) -> None:
        if not args:
            raise TypeError(f"no stored form for {_type_name(declared)} without an item type")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            self.fill_fixed(slot, declared, args, space)
            return
        item = self.slot(args[0], space)
        make: Callable[[Any], Any] = frozenset if origin is frozenset else origin
        is_set = origin in (frozenset, set)
        accepts = (frozenset, set) if is_set else (tuple, list)
        plain_str = args[0] is str
        item_encode, item_decode = item.encode, item.decode

        def encode(value: Any) -> list:
            if type(value) not in accepts:
                raise TypeError(f"{_type_name(declared)} expected, got {type(value).__name__}")
            if plain_str:
                if value and not set(map(type, value)) <= _STR:  # checked at C speed
                    raise TypeError("str items expected")
                return sorted(value) if is_set else list(value)
            out = [item_encode(v) for v in value]  # type: ignore[misc]
            if is_set:
                out.sort(key=_sort_key)
            return out

        def decode(data: Any) -> Any:
            if type(data) is not list:
                raise TypeError(f"{_type_name(declared)}: a list expected")
            if plain_str:
                if data and not set(map(type, data)) <= _STR:  # checked at C speed
                    raise TypeError("str items expected")
                return data if make is list else make(data)
            return make(map(item_decode, data))  # type: ignore[arg-type]

        slot.set(encode, decode, frozenset({list}), frozenset(accepts))

    def fill_fixed(self, slot: _Slot, declared: Any, args: tuple, space: dict[str, Any]) -> None:
        items = [self.slot(arg, space) for arg in args]
        fields = tuple(f"item{i}" for i in range(len(args)))  # a record whose fields have no names
        encode, decode = _record_converters(tuple, fields, list(args), items, named_tuple=True)
        slot.set(encode, decode, frozenset({list}), frozenset({tuple, list}))

    def fill_dict(self, slot: _Slot, declared: Any, args: tuple, space: dict[str, Any]) -> None:
        if len(args) != 2:
            raise TypeError(f"no stored form for {_type_name(declared)} without key and value types")
        value = self.slot(args[1], space)
        str_values = args[1] is str
        if args[0] is str:
            def encode(data: Any) -> dict:
                if type(data) is not dict:
                    raise TypeError(f"{_type_name(declared)} expected, got {type(data).__name__}")
                if data and not set(map(type, data)) <= _STR:
                    raise TypeError("str keys expected")
                if str_values:
                    if data and not set(map(type, data.values())) <= _STR:
                        raise TypeError("str values expected")
                    return data
                enc = value.encode
                return {k: enc(v) for k, v in data.items()}  # type: ignore[misc]

            def decode(data: Any) -> dict:
                if type(data) is not dict:
                    raise TypeError(f"{_type_name(declared)}: a JSON object expected")
                if str_values:  # JSON object keys are always str
                    if data and not set(map(type, data.values())) <= _STR:
                        raise TypeError("str values expected")
                    return data
                dec = value.decode
                return {k: dec(v) for k, v in data.items()}  # type: ignore[misc]

            slot.set(encode, decode, frozenset({dict}), frozenset({dict}))
            return
        key = self.slot(args[0], space)

        def encode_pairs(data: Any) -> list:
            if type(data) is not dict:
                raise TypeError(f"{_type_name(declared)} expected, got {type(data).__name__}")
            enc_key, enc_value = key.encode, value.encode
            return [[enc_key(k), enc_value(v)] for k, v in data.items()]  # type: ignore[misc]

        def decode_pairs(data: Any) -> dict:
            if type(data) is not list:
                raise TypeError(f"{_type_name(declared)}: a list of pairs expected")
            dec_key, dec_value = key.decode, value.decode
            out = {}
            for pair in data:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("a [key, value] pair expected")
                out[dec_key(pair[0])] = dec_value(pair[1])  # type: ignore[misc]
            return out

        slot.set(encode_pairs, decode_pairs, frozenset({list}), frozenset({dict}))

    def fill_record(self, slot: _Slot, declared: type, fields: tuple[str, ...], space: dict[str, Any],
                    named_tuple: bool) -> None:
        try:
            hints = typing.get_type_hints(declared, globalns=_namespace(declared))
        except Exception as exc:  # noqa: BLE001 - a name the annotations use is not defined
            raise TypeError(f"cannot read the annotations of {declared.__name__}: {exc}") from None
        space = _namespace(declared)
        slot.set(None, None, frozenset({list}), frozenset({declared, tuple, list} if named_tuple else {declared}))
        converters = [self.slot(hints[name], space) for name in fields]
        encode, decode = _record_converters(declared, fields, [hints[name] for name in fields], converters,
                                            named_tuple)
        slot.set(encode, decode)


def _record_converters(declared: type, fields: tuple[str, ...], kinds: list[Any], converters: list[_Slot],
                       named_tuple: bool) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """The encoder and decoder of a record, generated once as Python source (as :func:`collections.namedtuple`
    and :mod:`dataclasses` generate theirs) with the checks of ``str``, ``int``, ``float``, ``bool``,
    ``None`` and string-collection fields inline and the other fields' converters called: a summary
    holds thousands of small records, and a call per field made decoding them 4x slower than E9502's
    hand-written decoder was."""
    count = len(fields)
    env: dict[str, Any] = {"_cls": declared, "_new": tuple.__new__, "_intern": sys.intern, "_STR": _STR,
                           "_set": set, "_list": list, "_tuple": tuple, "_frozenset": frozenset, "_sorted": sorted,
                           "_type": type, "_len": len, "_isinstance": isinstance, "_TypeError": TypeError,
                           "_ValueError": ValueError, "_name": declared.__name__}
    enc: list[str] = []
    dec: list[str] = []
    for i, (kind, converter) in enumerate(zip(kinds, converters)):
        env[f"_e{i}"], env[f"_d{i}"], env[f"_k{i}"] = converter.encode, converter.decode, kind
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        strings = args[:1] == (str,) and (origin in (frozenset, set) or (origin is tuple and args == (str, Ellipsis)))
        if kind is str:
            enc.append(f"  if _type(x{i}) is not str: raise _TypeError(_name + '.{fields[i]}: str expected')")
            dec.append(f"  x{i} = _intern(x{i})")
        elif kind in (bool, int, float):
            check = f"  if _type(x{i}) is not _k{i}: raise _TypeError(_name + '.{fields[i]}: {kind.__name__} expected')"
            enc.append(check)
            dec.append(check)
        elif kind is None or kind is _NONE:
            check = f"  if x{i} is not None: raise _TypeError(_name + '.{fields[i]}: None expected')"
            enc.append(check)
            dec.append(check)
        elif strings:
            make = "_frozenset" if origin is frozenset else "_set" if origin is set else "_tuple"
            accepts = "(frozenset, set)" if origin in (frozenset, set) else "(tuple, list)"
            enc.append(f"  if _type(x{i}) not in {accepts} or (x{i} and not _set(map(_type, x{i})) <= _STR): "
                       f"raise _TypeError(_name + '.{fields[i]}: str items expected')")
            enc.append(f"  x{i} = {'_sorted' if origin in (frozenset, set) else '_list'}(x{i})")
            dec.append(f"  if _type(x{i}) is not _list or (x{i} and not _set(map(_type, x{i})) <= _STR): "
                       f"raise _TypeError(_name + '.{fields[i]}: str items expected')")
            dec.append(f"  x{i} = {make}(x{i})")
        else:
            enc.append(f"  x{i} = _e{i}(x{i})")
            dec.append(f"  x{i} = _d{i}(x{i})")
    names = ", ".join(f"x{i}" for i in range(count)) + ("," if count == 1 else "")
    if named_tuple:
        take = (f"  if not _isinstance(value, (tuple, list)) or _len(value) != {count}: "
                f"raise _TypeError(_name + ': {count} fields expected')\n  {names} = value")
        build = f"_new(_cls, ({names}))"
    else:
        take = (f"  if not _isinstance(value, _cls): raise _TypeError(_name + ' expected')\n"
                + "".join(f"  x{i} = value.{field}\n" for i, field in enumerate(fields)))
        build = f"_cls({names})"
    source = (f"def encode(value):\n{take}\n" + "".join(line + "\n" for line in enc) + f"  return [{names}]\n"
              f"def decode(data):\n  if _type(data) is not _list or _len(data) != {count}: "
              f"raise _ValueError(_name + ': {count} fields expected')\n  {names} = data\n"
              + "".join(line + "\n" for line in dec) + f"  return {build}\n")
    exec(compile(source, f"<stored form of {declared.__qualname__}>", "exec"), env)  # noqa: S102 - our own source
    return env["encode"], env["decode"]


def _deferred(slot: _Slot) -> _Slot:
    """Converters of a slot still being filled (a recursive type), resolved when first called."""
    out = _Slot()
    out.set(lambda value: slot.encode(value), lambda data: slot.decode(data))  # type: ignore[misc]
    return out


_SCALARS = frozenset({str, int, float, bool, _NONE})


def _nested_converters(scalars: frozenset[type]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """The encoder and decoder of a recursive union of ``scalars`` and tuples of itself (such as
    :data:`~hp_invariants.api.Plain`): one recursive function each (the generic union calls a
    function per level and per member: 4x slower on E9502's expressions); strings are interned."""
    def encode(value: Any) -> Any:
        kind = type(value)
        if kind is tuple or kind is list:
            return list(map(encode, value))
        if kind in scalars:
            return value
        raise TypeError(f"one of {sorted(t.__name__ for t in scalars)} or a tuple of them expected, got {kind.__name__}")

    def decode(data: Any) -> Any:
        kind = type(data)
        if kind is list:
            return tuple(map(decode, data))
        if kind is str and str in scalars:
            return sys.intern(data)
        if kind in scalars:
            return data
        raise TypeError(f"one of {sorted(t.__name__ for t in scalars)} or a list of them expected, got JSON {kind.__name__}")

    return encode, decode


def _nested_scalars(declared: Any, space: dict[str, Any], depth: int = 0) -> frozenset[type] | None:
    """The scalar types of ``declared`` when it is a recursive union of scalar types and of tuples of
    itself (``X = Union[str, int, Tuple["X", ...]]``, also as ``typing.get_type_hints`` rebuilds it,
    its inner name evaluated once), else ``None``."""
    if isinstance(declared, typing.ForwardRef):
        if depth == 0:
            return None
        try:
            declared = eval(declared.__forward_arg__, space)  # noqa: S307 - a type annotation of our own code
        except Exception:  # noqa: BLE001
            return None
    if depth > 4 or typing.get_origin(declared) not in _UNION_TYPES:
        return None
    args = typing.get_args(declared)
    scalars = frozenset(a for a in args if a in _SCALARS)
    rest = [a for a in args if a not in _SCALARS]
    if not scalars or len(rest) != 1 or typing.get_origin(rest[0]) is not tuple:
        return None
    inner = typing.get_args(rest[0])
    if len(inner) != 2 or inner[1] is not Ellipsis:
        return None
    if depth == 4 or isinstance(inner[0], typing.ForwardRef) and depth > 0:
        return scalars  # deep enough: the same shape at every level seen
    found = _nested_scalars(inner[0], space, depth + 1)
    return scalars if found == scalars else None


class Raw:
    """A declared type for JSON data kept as it is (the store decodes it later with the codec of its
    own type: a facts kind's dependency record inside a file's results)."""


def _same(value: Any) -> Any:
    return value


def _none(value: Any) -> None:
    if value is not None:
        raise TypeError("None expected")
    return None


def _scalar(kind: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"{kind.__name__} expected, got {type(value).__name__}")
        return value
    return convert


def _interned(data: Any) -> str:
    return sys.intern(data)  # raises TypeError for anything but a str


def _bytes_encode(value: Any) -> str:
    if type(value) is not bytes:
        raise TypeError(f"bytes expected, got {type(value).__name__}")
    return value.hex()


def _bytes_decode(data: Any) -> bytes:
    if type(data) is not str:
        raise TypeError("hex text expected")
    value = bytes.fromhex(data)
    if 2 * len(value) != len(data):  # no spaces: one form per value
        raise ValueError("hex text expected")
    return value


def _sort_key(data: Any) -> str:
    """The order of a set's encoded items (any JSON data): by their JSON text."""
    return _dumps(data)


# ====================================================================== where, and which version
FORMAT = 3
"""The layout of the database (``PRAGMA user_version``); 1 and 2 were the JSON files of earlier versions."""

DB_NAME = "hp-invariants.sqlite3"
"""The database file in the cache folder (SQLite adds ``-wal`` and ``-shm`` files beside it)."""

_APPLICATION_ID = 0x68706976
"""``PRAGMA application_id`` of our databases ("hpiv"): a database without it is not read."""

BUSY_TIMEOUT_S = 5.0
"""How long a write waits for another process's write to end before it gives up (costing speed only)."""

WAL_SIZE_LIMIT = 4 * 2**20
"""Bytes the ``-wal`` file keeps after a checkpoint (SQLite's ``journal_size_limit``)."""

_OLD_FILES = ("project-", "results-", "class-index-")
"""Name prefixes of the JSON and pickle cache files of earlier versions (removed by ``cache clear``)."""


def default_cache_dir() -> str:
    """``$HP_INVARIANTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hp-invariants``, else ``~/.cache/hp-invariants``."""
    env = os.environ.get("HP_INVARIANTS_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hp-invariants")


def cache_tag() -> str:
    """The version tag of everything stored: the format, the package version, a digest of the
    installed package's own files (names, sizes, mtimes: a changed rule or summarizer never reads
    what the old code stored, although nobody bumped a version) and the Python version."""
    from hp_invariants import __version__ as version  # noqa: PLC0415

    return f"hp-invariants-cache/{FORMAT}/{version}/{code_digest()}/py{sys.version_info[0]}.{sys.version_info[1]}"


_CODE_DIGEST: list[str] = []


def code_digest() -> str:
    """A digest of the ``stat`` of every file of the ``hp_invariants`` package (computed once)."""
    if not _CODE_DIGEST:
        package = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.blake2b(digest_size=8)
        for folder, dirs, names in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith((".py", ".json")):
                    try:
                        st = os.stat(os.path.join(folder, name))
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(os.path.join(folder, name), package)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                             .encode("utf-8", "surrogateescape"))
        _CODE_DIGEST.append(h.hexdigest())
    return _CODE_DIGEST[0]


def prepare_cache_dir(folder: str) -> None:
    """Create the cache ``folder`` if needed; a folder created here gets a ``.gitignore`` holding
    ``*`` and a ``CACHEDIR.TAG``, so that it never shows in ``git status`` and backup tools skip it.
    Raises ``OSError`` when it cannot be created."""
    if os.path.isdir(folder):
        return
    os.makedirs(folder, exist_ok=True)
    for name, text in ((".gitignore", "# Created by hp-invariants automatically.\n*\n"),
                       ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                        "# This file is a cache directory tag created by hp-invariants.\n")):
        _write_atomically(os.path.join(folder, name), text.encode())


def _write_atomically(path: str, body: bytes) -> None:
    import tempfile  # noqa: PLC0415 - only when a folder is created

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def clear_cache_dir(folder: str) -> list[str]:
    """Remove the cache of ``folder``: the database and SQLite's files beside it, the cache files of
    earlier versions (``project-*``/``results-*`` JSON, pickles), leftover temporary files, and the
    folder's own ``.gitignore``/``CACHEDIR.TAG`` when the store wrote them; then the folder when it
    is left empty. Nothing else is touched. Returns the removed paths; a missing folder removes nothing."""
    close_all()
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    ours = {".gitignore": b"# Created by hp-invariants", "CACHEDIR.TAG": b"Signature: 8a477f597d28d172789f06886806bc55"}
    database = {DB_NAME + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    for name in names:
        path = os.path.join(folder, name)
        mine = name in database or name.startswith(".tmp-") or (
            name.startswith(_OLD_FILES) and name.endswith((".json", ".pickle")))
        if name in ours:
            try:
                with open(path, "rb") as handle:
                    mine = handle.read(len(ours[name])) == ours[name]
            except OSError:
                mine = False
        if mine:
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    try:
        os.rmdir(folder)
    except OSError:
        pass
    return removed


# ====================================================================== the database
_SCHEMA = """
CREATE TABLE spaces (id INTEGER PRIMARY KEY, root BLOB NOT NULL, what TEXT NOT NULL, tag TEXT NOT NULL,
                     UNIQUE (root, what));
CREATE TABLE manifests (space INTEGER PRIMARY KEY, written INTEGER NOT NULL, data TEXT NOT NULL,
                        crc INTEGER NOT NULL);
CREATE TABLE summaries (space INTEGER NOT NULL, rel BLOB NOT NULL, digest BLOB NOT NULL, module TEXT NOT NULL,
                        data TEXT, crc INTEGER NOT NULL, PRIMARY KEY (space, rel)) WITHOUT ROWID;
CREATE TABLE built (space INTEGER NOT NULL, kind TEXT NOT NULL, gen INTEGER NOT NULL UNIQUE,
                    fingerprint TEXT NOT NULL, failed INTEGER NOT NULL, head TEXT NOT NULL, crc INTEGER NOT NULL,
                    PRIMARY KEY (space, kind));
CREATE TABLE built_rows (gen INTEGER NOT NULL, part TEXT NOT NULL, key NOT NULL, pos INTEGER NOT NULL,
                         data TEXT NOT NULL, crc INTEGER NOT NULL, PRIMARY KEY (gen, part, key)) WITHOUT ROWID;
CREATE TABLE results (space INTEGER NOT NULL, rel BLOB NOT NULL, data TEXT NOT NULL, crc INTEGER NOT NULL,
                      PRIMARY KEY (space, rel)) WITHOUT ROWID;
"""

_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


class StoreError(Exception):
    """A read of the database failed (damaged, unreadable, gone): the caller treats it as missing."""


def _sqlite() -> Any:
    import sqlite3  # noqa: PLC0415 - only a run that reads or writes the cache loads SQLite

    return sqlite3


def _damaged(exc: BaseException) -> bool:
    """True for SQLite's "damaged database" and "not a database" errors (not for a busy or
    read-only one)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _CORRUPT_CODES
    text = str(exc)
    return "malformed" in text or "not a database" in text


class Database:
    """The database of one cache folder, opened lazily, once per process (``-j`` workers are
    forked: a worker never uses its parent's connection, it opens its own), and used from one
    thread at a time.

    Reads never create anything and return nothing when the database is missing, not ours, damaged
    or unreadable (:meth:`rows`; :meth:`rows_or_raise` raises :class:`StoreError` instead). Writes
    (:meth:`write`) run in one transaction each; a database found damaged or foreign is replaced
    by an empty one first; a folder that cannot be written makes every write a no-op (a read-only
    folder's database is still read). Nothing here raises to the caller except :class:`StoreError`."""

    def __init__(self, folder: str):
        self.folder = folder
        self.path = os.path.join(folder, DB_NAME)
        self._conn: Any = None
        self._pid = 0
        self._writable = False
        self._failed = False
        self._snapshots: list[Snapshot] = []
        self._lock = threading.RLock()
        self._unusable = ""  # why the folder cannot be used, once found (see UNUSABLE)

    # ------------------------------------------------------------------ connecting
    def _connection(self, create: bool) -> Any:
        """The open connection of this process, opened (and, with ``create``, the database created)
        on first use; ``None`` when there is none to read (or, with ``create``, to write)."""
        pid = os.getpid()
        if self._pid != pid:  # first use, or a forked child: never touch the parent's connection
            if self._conn is not None:
                _FORSAKEN.append(self._conn)
            _FORSAKEN.extend(snapshot.conn for snapshot in self._snapshots)
            _SNAPSHOTS[:] = [snapshot for snapshot in _SNAPSHOTS if snapshot.pid == pid]
            self._conn, self._pid, self._writable, self._failed, self._snapshots = None, pid, False, False, []
        if self._conn is not None and (self._writable or not create):
            return self._conn
        if self._failed:
            if create and self._unusable:  # each run of a long-lived process says so once
                UNUSABLE.setdefault(self.folder, self._unusable)
            return None
        if self._conn is not None:  # open read-only: a write cannot be done here
            return None
        if not create and not os.path.exists(self.path):
            return None
        try:
            self._conn = self._open(create)
        except Exception:  # noqa: BLE001 - a cache that cannot be opened costs speed only
            self._conn = None
        if self._conn is None and create:
            self._failed = True
        return self._conn

    def _open(self, create: bool, again: bool = True) -> Any:
        sqlite3 = _sqlite()
        if create:
            try:
                prepare_cache_dir(self.folder)
            except OSError as exc:
                conn = self._open_read_only()
                if conn is None:  # nothing can be read or written there: the run says so (unusable_notes)
                    self._unusable = "a file has that name" if os.path.isfile(self.folder) else exc.strerror or str(exc)
                    UNUSABLE.setdefault(self.folder, self._unusable)
                return conn
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return self._open_read_only()
        try:
            state = self._check(conn)
            if state == "new" and create:
                self._create(conn)
                state = self._check(conn)
            if state == "foreign" and create:  # damaged or not ours: replaced by an empty one
                conn.close()
                self._remove_files()
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
                self._create(conn)
                state = self._check(conn)
            if state != "ours":
                conn.close()
                return None
            conn.execute("PRAGMA synchronous=NORMAL")
            # a checkpoint truncates the -wal file to this size: without it, it stays as large as the
            # largest transaction (a cold run's summaries: the database's size again) after every run
            conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            self._writable = True
            return conn
        except sqlite3.Error as exc:
            conn.close()
            if _damaged(exc) and create and again:  # replaced by an empty one, once
                self._remove_files()
                return self._open(create=True, again=False)
            return self._open_read_only()

    def _open_read_only(self) -> Any:
        """The database opened read-only (a folder that cannot be written: SQLite cannot add its
        ``-shm`` file there, so the database is read as it is, immutable), or ``None``."""
        if not os.path.exists(self.path):
            return None
        sqlite3 = _sqlite()
        from urllib.request import pathname2url  # noqa: PLC0415

        for mode in ("mode=ro", "immutable=1"):
            try:
                conn = sqlite3.connect(f"file:{pathname2url(self.path)}?{mode}", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=BUSY_TIMEOUT_S)
            except sqlite3.Error:
                continue
            try:
                if self._check(conn) == "ours":
                    self._writable = False
                    return conn
            except sqlite3.Error:
                pass
            conn.close()
        return None

    @staticmethod
    def _check(conn: Any) -> str:
        """``"ours"``, ``"new"`` (an empty database) or ``"foreign"`` (not ours, or of another format)."""
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if (app, version) == (_APPLICATION_ID, FORMAT):
            return "ours"
        if (app, version) == (0, 0) and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return "new"
        return "foreign"

    @staticmethod
    def _create(conn: Any) -> None:
        conn.execute("BEGIN IMMEDIATE")  # another process may be creating it too: the second one sees it done
        try:
            if Database._check(conn) == "new":
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {FORMAT}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("PRAGMA journal_mode=WAL")  # concurrent readers and one writer; kept in the file

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(self.path + suffix)
            except OSError:
                pass

    def close(self) -> None:
        """Close this process's connections, snapshots included (SQLite then folds its write-ahead log
        into the database)."""
        with self._lock:
            if self._pid == os.getpid():
                for snapshot in list(self._snapshots):
                    snapshot.release(everything=True)
                if self._conn is not None:
                    try:
                        self._conn.close()
                    except Exception:  # noqa: BLE001
                        pass
            self._conn, self._pid, self._failed, self._snapshots = None, 0, False, []

    def snapshot(self, gen: int) -> Snapshot | None:
        """A :class:`Snapshot` in which the built object ``gen`` is stored: the newest one of this process
        when it holds it, else a new one; ``None`` when it is stored no more (or cannot be read). A
        snapshot closes when the last view reading through it is gone; at most :data:`MAX_SNAPSHOTS`
        stay open (beyond, the one read least recently is closed: its views then read the database as it
        is, see :class:`_KeyedRows`)."""
        sqlite3 = _sqlite()
        query = "SELECT 1 FROM built WHERE gen = ?"
        with self._lock:
            if self._connection(create=False) is None:
                return None
            if self._snapshots:
                try:
                    if self._snapshots[-1].conn.execute(query, (gen,)).fetchone():
                        return self._snapshots[-1]
                except sqlite3.Error:
                    pass
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False) if self._writable else self._open_read_only()
            except sqlite3.Error:
                return None
            if conn is None:
                return None
            try:
                conn.execute("BEGIN")  # the read transaction starts at the first read and stays open
                if conn.execute(query, (gen,)).fetchone():
                    snapshot = Snapshot(self, conn)
                    self._snapshots.append(snapshot)
                    _SNAPSHOTS.append(snapshot)
                    if len(_SNAPSHOTS) > MAX_SNAPSHOTS:
                        min(_SNAPSHOTS[:-1], key=lambda old: old.used).release(everything=True)
                    return snapshot
            except sqlite3.Error:
                pass
            conn.close()
            return None

    # ------------------------------------------------------------------ reading and writing
    def rows_or_raise(self, sql: str, args: Sequence[Any] = ()) -> list:
        """The rows of the query ``sql``: ``[]`` when there is no database to read; raises
        :class:`StoreError` when it cannot be read (damaged, gone)."""
        with self._lock:
            conn = self._connection(create=False)
            if conn is None:
                return []
            try:
                return conn.execute(sql, args).fetchall()
            except Exception as exc:  # noqa: BLE001 - sqlite3.Error, or an argument SQLite cannot take
                raise StoreError(str(exc)) from None

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list:
        """:meth:`rows_or_raise`, with ``[]`` for a database that cannot be read."""
        try:
            return self.rows_or_raise(sql, args)
        except StoreError:
            return []

    def write(self, work: Callable[[Any], None]) -> bool:
        """Run ``work(connection)`` in one transaction (committed when it returns; nothing of it is
        written when it raises). Returns False when nothing was written: no writable database, busy
        beyond :data:`BUSY_TIMEOUT_S`, or ``work`` raised ``TypeError``/``ValueError`` (a value that
        cannot be stored); a damaged database is replaced by an empty one and written once more."""
        sqlite3 = _sqlite()
        for attempt in (1, 2):
            with self._lock:
                conn = self._connection(create=True)
                if conn is None or not self._writable:
                    return False
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        work(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        _rollback(conn)
                        raise
                    return True
                except sqlite3.Error as exc:
                    if not _damaged(exc) or attempt == 2:
                        return False
                    self._replace()
                except (TypeError, ValueError, OverflowError, UnicodeError, OSError, MemoryError, RecursionError):
                    return False
        return False

    def _replace(self) -> None:
        """Replace a damaged database by an empty one (the next write creates it)."""
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001
            pass
        self._conn = None
        self._remove_files()


UNUSABLE: dict[str, str] = {}
"""The cache folders this process could neither create nor read (a file in the way, no permission),
with the reason: the run goes on without the cache and says so once (:func:`unusable_notes`)."""


def unusable_notes() -> list[str]:
    """The notes a run prints for the cache folders it could not use (each once per process)."""
    notes = [f"cannot use the cache folder {folder} ({reason}): this run kept nothing; "
             f"set cache-dir or --cache-dir to a folder it can create" for folder, reason in sorted(UNUSABLE.items())]
    UNUSABLE.clear()
    return notes


MAX_SNAPSHOTS = 16
"""At most this many :class:`Snapshot` connections stay open in a process (two file descriptors each;
in a run they are one or two per cache folder: every object restored before anything newer was
written shares the newest)."""

_SNAPSHOTS: list[Snapshot] = []
"""The open snapshots of this process, every database's."""

_READS = [0]
"""A counter of snapshot reads (the order in which snapshots were last read)."""


class Snapshot:
    """A read transaction kept open on a connection of its own, through which the table views of
    restored objects read their entries: they read the database as it was when the snapshot began,
    so an object restored once answers as it was stored even while another run (or a later build of
    this one) replaces it, as a file kept open would (a closed snapshot, or one inherited by a
    forked worker, reads the database as it is instead)."""

    __slots__ = ("db", "conn", "pid", "views", "used")

    def __init__(self, db: Database, conn: Any):
        self.db = db
        self.conn = conn
        self.pid = os.getpid()
        self.views = 0
        self.used = 0

    def hold(self) -> None:
        """Count one more view reading through this snapshot."""
        self.views += 1

    def release(self, everything: bool = False) -> None:
        """Count one view less (``everything``: close now); the last one gone closes the snapshot."""
        self.views = 0 if everything else self.views - 1
        if self.views <= 0:
            with self.db._lock:
                self.close()
                if self in self.db._snapshots:
                    self.db._snapshots.remove(self)
                if self in _SNAPSHOTS:
                    _SNAPSHOTS.remove(self)

    def rows(self, sql: str, args: Sequence[Any]) -> list | None:
        """The rows of ``sql`` read in the snapshot; ``None`` when it cannot serve (closed, or of
        another process); raises :class:`StoreError` when the read fails."""
        with self.db._lock:
            if self.conn is None or self.pid != os.getpid():
                return None
            _READS[0] += 1
            self.used = _READS[0]
            try:
                return self.conn.execute(sql, args).fetchall()
            except Exception as exc:  # noqa: BLE001 - sqlite3.Error, or an argument SQLite cannot take
                raise StoreError(str(exc)) from None

    def close(self) -> None:
        """End the read transaction and close the connection."""
        if self.conn is not None and self.pid == os.getpid():
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001
                pass
        self.conn = None


def _rollback(conn: Any) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - no transaction left to roll back
        pass


_DATABASES: dict[str, Database] = {}
_FORSAKEN: list[Any] = []
"""Connections inherited from a parent process: kept (never closed or collected) in a forked child."""


def database(folder: str) -> Database:
    """The :class:`Database` of the cache folder ``folder`` (one per folder and process)."""
    key = os.path.abspath(folder)
    found = _DATABASES.get(key)
    if found is None:
        found = _DATABASES[key] = Database(key)
    return found


def close_all() -> None:
    """Close every database this process opened (tests, ``cache clear``; a run need not call it)."""
    for db in list(_DATABASES.values()):
        db.close()


def _blob(text: str) -> bytes:
    """A path as stored (file names need not be valid UTF-8)."""
    return text.encode("utf-8", "surrogateescape")


def _crc(text: str, seed: int) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"), seed)


class _Space:
    """One space of a database: a project root and what it is for (``results`` or facts kinds)."""

    __slots__ = ("db", "root", "what", "tag", "_key", "seed")

    def __init__(self, folder: str, root: Path, what: str):
        self.db = database(folder)
        self.root = root
        self.what = what
        self.tag = cache_tag()
        self._key = (_blob(str(root)), what, self.tag)
        self.seed = zlib.crc32(b"\0".join((self._key[0], what.encode(), self.tag.encode())))

    def where(self, table: str) -> str:
        """A join of ``table`` with this space's row, of this tag (the query then takes :attr:`key`)."""
        return f"{table} t JOIN spaces s ON s.id = t.space WHERE s.root = ? AND s.what = ? AND s.tag = ?"

    @property
    def key(self) -> tuple[bytes, str, str]:
        return self._key

    def claim(self, conn: Any) -> int:
        """The id of this space's row (inside a write): created when missing; a row of another tag
        is emptied of everything stored under it and takes this tag."""
        row = conn.execute("SELECT id, tag FROM spaces WHERE root = ? AND what = ?", self._key[:2]).fetchone()
        if row is None:
            return conn.execute("INSERT INTO spaces (root, what, tag) VALUES (?, ?, ?)", self._key).lastrowid
        space, tag = row
        if tag != self.tag:
            conn.execute("DELETE FROM built_rows WHERE gen IN (SELECT gen FROM built WHERE space = ?)", (space,))
            for table in ("built", "manifests", "summaries", "results"):
                conn.execute(f"DELETE FROM {table} WHERE space = ?", (space,))  # noqa: S608 - our table names
            conn.execute("UPDATE spaces SET tag = ? WHERE id = ?", (self.tag, space))
        return space


# ====================================================================== documents
def read_document(folder: str, root: Path, what: str) -> Any:
    """The JSON data :func:`write_document` stored for the repository or project ``root`` under
    ``what`` (``"history"``: the provenance answers of :mod:`hp_invariants.history`) in the cache
    folder ``folder``; ``None`` when there is none, or it is damaged, foreign or of another version.
    Never raises for the cache's state."""
    space = _Space(folder, root, what)
    found = space.db.rows(f"SELECT t.written, t.data, t.crc FROM {space.where('manifests')}", space.key)
    if not found:
        return None
    written, data, crc = found[0]
    if type(written) is not int or type(data) is not str or _crc(f"{written}\0{data}", space.seed) != crc:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def write_document(folder: str, root: Path, what: str, data: Any) -> None:
    """Store the JSON data ``data`` for ``root`` under ``what`` (one checksummed row, replacing the
    previous one, in one transaction); a cache that cannot be written only costs speed. Raises
    ``TypeError`` when ``data`` is not JSON data."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
    import time  # noqa: PLC0415

    space = _Space(folder, root, what)
    written = time.time_ns()

    def work(conn: Any) -> None:
        conn.execute("INSERT OR REPLACE INTO manifests VALUES (?, ?, ?, ?)",
                     (space.claim(conn), written, text, _crc(f"{written}\0{text}", space.seed)))

    space.db.write(work)


# ====================================================================== the project facts
class ProjectCache:
    """What is stored of the project ``root`` for the facts kinds ``facts`` (built together) in the
    cache folder ``folder``: the stat manifest, each file's summaries and the built objects. Made
    per use (no I/O until a method is called); every method reads or writes the database once."""

    def __init__(self, folder: str, root: Path, facts: Sequence[ProjectFacts]):
        self.facts = list(facts)
        self.space = _Space(folder, root, "+".join(sorted(f.key for f in facts)))

    # ------------------------------------------------------------------ the stat manifest
    def manifest(self) -> dict:
        """``{"written": ns, "entries": {rel: (mtime_ns, size, ctime_ns, inode, digest)}}`` as the last
        build stored it; ``{}`` when none (or damaged, or of another version)."""
        space = self.space
        found = space.db.rows(f"SELECT t.written, t.data, t.crc FROM {space.where('manifests')}", space.key)
        if not found:
            return {}
        written, data, crc = found[0]
        if type(written) is not int or type(data) is not str or _crc(f"{written}\0{data}", space.seed) != crc:
            return {}
        try:
            return {"written": written, "entries": _MANIFEST.loads(data)}
        except Malformed:
            return {}

    # ------------------------------------------------------------------ per-file summaries
    def summaries(self) -> dict[str, tuple[bytes, str, str | None]]:
        """``rel -> (content digest, module name, stored summaries)`` of every file whose row is
        intact; the summaries stay JSON text (``None``: the file does not parse) until
        :meth:`decode_summaries`."""
        space = self.space
        out: dict[str, tuple[bytes, str, str | None]] = {}
        seed = space.seed
        for rel, digest, module, data, crc in space.db.rows(
                f"SELECT t.rel, t.digest, t.module, t.data, t.crc FROM {space.where('summaries')}", space.key):
            if type(rel) is not bytes or type(digest) is not bytes or type(module) is not str \
                    or (data is not None and type(data) is not str):
                continue
            if zlib.crc32(b"%s\0%s%s\0%s" % (rel, digest, module.encode("utf-8", "surrogatepass"),
                                             b"-" if data is None else data.encode("ascii", "replace")), seed) != crc:
                continue  # a damaged row: the file is summarized again
            out[rel.decode("utf-8", "surrogateescape")] = (digest, module, data)
        return out

    @staticmethod
    def decode_summaries(facts: Sequence[ProjectFacts], data: str) -> dict[str, Any] | None:
        """The summaries of the kinds ``facts`` from one file's stored ``data``; ``None`` when a kind
        is missing or malformed (the file is then summarized again)."""
        try:
            stored = json.loads(data)
        except (ValueError, TypeError, RecursionError):
            return None
        if type(stored) is not dict:
            return None
        try:
            return {f.key: facts_codec(f, f.summary_type).decode(stored[f.key]) for f in facts}
        except (Malformed, KeyError, TypeError):
            return None

    def write(self, scan: Scan, summaries: Sequence[dict | None], transient: set[str] = frozenset(),  # type: ignore[assignment]
              write_summaries: bool = True, reuse: Sequence[Any] = ()) -> dict[str, dict[int, tuple[Any, str]]]:
        """Store the manifest of ``scan`` and (when ``write_summaries``) each file's ``summaries``
        (``None``: the file does not parse), in one transaction. The manifest's time is taken before
        anything is read for it, so a file edited meanwhile is hashed next time. ``transient``: files
        whose failure may not happen again (not stored); ``reuse[i]`` not ``None``: file ``i``'s
        stored row is current (left as it is). Nothing is stored when a facts kind declares no
        ``summary_type`` or a summary is not of it; nothing is raised.

        Returns the JSON text made of each summary, ``facts key -> {id(summary): (summary, text)}``
        (empty when nothing was encoded), for :meth:`write_built` to store again as it is where the
        built object keeps the same summary (a cold build encoded every summary twice)."""
        import time  # noqa: PLC0415

        written = time.time_ns()
        texts: dict[str, dict[int, tuple[Any, str]]] = {}
        manifest = {f.rel: (*f.stat, f.digest) for f in scan.files if f.digest is not None}
        try:
            manifest_text = _MANIFEST.dumps(manifest)
        except (TypeError, ValueError):
            return texts
        space = self.space
        seed = space.seed
        rows: list[tuple] = []
        keep: set[bytes] = set()
        if write_summaries:
            if any(f.summary_type is None for f in self.facts):
                return texts  # a facts kind without a declared summary type: not cached
            # each kind's text made alone, then joined: the same text as _dumps of the {key: data} object
            codecs = [(f.key, _dumps(f.key) + ":", facts_codec(f, f.summary_type), texts.setdefault(f.key, {}))
                      for f in self.facts]
            try:
                for i, (f, summary) in enumerate(zip(scan.files, summaries)):
                    if f.digest is None or f.rel in transient:
                        continue
                    rel = _blob(f.rel)
                    keep.add(rel)
                    if i < len(reuse) and reuse[i] is not None:
                        continue
                    data = None
                    if summary is not None:
                        fields = []
                        for key, label, c, made in codecs:
                            value = summary[key]
                            text = _dumps(c.encode(value))
                            made[id(value)] = (value, text)
                            fields.append(label + text)
                        data = "{" + ",".join(fields) + "}"
                    crc = zlib.crc32(b"%s\0%s%s\0%s" % (rel, f.digest, f.module.encode("utf-8", "surrogatepass"),
                                                        b"-" if data is None else data.encode("ascii")), seed)
                    rows.append((rel, f.digest, f.module, data, crc))
            except (TypeError, KeyError, ValueError):
                return {}  # a summary not of its declared type: not cached

        def work(conn: Any) -> None:
            space_id = space.claim(conn)
            conn.execute("INSERT OR REPLACE INTO manifests VALUES (?, ?, ?, ?)",
                         (space_id, written, manifest_text, _crc(f"{written}\0{manifest_text}", seed)))
            if write_summaries:
                stale = [(space_id, rel) for (rel,) in conn.execute("SELECT rel FROM summaries WHERE space = ?",
                                                                   (space_id,)) if rel not in keep]
                conn.executemany("DELETE FROM summaries WHERE space = ? AND rel = ?", stale)
                conn.executemany("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?, ?)",
                                 [(space_id, *row) for row in rows])

        space.db.write(work)
        return texts

    # ------------------------------------------------------------------ the built objects
    def read_built(self, facts: ProjectFacts, fingerprint: str, rebuild: Callable[[], Any]) -> tuple[Any, int] | None:
        """``(project object, files that failed to parse)`` of ``facts`` as stored for the project
        ``fingerprint`` (:meth:`ProjectFacts.restore` of its parts), or ``None`` when none is stored
        for it (or it is damaged, or malformed: the caller builds it). ``rebuild()``: the object
        built from the summaries, which the table views answer from when an entry is found damaged."""
        if not facts.built_parts:
            return None
        space = self.space
        found = space.db.rows(f"SELECT t.gen, t.fingerprint, t.failed, t.head, t.crc FROM {space.where('built')} "
                              f"AND t.kind = ?", (*space.key, facts.key))
        if not found:
            return None
        gen, stored_fingerprint, failed, head, crc = found[0]
        if type(gen) is not int or type(failed) is not int or type(head) is not str \
                or type(stored_fingerprint) is not str \
                or _crc(f"{facts.key}\0{gen}\0{stored_fingerprint}\0{failed}\0{head}", space.seed) != crc:
            return None
        if stored_fingerprint != fingerprint:
            return None
        snapshot = space.db.snapshot(gen)
        if snapshot is None:
            return None
        try:
            parts = _restore_parts(snapshot, gen, facts, _HEAD.loads(head), rebuild)
            return facts.restore(parts, rebuild), failed
        except (Malformed, KeyError, TypeError, ValueError, IndexError, AttributeError, StoreError):
            return None

    def write_built(self, facts: ProjectFacts, fingerprint: str, built: Any, failed: int,
                    texts: dict[int, tuple[Any, str]] | None = None) -> None:
        """Store the project object ``built`` of ``facts`` (:meth:`ProjectFacts.persist`) for the project
        ``fingerprint``, replacing the one stored before; nothing when the facts kind declares no
        ``built_parts`` or a part is not of its declared type (nothing is raised). ``texts``: the
        JSON text of summaries already encoded (:meth:`write`), by the summary's id: an entry of a
        table of summaries that is one of them is not encoded again."""
        if not facts.built_parts:
            return
        gen = int.from_bytes(os.urandom(8), "big") >> 1  # never reused: a reader of the old one never reads this one
        try:
            head, rows = _persist_parts(facts, built, gen, texts)
        except (TypeError, ValueError, KeyError, UnicodeError, NotImplementedError, RecursionError):
            return
        head_text = _HEAD.dumps(head)
        space = self.space
        crc = _crc(f"{facts.key}\0{gen}\0{fingerprint}\0{failed}\0{head_text}", space.seed)

        def work(conn: Any) -> None:
            space_id = space.claim(conn)
            conn.execute("DELETE FROM built_rows WHERE gen IN (SELECT gen FROM built WHERE space = ? AND kind = ?)",
                         (space_id, facts.key))
            conn.execute("DELETE FROM built WHERE space = ? AND kind = ?", (space_id, facts.key))
            conn.execute("INSERT INTO built VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (space_id, facts.key, gen, fingerprint, failed, head_text, crc))
            conn.executemany("INSERT INTO built_rows VALUES (?, ?, ?, ?, ?, ?)", rows)

        space.db.write(work)


_MANIFEST = codec(dict[str, tuple[int, int, int, int, bytes]])


class _Head(NamedTuple):
    """The head row of a built object: its plain parts (the JSON data of their declared types,
    decoded by :func:`_restore_parts`) and, per table part, ``(entries, digest of its keys)``."""

    parts: dict[str, Raw]
    tables: dict[str, tuple[int, int]]


_HEAD = codec(_Head)


def _table_kind(declared: Any) -> tuple[type | None, Any]:
    """``(KeyedTable or ListTable, item type)`` of a declared part, or ``(None, declared)``."""
    origin = typing.get_origin(declared)
    if origin in (KeyedTable, ListTable):
        return origin, typing.get_args(declared)[0]
    return None, declared


def _third(row: tuple) -> Any:
    return row[2]


def _keys_digest(keys: Sequence[bytes]) -> int:
    """A digest of a set of keys (UTF-8) that does not depend on their order."""
    return sum(map(zlib.crc32, keys)) & 0x7FFFFFFFFFFFFFFF


def _row_crc(gen: int, part: str, key: Any, pos: int, data: str) -> int:
    return zlib.crc32(f"{part}\0{key}\0{pos}\0{data}".encode("utf-8", "surrogatepass"), gen & 0xFFFFFFFF)


def _persist_parts(facts: ProjectFacts, built: Any, gen: int,
                   texts: dict[int, tuple[Any, str]] | None = None) -> tuple[_Head, list[tuple]]:
    """The head and the table rows of ``built`` (raises ``TypeError``/``ValueError`` for a part that
    is not of its declared type, ``KeyError`` for a part missing). ``texts``: see
    :meth:`ProjectCache.write_built` (used for the entries of a ``ListTable`` of summaries)."""
    parts = facts.persist(built)
    plain: dict[str, Any] = {}
    tables: dict[str, tuple[int, int]] = {}
    rows: list[tuple] = []
    for name, declared in facts.built_parts.items():
        kind, item = _table_kind(declared)
        value = parts[name]
        if kind is None:
            plain[name] = facts_codec(facts, declared).encode(value)
            continue
        encode = facts_codec(facts, item).encode_data  # RecursionError: caught by write_built

        def dumps(entry: Any, encode: Callable[[Any], Any] = encode) -> str:
            return _dumps(encode(entry))

        if texts and kind is ListTable and item is facts.summary_type:  # the same codec as the summaries'
            def dumps(entry: Any, encode: Callable[[Any], Any] = encode, texts: dict = texts) -> str:
                known = texts.get(id(entry))
                return known[1] if known is not None and known[0] is entry else _dumps(encode(entry))

        if kind is KeyedTable:
            if type(value) is not dict:
                raise TypeError(f"{name}: a dict expected")
            keys = []
            table = []
            for pos, (key, entry) in enumerate(value.items()):
                if type(key) is not str or "\0" in key:
                    raise ValueError(f"{name}: keys are str without NUL")
                data = dumps(entry)
                table.append((gen, name, key, pos, data, _row_crc(gen, name, key, pos, data)))
                keys.append(key.encode("utf-8"))  # a lone surrogate raises: not stored
            table.sort(key=_third)  # inserted in key order, SQLite appends to its B-tree instead of splitting pages
            rows.extend(table)
            tables[name] = (len(keys), _keys_digest(keys))
        else:
            if type(value) not in (list, tuple):
                raise TypeError(f"{name}: a list expected")
            for pos, entry in enumerate(value):
                data = dumps(entry)
                rows.append((gen, name, pos, pos, data, _row_crc(gen, name, pos, pos, data)))
            tables[name] = (len(value), 0)
    return _Head(plain, tables), rows


def _restore_parts(snapshot: Snapshot, gen: int, facts: ProjectFacts, head: _Head,
                   rebuild: Callable[[], Any]) -> dict[str, Any]:
    """The parts :meth:`ProjectFacts.restore` receives (raises ``KeyError``/:class:`Malformed` for a
    head that does not fit the declared parts)."""
    recovery = _Recovery(facts, rebuild, head)
    parts: dict[str, Any] = {}
    for name, declared in facts.built_parts.items():
        kind, item = _table_kind(declared)
        if kind is None:
            parts[name] = facts_codec(facts, declared).decode(head.parts[name])
            continue
        count, digest = head.tables[name]
        view = _KeyedRows if kind is KeyedTable else _ListRows
        parts[name] = view(snapshot, gen, name, facts_codec(facts, item), count, digest, recovery)
    return parts


class _Recovery:
    """The parts of the object rebuilt from the summaries, which the table views of a restored
    object answer from once an entry is found damaged (computed once per object)."""

    __slots__ = ("facts", "rebuild", "head", "parts")

    def __init__(self, facts: ProjectFacts, rebuild: Callable[[], Any], head: _Head):
        self.facts = facts
        self.rebuild = rebuild
        self.head = head
        self.parts: dict[str, Any] | None = None

    def part(self, name: str) -> Any:
        """The part ``name`` of the rebuilt object; raises ``ValueError`` when the rebuilt object is
        not the stored one (its plain parts differ: the project changed while it was read)."""
        if self.parts is None:
            parts = self.facts.persist(self.rebuild())
            for plain, stored in self.head.parts.items():
                if facts_codec(self.facts, self.facts.built_parts[plain]).encode(parts[plain]) != stored:
                    raise ValueError(f"the project changed while its stored {self.facts.key} facts were read")
            self.parts = parts
        return self.parts[name]


_UNREAD = object()


class _KeyedRows(KeyedTable):
    """A :class:`~hp_invariants.api.KeyedTable` read from the database: each entry is read, checked
    (its CRC-32, its type) and decoded when first asked for, then kept. Before an answer that says a
    key is absent, the table's keys are checked once against the count and digest of its head (a
    damaged key would otherwise read as a missing one) and the object is checked to be still stored
    (a newer build may have replaced it since). Anything damaged: the rebuilt object's part answers."""

    __slots__ = ("_snapshot", "_gen", "_part", "_codec", "_count", "_digest", "_recovery", "_values", "_fallback",
                 "_complete")

    def __init__(self, snapshot: Snapshot, gen: int, part: str, item: Codec, count: int, digest: int,
                 recovery: _Recovery):
        self._snapshot = snapshot
        snapshot.hold()
        self._gen = gen
        self._part = part
        self._codec = item
        self._count = count
        self._digest = digest
        self._recovery = recovery
        self._values: dict[str, Any] = {}
        self._fallback: dict[str, Any] | None = None
        self._complete = False

    def get(self, key: str, default: Any = None) -> Any:
        """The entry of ``key``, else ``default``."""
        value = self._values.get(key, _UNREAD)
        if value is not _UNREAD:
            return value
        if self._fallback is not None:
            return self._fallback.get(key, default)
        if type(key) is not str:
            return default
        try:
            found = self._rows("SELECT pos, data, crc FROM built_rows WHERE gen = ? AND part = ? AND key = ?",
                                           (self._gen, self._part, key))
            if not found:
                self._confirm_absent()
                return default
            pos, data, crc = found[0]
            if type(data) is not str or _row_crc(self._gen, self._part, key, pos, data) != crc:
                raise StoreError("a damaged entry")
            value = self._codec.loads(data)
        except (StoreError, Malformed, TypeError):
            return self._recover().get(key, default)
        self._values[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        if key in self._values:
            return True
        if self._fallback is not None:
            return key in self._fallback
        if type(key) is not str:
            return False
        try:
            if self._rows("SELECT 1 FROM built_rows WHERE gen = ? AND part = ? AND key = ?",
                                      (self._gen, self._part, key)):
                return True
            self._confirm_absent()
            return False
        except StoreError:
            return key in self._recover()

    def __len__(self) -> int:
        if self._fallback is None:
            try:
                self._confirm_absent()
            except StoreError:
                self._recover()
        return len(self._fallback) if self._fallback is not None else self._count

    def __iter__(self) -> Iterator[str]:
        if self._fallback is None:
            try:
                keys = [key for (key,) in self._rows(
                    "SELECT key FROM built_rows WHERE gen = ? AND part = ? ORDER BY pos", (self._gen, self._part))]
                if len(keys) != self._count or not all(type(k) is str for k in keys) \
                        or _keys_digest([k.encode("utf-8") for k in keys]) != self._digest:
                    raise StoreError("damaged keys")
                return iter(keys)
            except (StoreError, UnicodeError):
                self._recover()
        return iter(self._fallback)  # type: ignore[arg-type]

    def _rows(self, sql: str, args: Sequence[Any]) -> list:
        found = self._snapshot.rows(sql, args)
        return self._snapshot.db.rows_or_raise(sql, args) if found is None else found

    def __del__(self) -> None:
        try:
            self._snapshot.release()
        except Exception:  # noqa: BLE001 - at interpreter exit the module may be half gone
            pass

    def _confirm_absent(self) -> None:
        """Raise :class:`StoreError` unless an absent key is absent from the stored object: its keys are
        intact (checked once) and, read outside the snapshot, it is still stored."""
        if not self._complete:
            found = self._rows("SELECT count(*), group_concat(key, char(0)) FROM built_rows WHERE gen = ? AND part = ?",
                               (self._gen, self._part))
            count, joined = found[0] if found else (0, None)
            keys = joined.encode("utf-8", "surrogatepass").split(b"\0") if count else []
            if count != self._count or len(keys) != count or _keys_digest(keys) != self._digest:
                raise StoreError("damaged keys")
            self._complete = True
        elif self._snapshot.conn is None or self._snapshot.pid != os.getpid():
            if not self._snapshot.db.rows_or_raise("SELECT 1 FROM built WHERE gen = ?", (self._gen,)):
                raise StoreError("replaced since it was read")

    def _recover(self) -> dict[str, Any]:
        if self._fallback is None:
            fallback = self._recovery.part(self._part)
            if type(fallback) is not dict:
                raise ValueError(f"{self._part}: the rebuilt part is not a dict")
            self._fallback = fallback
            self._values.clear()
        return self._fallback


class _ListRows(ListTable):
    """A :class:`~hp_invariants.api.ListTable` read from the database, item by item (see
    :class:`_KeyedRows`; an item is never legitimately absent, so a missing one is damage)."""

    __slots__ = ("_snapshot", "_gen", "_part", "_codec", "_count", "_recovery", "_items", "_fallback")

    def __init__(self, snapshot: Snapshot, gen: int, part: str, item: Codec, count: int, digest: int,
                 recovery: _Recovery):
        self._snapshot = snapshot
        snapshot.hold()
        self._gen = gen
        self._part = part
        self._codec = item
        self._count = count
        self._recovery = recovery
        self._items: list[Any] = [_UNREAD] * count
        self._fallback: list[Any] | None = None

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> Any:
        if type(i) is not int:
            raise TypeError("list indices must be integers")
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("list index out of range")
        item = self._items[i]
        if item is not _UNREAD:
            return item
        if self._fallback is not None:
            return self._fallback[i]
        try:
            found = self._rows("SELECT data, crc FROM built_rows WHERE gen = ? AND part = ? AND key = ?",
                                           (self._gen, self._part, i))
            if not found:
                raise StoreError("a missing item")
            data, crc = found[0]
            if type(data) is not str or _row_crc(self._gen, self._part, i, i, data) != crc:
                raise StoreError("a damaged item")
            item = self._codec.loads(data)
        except (StoreError, Malformed, TypeError):
            return self._recover()[i]
        self._items[i] = item
        return item

    _rows = _KeyedRows._rows
    __del__ = _KeyedRows.__del__

    def _recover(self) -> list[Any]:
        if self._fallback is None:
            fallback = self._recovery.part(self._part)
            if type(fallback) not in (list, tuple) or len(fallback) != self._count:
                raise ValueError(f"the project changed while its stored {self._part} were read")
            self._fallback = list(fallback)
        return self._fallback


# ====================================================================== the per-file results
CACHEABLE_PROBLEMS = frozenset({"E0001"})
"""Problems that depend only on a file's bytes (syntax and decoding errors) are cached; a rule error
(F0002) or a timeout (F0003) is computed again."""


class _Dependency(NamedTuple):
    """What a file's results depend on in one facts kind: the project ``fingerprint`` they were
    computed against; ``prefiltered``: the rule's prefilter, reading the project, skipped the file
    and ``prefilter`` is what it read; else ``record``: the kind's dependency record (the JSON data of
    its ``record_type``, decoded when needed)."""

    fingerprint: str
    prefiltered: bool
    prefilter: Union[str, None]
    record: Raw


class _FindingRow(NamedTuple):
    """A finding as stored (the path is the entry's)."""

    rule_id: str
    symbol: str
    line: int
    col: int
    end_line: int
    end_col: int
    message: str
    confidence: Confidence
    fix: Union[Fix, None]
    args: tuple[Union[str, int, float, bool, None], ...]
    obj: str


class _ProblemRow(NamedTuple):
    """A problem as stored (only :data:`CACHEABLE_PROBLEMS`)."""

    problem_id: str
    symbol: str
    line: int
    col: int
    message: str
    hint: str


class _Entry(NamedTuple):
    """One file's stored results: the ``key`` of its bytes and settings, what they depend on per
    facts kind, its findings and problems."""

    key: str
    deps: dict[str, _Dependency]
    findings: tuple[_FindingRow, ...]
    problems: tuple[_ProblemRow, ...]


_ENTRY = codec(_Entry)


def _record_codec(facts: ProjectFacts) -> Codec:
    return facts_codec(facts, facts.record_type)


class ResultsCache:
    """Per-file results of earlier runs, per project root in the project's cache folder (one row
    per file, as ruff keeps one file per package).

    An entry is used only when the file's bytes (content digest), its resolved settings
    (``Settings.key``) and the project facts its findings read are unchanged: for each facts kind the
    check read, either the project's fingerprint (every file's content) is the one recorded, or the
    facts kind's :meth:`~hp_invariants.api.ProjectFacts.still_valid` replays what the file's check
    read and gets the same answers. Anything else, or any malformed entry, is a miss (the file is
    checked again). Only :meth:`Session.check_bytes` reads it; ``fix`` never does.
    """

    def __init__(self, project: Project):
        self.project = project
        self._texts: dict[Path, dict[str, str]] = {}  # root -> rel -> the stored JSON text of its entry
        self._decoded: dict[tuple[Path, str], _Entry | None] = {}
        self._fresh: dict[Path, dict[str, str]] = {}
        self.stats = {"hits": 0, "misses": 0}

    def _space(self, root: Path) -> _Space:
        return _Space(self.project.cache_folder(root), root, "results")

    def entries(self, root: Path) -> dict[str, str]:
        """The intact stored entries of ``root``: path relative to it -> JSON text (read once; decoded
        by :meth:`entry`)."""
        found = self._texts.get(root)
        if found is None:
            space = self._space(root)
            found = {}
            for rel, data, crc in space.db.rows(f"SELECT t.rel, t.data, t.crc FROM {space.where('results')}",
                                                space.key):
                if type(rel) is bytes and type(data) is str \
                        and zlib.crc32(b"%s\0%s" % (rel, data.encode("ascii", "replace")), space.seed) == crc:
                    found[rel.decode("utf-8", "surrogateescape")] = data
            self._texts[root] = found
        return found

    def entry(self, root: Path, rel: str) -> _Entry | None:
        """The decoded entry of the file ``rel`` of ``root``, or ``None`` (none, or malformed)."""
        key = (root, rel)
        if key in self._decoded:
            return self._decoded[key]
        text = self.entries(root).get(rel)
        value = None
        if text is not None:
            try:
                value = _ENTRY.loads(text)
            except Malformed:
                value = None
        self._decoded[key] = value
        return value

    def all_current(self, root: Path, paths: Sequence[str], fingerprints: dict[str, str]) -> bool:
        """True when each of ``paths`` (of ``root``) has an entry recorded against the project as it
        is now: every facts kind it depends on is a key of ``fingerprints`` (facts kind -> the
        project's :meth:`~hp_invariants.project.Project.root_fingerprint` for that kind alone, as
        :meth:`make_entry` records it) and has that fingerprint."""
        for path in paths:
            entry = self.entry(root, _rel(path, root))
            if entry is None or any(fingerprints.get(k) != d.fingerprint for k, d in entry.deps.items()):
                return False
        return True

    @staticmethod
    def key(digest: bytes, settings: Settings, with_project: bool) -> str:
        """The key of a file's entry: its content digest, its settings, whether project facts exist."""
        text = repr((digest.hex(), settings.key, with_project))
        return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()

    def locate(self, path: str) -> tuple[Path, str]:
        """``(project root, path relative to it)`` of ``path``: where its entry lives."""
        root = self.project.root_of(path)
        return root, _rel(path, root)

    def lookup(self, path: str, digest: bytes, settings: Settings,
               where: tuple[Path, str] | None = None) -> FileResult | None:
        """The cached :class:`FileResult` of ``path`` or ``None`` (a miss); ``where``: :meth:`locate`
        of ``path`` when the caller has it."""
        root, rel = where or self.locate(path)
        entry = self.entry(root, rel)
        if entry is None or entry.key != self.key(digest, settings, True) \
                or not self._deps_valid(path, digest, settings, entry.deps) \
                or any(p.problem_id not in CACHEABLE_PROBLEMS for p in entry.problems):
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return FileResult(path=path, findings=[Finding(f.rule_id, f.symbol, path, f.line, f.col, f.end_line, f.end_col,
                                                       f.message, f.confidence, f.fix, f.args, f.obj)
                                               for f in entry.findings],
                          problems=[FileProblem(p.problem_id, p.symbol, path, p.line, p.col, p.message, p.hint)
                                    for p in entry.problems])

    def _deps_valid(self, path: str, digest: bytes, settings: Settings, deps: dict[str, _Dependency]) -> bool:
        facts_by_key = {r.project_facts.key: r.project_facts for r in settings.rules if r.project_facts is not None}
        from hp_invariants.declarations import PROJECT_FACTS  # noqa: PLC0415 - light (imports api only)

        for facts in PROJECT_FACTS:  # the pipeline asks CLASS_INDEX_FACTS of any file with findings
            facts_by_key.setdefault(facts.key, facts)
        for key, dep in deps.items():
            facts = facts_by_key.get(key)
            if facts is None:
                return False
            if dep.fingerprint == self.project.fingerprint(path, [facts]):
                continue
            if dep.prefiltered:  # only a prefilter that reads the project skipped a rule: ask it again
                rule = next((r for r in settings.rules if r.prefilter_reads_project and r.project_facts is facts), None)
                if rule is None or rule.prefilter_record(self.project.data(facts, path),
                                                         settings.options.get(rule.rule_id)) != dep.prefilter:
                    return False
                continue
            try:
                record = _record_codec(facts).decode(dep.record)
            except (Malformed, TypeError):
                return False
            if not facts.still_valid(self.project.data(facts, path), path, digest, record):
                return False
        return True

    def make_entry(self, path: str, digest: bytes, settings: Settings, result: FileResult,
                   tracking: _TrackingProject | None, where: tuple[Path, str] | None = None) -> str | None:
        """The entry to store for ``result`` (its JSON text; ``None``: not cacheable); ``where``: see
        :meth:`lookup`."""
        if any(p.problem_id not in CACHEABLE_PROBLEMS for p in result.problems):
            return None
        deps: dict[str, _Dependency] = {}
        root = where[0] if where else self.project.root_of(path)
        try:
            for key, (facts, tracker, _view) in (tracking.used.items() if tracking else ()):
                record = _record_codec(facts).encode(facts.dependencies(tracker, path))
                deps[key] = _Dependency(self.project.root_fingerprint(root, [facts]), False, None, record)
            for key, prefilter in (tracking.prefilters.items() if tracking else ()):
                if key not in deps:
                    facts = next(r.project_facts for r in settings.rules if r.project_facts is not None
                                 and r.project_facts.key == key)
                    deps[key] = _Dependency(self.project.root_fingerprint(root, [facts]), True, prefilter, None)
            return _ENTRY.dumps(_Entry(
                self.key(digest, settings, True), deps,
                tuple(_FindingRow(f.rule_id, f.symbol, f.line, f.col, f.end_line, f.end_col, f.message, f.confidence,
                                  f.fix, f.args, f.obj) for f in result.findings),
                tuple(_ProblemRow(p.problem_id, p.symbol, p.line, p.col, p.message, p.hint) for p in result.problems)))
        except TypeError:  # a value that has no stored form (a finding argument that is not plain data)
            return None

    def store(self, path: str, entry: str, where: tuple[Path, str] | None = None) -> None:
        """Remember ``entry`` for ``path`` (written by :meth:`save`); ``where``: see :meth:`lookup`."""
        root, rel = where or self.locate(path)
        self._fresh.setdefault(root, {})[rel] = entry

    def save(self) -> None:
        """Write the entries stored since the last save, each root in one transaction, and drop the
        entries of files that no longer exist; nothing when every entry is the one stored."""
        for root, fresh in self._fresh.items():
            old = self.entries(root)
            changed = {rel: entry for rel, entry in fresh.items() if old.get(rel) != entry}
            if not changed:
                continue
            gone = [rel for rel in old if rel not in fresh and not os.path.exists(os.path.join(root, rel))]
            space = self._space(root)
            rows = []
            for rel, entry in changed.items():
                blob = _blob(rel)
                rows.append((blob, entry, zlib.crc32(b"%s\0%s" % (blob, entry.encode("ascii")), space.seed)))

            def work(conn: Any, space: _Space = space, rows: list = rows, gone: list = gone) -> None:
                space_id = space.claim(conn)
                conn.executemany("DELETE FROM results WHERE space = ? AND rel = ?",
                                 [(space_id, _blob(rel)) for rel in gone])
                conn.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                                 [(space_id, *row) for row in rows])

            if space.db.write(work):
                for rel in gone:
                    old.pop(rel, None)
                    self._decoded.pop((root, rel), None)
                for rel, entry in changed.items():
                    old[rel] = entry
                    self._decoded.pop((root, rel), None)
        self._fresh.clear()


def _rel(path: str, root: Path) -> str:
    """``os.path.relpath`` of ``path`` from the project ``root``: for a path under it (the common
    case), the part after the root's own, without splitting both paths into components."""
    absolute = os.path.abspath(path)
    prefix = str(root).rstrip(os.sep) + os.sep
    if absolute.startswith(prefix) and len(absolute) > len(prefix):
        return absolute[len(prefix):]
    return os.path.relpath(absolute, root)
