"""Memo: a bounded cache keyed on the identity of objects (a spec, a profile, a defines dict,
a read-only array) besides plain values.

The key holds id()s, which are cheap to hash where the object's value is not (or has no hash).
An id is reused only once its object is gone, and the entry keeps its objects alive, so while
an entry lives no other object can take its ids; a hit is checked all the same, as the held
tuple's equality: a tuple compares its items by identity first, so the same objects are equal
without asking their own __eq__ (half the time of an `is` a pair; hot: some 40 gets a predict)."""

MISS = object()  # get's answer when nothing is remembered


class Memo:
    """A dict of key -> (the objects whose ids the key holds, the value), cleared when it
    outgrows `size` (a sweep asks for a few hundred)."""

    __slots__ = ("_d", "_size")

    def __init__(self, size: int = 4096):
        self._d: dict = {}
        self._size = size

    def get(self, key, *held):
        """The value remembered under `key` for these objects (`is`), else MISS."""
        e = self._d.get(key)
        return e[1] if e is not None and e[0] == held else MISS

    def put(self, key, held: tuple, value):
        """Remember `value` under `key`, keeping `held` (the objects whose ids the key holds)
        alive; returns value."""
        if len(self._d) > self._size:
            self._d.clear()
        self._d[key] = (held, value)
        return value
