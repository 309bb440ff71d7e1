"""The resources of one store, held together: the SQLite store, the dense and keyword indexes, the embedder, the
team client, and the background threads that keep the derived indexes current. It implements no operation (those
are the modules above it: write, recall, memories, lifecycle, sharing, review, ...); an operation that changes the
store calls `changed()`, the commit hook that wakes the indexer.

Exactly one process opens an engine on a store at a time (the owner lock); everything else goes through that
process (see `mnemo.daemon`). The indexer thread replays the change log into chroma in the background, so a write
is acknowledged after the SQLite commit only. It also keeps `<home>/cache/` (the vector file of
core/indexes/vector_file.py and the keyword postings of core/indexes/keyword.py) in step with the store, so the next owner answers
its first query without a rebuild.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core import environment
from mnemo.core import store_settings as config
from mnemo.core.embedding.embedder import get_embedder
from mnemo.core.errors import MnemoError, StoreCorrupt, StoreLocked, StoreNotWritable, TeamUnavailable
from mnemo.core.indexes.dense import DenseIndex
from mnemo.core.indexes.keyword import KeywordIndex
from mnemo.core.indexes.vector_file import VectorFile
from mnemo.core.safety import screen as safety
from mnemo.core.store import Store
from mnemo.core.team.address import load_settings, retry_interval
from mnemo.core.team.client import TeamClient

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from mnemo.core.models import Context
    from mnemo.core.skills import SkillEngine

log = logging.getLogger("mnemo.engine")
# How long the indexer waits after a commit wakes it before replaying: one chroma upsert (and one state file write)
# per burst of writes instead of one per write, which competed with the writes themselves for the CPU.
REPLAY_DELAY = 0.05
TEAM_PROBE_S = 2.0  # while promotions wait for a server that was down: how often the sender checks it is back
# The shortest time between two replays while writes keep coming (remembers in a row, an import): a chroma upsert
# costs ~10 ms whatever it holds and grows with the index, so replaying after every write took as much CPU as the
# write itself (issue 22). Meanwhile the searches score the unreplayed tail exactly, so nothing is missed.
REPLAY_INTERVAL = 1.0
EMBED_CACHE = 4096  # texts kept by `Engine.embed_cached`
REEMBED_CHUNK = 256  # items re-embedded and committed together after a model change


class _LazyEmbedder:
    """An embedder whose model loads on its first `embed` (its identity, `model_id` and `dim`, is known before)."""

    def __init__(self, build, model_id: str, dim: int, backend: str):
        self._build, self.model_id, self.dim, self.backend = build, model_id, dim, backend
        self._inst = None
        self._lock = threading.Lock()

    def _get(self):
        if self._inst is None:
            with self._lock:
                if self._inst is None:
                    self._inst = self._build()
        return self._inst

    def embed(self, texts):
        return self._get().embed(texts)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._get(), name)



_frozen = threading.Lock()
_frozen_done = False


def _freeze_once() -> None:
    """`gc.freeze()` the first time an engine of this process has loaded its indexes (see `_prepare_cache`)."""
    global _frozen_done
    with _frozen:
        if not _frozen_done:
            _frozen_done = True
            gc.freeze()


class OwnerLock:
    """The exclusive owner lock of a store. The kernel drops it when the process dies: no stale pid files."""

    def __init__(self, home: Path):
        from filelock import FileLock, Timeout  # third-party, only where a store is opened

        self.path = home / "owner.lock"
        self._lock = FileLock(str(self.path), timeout=0)
        self._timeout = Timeout

    def acquire(self) -> None:
        try:
            self._lock.acquire()
        except self._timeout as exc:
            raise StoreLocked(
                f"another process owns the store at {self.path.parent}",
                hint="use the running owner (`mnemo daemon status`), or stop it with `mnemo daemon stop`",
            ) from exc

    def release(self) -> None:
        self._lock.release(force=True)


class Engine:
    """The resources of the store at `home`. `embedder`: the model to use (default: `get_embedder()`, loaded in
    the background); `lock`: take the owner lock; `start_indexer`: run the store check and the index threads."""

    def __init__(self, home: Path, embedder=None, *, lock: bool = True, start_indexer: bool = True):
        self.home = Path(home)
        self._owner_lock: OwnerLock | None = None
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreNotWritable(f"cannot create the store directory {self.home}: {exc.strerror}",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
        if lock:
            self._owner_lock = OwnerLock(self.home)
            self._owner_lock.acquire()
        config.bind(self.home)  # store-wide settings of this process: `<home>/config.json`
        self.store = Store(self.home / "mnemo.db")
        self._reflag()
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._embedder_ready = threading.Event()
        self._embed_cache: OrderedDict = OrderedDict()  # (model id, text) -> vector, see embed_cached
        self._embed_cache_lock = threading.Lock()
        if embedder is not None:
            self._embedder_ready.set()
        self.index: DenseIndex | None = None
        self.cache_dir = self.home / "cache"
        self.keywords = KeywordIndex(self.store, self.cache_dir)
        self._vector_file: VectorFile | None = None
        self._persist_after = 0.0  # monotonic time of the next attempt to write <home>/cache after a failure
        self._access_lock = threading.Lock()
        self._pending_access: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._repair = threading.Event()
        self._retry = (2.0, 0.0)  # the indexer's (backoff, retry time) after a failure
        self._threads: list[threading.Thread] = []
        self._team: TeamClient | None = None
        self._team_lock = threading.Lock()
        self._store_checked = threading.Event()
        self.reembed: dict | None = None  # {"model_id", "done", "total", "running"} of a re-embedding at start
        self._skill_engines: dict[str, SkillEngine] = {}  # one per (starter skills on/off, project root)
        self._beside: Any = None  # a ThreadPoolExecutor, see `beside`
        self._beside_lock = threading.Lock()
        self._skills_lock = threading.Lock()
        if start_indexer:
            import numpy  # noqa: F401 - import here, not first in two threads at once (partial-import race)

            self._start(self._check_store, "mnemo-store-check")
            self._start(self._background, "mnemo-indexer")
        else:
            self._store_checked.set()

    def _start(self, target, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)  # joined by close()

    # -- the commit hook -------------------------------------------------------------------------------------
    def changed(self) -> None:
        """Something was committed to the store: the indexer replays the change log now instead of at its next
        poll (every second)."""
        self._wake.set()

    def _reflag(self) -> None:
        """Give every stored note its injection flags, once per version of the patterns (a store written before
        they existed, or with older ones): flags are shown on every surface, whoever wrote the note."""
        if self.store.get_meta("injection_flags_version") == safety.INJECTION_FLAGS_VERSION:
            return
        changed = 0
        with self.store.write() as c:
            for m in self.store.query_memories():
                flags = safety.reflag(m.text, m.flags)
                if flags != m.flags:
                    self.store.update_memory(c, m.id, flags=flags)
                    changed += 1
            self.store.set_meta(c, "injection_flags_version", safety.INJECTION_FLAGS_VERSION)
        if changed:
            log.info("injection flags added to %d stored notes", changed)

    # -- store damage ----------------------------------------------------------------------------------------
    def _check_store(self) -> None:
        try:
            found = self.store.check_damage()
            if found:
                log.error("the store is damaged: %s", found)
        finally:
            self._store_checked.set()

    def store_problem(self, wait: float = 5.0) -> StoreCorrupt | None:
        """A `StoreCorrupt` when the file is known to be damaged (the start-up `quick_check`, waited for up to `wait`
        seconds, or a read that hit a damaged page since), else None."""
        self._store_checked.wait(wait)
        return self.store.damage_error()

    # -- embedder --------------------------------------------------------------------------------------------
    @property
    def embedder(self):
        """The embedding model (loaded on first use)."""
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    self._embedder = get_embedder()
                    self._embedder_ready.set()
        return self._embedder

    @property
    def loaded_embedder(self):
        """The embedding model if it is loaded already, else None (never loads it)."""
        return self._embedder

    @property
    def model_loaded(self) -> bool:
        return self._embedder_ready.is_set()

    def warm_up(self) -> None:
        """Load the model (and run one embedding) so the first caller does not pay for it."""
        self.embedder.embed(["warm up"])

    def embed(self, texts: list[str]):
        return self.embedder.embed(texts)

    def embed_cached(self, texts: list[str]):
        """`embed` through a small LRU of texts, for short texts asked for again and again: recall's queries (the
        code lens pass, then a hover on the same symbol), and the relation check's masked notes and replaced slots
        when diagnostics ask for them (since issue 22's third pass the decision itself embeds nothing: the write
        path's `decide_many(scores=False)` never calls it)."""
        import numpy as np

        mid = self.model_id
        with self._embed_cache_lock:
            cache = self._embed_cache
            hits = {t: cache[(mid, t)] for t in texts if (mid, t) in cache}
            for t in hits:
                cache.move_to_end((mid, t))
        todo = list(dict.fromkeys(t for t in texts if t not in hits))
        if todo:
            vecs = self.embed(todo)
            with self._embed_cache_lock:
                for t, v in zip(todo, vecs, strict=True):
                    hits[t] = cache[(mid, t)] = v
                while len(cache) > EMBED_CACHE:
                    cache.popitem(last=False)
        if not texts:
            return self.embed([])
        return np.stack([hits[t] for t in texts])

    def beside(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """`fn(*args)` in the engine's helper thread (made on first use): work a request does not need the query's
        vector for runs there while the request's thread embeds the query (onnxruntime releases the GIL while the
        model runs, on one core by default), e.g. recall's keyword side (issue 22, fourth pass). After `close`, or
        when the thread cannot start, it runs here and now (the future is done)."""
        from concurrent.futures import Future, ThreadPoolExecutor

        pool = self._beside
        if pool is None and not self._stop.is_set():
            with self._beside_lock:
                if self._beside is None and not self._stop.is_set():
                    self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-beside")
                pool = self._beside
        if pool is not None:
            try:
                return pool.submit(fn, *args)
            except RuntimeError:  # shut down meanwhile
                pass
        done: Future = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future, as the pool would
            done.set_exception(exc)
        return done

    def embed_query(self, text: str):
        return self.embedder.embed([text])[0]

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    # -- the persisted read side (<home>/cache) --------------------------------------------------------------
    def vector_file(self) -> VectorFile:
        """The persisted vector matrix of the current model (opened and checked on first use)."""
        vf = self._vector_file
        if vf is None or vf.model_id != self.model_id:
            with self._embedder_lock:
                vf = self._vector_file
                if vf is None or vf.model_id != self.model_id:
                    self._vector_file = vf = VectorFile(self.cache_dir, self.store, self.model_id)
        return vf

    def persist(self, force: bool = False, compact: bool = True) -> None:
        """Rewrite the vector file and the keyword postings when enough changes have gone by (`force`: any), and
        give the large partitions of the vector file their compact exact scan (not at the owner's last step)."""
        vf = self.vector_file()
        wrote = vf.refresh(any_tail=force)
        saved = self.keywords.saved_seq
        if wrote or saved is None or (force and saved != self.store.max_seq()):
            self.keywords.save()
        if compact:
            vf.ensure_compact()

    # -- team server -----------------------------------------------------------------------------------------
    def team(self) -> TeamClient | None:
        """The client of the team server for the current settings (None when none is configured); the first call
        starts the background sender of queued promotions."""
        settings = load_settings(self.home)
        if not settings.configured:
            return None
        with self._team_lock:
            client = self._team
            if client is None or client.settings != settings:
                breaker = client.breaker if client is not None and client.settings.url == settings.url else None
                self._team = client = TeamClient(self.store, settings, breaker)
                if not any(t.name == "mnemo-team-sender" for t in self._threads):
                    self._start(self._send_team_outbox, "mnemo-team-sender")
        return client

    def _send_team_outbox(self) -> None:
        """Sends queued promotions. While some wait and the breaker keeps requests away from a server that was
        down, a heartbeat every `TEAM_PROBE_S` notices its return, so the queue replays within seconds of it,
        not at the end of the retry interval (30 s by default)."""
        poll = max(0.2, min(2.0, retry_interval()))
        last_probe = 0.0
        while not self._stop.wait(poll):
            try:
                client = self.team()
                if client is None or not client.pending():
                    continue
                if not client.breaker.allow() and time.monotonic() - last_probe >= TEAM_PROBE_S:
                    last_probe = time.monotonic()
                    client.probe()
                if client.breaker.allow():
                    client.drain()
            except TeamUnavailable:
                pass
            except Exception as exc:  # noqa: BLE001 - keep retrying; never kill the owner
                log.warning("team sender: %s", exc)

    # -- background: index replay, access reinforcement ------------------------------------------------------
    def _background(self) -> None:
        # A failed preparation or replay (disk full, I/O error, a damaged chroma directory) is retried with a
        # growing pause (2 s .. 5 min): the index must come back once the disk does, without spinning meanwhile.
        try:
            self.embedder  # noqa: B018 - load once, off the caller's path
            self._reembed_foreign_vectors()
            self._prepare_cache()
            self.index = DenseIndex(self.home / "chroma", self.store, self.model_id,
                                    min_rows=int(config.value("ann_min_rows")))
            self.index.ensure_ready()
        except Exception as exc:  # noqa: BLE001
            log.exception("dense index could not be prepared; recall uses exact scans")
            if self.index is not None:
                self._index_failed(exc, grow=False)
        last_replay = 0.0
        while not self._stop.is_set():
            if self._wake.wait(timeout=1.0):  # a commit: let the writes of a burst (an import, remembers in a row)
                # land first and replay them in one go, at most once per REPLAY_INTERVAL; meanwhile recall and
                # the checks on write scan the unreplayed tail exactly, so nothing is missed
                self._stop.wait(max(REPLAY_DELAY, last_replay + REPLAY_INTERVAL - time.monotonic()))
                last_replay = time.monotonic()
            self._wake.clear()
            if self.store.damage:  # nothing is read or written until `mnemo doctor --repair`
                continue
            try:
                self.flush_access()
            except Exception as exc:  # noqa: BLE001 - the store is failing (disk full?): keep them for next time
                log.warning("could not record recall accesses: %s", exc)
            try:
                self._index_step()
            except Exception as exc:  # noqa: BLE001
                log.warning("indexer: %s; will rebuild in %.0f s", exc, self._retry[0])
                if self.index is not None:
                    self._index_failed(exc, grow=True)
            self._persist_step()

    def _prepare_cache(self) -> None:
        """At start: check the vector file's every row, write it when missing or stale (the first queries read it
        while chroma opens), load or build the keyword postings, save them when no usable file holds them."""
        try:
            self.vector_file().verify()
            self.keywords.build_all()  # loads the saved postings first; builds a partition they lack
            self.persist()
            self.store.warm_visibility()  # recall's visibility columns of a store up to 20k memories, in memory
            # What is loaded now lives as long as the process: the keyword postings alone are up to ~300k small
            # arrays and tuples at 100k notes, which every full pass of the garbage collector traversed (one every
            # ~200 writes, ~0.2 s of CPU at 100k: ~1 ms per write, growing with the store; issue 22, fourth pass).
            # Frozen, the full passes traverse only what came after. Nothing is collected by it (no `gc.collect`
            # here: a pause of the requests being served); objects frozen are still freed by their reference count.
            # Once per process (the owner has one engine; a process that opens many, a test run, would otherwise
            # freeze its reference cycles over and over, never to be collected).
            _freeze_once()
        except Exception as exc:  # noqa: BLE001 - derived files: queries scan the store meanwhile
            log.warning("could not prepare %s: %s; next attempt in a minute", self.cache_dir, exc)
            self._persist_after = time.monotonic() + 60.0

    def _persist_step(self) -> None:
        """Keep `<home>/cache` in step; after a failure (disk full) wait a minute before the next attempt."""
        if not self._embedder_ready.is_set() or time.monotonic() < self._persist_after:
            return
        try:
            self.persist()
        except Exception as exc:  # noqa: BLE001 - derived files: the store stays the truth
            log.warning("could not write %s: %s; next attempt in a minute", self.cache_dir, exc)
            self._persist_after = time.monotonic() + 60.0

    def _index_step(self) -> None:
        """Replay new changes into the index, or rebuild it when it is broken and its retry time has come."""
        if self.index is None:
            return
        if self._repair.is_set():
            if time.monotonic() >= self._retry[1]:
                self._repair.clear()
                self.index.ensure_ready()
                if self.index.ready:
                    self._retry = (2.0, self._retry[1])
        elif self.index.ready:
            self.index.catch_up()

    def _index_failed(self, exc: Exception, *, grow: bool) -> None:
        backoff = self._retry[0]
        if self.index is not None:
            self.index.mark_broken(exc)
        self._repair.set()
        self._retry = (min(backoff * 2, 300.0) if grow else backoff, time.monotonic() + backoff)

    def _reembed_foreign_vectors(self) -> None:
        """Vectors made by another model (the embedder setting changed) are re-embedded from the stored text, once,
        in committed chunks: an owner stopped midway resumes with what is left. Meanwhile the searches compare a
        query only with this model's vectors (never two models' cosines in one ranking); `reembed` says how far it
        got (`mnemo reembed` shows it as a progress bar)."""
        mid = self.model_id
        rows = self.store.foreign_vectors(mid)
        if not rows:
            return
        total = len(rows)
        self.reembed = {"model_id": mid, "done": 0, "total": total, "running": True}
        log.info("re-embedding %d items for model %s", total, mid)
        for i in range(0, total, REEMBED_CHUNK):
            if self._stop.is_set():
                break
            chunk = rows[i:i + REEMBED_CHUNK]
            vecs = self.embed([self.store.item_text(r["item_id"]) for r in chunk])
            with self.store.write() as c:
                for r, v in zip(chunk, vecs, strict=True):
                    self.store.replace_foreign_vector(c, r["item_id"], v, mid)
            self.reembed = {**self.reembed, "done": min(total, i + len(chunk))}
            log.info("re-embedded %d / %d items for model %s", self.reembed["done"], total, mid)
        self.reembed = {**self.reembed, "running": False}

    def schedule_index_repair(self) -> None:
        self._repair.set()
        self._wake.set()

    def wait_indexed(self, timeout: float = 30.0) -> bool:
        """Block until the dense index has replayed every change (tests, benchmarks)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.index is not None and self.index.ready and self.index.indexed_seq >= self.store.max_seq():
                return True
            self._wake.set()
            time.sleep(0.05)
        return False

    def note_access(self, ids: list[str]) -> None:
        """Recalled memories: their access time and count are written by the indexer thread (off the caller's
        path)."""
        if not ids:
            return
        now = time.time()
        with self._access_lock:
            for i in ids:
                self._pending_access[i] = now

    def flush_access(self) -> None:
        with self._access_lock:
            pending, self._pending_access = self._pending_access, {}
        if not pending:
            return
        try:
            with self.store.write() as c:
                self.store.record_accesses(c, pending)
        except Exception:
            with self._access_lock:  # not recorded: keep them for the next flush
                for mem_id, at in pending.items():
                    self._pending_access[mem_id] = max(at, self._pending_access.get(mem_id, at))
            raise

    # -- skills --------------------------------------------------------------------------------------------------
    def skill_engine(self, ctx: Context) -> SkillEngine:
        """The skill engine of a project (its registry, watcher and vectors), made once and kept while the owner
        runs: the registry re-reads an edited rule file by itself (`maybe_refresh`). Mnemo's starter skills apply
        in every project unless `mnemo config set starter_skills false` (or MNEMO_STARTER_SKILLS=0); a change
        applies at once (another key). Skill vectors are cached in the store's home, so a restart embeds only what
        changed."""
        from mnemo.core.skills import SkillEngine, SkillRegistry

        starter = bool(config.value("starter_skills", self.home))
        key = f"{int(starter)}:{ctx.root or ''}"
        with self._skills_lock:
            eng = self._skill_engines.get(key)
            if eng is None:
                registry = SkillRegistry(Path(ctx.root) if ctx.root else None, include_builtin=starter)
                eng = SkillEngine(registry, self.skill_embedder(), vector_cache=self.home / "skill_vectors.sqlite")
                self._skill_engines[key] = eng
            return eng

    def skill_embedder(self):
        """The embedder of skill activation. Skills are embedded on this machine only (vectors cached in the
        store's home, never shared), so they use the int8 export of MiniLM by default (~2x faster query embedding,
        same MetaTool accuracy; docs/benchmarks.md). Memories use it too by default (issue 22): then skills share
        the memory embedder's one session, never a second copy of the model. With memories on the float ONNX
        model, skills still load the int8 one. MNEMO_SKILL_EMBEDDER=same uses the memory embedder; a kind name
        forces one."""
        from mnemo.core.embedding.embedder import DIM, MODEL_ID, MODEL_ID_INT8, ONNX_KINDS, configured_kind

        choice = (environment.raw("MNEMO_SKILL_EMBEDDER") or "").strip().lower() or str(config.value("skill_embedder"))
        loaded = self.loaded_embedder
        if choice == "auto" and loaded is not None and getattr(loaded, "model_id", None) == MODEL_ID_INT8:
            return loaded                    # the memory embedder is the int8 model: one session for both
        if choice == "auto" and configured_kind() in ONNX_KINDS and (loaded is None or (
                getattr(loaded, "backend", None) in ONNX_KINDS
                and getattr(loaded, "model_id", None) in (MODEL_ID, MODEL_ID_INT8))):
            # built on first use: a session's start needs the skills' cached vectors, not a model (issue 20);
            # get_embedder("onnx-int8") is the very instance the memory embedder gets when it is configured so
            return _LazyEmbedder(lambda: get_embedder("onnx-int8"), MODEL_ID_INT8, DIM, "onnx-int8")
        base = self.embedder
        if choice == "same":
            return base
        if choice != "auto":
            return get_embedder(choice)
        if getattr(base, "backend", None) != "onnx" or getattr(base, "model_id", None) != MODEL_ID:
            return base                      # int8 already, torch, hash (tests) or a caller's own embedder: keep it
        try:
            return get_embedder("onnx-int8")
        except MnemoError as e:
            log.warning("int8 skill embedder unavailable (%s); skills use the memory embedder", e)
            return base

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._beside_lock:
            if self._beside is not None:
                self._beside.shutdown(wait=True)
        for t in self._threads:
            t.join(timeout=10)
        try:
            self.flush_access()
        except Exception:  # noqa: BLE001
            pass
        try:  # the next owner starts from files that hold every change
            if self._vector_file is not None and not self.store.damage:
                self.persist(force=True, compact=False)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not write %s: %s", self.cache_dir, exc)
        if self.index is not None:
            self.index.shutdown()
        self.store.close()
        if self._owner_lock is not None:
            self._owner_lock.release()


__all__ = ["Engine", "OwnerLock"]
