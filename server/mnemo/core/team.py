"""Team scope on a Chroma server: promotion (secret-checked, queued in a durable outbox), team hits for recall,
a circuit breaker so an unreachable server costs recall one short timeout, then nothing until the retry interval.

Settings: `MNEMO_TEAM_URL` (e.g. http://127.0.0.1:8765), `MNEMO_TEAM_TOKEN`, `MNEMO_TEAM_NAMESPACE` (default
"default"), `MNEMO_TEAM_CA` (a CA certificate for an https URL), else `<store>/team.json` (written by `mnemo team
connect`). The token goes as `Authorization: Bearer` and `X-Chroma-Token` to the nginx that `mnemo team serve`
puts in front of Chroma (core/team_server.py). The owner process is the only client of
the server for a store: it computes embeddings locally and passes them explicitly (chroma never embeds), one
collection per (namespace, embedding model), so members on another model never mix vectors of different spaces.

A promotion is written to the `team_outbox` table in the same SQLite transaction that marks the local memory
`promoted_to_team`; it is sent at once when the server answers, else retried in the background until it does.
Records are upserted under an id derived from the local memory id, so a retry after a lost reply never duplicates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mnemo.core.errors import InvalidInput, MnemoError, NotFound, SecretDetected, TeamUnavailable
from mnemo.core.models import Context, Memory

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

log = logging.getLogger("mnemo.team")

CONFIG_FILE = "team.json"
DEFAULT_NAMESPACE = "default"
RECORD_PREFIX = "team-"
OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS team_outbox (
    record_id TEXT PRIMARY KEY,
    memory_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_attempt REAL
);
"""


def connect_timeout() -> float:
    from mnemo.core import config  # store-wide: `mnemo config set team_timeout`, MNEMO_TEAM_TIMEOUT

    return float(config.value("team_timeout"))


def retry_interval() -> float:
    from mnemo.core import config

    return float(config.value("team_retry"))


# -- settings ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TeamSettings:
    url: str | None = None
    token: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    source: str = "none"  # env | file | none
    ca_cert: str | None = None  # PEM file to trust for an https URL (else the default CA bundle)

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def endpoint(self) -> tuple[str, int, bool]:
        u = urlsplit(self.url if "://" in (self.url or "") else f"http://{self.url}")
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidInput(f"the team server URL {self.url!r} is not valid",
                               hint="use http://HOST:PORT, e.g. MNEMO_TEAM_URL=http://127.0.0.1:8765")
        ssl = u.scheme == "https"
        return u.hostname, u.port or (443 if ssl else 8000), ssl

    def base_url(self) -> str:
        host, port, ssl = self.endpoint()
        return f"{'https' if ssl else 'http'}://{host}:{port}"

    def headers(self) -> dict[str, str]:
        # Chroma's own token header and the standard bearer form, for a server behind an authenticating proxy.
        if not self.token:
            return {}
        return {"Authorization": f"Bearer {self.token}", "X-Chroma-Token": self.token}

    def validate(self) -> None:
        """The URL parses, and a CA certificate (only for https) loads: refused now, not at the first promotion."""
        _host, _port, ssl = self.endpoint()
        if self.ca_cert and not ssl:
            raise InvalidInput("a CA certificate is only used with an https:// team URL",
                               hint="use the https URL that `mnemo team serve --tls-cert` printed, or drop"
                                    " --ca-cert")
        self.verify()

    def verify(self):
        """What TLS trusts: the configured CA certificate, else the default bundle."""
        if not self.ca_cert:
            return True
        import ssl

        try:
            return ssl.create_default_context(cafile=self.ca_cert)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInput(f"cannot load the team CA certificate {self.ca_cert}: {exc}",
                               hint="pass a PEM file with `mnemo team connect URL --ca-cert FILE` or"
                                    " MNEMO_TEAM_CA") from exc

    def public(self) -> dict[str, Any]:
        return {"url": self.url, "namespace": self.namespace, "token": "set" if self.token else "not set",
                "source": self.source, "ca_cert": self.ca_cert}


def check_namespace(ns: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,62}", ns or ""):
        raise InvalidInput(f"team namespace {ns!r} is not valid", hint="use letters, digits, - and _ (max 63)")
    return ns


def config_path(home: Path) -> Path:
    return Path(home) / CONFIG_FILE


def load_settings(home: Path | None) -> TeamSettings:
    """Environment first (`MNEMO_TEAM_*`), then `<store>/team.json`; the environment's token/namespace win."""
    env_url = os.environ.get("MNEMO_TEAM_URL", "").strip()
    env_token = os.environ.get("MNEMO_TEAM_TOKEN") or None
    env_ns = os.environ.get("MNEMO_TEAM_NAMESPACE") or None
    env_ca = os.environ.get("MNEMO_TEAM_CA") or None
    if env_url:
        return TeamSettings(env_url, env_token, env_ns or DEFAULT_NAMESPACE, "env", env_ca)
    if home is not None:
        try:
            data = json.loads(config_path(home).read_text())
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("url"):
            return TeamSettings(str(data["url"]), env_token or data.get("token") or None,
                                env_ns or data.get("namespace") or DEFAULT_NAMESPACE, "file",
                                env_ca or data.get("ca_cert") or None)
    return TeamSettings()


def save_settings(home: Path, url: str, token: str | None = None, namespace: str = DEFAULT_NAMESPACE,
                  ca_cert: str | None = None) -> Path:
    s = TeamSettings(url, token, check_namespace(namespace), "file", ca_cert)
    s.validate()
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    path = config_path(home)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the token is a credential
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token, "namespace": namespace, "ca_cert": ca_cert}, f)
    os.replace(tmp, path)
    return path


def clear_settings(home: Path) -> bool:
    try:
        config_path(home).unlink()
        return True
    except FileNotFoundError:
        return False


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
    from mnemo.core.safety import injection_flags

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

    def __init__(self, store, settings: TeamSettings, breaker: CircuitBreaker | None = None):
        self.store = store
        self.settings = settings
        self.breaker = breaker or CircuitBreaker()
        self._lock = threading.RLock()
        self._drain_lock = threading.Lock()
        self._chroma = None
        self._collections: dict[str, Any] = {}
        self.sent_total = 0
        with store.write() as c:
            for stmt in OUTBOX_SCHEMA.strip().split(";"):
                if stmt.strip():
                    c.execute(stmt)

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
    @staticmethod
    def enqueue(conn: sqlite3.Connection, record: dict[str, Any], memory_id: str) -> None:
        conn.execute(
            "INSERT INTO team_outbox(record_id, memory_id, namespace, payload, created_at) VALUES(?,?,?,?,?)"
            " ON CONFLICT(record_id) DO UPDATE SET payload=excluded.payload, namespace=excluded.namespace",
            (record["id"], memory_id, record["namespace"], json.dumps(record), time.time()))

    def outbox(self) -> dict[str, Any]:
        conn = self.store.conn()
        row = conn.execute("SELECT COUNT(*), MIN(created_at), MAX(attempts) FROM team_outbox").fetchone()
        err = conn.execute("SELECT last_error FROM team_outbox WHERE last_error IS NOT NULL"
                           " ORDER BY last_attempt DESC LIMIT 1").fetchone()
        return {"pending": int(row[0]), "oldest_at": row[1], "max_attempts": int(row[2] or 0),
                "last_error": err[0] if err else None, "sent_total": self.sent_total}

    def pending(self) -> int:
        return int(self.store.conn().execute("SELECT COUNT(*) FROM team_outbox").fetchone()[0])

    def drain(self, only: list[str] | None = None, batch: int = 64) -> list[str]:
        """Send queued records (all, or `only` these ids). Returns the ids now on the server."""
        sent: list[str] = []
        with self._drain_lock:
            conn = self.store.conn()
            if only:
                marks = ",".join("?" * len(only))
                rows = conn.execute(f"SELECT record_id, memory_id, payload FROM team_outbox WHERE record_id IN"
                                    f" ({marks}) ORDER BY created_at", only).fetchall()
            else:
                rows = conn.execute("SELECT record_id, memory_id, payload FROM team_outbox ORDER BY created_at"
                                    ).fetchall()
            for i in range(0, len(rows), batch):
                chunk = rows[i:i + batch]
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
                            c.execute("UPDATE team_outbox SET attempts=attempts+1, last_error=?, last_attempt=?"
                                      " WHERE record_id=?", (exc.message[:300], time.time(), r["record_id"]))
                    break
                with self.store.write() as c:
                    for r in chunk:
                        c.execute("DELETE FROM team_outbox WHERE record_id=?", (r["record_id"],))
                        _mark_shared(self.store, c, r["memory_id"], r["record_id"])
                sent.extend(r["record_id"] for r in chunk)
                self.sent_total += len(chunk)
        if sent:
            log.info("sent %d queued promotion(s) to the team server", len(sent))
        return sent


def _mark_shared(store, conn: sqlite3.Connection, memory_id: str, record_id: str) -> None:
    row = conn.execute("SELECT provenance FROM memories WHERE id=?", (memory_id,)).fetchone()
    if row is None:  # forgotten locally since: the team copy stands on its own
        return
    prov = json.loads(row[0] or "{}")
    info = dict(prov.get("promoted_to_team") or {})
    if info.get("record_id") == record_id:
        info.update({"status": "shared", "shared_at": time.time()})
        prov["promoted_to_team"] = info
        store.update_memory(conn, memory_id, provenance=prov)


# -- per-engine wiring -------------------------------------------------------------------------------------------
_wiring_lock = threading.Lock()


def team_for(engine: Engine) -> TeamClient | None:
    """The engine's team client for the current settings (None when no team server is configured). Starts the
    background sender once per engine."""
    settings = load_settings(engine.home)
    if not settings.configured:
        return None
    with _wiring_lock:
        client: TeamClient | None = getattr(engine, "_team_client", None)
        if client is None or client.settings != settings:
            breaker = client.breaker if client is not None and client.settings.url == settings.url else None
            client = TeamClient(engine.store, settings, breaker)
            engine._team_client = client
        if not getattr(engine, "_team_sender", None):
            t = threading.Thread(target=_sender_loop, args=(engine,), name="mnemo-team-sender", daemon=True)
            engine._team_sender = t
            engine._threads.append(t)  # joined by Engine.close()
            t.start()
    return client


def attach(engine: Engine) -> None:
    """Called when the service starts: resumes sending promotions queued before a restart."""
    try:
        team_for(engine)
    except Exception as exc:  # noqa: BLE001 - a bad team setting must never stop the owner
        log.warning("team scope disabled: %s", exc)


def _sender_loop(engine: Engine) -> None:
    poll = max(0.2, min(2.0, retry_interval()))
    while not engine._stop.wait(poll):
        try:
            client = team_for(engine)
            if client is not None and client.breaker.allow() and client.pending():
                client.drain()
        except TeamUnavailable:
            pass
        except Exception as exc:  # noqa: BLE001 - keep retrying; never kill the owner
            log.warning("team sender: %s", exc)


# -- operations called by the engine, recall and the service --------------------------------------------------
def promote_to_team(engine: Engine, ctx: Context, m: Memory) -> dict[str, Any]:
    from mnemo.core.safety import describe_findings, find_secrets

    team = team_for(engine)
    if team is None:
        raise InvalidInput("the team scope needs a team server",
                           hint="set MNEMO_TEAM_URL (or run `mnemo team connect http://HOST:PORT`); start a server"
                                " with `mnemo team serve` (see docs/agents-and-teams.md)")
    findings = find_secrets(m.text)
    if findings:
        raise SecretDetected(
            f"memory {m.id} looks like it contains a secret: {describe_findings(findings)}; nothing was promoted",
            hint="promotion shares the text with the whole team: forget this memory and remember it without the"
                 " secret (point to where the secret lives instead)",
            findings=[f.to_dict() for f in findings])
    import numpy as np

    blob = engine.store.vectors([m.id]).get(m.id)
    model_id = engine.model_id
    vec = np.frombuffer(blob, dtype=np.float32) if blob is not None else engine.embed([m.text])[0]
    record = build_record(ctx, m, vec, model_id, team.settings.namespace)
    rid = record["id"]
    info = {"record_id": rid, "namespace": team.settings.namespace, "server": team.settings.url,
            "promoted_at": time.time(), "promoted_by": ctx.user, "status": "queued"}
    with engine.store.write() as c:
        team.enqueue(c, record, m.id)
        prov = dict(m.provenance)
        prov["promoted_to_team"] = info
        engine.store.update_memory(c, m.id, provenance=prov)
    sent = []
    with contextlib.suppress(TeamUnavailable):
        sent = team.drain(only=[rid])
    mem = engine.store.get_memory(m.id).to_dict()
    if rid in sent:
        return {"status": "promoted", "memory": mem, "team": {"record_id": rid, "status": "shared",
                                                               "namespace": team.settings.namespace},
                "message": f"shared with the team ({team.settings.namespace}) as {rid}"}
    return {"status": "queued", "memory": mem,
            "team": {"record_id": rid, "status": "queued", "namespace": team.settings.namespace,
                     "retry_in_s": round(team.breaker.retry_in(), 1), "error": team.breaker.last_error},
            "message": "the team server is unreachable: the promotion is queued and will be sent when it answers"}


def team_candidates(engine: Engine, ctx: Context, qvec, k: int, warnings: list[str], scope: str) -> list:
    """Team hits for recall as `Candidate`s in the team scope (cosine only: BM25 is local)."""
    from mnemo.core.recall import Candidate

    try:
        team = team_for(engine)
    except InvalidInput as exc:
        warnings.append(f"team scope skipped: {exc.message}")
        return []
    if team is None:
        if scope == "team":
            warnings.append("no team server is configured (set MNEMO_TEAM_URL or run `mnemo team connect`)")
        return []
    hits: list[TeamHit] = []
    try:
        hits = team.query(qvec, engine.model_id, min(max(k, 10), 100))
    except TeamUnavailable:
        pass  # the breaker's notice below says so, once
    except MnemoError as exc:  # a setting to fix (e.g. a malformed URL): say it every time, keep local recall
        warnings.append(f"team scope skipped: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
    notice = team.breaker.take_notice()
    if notice:
        warnings.append(notice)
    # Another person's note is untrusted here (SPEC §7): recall shows it as such; only your own stays as you left it.
    return [Candidate(h.id, cosine=h.cosine, scope="team", extras={"vector": h.vector},
                      memory=h.memory if h.memory.author == ctx.user else dataclasses.replace(h.memory,
                                                                                              trust="untrusted"))
            for h in hits]


def team_neighbours(engine: Engine, ctx: Context, vec, k: int) -> list[tuple[Memory, float]]:
    """Team records nearest to `vec` as (memory, cosine), for the checks on write (core/lifecycle.relate): the
    chain is branch > project > team > global on every level. [] without a server or when it does not answer
    (the breaker keeps that to one short timeout per retry interval)."""
    try:
        team = team_for(engine)
    except InvalidInput:
        return []
    if team is None or not team.breaker.allow():
        return []
    try:
        hits = team.query(vec, engine.model_id, k)
    except MnemoError:
        return []
    return [(h.memory, h.cosine) for h in hits if not h.memory.deprecated]


def drop_restated(engine: Engine, ctx: Context, visible: dict[str, Any]) -> None:
    """Recall: a team hit that states what a visible local note states (the same claim, core/relation.py) is
    dropped for the more specific local note, as an identical one is (by content hash). Team records written
    before the local note (or while the server was away) never went through the check on write."""
    from mnemo.core import relation

    team_ids = [i for i, c in visible.items() if getattr(c, "scope", None) == "team" and c.memory is not None]
    local = [i for i, c in visible.items() if c.memory is not None and c.scope != "team"]
    if not team_ids or not local:
        return
    import numpy as np

    blobs = engine.store.vectors(local)
    ids = [i for i in local if i in blobs]
    if not ids:
        return
    mat = np.frombuffer(b"".join(blobs[i] for i in ids), dtype=np.float32).reshape(len(ids), -1)
    texts = {m.id: m.text for m in engine.store.get_memories(ids).values()}
    vocab = relation.vocabulary_of(engine._embedder)
    for tid in team_ids:
        c = visible[tid]
        tvec = c.extras.get("vector")
        if tvec is None or len(tvec) != mat.shape[1]:
            continue
        sims = mat @ np.asarray(tvec, dtype=np.float32)
        for j in np.argsort(-sims)[:5]:
            lid = ids[int(j)]
            if lid in texts and relation.same_claim(c.memory.text, texts[lid], float(sims[int(j)]), vocab):
                visible.pop(tid, None)
                break


def hydrate_team(engine: Engine, ctx: Context, item_id: str, mode: str) -> dict[str, Any]:
    from mnemo.core.recall import HYDRATE_BUDGET, HYDRATE_RELATED_NOTES, recall

    if mode not in HYDRATE_BUDGET:
        raise InvalidInput(f"unknown hydrate mode {mode!r}", hint="use 'default' or 'related'")
    team = team_for(engine)
    if team is None:
        raise NotFound(f"no team memory {item_id}: no team server is configured", hint="`mnemo team status`")
    got = team.get(item_id, engine.model_id)
    if got is None:
        raise NotFound(f"no team memory {item_id}", hint="run `mnemo recall --scope team` for fresh ids")
    m, vec = got
    related = []
    if vec is not None:
        res = recall(engine, ctx, m.text, limit=HYDRATE_RELATED_NOTES[mode] + 1, include_docs=(mode == "related"),
                     qvec=vec)
        used = len(m.text)
        for card in res["cards"]:
            if card["item_id"] == item_id:
                continue
            used += len(card["compressed_summary"])
            if used > HYDRATE_BUDGET[mode]:
                break
            related.append(card)
    return {"item_id": item_id, "source_kind": "note", "mode": mode, "memory": m.to_dict(), "related": related}


def deprecate_team(engine: Engine, ctx: Context, record_id: str, reason: str | None) -> dict[str, Any]:
    team = team_for(engine)
    if team is None:
        raise NotFound(f"no team memory {record_id}: no team server is configured", hint="`mnemo team status`")
    team.set_deprecated(record_id, engine.model_id, reason or "deprecated", ctx.user)
    return {"status": "deprecated", "id": record_id, "scope": "team",
            "message": "deprecated for the whole team (kept on the server, out of recall)"}


def recent_team(engine: Engine, ctx: Context, since: float, limit: int = 10) -> list[Memory]:
    """Team memories promoted from this project since `since` (other people's hand-offs); [] when unreachable."""
    team = team_for(engine)
    if team is None:
        return []
    try:
        recs = team.records(engine.model_id, limit=1000, where={"project_id": ctx.project_id})
    except TeamUnavailable:
        return []
    recs = [m for m in recs if m.updated_at >= since and not m.deprecated]
    recs.sort(key=lambda m: (-m.updated_at, m.id))
    return recs[:limit]


def team_status(engine: Engine, ctx: Context) -> dict[str, Any]:
    settings = load_settings(engine.home)
    out: dict[str, Any] = {"configured": settings.configured, **settings.public()}
    if not settings.configured:
        out["hint"] = ("start a server with `mnemo team serve`, then `mnemo team connect http://HOST:PORT`"
                       " (or set MNEMO_TEAM_URL)")
        return out
    team = team_for(engine)
    reachable = team.ping()
    if reachable and team.pending():
        with contextlib.suppress(TeamUnavailable):
            team.drain()
    out.update({"reachable": reachable, "breaker": team.breaker.to_dict(), "outbox": team.outbox(),
                "collection": collection_name(settings.namespace, engine.model_id), "model_id": engine.model_id})
    if reachable:
        try:
            recs = team.records(engine.model_id, limit=1000)
            authors: dict[str, int] = {}
            for m in recs:
                authors[m.author] = authors.get(m.author, 0) + 1
            recs.sort(key=lambda m: (-m.updated_at, m.id))
            out["records"] = team.count(engine.model_id)
            out["authors"] = dict(sorted(authors.items(), key=lambda kv: (-kv[1], kv[0])))
            out["recent"] = [{"id": m.id, "author": m.author, "project_name": m.project_name,
                              "text": m.text[:160], "updated_at": m.updated_at, "deprecated": m.deprecated}
                             for m in recs[:10]]
        except TeamUnavailable as exc:
            out["reachable"] = False
            out["error"] = exc.message
    else:
        out["error"] = team.breaker.last_error
    return out


__all__ = [
    "CircuitBreaker", "TeamClient", "TeamSettings", "attach", "build_record", "clear_settings", "collection_name",
    "deprecate_team", "drop_restated", "hydrate_team", "load_settings", "promote_to_team", "record_id_for", "recent_team",
    "save_settings", "team_candidates", "team_for", "team_neighbours", "team_status",
]
