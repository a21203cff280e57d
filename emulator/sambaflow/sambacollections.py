"""sambaflow.sambacollections: OrderedSet, a set that keeps the order items were added in.

Model code uses it to split a model's parameters into optimizer groups while keeping
the model's order (a plain set of tensors would order them by address).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSet
from typing import Any


class OrderedSet(MutableSet):
    """A set in insertion order; items are compared as set members are (hash, then ==)."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: dict[Any, None] = {}
        for item in items:
            self._items[item] = None

    def __contains__(self, item: Any) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Any) -> None:
        self._items[item] = None

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)

    def update(self, *iterables: Iterable[Any]) -> None:
        for items in iterables:
            for item in items:
                self._items[item] = None

    def __getitem__(self, index: int) -> Any:
        return list(self._items)[index]

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._items)!r})"


__all__ = ["OrderedSet"]
