"""What Job, Node and Partition share: pyslurm's names over one command's record,
and collections of them keyed by id or name."""

from __future__ import annotations

from collections.abc import Callable, Iterable


class Record:
    """A Slurm object as one command reported it (a dict in `_info`).

    `_FIELDS` maps pyslurm's attribute names to the record's keys, optionally
    with a conversion: {"total_cpus": ("TotalCPUs", number)}. Properties the
    subclass computes are listed in `_DERIVED`; to_dict() gives both.
    """

    _FIELDS: dict[str, str | tuple[str, Callable]] = {}
    _DERIVED: tuple[str, ...] = ()

    def __init__(self, info: dict | None = None):
        self._info: dict = dict(info or {})

    def __getattr__(self, name: str):
        spec = type(self)._FIELDS.get(name)
        if spec is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        key, convert = (spec, None) if isinstance(spec, str) else spec
        value = self._info.get(key)
        return convert(value) if convert else value

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in (*self._FIELDS, *self._DERIVED)}

    as_dict = to_dict


class Collection(dict):
    """Records keyed by `_key` (id or name); each subclass has its own load()."""

    _key = "name"

    def __init__(self, records: Iterable[Record] | dict | None = None):
        super().__init__()
        for record in (records.values() if isinstance(records, dict) else records or []):
            self[getattr(record, self._key)] = record

    def reload(self) -> Collection:
        self.clear()
        self.update(type(self).load())
        return self

    def as_dict(self) -> dict:
        return {key: record.to_dict() for key, record in self.items()}

    def _sum(self, attribute: str) -> int:
        return sum(v for r in self.values() if isinstance(v := getattr(r, attribute), int))
