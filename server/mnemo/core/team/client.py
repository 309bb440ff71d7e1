"""The owner's connection to the team server (a Chroma server): records, the circuit breaker, the durable outbox.

The owner process is the only client of the server for a store: it computes embeddings locally and passes them
explicitly (chroma never embeds), one collection per (namespace, embedding model), so members on another model
never mix vectors of different spaces. A promotion is written to the `team_outbox` table in the same SQLite
transaction that marks the local memory `promoted_to_team`; it is sent at once when the server answers, else
retried in the background (the engine's sender thread) until it does. Records are upserted under an id derived
from the local memory id, so a retry after a lost reply never duplicates. An unreachable server costs one short
timeout, then nothing until the retry interval has passed (`CircuitBreaker`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from mnemo.core.errors import MnemoError, NotFound, TeamUnavailable
from mnemo.core.models import Context, Memory
from mnemo.core.safety.screen import injection_flags
from mnemo.core.store import Store
from mnemo.core.team.address import TeamSettings, connect_timeout, retry_interval

log = logging.getLogger("mnemo.team")

RECORD_PREFIX = "team-"


# -- circuit breaker ---------------------------------------------------------------------------------------------
class CircuitBreaker:
    """Closed: calls go through. Open (after a failure): calls are skipped until `retry_interval` has passed, then
    one trial call decides. Each change of state leaves one message to show (the outage, then the recovery)."""

    def __init__(self, interval: float | None = None, clock=time.monotonic):
        self.interval = retry_interval() if interval is None else interval
        self._clock = clock
        self._lock = threading.Lock()
        self.open = False
        self.failures = 0
        self.opened_at: float | None = None
        self.next_try = 0.0
        self.last_error: str | None = None
        self._notice: str | None = None

    def allow(self) -> bool:
        with self._lock:
            return not self.open or self._clock() >= self.next_try

    def success(self) -> None:
        with self._lock:
            if self.open:
                self._notice = "the team server is reachable again; team memories are back in recall"
            self.open = False
            self.failures = 0
            self.opened_at = None

    def failure(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = error
            self.next_try = self._clock() + self.interval
            if not self.open:
                self.open = True
                self.opened_at = time.time()
                self._notice = (f"the team server is unreachable ({error}); recall shows local scopes only and"
                                f" promotions are queued; retrying every {self.interval:.0f} s")

    def force_trial(self) -> None:
        with self._lock:
            self.next_try = 0.0

    def take_notice(self) -> str | None:
        with self._lock:
            notice, self._notice = self._notice, None
            return notice

    def retry_in(self) -> float:
        with self._lock:
            return max(0.0, self.next_try - self._clock()) if self.open else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"state": "open" if self.open else "closed", "failures": self.failures,
                "last_error": self.last_error, "opened_at": self.opened_at, "retry_in_s": round(self.retry_in(), 1)}


# -- records -----------------------------------------------------------------------------------------------------
def record_id_for(memory_id: str) -> str:
    return RECORD_PREFIX + memory_id.removeprefix("mem-")


def model_tag(model_id: str) -> str:
    return hashlib.sha256(model_id.encode()).hexdigest()[:10]


def collection_name(namespace: str, model_id: str) -> str:
    return f"mnemo-team-{namespace}-{model_tag(model_id)}"


def build_record(ctx: Context, m: Memory, vec, model_id: str, namespace: str) -> dict[str, Any]:
    now = time.time()
    meta: dict[str, Any] = {
        "author": ctx.user or "unknown", "project_id": m.project_id, "project_name": m.project_name,
        "branch": m.branch, "type": m.type, "kind": m.kind, "content_hash": m.content_hash, "note_id": m.id,
        "source": m.source, "trust": m.trust, "importance": float(m.importance), "created_at": float(m.created_at),
        "updated_at": now, "promoted_at": now, "model_id": model_id, "tags": json.dumps(m.tags),
        "source_path": m.anchors[0].get("path") if m.anchors else None, "origin": ctx.origin,
        "deprecated": False,
    }
    meta = {k: v for k, v in meta.items() if v is not None}  # chroma metadata has no nulls
    return {"id": record_id_for(m.id), "document": m.text, "metadata": meta,
            "embedding": [float(x) for x in vec], "model_id": model_id, "namespace": namespace}


def record_to_memory(record_id: str, document: str, meta: dict[str, Any]) -> Memory:
    """A team record as a read-only `Memory` in the team scope, so recall ranks and renders it like any note."""
    try:
        tags = json.loads(meta.get("tags") or "[]")
    except ValueError:
        tags = []
    updated = float(meta.get("updated_at") or meta.get("promoted_at") or 0.0)
    source_path = meta.get("source_path")
    promoted_from = {"scope": "project", "project_id": meta.get("project_id"),
                     "project_name": meta.get("project_name"), "note_id": meta.get("note_id"),
                     "branch": meta.get("branch"), "source_path": source_path,
                     "promoted_at": meta.get("promoted_at"), "promoted_by": meta.get("author")}
    return Memory(
        id=record_id, text=document or "", type=meta.get("type") or "project", kind=meta.get("kind") or "fact",
        scope="team", project_id=meta.get("project_id") or "", project_name=meta.get("project_name") or "",
        branch=None, importance=float(meta.get("importance") or 0.5), confirmations=1,
        created_at=float(meta.get("created_at") or updated), updated_at=updated, last_accessed=updated,
        access_count=0, content_hash=meta.get("content_hash") or "", source=meta.get("source") or "agent",
        provenance={"promoted_from": promoted_from, "team": {"author": meta.get("author")}},
        anchors=[{"path": source_path}] if source_path else [], deprecated=bool(meta.get("deprecated")),
        deprecated_reason=meta.get("deprecated_reason"), tier="warm", tags=tags if isinstance(tags, list) else [],
        trust=meta.get("trust") or "trusted", status="active", author=meta.get("author") or "unknown",
        flags=injection_flags(document or ""))  # computed on read: a teammate's note is flagged like any other


@dataclass
class TeamHit:
    id: str
    cosine: float
    memory: Memory
    metadata: dict[str, Any] = field(default_factory=dict)
    vector: list[float] | None = None


# -- the client --------------------------------------------------------------------------------------------------
class TeamClient:
    """The owner's connection to one team server. Thread-safe; every remote call goes through the breaker."""

    def __init__(self, store: Store, settings: TeamSettings, breaker: CircuitBreaker | None = None):
        self.store = store
        self.settings = settings
        self.breaker = breaker or CircuitBreaker()
        self._lock = threading.RLock()
        self._drain_lock = threading.Lock()
        self._chroma = None
        self._collections: dict[str, Any] = {}
        self.sent_total = 0

    # -- connection ------------------------------------------------------------------------------------------
    def _connect(self):
        import httpx

        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        base = self.settings.base_url()
        # A short preflight: chroma's own client has no timeout and would hang on a black-holed host.
        resp = httpx.get(f"{base}/api/v2/heartbeat", headers=self.settings.headers(), verify=self.settings.verify(),
                         timeout=httpx.Timeout(connect_timeout() * 2, connect=connect_timeout()))
        if resp.status_code in (401, 403):
            raise TeamUnavailable(f"the team server refused the token (HTTP {resp.status_code})",
                                  hint="check MNEMO_TEAM_TOKEN / `mnemo team connect --token`")
        resp.raise_for_status()
        import chromadb
        from chromadb.config import Settings

        host, port, ssl = self.settings.endpoint()
        with warnings.catch_warnings():  # httpx deprecates the CA file path that chroma's settings pass on
            warnings.simplefilter("ignore", DeprecationWarning)
            client = chromadb.HttpClient(
                host=host, port=port, ssl=ssl, headers=self.settings.headers() or None,
                settings=Settings(anonymized_telemetry=False, chroma_server_ssl_verify=self.settings.ca_cert))
        session = getattr(getattr(client, "_server", None), "_session", None)
        if session is not None:  # bound every later call, so a dead server costs seconds, not forever
            session.timeout = httpx.Timeout(max(3.0, connect_timeout() * 2), connect=connect_timeout())
        return client

    def _collection(self, model_id: str):
        name = collection_name(self.settings.namespace, model_id)
        with self._lock:
            col = self._collections.get(name)
            if col is None:
                if self._chroma is None:
                    self._chroma = self._connect()
                assert self._chroma is not None
                col = self._chroma.get_or_create_collection(
                    name, embedding_function=None,
                    configuration={"hnsw": {"space": "cosine", "ef_search": 400}},
                    metadata={"mnemo": "team", "namespace": self.settings.namespace, "model_id": model_id})
                self._collections[name] = col
            return col

    def _reset(self) -> None:
        with self._lock:
            self._chroma = None
            self._collections.clear()

    def _call(self, what: str, fn):
        """Run one remote operation through the breaker; any failure opens it and raises `TeamUnavailable`."""
        if not self.breaker.allow():
            raise TeamUnavailable(f"the team server is unreachable (retrying in {self.breaker.retry_in():.0f} s)",
                                  hint="local scopes keep working; `mnemo team status` shows the queue")
        try:
            out = fn()
        except TeamUnavailable as exc:
            self._reset()
            self.breaker.failure(exc.message)
            raise
        except MnemoError:  # an answer from a reachable server (e.g. no such record)
            raise
        except Exception as exc:  # noqa: BLE001 - network, HTTP and chroma errors all mean "not now"
            self._reset()
            reason = f"{type(exc).__name__}: {exc}"[:200]
            log.warning("team server %s failed during %s: %s", self.settings.url, what, reason)
            self.breaker.failure(reason)
            raise TeamUnavailable(f"the team server at {self.settings.url} is unreachable ({reason})",
                                  hint="start it (`mnemo team serve`) or check MNEMO_TEAM_URL; local scopes keep"
                                       " working and promotions are queued") from exc
        self.breaker.success()
        return out

    # -- remote operations -----------------------------------------------------------------------------------
    def ping(self) -> bool:
        """A live check that ignores the breaker's wait (status commands); updates the breaker."""
        self.breaker.force_trial()
        try:
            self._call("heartbeat", self._ensure)
            return True
        except TeamUnavailable:
            return False

    def probe(self) -> bool:
        """A heartbeat for the background sender, ignoring the breaker's wait: success closes the breaker (the
        server is back: queued promotions go at once, not when the retry interval is over); a failure leaves the
        breaker as it is (no new wait, no second notice). One short timeout at most; never on a request's path."""
        import httpx

        try:
            resp = httpx.get(f"{self.settings.base_url()}/api/v2/heartbeat", headers=self.settings.headers(),
                             verify=self.settings.verify(),
                             timeout=httpx.Timeout(connect_timeout() * 2, connect=connect_timeout()))
        except Exception:  # noqa: BLE001 - still down
            return False
        if resp.status_code != 200:
            return False
        self._reset()  # a restarted server: connect afresh
        self.breaker.success()
        return True

    def _ensure(self):
        with self._lock:
            if self._chroma is None:
                self._chroma = self._connect()
            return self._chroma.heartbeat()

    def query(self, qvec, model_id: str, k: int) -> list[TeamHit]:
        def run():
            col = self._collection(model_id)
            n = col.count()
            if n == 0:
                return []
            res = col.query(query_embeddings=[[float(x) for x in qvec]], n_results=min(k, n),
                            include=["documents", "metadatas", "distances", "embeddings"])
            embs = res.get("embeddings")
            embs = embs[0] if embs is not None and len(embs) else [None] * len(res["ids"][0])
            out = []
            for rid, doc, meta, dist, emb in zip(res["ids"][0], res["documents"][0], res["metadatas"][0],
                                                 res["distances"][0], embs, strict=False):
                meta = dict(meta or {})
                if meta.get("deprecated"):
                    continue
                out.append(TeamHit(rid, 1.0 - float(dist), record_to_memory(rid, doc, meta), meta,
                                   None if emb is None else [float(x) for x in emb]))
            return out

        return self._call("query", run)

    def get(self, record_id: str, model_id: str) -> tuple[Memory, list[float] | None] | None:
        def run():
            res = self._collection(model_id).get(ids=[record_id], include=["documents", "metadatas", "embeddings"])
            if not res["ids"]:
                return None
            emb = res.get("embeddings")
            vec = list(emb[0]) if emb is not None and len(emb) else None
            return record_to_memory(record_id, res["documents"][0], dict(res["metadatas"][0] or {})), vec

        return self._call("get", run)

    def records(self, model_id: str, limit: int = 1000, where: dict | None = None) -> list[Memory]:
        def run():
            res = self._collection(model_id).get(limit=limit, where=where, include=["documents", "metadatas"])
            return [record_to_memory(i, d, dict(m or {}))
                    for i, d, m in zip(res["ids"], res["documents"], res["metadatas"], strict=False)]

        return self._call("list", run)

    def count(self, model_id: str) -> int:
        return self._call("count", lambda: self._collection(model_id).count())

    def set_deprecated(self, record_id: str, model_id: str, reason: str, by: str) -> None:
        def run():
            col = self._collection(model_id)
            res = col.get(ids=[record_id], include=["metadatas"])
            if not res["ids"]:
                raise NotFound(f"no team memory {record_id}", hint="run `mnemo recall --scope team` for fresh ids")
            meta = dict(res["metadatas"][0] or {})
            meta.update({"deprecated": True, "deprecated_reason": reason, "deprecated_by": by,
                         "updated_at": time.time()})
            col.update(ids=[record_id], metadatas=[meta])

        self._call("deprecate", run)

    # -- outbox ----------------------------------------------------------------------------------------------
    def outbox(self) -> dict[str, Any]:
        return {**self.store.outbox_summary(), "sent_total": self.sent_total}

    def pending(self) -> int:
        return self.store.outbox_pending()

    def drain(self, only: list[str] | None = None, batch: int = 64) -> list[str]:
        """Send queued records (all, or `only` these ids). Returns the ids now on the server."""
        sent: list[str] = []
        with self._drain_lock:
            rows = self.store.outbox_rows(only)
            for i in range(0, len(rows), batch):
                chunk = rows[i:i + batch]
                if not self._send(chunk):
                    break
                sent.extend(r["record_id"] for r in chunk)
                self.sent_total += len(chunk)
        if sent:
            log.info("sent %d queued promotion(s) to the team server", len(sent))
        return sent

    def _send(self, chunk: list) -> bool:
        """Upsert one batch of queued records; on success they leave the outbox and their local memories are
        marked shared, on failure each records the attempt. Returns whether it was sent."""
        by_model: dict[str, list[dict]] = {}
        for r in chunk:
            rec = json.loads(r["payload"])
            by_model.setdefault(rec["model_id"], []).append(rec)
        try:
            for model_id, recs in by_model.items():
                self._call("promote", lambda m=model_id, rs=recs: self._collection(m).upsert(
                    ids=[x["id"] for x in rs], documents=[x["document"] for x in rs],
                    metadatas=[x["metadata"] for x in rs], embeddings=[x["embedding"] for x in rs]))
        except TeamUnavailable as exc:
            with self.store.write() as c:
                for r in chunk:
                    self.store.outbox_failed(c, r["record_id"], exc.message[:300], time.time())
            return False
        with self.store.write() as c:
            for r in chunk:
                self.store.outbox_sent(c, r["record_id"])
                self._mark_shared(c, r["memory_id"], r["record_id"])
        return True

    def _mark_shared(self, conn, memory_id: str, record_id: str) -> None:
        m = self.store.get_memory(memory_id)
        if m is None:  # forgotten locally since: the team copy stands on its own
            return
        prov = dict(m.provenance)
        info = dict(prov.get("promoted_to_team") or {})
        if info.get("record_id") == record_id:
            info.update({"status": "shared", "shared_at": time.time()})
            prov["promoted_to_team"] = info
            self.store.update_memory(conn, memory_id, provenance=prov)
