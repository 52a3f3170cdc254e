"""Everything hp-invariants keeps on disk: the per-file project facts and the per-file results.

Nothing outside this module encodes, validates or versions cache files.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import sys
import types
import typing
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

from hp_invariants import api

from hp_invariants.model import Applicability, Confidence, Edit, FileProblem, FileResult, Finding, Fix

if TYPE_CHECKING:  # pragma: no cover
    from hp_invariants.api import ProjectFacts
    from hp_invariants.config import Settings
    from hp_invariants.engine import _TrackingProject
    from hp_invariants.project import Project


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


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
"""Compact ASCII JSON text (one encoder for every call: ``json.dumps`` with options builds one per call)."""

_CODECS: dict[Any, Codec] = {}


def codec(declared: Any) -> Codec:
    """The :class:`Codec` of the type ``declared`` (memoized).

    Types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes`` (hex text), enums (their
    values), ``tuple[T, ...]``, ``tuple[A, B]``, ``list[T]``, ``frozenset[T]`` and ``set[T]``
    (sorted lists), ``dict[str, V]`` (a JSON object) and ``dict[K, V]`` (a list of pairs),
    ``Optional[T]`` and unions whose members have different JSON forms, :data:`~hp_invariants.api.Plain`,
    :class:`Raw` (JSON data passed through), and ``NamedTuple`` and dataclass records (lists of their fields, by their annotations; a
    ``NamedTuple`` record also takes a plain tuple of its fields). Names in string annotations are
    looked up in the record's module, then in :mod:`hp_invariants.api`. Raises ``TypeError`` for any
    other type (``Any``, ``object``, a union whose members share a JSON form)."""
    try:
        return _CODECS[declared]
    except (KeyError, TypeError):
        pass
    built = _Builder().codec(declared, _namespace(None))
    try:
        _CODECS[declared] = built
    except TypeError:  # an unhashable annotation: not memoized
        pass
    return built


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
_INT = frozenset({int})
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
        count = len(items)

        def encode(value: Any) -> list:
            if type(value) not in (tuple, list) or len(value) != count:
                raise TypeError(f"{_type_name(declared)}: {count} items expected")
            return [item.encode(v) for item, v in zip(items, value)]  # type: ignore[misc]

        def decode(data: Any) -> tuple:
            if type(data) is not list or len(data) != count:
                raise ValueError(f"{_type_name(declared)}: {count} items expected")
            return tuple([item.decode(v) for item, v in zip(items, data)])  # type: ignore[misc]

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
        count = len(fields)
        name = declared.__name__
        make = declared._make if named_tuple else (lambda values: declared(*values))  # type: ignore[attr-defined]

        if named_tuple:
            def encode(value: Any) -> list:
                if not isinstance(value, (tuple, list)) or len(value) != count:
                    raise TypeError(f"{name}: {count} fields expected, got {type(value).__name__}")
                return [c.encode(v) for c, v in zip(converters, value)]  # type: ignore[misc]
        else:
            def encode(value: Any) -> list:
                if not isinstance(value, declared):
                    raise TypeError(f"{name} expected, got {type(value).__name__}")
                return [c.encode(getattr(value, f)) for c, f in zip(converters, fields)]  # type: ignore[misc]

        def decode(data: Any) -> Any:
            if type(data) is not list or len(data) != count:
                raise ValueError(f"{name}: {count} fields expected")
            return make([c.decode(v) for c, v in zip(converters, data)])  # type: ignore[misc]

        slot.set(encode, decode)


def _deferred(slot: _Slot) -> _Slot:
    """Converters of a slot still being filled (a recursive type), resolved when first called."""
    out = _Slot()
    out.set(lambda value: slot.encode(value), lambda data: slot.decode(data))  # type: ignore[misc]
    return out


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


def _plain(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if isinstance(value, tuple) or kind is list:
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((_plain(v) for v in value), key=repr)}
    raise TypeError(f"no plain-data form for {kind.__name__}")


def _unplain(data: Any) -> Any:
    kind = type(data)
    if data is None or kind in (str, int, float, bool):
        return data
    if kind is list:
        return tuple(_unplain(v) for v in data)
    if kind is dict and len(data) == 1 and type(data.get("set")) is list:
        return frozenset(_unplain(v) for v in data["set"])
    raise TypeError(f"not a plain-data summary: {kind.__name__}")


# ---------------------------------------------------------------------- cache files
CACHE_FORMAT = "hp-invariants-cache/2"
"""The ``format`` field of every cache file (JSON); another value: the file is ignored (2: built
objects keep their text offsets, checksums and keys in a binary index, see :func:`read_built`)."""


def default_cache_dir() -> str:
    """``$HP_INVARIANTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hp-invariants``, else ``~/.cache/hp-invariants``."""
    env = os.environ.get("HP_INVARIANTS_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hp-invariants")


def cache_tag(facts: Sequence[ProjectFacts] = ()) -> str:
    """The version tag of a cache file: package version, Python version, each facts' version, and a
    digest of the installed package's own files (names, sizes, mtimes), so that a changed rule or
    summarizer never reads results of the old code even when nobody bumped a version."""
    from hp_invariants import __version__ as version  # noqa: PLC0415

    kinds = ",".join(f"{f.key}:{f.version}" for f in sorted(facts, key=lambda f: f.key))
    return f"{CACHE_FORMAT}/{kinds}/{version}/{code_digest()}/py{sys.version_info[0]}.{sys.version_info[1]}"


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


def root_digest(root: Path, kinds: str) -> str:
    """The 20-hex-digit name part of the cache files of ``root`` (and ``kinds``)."""
    return hashlib.blake2b(f"{root}\0{kinds}".encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()


def read_json(path: str, tag: str, root: Path) -> dict | None:
    """Return the ``data`` of the cache file ``path`` when it is a JSON object of this ``tag`` and
    ``root``; ``None`` when missing, unreadable, malformed or of another version or root. Plain
    :func:`json.loads`: nothing in the file can run code."""
    try:
        with open(path, "rb") as handle:
            content = _checked(handle.read())
        if content is None:  # damaged (even into other well-formed JSON): as if missing
            return None
        return _header_data(json.loads(content), tag, root)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None


def _header_data(loaded: Any, tag: str, root: Path) -> dict | None:
    """The ``data`` of a cache file's decoded JSON part when it is of this format, ``tag`` and ``root``."""
    if not isinstance(loaded, dict) or loaded.get("format") != CACHE_FORMAT or loaded.get("tag") != tag \
            or loaded.get("root") != str(root) or not isinstance(loaded.get("data"), dict):
        return None
    return loaded["data"]


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


def write_json(path: str, tag: str, root: Path, data: Any) -> None:
    """Write ``data`` as a cache file atomically (temp file + rename), with its checksum line; a
    read-only location only costs speed (nothing is raised)."""
    try:
        prepare_cache_dir(os.path.dirname(path))
        _write_atomically(path, with_checksum(_json_line(tag, root, data)))
    except (OSError, ValueError, TypeError):
        pass


def _json_line(tag: str, root: Path, data: Any) -> bytes:
    """The JSON part of a cache file: one line (ASCII, so it holds no raw newline)."""
    return json.dumps({"format": CACHE_FORMAT, "tag": tag, "root": str(root), "data": data},
                      separators=(",", ":"), ensure_ascii=True).encode("ascii")


def with_checksum(content: bytes) -> bytes:
    """``content`` followed by a newline and its CRC-32 in 8 hex digits: what every cache file ends
    with, so that a damaged one (a flipped byte, a cut, swapped keys: damage that may leave valid
    JSON) reads as missing instead of as other facts. CRC-32 runs at C speed (13 MB: 3.5 ms). A built
    object's file checks its texts one by one instead (:func:`read_built`)."""
    return content + b"\n%08x" % zlib.crc32(content)


def _checked(raw: bytes) -> bytes | None:
    """The content of a cache file's bytes ``raw`` when its checksum (:func:`with_checksum`) holds."""
    size = _content_size(raw)
    return None if size is None else raw[:size]


def _content_size(raw: bytes) -> int | None:
    """The length of a cache file's content (what precedes its checksum line) when the checksum
    (:func:`with_checksum`) holds, else ``None``; the content is checked in place, not copied."""
    if len(raw) < 9 or raw[-9:-8] != b"\n":
        return None
    try:
        expected = int(raw[-8:], 16)
    except ValueError:
        return None
    with memoryview(raw) as view:
        return len(raw) - 9 if zlib.crc32(view[:-9]) == expected else None


def _write_atomically(path: str, body: bytes) -> None:
    import tempfile  # noqa: PLC0415 - only when the cache is written

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


# ---------------------------------------------------------------------- the per-file results cache
CACHEABLE_PROBLEMS = frozenset({"E0001"})
"""Problems that depend only on a file's bytes (syntax and decoding errors) are cached; a rule error
(F0002) or a timeout (F0003) is computed again."""


class ResultsCache:
    """Per-file results of earlier runs, one JSON file per project root in the project's cache folder
    (``results-<hash>.json``), as ruff keeps one.

    An entry is used only when the file's bytes (content digest), its resolved settings
    (``Settings.key``) and the project facts its findings read are unchanged: for each facts kind the
    check read, either the project's fingerprint (every file's content) is the one recorded, or the
    facts kind's :meth:`~hp_invariants.api.ProjectFacts.still_valid` replays what the file's check
    read and gets the same answers. Anything else, or any malformed entry, is a miss (the file is
    checked again). Only :meth:`Session.check_bytes` reads it; ``fix`` never does.
    """

    def __init__(self, project: Project):
        self.project = project
        self._loaded: dict[Path, dict] = {}
        self._fresh: dict[Path, dict[str, Any]] = {}
        self.stats = {"hits": 0, "misses": 0}

    def file_of(self, root: Path) -> str:
        """The results file of the project ``root``."""
        return os.path.join(self.project.cache_folder(root), f"results-{root_digest(root, 'results')}.json")

    def entries(self, root: Path) -> dict:
        """The stored entries of ``root`` (loaded once)."""
        found = self._loaded.get(root)
        if found is None:
            data = read_json(self.file_of(root), cache_tag(), root) or {}
            files = data.get("files")
            found = self._loaded[root] = files if isinstance(files, dict) else {}
        return found

    @staticmethod
    def key(digest: bytes, settings: Settings, with_project: bool) -> str:
        """The key of a file's entry: its content digest, its settings, whether project facts exist."""
        import hashlib  # noqa: PLC0415

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
        entry = self.entries(root).get(rel)
        if not isinstance(entry, dict) or entry.get("key") != self.key(digest, settings, True):
            self.stats["misses"] += 1
            return None
        try:
            if not self._deps_valid(path, digest, settings, entry.get("deps")):
                self.stats["misses"] += 1
                return None
            result = FileResult(path=path, findings=[_finding_from(path, f) for f in entry["findings"]],
                                problems=[_problem_from(path, p) for p in entry["problems"]])
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return result

    def _deps_valid(self, path: str, digest: bytes, settings: Settings, deps: Any) -> bool:
        if not isinstance(deps, dict):
            return False
        facts_by_key = {r.project_facts.key: r.project_facts for r in settings.rules if r.project_facts is not None}
        for key, dep in deps.items():
            facts = facts_by_key.get(key)
            if facts is None or not isinstance(dep, dict):
                return False
            if dep.get("fp") == self.project.fingerprint(path, [facts]):
                continue
            if "pre" in dep:  # only a prefilter that reads the project skipped a rule: ask it again
                rule = next((r for r in settings.rules if r.prefilter_reads_project and r.project_facts is facts), None)
                if rule is None or rule.prefilter_record(self.project.data(facts, path),
                                                         settings.options.get(rule.rule_id)) != dep["pre"]:
                    return False
                continue
            if not facts.still_valid(self.project.data(facts, path), path, digest, dep.get("rec")):
                return False
        return True

    def make_entry(self, path: str, digest: bytes, settings: Settings, result: FileResult,
                   tracking: _TrackingProject | None, where: tuple[Path, str] | None = None) -> dict | None:
        """The entry to store for ``result`` (``None``: not cacheable); ``where``: see :meth:`lookup`."""
        if any(p.problem_id not in CACHEABLE_PROBLEMS for p in result.problems):
            return None
        deps: dict[str, Any] = {}
        root = where[0] if where else self.project.root_of(path)
        for key, (facts, tracker, _view) in (tracking.used.items() if tracking else ()):
            deps[key] = {"fp": self.project.root_fingerprint(root, [facts]), "rec": facts.dependencies(tracker, path)}
        for key, record in (tracking.prefilters.items() if tracking else ()):
            if key not in deps:
                facts = next(r.project_facts for r in settings.rules if r.project_facts is not None
                             and r.project_facts.key == key)
                deps[key] = {"fp": self.project.root_fingerprint(root, [facts]), "pre": record}
        try:
            findings = [_finding_to(f) for f in result.findings]
        except TypeError:
            return None
        return {"key": self.key(digest, settings, True), "deps": deps, "findings": findings,
                "problems": [[p.problem_id, p.symbol, p.line, p.col, p.message, p.hint] for p in result.problems]}

    def store(self, path: str, entry: dict, where: tuple[Path, str] | None = None) -> None:
        """Remember ``entry`` for ``path`` (written by :meth:`save`); ``where``: see :meth:`lookup`."""
        root, rel = where or self.locate(path)
        self._fresh.setdefault(root, {})[rel] = entry

    def save(self) -> None:
        """Write the stored entries of each root (merged with the old ones of files that still exist)."""
        for root, fresh in self._fresh.items():
            old = self.entries(root)
            if all(old.get(rel) == entry for rel, entry in fresh.items()):
                continue
            merged = {rel: e for rel, e in old.items() if rel not in fresh and os.path.exists(os.path.join(root, rel))}
            merged.update(fresh)
            write_json(self.file_of(root), cache_tag(), root, {"files": merged})
            self._loaded[root] = merged
        self._fresh.clear()


def _rel(path: str, root: Path) -> str:
    return os.path.relpath(os.path.abspath(path), root)


_ARG_TYPES = (str, int, float, bool, type(None))


def _finding_to(f: Finding) -> list:
    if not all(type(a) in _ARG_TYPES for a in f.args):
        raise TypeError("finding arguments are not plain data")
    fix = None
    if f.fix is not None:
        fix = [[[list(e.start), list(e.end), e.content] for e in f.fix.edits], f.fix.applicability.value, f.fix.message]
    return [f.rule_id, f.symbol, f.line, f.col, f.end_line, f.end_col, f.message, f.confidence.value, fix,
            list(f.args), f.obj]


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError("int expected")
    return value


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("str expected")
    return value


def _finding_from(path: str, data: Any) -> Finding:
    rule_id, symbol, line, col, end_line, end_col, message, confidence, fix, args, obj = data
    made_fix = None
    if fix is not None:
        edits, applicability, fix_message = fix
        made_fix = Fix(tuple(Edit((_int(s[0]), _int(s[1])), (_int(e[0]), _int(e[1])), _text(c)) for s, e, c in edits),
                       Applicability(applicability), _text(fix_message))
    if type(args) is not list or not all(type(a) in _ARG_TYPES for a in args):
        raise TypeError("bad arguments")
    return Finding(rule_id=_text(rule_id), symbol=_text(symbol), path=path, line=_int(line), col=_int(col),
                   end_line=_int(end_line), end_col=_int(end_col), message=_text(message),
                   confidence=Confidence(confidence), fix=made_fix, args=tuple(args), obj=_text(obj))


def _problem_from(path: str, data: Any) -> FileProblem:
    problem_id, symbol, line, col, message, hint = data
    if problem_id not in CACHEABLE_PROBLEMS:
        raise ValueError("not a cacheable problem")
    return FileProblem(_text(problem_id), _text(symbol), path, _int(line), _int(col), _text(message), _text(hint))
