"""The ids of the requests logged last, each with its candidates' ids: what feedback is checked against.

Bounded: the oldest entry is dropped when a new one would pass the capacity, so its memory is the
capacity times an entry (a request id and a tuple of candidate ids). It lives in one process:
a request logged by another replica, before a restart, or longer ago than the capacity reaches,
is not here, which says nothing about whether it was ranked.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class RecentRequests:
    """The last ``capacity`` logged requests' ids and candidate ids (0: none is kept)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, request_id: str, candidate_ids: Sequence[str]) -> None:
        """Remember a logged request (a request id seen again replaces its entry)."""
        if self.capacity == 0:
            return
        self._entries.pop(request_id, None)
        self._entries[request_id] = tuple(candidate_ids)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def candidates(self, request_id: str) -> tuple[str, ...] | None:
        """The candidate ids of ``request_id``, or None when it is not held."""
        return self._entries.get(request_id)
