"""``SessionStore``: the session's SQLite file, the single source of truth for a search.

Why it looks like this:
- One writer (the engine thread) and any number of readers (GUI thread, CLI): every thread gets its
  own connection (WAL lets readers read while the writer writes), so one ``SessionStore`` object
  may be shared between threads, or each thread may open its own on the same file.
- Crash safety: every step that must be all-or-nothing (a generated node together with its LLM
  call; a verdict together with the node's new state) is one transaction. After ``kill -9``,
  ``reset_in_flight()`` puts nodes that were being evaluated back to ``pending`` and the engine
  evaluates them again; an LLM answer that was not yet stored is simply asked for again.
- Plain data: opening a session reads rows; it never imports or runs a candidate, and nothing is
  pickled (verdicts, configs and RNG states are JSON).
- One job over 500 lines: every query of the session file is here, so the schema has one reader.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..kernels.verdict import Verdict
from ..problem.problem import Problem
from .archive import is_packed
from .records import (
    KINDS,
    NODE_STATES,
    ORIGINS,
    EventRecord,
    LLMCallRecord,
    NodeRecord,
    ProblemRecord,
    Productivity,
    SearchState,
    TimeSplit,
)
from .schema import DDL, SCHEMA_VERSION

FAILED_STATUSES = ("incorrect", "compile_error", "runtime_error", "crashed", "timeout", "rejected")

_NODE_COLUMNS = (
    "n.id, n.problem_id, n.parent_id, n.origin, n.state, n.language, n.directive, {source}, {kernel}, "
    "n.created_at, n.pinned, n.excluded, n.visits, n.value, n.kind, n.duplicate_of, v.json, n.llm_call_id, n.note"
)


class StoreError(Exception):
    """A session file that cannot be used; ``str(err)`` is one sentence a user can act on."""


class SessionStore:
    """One session file. Create or open with ``SessionStore(path)``; ``SessionStore.open(path)``
    refuses a file that does not exist or is not a session.

    Reading (any thread): ``problems()``, ``problem(id)``, ``nodes(problem_id)``, ``node(id)``,
    ``children(id)``, ``changed_since(problem_id, rev)``, ``best_node``, ``chosen_node``,
    ``best_path``, ``llm_call(id)``, ``events(...)``, ``search_state``, ``productivity``,
    ``time_split``, ``environment()``.
    Writing (the engine, or a view while no engine runs): ``add_problem``, ``add_node``,
    ``add_llm_call``, ``record_verdict``, ``set_state``, ``set_pinned``, ``set_excluded``,
    ``update_stats``, ``log_event``, ``save_search_state``, ``reset_in_flight``.
    """

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"Session file {self.path} does not exist.")
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a folder; give the path of a session file.")
        if is_packed(self.path):
            raise StoreError(f"{self.path} is a packed session; unpack it first (gunzip -k {self.path}).")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._init_schema(create)

    @classmethod
    def open(cls, path: str | Path) -> SessionStore:
        """Open an existing session (never creates one)."""
        return cls(path, create=False)

    # -- connections -------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # WAL+NORMAL: durable across a process kill
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute("PRAGMA busy_timeout=30000")
            except sqlite3.DatabaseError as err:
                raise StoreError(f"{self.path} is not a Kernel Forge session file ({err}).") from None
            self._local.conn = conn
            self._local.depth = 0
            with self._conns_lock:
                self._all_conns.append(conn)
        return conn

    def _init_schema(self, create: bool) -> None:
        conn = self._conn()
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path} is not a Kernel Forge session file ({err}).") from None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = json.loads(row[0]) if row else None
            if version is None:
                raise StoreError(f"{self.path} is not a Kernel Forge session file.")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by a newer Kernel Forge (session format {version}); update the app."
                )
            return
        if tables:
            raise StoreError(f"{self.path} is an SQLite file but not a Kernel Forge session.")
        if not create:
            raise StoreError(f"{self.path} is not a Kernel Forge session file.")
        conn.executescript(DDL)
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('created_at', ?)", (json.dumps(time.time()),))

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (nestable: the outermost commits)."""
        conn = self._conn()
        depth = self._local.depth
        if depth == 0:
            conn.execute("BEGIN IMMEDIATE")
        self._local.depth = depth + 1
        try:
            yield conn
        except BaseException:
            self._local.depth = depth
            if depth == 0:
                conn.execute("ROLLBACK")
            raise
        self._local.depth = depth
        if depth == 0:
            conn.execute("COMMIT")

    @contextmanager
    def transaction(self) -> Iterator[SessionStore]:
        """Group several writes so they land together or not at all (e.g. node + LLM call)."""
        with self._tx():
            yield self

    def close(self) -> None:
        with self._conns_lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _q(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self._conn().execute(sql, args).fetchall()

    # -- meta and environment ----------------------------------------------------------------------

    def set_meta(self, key: str, value: object) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: object = None) -> object:
        rows = self._q("SELECT value FROM meta WHERE key=?", (key,))
        return json.loads(rows[0][0]) if rows else default

    def set_environment(self, facts: dict) -> None:
        """The device and software the verdicts were measured on (GPU, driver, CUDA, torch, CPU)."""
        self.set_meta("environment", facts)

    def environment(self) -> dict:
        return dict(self.meta("environment", {}) or {})

    # -- problems ----------------------------------------------------------------------------------

    def add_problem(self, problem: Problem, device: str = "cpu", language: str = "cpp", info: dict | None = None) -> int:
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO problems (name, source, path, digest, device, language, info, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (problem.name, problem.source, problem.path, problem.digest, device, language,
                 json.dumps(info or {}), time.time()),
            )
            return int(cur.lastrowid)

    def set_problem_info(self, problem_id: int, info: dict) -> None:
        with self._tx() as c:
            c.execute("UPDATE problems SET info=? WHERE id=?", (json.dumps(info), problem_id))

    def problems(self) -> list[ProblemRecord]:
        rows = self._q("SELECT id, name, source, path, digest, device, language, info, created_at FROM problems ORDER BY id")
        return [_problem(r) for r in rows]

    def problem(self, problem_id: int) -> ProblemRecord:
        rows = self._q(
            "SELECT id, name, source, path, digest, device, language, info, created_at FROM problems WHERE id=?",
            (problem_id,),
        )
        if not rows:
            raise StoreError(f"The session has no problem {problem_id}.")
        return _problem(rows[0])

    # -- nodes: writing ----------------------------------------------------------------------------

    def _next_rev(self, c: sqlite3.Connection) -> int:
        return int(c.execute("SELECT COALESCE(MAX(rev), 0) + 1 FROM nodes").fetchone()[0])

    def add_node(
        self,
        problem_id: int,
        parent_id: int | None,
        origin: str,
        kind: str,
        language: str,
        source: str = "",
        kernel_source: str = "",
        directive: str = "",
        state: str = "pending",
        note: str = "",
        norm_code: str = "",
        duplicate_of: int | None = None,
        llm_call_id: int | None = None,
    ) -> int:
        if origin not in ORIGINS:
            raise ValueError(f"unknown origin {origin!r}")
        if state not in NODE_STATES:
            raise ValueError(f"unknown node state {state!r}")
        if kind not in KINDS:
            raise ValueError(f"unknown node kind {kind!r}")
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO nodes (problem_id, parent_id, origin, kind, state, language, directive, source, "
                "kernel_source, norm_code, note, duplicate_of, llm_call_id, created_at, rev) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (problem_id, parent_id, origin, kind, state, language, directive, source, kernel_source,
                 norm_code, note, duplicate_of, llm_call_id, time.time(), self._next_rev(c)),
            )
            return int(cur.lastrowid)

    def add_llm_call(
        self,
        problem_id: int | None,
        purpose: str,
        model: str,
        prompt: str,
        response: str,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        seconds: float | None = None,
        params: dict | None = None,
    ) -> int:
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO llm_calls (problem_id, purpose, model, prompt, response, prompt_tokens, "
                "completion_tokens, seconds, params, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (problem_id, purpose, model, prompt, response, prompt_tokens, completion_tokens, seconds,
                 json.dumps(params or {}), time.time()),
            )
            return int(cur.lastrowid)

    def set_state(self, node_id: int, state: str) -> None:
        if state not in NODE_STATES:
            raise ValueError(f"unknown node state {state!r}")
        with self._tx() as c:
            c.execute("UPDATE nodes SET state=?, rev=? WHERE id=?", (state, self._next_rev(c), node_id))

    def record_verdict(self, node_id: int, verdict: Verdict, reward: float | None = None) -> None:
        """Store the verdict and mark the node evaluated, together (a re-evaluation replaces it)."""
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO verdicts (node_id, status, speedup, latency_ms, baseline_ms, build_s, "
                "verify_s, time_s, json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (node_id, verdict.status, verdict.speedup, verdict.latency_ms, verdict.baseline_ms,
                 verdict.build_s, verdict.verify_s, verdict.time_s, verdict.to_json(), time.time()),
            )
            c.execute(
                "UPDATE nodes SET state='evaluated', reward=?, rev=? WHERE id=?",
                (reward, self._next_rev(c), node_id),
            )

    def set_pinned(self, node_id: int, pinned: bool = True) -> None:
        """Pin a node (the chosen kernel of its problem); pinning one unpins any other of that problem."""
        with self._tx() as c:
            rev = self._next_rev(c)
            if pinned:
                pid = c.execute("SELECT problem_id FROM nodes WHERE id=?", (node_id,)).fetchone()
                if pid is None:
                    raise StoreError(f"The session has no node {node_id}.")
                c.execute("UPDATE nodes SET pinned=0, rev=? WHERE problem_id=? AND pinned=1 AND id<>?",
                          (rev, pid[0], node_id))
            c.execute("UPDATE nodes SET pinned=?, rev=? WHERE id=?", (int(pinned), rev, node_id))

    def set_excluded(self, node_id: int, excluded: bool = True) -> None:
        with self._tx() as c:
            c.execute("UPDATE nodes SET excluded=?, rev=? WHERE id=?", (int(excluded), self._next_rev(c), node_id))

    def update_stats(self, stats: list[tuple[int, int, float]]) -> None:
        """Set (node_id, visits, value) for several nodes at once (after backpropagation)."""
        if not stats:
            return
        with self._tx() as c:
            rev = self._next_rev(c)
            c.executemany("UPDATE nodes SET visits=?, value=?, rev=? WHERE id=?",
                          [(v, val, rev, nid) for nid, v, val in stats])

    def reset_in_flight(self, problem_id: int | None = None) -> list[int]:
        """After a crash: nodes caught 'evaluating' go back to 'pending'. Returns all pending ids."""
        where = "" if problem_id is None else " AND problem_id=?"
        args: tuple = () if problem_id is None else (problem_id,)
        with self._tx() as c:
            rev = self._next_rev(c)
            c.execute(f"UPDATE nodes SET state='pending', rev=? WHERE state='evaluating'{where}", (rev, *args))
            rows = c.execute(f"SELECT id FROM nodes WHERE state='pending'{where} ORDER BY id", args).fetchall()
        return [r[0] for r in rows]

    # -- nodes: reading ----------------------------------------------------------------------------

    def _select_nodes(self, where: str, args: tuple, with_source: bool = True, order: str = "n.id") -> list[NodeRecord]:
        cols = _NODE_COLUMNS.format(
            source="n.source" if with_source else "''", kernel="n.kernel_source" if with_source else "''"
        )
        sql = f"SELECT {cols} FROM nodes n LEFT JOIN verdicts v ON v.node_id = n.id WHERE {where} ORDER BY {order}"
        return [_node(r) for r in self._q(sql, args)]

    def node(self, node_id: int) -> NodeRecord | None:
        rows = self._select_nodes("n.id=?", (node_id,))
        return rows[0] if rows else None

    def nodes(self, problem_id: int, with_source: bool = True) -> list[NodeRecord]:
        """Every node of a problem in creation order (``with_source=False`` for a light tree view)."""
        return self._select_nodes("n.problem_id=?", (problem_id,), with_source)

    def children(self, node_id: int) -> list[NodeRecord]:
        return self._select_nodes("n.parent_id=?", (node_id,))

    def root(self, problem_id: int) -> NodeRecord | None:
        rows = self._select_nodes("n.problem_id=? AND n.origin='root'", (problem_id,))
        return rows[0] if rows else None

    def revision(self) -> int:
        return int(self._q("SELECT COALESCE(MAX(rev), 0) FROM nodes")[0][0])

    def changed_since(self, problem_id: int, rev: int, with_source: bool = False) -> tuple[list[NodeRecord], int]:
        """Nodes added or changed after revision ``rev``, and the revision to ask from next time."""
        now = self.revision()
        if now <= rev:
            return [], rev
        return self._select_nodes("n.problem_id=? AND n.rev>? AND n.rev<=?", (problem_id, rev, now), with_source), now

    def pending_nodes(self, problem_id: int) -> list[NodeRecord]:
        return self._select_nodes("n.problem_id=? AND n.state IN ('pending','evaluating')", (problem_id,))

    def find_duplicate(self, problem_id: int, norm_code: str) -> int | None:
        """The first node of the problem whose normalised code equals ``norm_code`` (not itself a duplicate)."""
        if not norm_code:
            return None
        rows = self._q(
            "SELECT id FROM nodes WHERE problem_id=? AND norm_code=? AND state<>'duplicate' ORDER BY id LIMIT 1",
            (problem_id, norm_code),
        )
        return rows[0][0] if rows else None

    def best_node(self, problem_id: int) -> NodeRecord | None:
        """The fastest correct candidate (the root, i.e. eager, is never a candidate).

        Never one that leaves part of the work to PyTorch (``Verdict.delegates``) or whose
        measurement was disturbed: those are chosen only when the user pins them. After a re-timing
        (``search.retiming``) the choice is made among the nodes it measured together.
        """
        rows = self._select_nodes(
            "n.problem_id=? AND n.origin<>'root' AND v.status='ok' AND v.speedup IS NOT NULL "
            "AND json_array_length(json_extract(v.json, '$.library_calls')) = 0 "
            "AND coalesce(json_extract(v.json, '$.disturbed'), '') = ''",
            (problem_id,),
            # a re-timing decides: its nodes were measured together, the others alone
            # then a measured win (faster beyond the noise) before a figure within the noise
            order="coalesce(json_extract(v.json, '$.retimed'), 0) > 0 DESC, "
                  "(coalesce(json_extract(v.json, '$.significant'), 0) AND v.speedup > 1) DESC, "
                  "v.speedup DESC, n.id ASC LIMIT 1",
        )
        return rows[0] if rows else None

    def pinned_node(self, problem_id: int) -> NodeRecord | None:
        rows = self._select_nodes("n.problem_id=? AND n.pinned=1", (problem_id,))
        return rows[0] if rows else None

    def chosen_node(self, problem_id: int) -> NodeRecord | None:
        """What export uses: the pinned node if the user pinned one, else the fastest correct one."""
        return self.pinned_node(problem_id) or self.best_node(problem_id)

    def path_to(self, node_id: int) -> list[int]:
        """Node ids from the root down to ``node_id``."""
        path: list[int] = []
        current: int | None = node_id
        while current is not None:
            path.append(current)
            rows = self._q("SELECT parent_id FROM nodes WHERE id=?", (current,))
            current = rows[0][0] if rows else None
        return path[::-1]

    def best_path(self, problem_id: int) -> list[int]:
        node = self.chosen_node(problem_id)
        return self.path_to(node.id) if node else []

    # -- LLM calls ---------------------------------------------------------------------------------

    def llm_call(self, call_id: int) -> LLMCallRecord | None:
        rows = self._q(
            "SELECT id, problem_id, purpose, model, prompt, response, prompt_tokens, completion_tokens, seconds, "
            "params, created_at FROM llm_calls WHERE id=?", (call_id,),
        )
        return _llm_call(rows[0]) if rows else None

    def llm_calls(self, problem_id: int | None = None) -> list[LLMCallRecord]:
        where, args = ("WHERE problem_id=?", (problem_id,)) if problem_id is not None else ("", ())
        rows = self._q(
            "SELECT id, problem_id, purpose, model, prompt, response, prompt_tokens, completion_tokens, seconds, "
            f"params, created_at FROM llm_calls {where} ORDER BY id", args,
        )
        return [_llm_call(r) for r in rows]

    # -- events ------------------------------------------------------------------------------------

    def log_event(self, problem_id: int | None, kind: str, message: str = "", level: str = "info",
                  payload: dict | None = None) -> int:
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO events (problem_id, t, kind, level, message, payload) VALUES (?, ?, ?, ?, ?, ?)",
                (problem_id, time.time(), kind, level, message, json.dumps(payload or {})),
            )
            return int(cur.lastrowid)

    def events(self, problem_id: int | None = None, since_id: int = 0, limit: int | None = None) -> list[EventRecord]:
        where = "id>?" + ("" if problem_id is None else " AND problem_id=?")
        args: tuple = (since_id,) if problem_id is None else (since_id, problem_id)
        tail = f" LIMIT {int(limit)}" if limit else ""
        rows = self._q(f"SELECT id, problem_id, t, kind, level, message, payload FROM events WHERE {where} ORDER BY id{tail}", args)
        return [EventRecord(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6] or "{}")) for r in rows]

    # -- search state ------------------------------------------------------------------------------

    def save_search_state(self, state: SearchState) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO search_state (problem_id, strategy, budget_candidates, budget_minutes, seed, "
                "rng_state, config, status, elapsed_s, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (state.problem_id, state.strategy, state.budget_candidates, state.budget_minutes, state.seed,
                 json.dumps(state.rng_state), json.dumps(state.config), state.status, state.elapsed_s, time.time()),
            )

    def search_state(self, problem_id: int) -> SearchState | None:
        rows = self._q(
            "SELECT problem_id, strategy, budget_candidates, budget_minutes, seed, rng_state, config, status, "
            "elapsed_s, updated_at FROM search_state WHERE problem_id=?", (problem_id,),
        )
        if not rows:
            return None
        r = rows[0]
        return SearchState(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7], r[8], r[9])

    # -- what the views and the budget need ----------------------------------------------------------

    def candidates_done(self, problem_id: int) -> int:
        """Candidates that count against the budget: LLM- and user-written nodes that were judged
        (evaluated, or an answer without usable code). Seeds, the root and duplicates do not count."""
        return int(self._q(
            "SELECT COUNT(*) FROM nodes WHERE problem_id=? AND origin IN ('llm','user') "
            "AND state IN ('evaluated','no_code')", (problem_id,),
        )[0][0])

    def productivity(self, problem_id: int) -> Productivity:
        rows = self._q(
            "SELECT n.kind, n.state, v.status, v.json FROM nodes n LEFT JOIN verdicts v ON v.node_id=n.id "
            "WHERE n.problem_id=? AND n.origin='llm'", (problem_id,),
        )
        candidates = no_code = built = correct = self_made = duplicates = 0
        by_kind: dict[str, list[int]] = {}
        for kind, state, status, vjson in rows:
            if state == "duplicate":
                duplicates += 1
                continue
            if state not in ("evaluated", "no_code"):
                continue
            candidates += 1
            entry = by_kind.setdefault(kind, [0, 0])
            entry[0] += 1
            if state == "no_code":
                no_code += 1
                continue
            if status not in ("compile_error",):
                built += 1
            if status == "ok":
                correct += 1
                entry[1] += 1
                if not (json.loads(vjson).get("library_calls") if vjson else None):
                    self_made += 1
        return Productivity(candidates, no_code, built, correct, self_made, duplicates,
                            {k: tuple(v) for k, v in by_kind.items()})

    def time_split(self, problem_id: int) -> TimeSplit:
        llm = self._q(
            "SELECT COALESCE(SUM(seconds),0), COALESCE(SUM(completion_tokens),0), COUNT(*) FROM llm_calls "
            "WHERE problem_id=?", (problem_id,),
        )[0]
        ev = self._q(
            "SELECT COALESCE(SUM(v.build_s),0), COALESCE(SUM(v.verify_s),0), COALESCE(SUM(v.time_s),0), COUNT(*) "
            "FROM verdicts v JOIN nodes n ON n.id=v.node_id WHERE n.problem_id=? AND n.origin<>'root'", (problem_id,),
        )[0]
        return TimeSplit(float(llm[0]), float(ev[0]), float(ev[1]), float(ev[2]), int(llm[1]), int(llm[2]), int(ev[3]))


def _problem(r: tuple) -> ProblemRecord:
    return ProblemRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7] or "{}"), r[8])


def _node(r: tuple) -> NodeRecord:
    verdict = Verdict.from_json(r[16]) if r[16] else None
    return NodeRecord(
        id=r[0], problem_id=r[1], parent_id=r[2], origin=r[3], state=r[4], language=r[5], directive=r[6],
        source=r[7], kernel_source=r[8], created_at=r[9], pinned=bool(r[10]), excluded=bool(r[11]),
        visits=r[12], value=r[13], kind=r[14], duplicate_of=r[15], verdict=verdict, llm_call_id=r[17], note=r[18],
    )


def _llm_call(r: tuple) -> LLMCallRecord:
    return LLMCallRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], json.loads(r[9] or "{}"), r[10])
