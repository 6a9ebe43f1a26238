"""A step's inputs in its own layout, packed on the first call with a set of arrays and reused by every later
call on the same arrays (``Variant.prepared``)."""

from __future__ import annotations

import weakref

from zoo.runtime.arrays import address


class PreparedInputs:
    """A step's inputs in its own layout (``pack``), made once per set of arrays and handed to every later call.

    An entry is keyed by the identity of each input that ``pack`` reordered (a weak reference: the entry goes when
    one of them does, and its packed copies with it) and by every input's layout (shape, strides, dtype, 16-byte
    alignment: what ``pack`` decides from), so a call on the same weights and a new x finds the weights packed, and
    one whose x is laid out otherwise is packed again. Values are not compared: after changing packed inputs in
    place, ``clear()``. ``hits`` and ``misses`` count the calls that found an entry and those that packed."""

    LIMIT = 8  # entries kept, the oldest dropped first: a model's layers are more weights, each its own entry

    def __init__(self, pack):
        self.pack = pack
        self.entries = []  # [(layouts, ((position, weak reference), ...), packed inputs or None where unchanged)]
        self.hits = self.misses = 0

    def __call__(self, inputs):
        layouts = [None if a is None else (a.shape, a.strides, a.dtype, address(a) & 15) for a in inputs]  # every call
        for known, refs, packed in reversed(self.entries):
            if known == layouts and all(ref() is inputs[i] for i, ref in refs):
                self.hits += 1
                return tuple(a if p is None else p for a, p in zip(inputs, packed, strict=True))
        self.misses += 1
        result = tuple(self.pack(*inputs))
        changed = [i for i, (a, p) in enumerate(zip(inputs, result, strict=True)) if a is not p]
        try:
            refs = tuple((i, weakref.ref(inputs[i], self._forget)) for i in changed)
        except TypeError:  # an array that takes no weak reference: packed again on every call
            return result
        self.entries.append((layouts, refs, tuple(result[i] if i in changed else None for i in range(len(result)))))
        del self.entries[: -self.LIMIT]
        return result

    def _forget(self, ref):
        """An input of some entries is gone: drop them (their packed copies too)."""
        self.entries = [e for e in self.entries if all(r is not ref for _, r in e[1])]

    def clear(self):
        self.entries = []
