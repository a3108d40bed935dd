"""The session store: one SQLite file per session, the single source of truth of a search.

    from kforge_desktop.store import SessionStore
    store = SessionStore(path)              # creates the file if needed
    store = SessionStore.open(path)         # an existing session only
    nodes = store.nodes(problem_id)         # list[NodeRecord]
    pack(path); with readable(stored(path)) as plain: ...   # finished sessions kept as .kforge.gz
"""

from .archive import pack, readable, stored
from .records import (
    EventRecord,
    LLMCallRecord,
    NodeRecord,
    ProblemRecord,
    Productivity,
    SearchState,
    TimeSplit,
)
from .session import SessionStore, StoreError

__all__ = [
    "EventRecord",
    "LLMCallRecord",
    "NodeRecord",
    "ProblemRecord",
    "Productivity",
    "SearchState",
    "SessionStore",
    "StoreError",
    "TimeSplit",
    "pack",
    "readable",
    "stored",
]
