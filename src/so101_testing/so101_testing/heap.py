"""Short garbage collections for tests that serve the virtual bus from a thread of the client's process."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Move everything allocated so far out of the collector's reach for the duration.

    A test that imports LeRobot holds ~280k objects; a full collection of them takes ~120 ms on this
    machine and holds the interpreter lock all along, so a virtual servo answering from a thread of the
    same process misses the SDK's 50 ms reply deadline, which a real servo (its own chip) never would.
    Frozen, a full collection only looks at what the test itself allocates.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
