"""Sharing: snapshots (export / diff / merge) and branch memory (diff / merge / delete, merged-branch detection).

Snapshot file (format 1): UTF-8 JSON Lines.

    line 1     {"format": "mnemo-snapshot", "version": 1, "manifest": {...}, "manifest_sha256": "..."}
    lines 2..  {"record": {...memory fields, "vector": {"model_id", "dim", "b64"}}, "sha256": "..."}

Every line is canonical JSON (sorted keys, no spaces). `manifest_sha256` covers the manifest; the manifest holds
the format, the model id, counts, the filters, and `body_sha256` / `body_bytes` over every byte after line 1; each
record carries the sha256 of its own canonical JSON. Vectors travel as base64 float32, so an import into a store
with the same model id needs no re-embedding. The writer goes through a temp file in the target directory, fsync,
rename, fsync of the directory. The reader checks size caps, the manifest, the whole-body checksum, every record's
checksum and every field BEFORE a transaction starts; a merge is then applied in ONE transaction.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo import __version__
from mnemo.core import lifecycle
from mnemo.core.env import env_int
from mnemo.core.errors import InvalidInput, NotFound, SnapshotError
from mnemo.core.models import MEMORY_TYPES, SOURCES, STATUSES, STORED_SCOPES, TIERS, TRUST, Context, Memory
from mnemo.core.store import blob_to_vec, partition_for
from mnemo.core.text import content_hash

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

MAGIC = "mnemo-snapshot"
FORMAT_VERSION = 1
STRATEGIES = ("local_wins", "remote_wins", "newer_wins", "keep_both")
MAX_MANIFEST_BYTES = 64 * 1024
NOT_CHANGED = "nothing was changed"


def max_snapshot_bytes() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_BYTES", 512 * 1024 * 1024)


def max_records() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_RECORDS", 500_000)


def max_record_bytes() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_RECORD_BYTES", 512 * 1024)


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_strategy(strategy: str | None) -> str:
    strategy = strategy or "newer_wins"
    if strategy not in STRATEGIES:
        raise InvalidInput(f"unknown merge strategy {strategy!r}", hint=f"use one of: {', '.join(STRATEGIES)}")
    return strategy


def _abs_path(path: Any, what: str) -> Path:
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise InvalidInput(f"{what} needs a file path", hint="pass the snapshot file")
    p = Path(path)
    if not p.is_absolute():
        raise InvalidInput(f"snapshot path {str(path)!r} is relative",
                           hint="clients resolve the path (the owner process runs in another directory)")
    return p


_SECRET_HINT = re.compile(r"[A-Za-z0-9_\-+/=]{16,}|key|token|secret|passw|pwd|auth|bearer|BEGIN|://[^/\s:@]+:[^@\s]+@",
                          re.I)


def secret_kinds(text: str) -> list[str]:
    """Kinds of secrets in `text` (core/safety.py), behind a cheap pre-filter: most notes are prose."""
    if not _SECRET_HINT.search(text):
        return []
    try:
        from mnemo.core.safety import find_secrets
    except ImportError:  # safety module absent in a partial checkout
        return []
    return sorted({f.kind for f in find_secrets(text)})


# -- export ----------------------------------------------------------------------------------------------------
def _export_where(ctx: Context, scopes: list[str] | None, branches: list[str] | None) -> tuple[str, list[Any]]:
    scopes = list(scopes or ["project", "global"])
    for s in scopes:
        if s not in ("project", "global", "all"):
            raise InvalidInput(f"cannot export the scope {s!r}",
                               hint="use project, global, or all (every project in the store, and global)")
    clause, params = [], []
    if "all" in scopes:
        clause.append("scope IN ('project','global')")
    else:
        if "project" in scopes:
            clause.append("(scope='project' AND project_id=?)")
            params.append(ctx.project_id)
        if "global" in scopes:
            clause.append("scope='global'")
    where = "(" + " OR ".join(clause) + ")"
    if branches:
        if not all(isinstance(b, str) and b for b in branches):
            raise InvalidInput("branch names must be non-empty strings")
        where += f" AND scope='project' AND branch IN ({','.join('?' * len(branches))})"
        params += list(branches)
    return where, params


def memory_record(m: Memory, vec_row: Any | None, decayed_at: float | None) -> dict[str, Any]:
    rec = m.to_dict()
    rec["record_type"] = "memory"
    if decayed_at is not None:
        rec["decayed_at"] = decayed_at
    if vec_row is not None:
        vec = blob_to_vec(vec_row["vec"])
        rec["vector"] = {"model_id": vec_row["model_id"], "dim": int(vec.shape[0]),
                         "b64": base64.b64encode(vec_row["vec"]).decode("ascii")}
    return rec


def write_atomic(path: Path, chunks: list[bytes]) -> None:
    """Temp file in the same directory, fsync, rename, fsync the directory; the target is whole or untouched."""
    d = path.parent
    if not d.is_dir():
        raise InvalidInput(f"the directory {d} does not exist", hint="create it first or pick another path")
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory", hint="give a file name, e.g. memory.mnemo")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for ch in chunks:
                f.write(ch)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)  # memories are private by default
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def export_snapshot(engine: Engine, ctx: Context, path: str, scopes: list[str] | None = None,
                    branches: list[str] | None = None) -> dict[str, Any]:
    target = _abs_path(path, "snapshot export")
    where, params = _export_where(ctx, scopes, branches)
    store = engine.store
    lifecycle.ensure_schema(store)
    conn = store.conn()
    conn.execute("BEGIN")  # one consistent read of the whole selection
    try:
        mems = store.query_memories(where, params, order="id")
        ids = [m.id for m in mems]
        vec_rows, decayed = {}, {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(f"SELECT item_id, model_id, vec FROM vectors WHERE item_id IN ({marks})", chunk):
                vec_rows[r["item_id"]] = r
            for r in conn.execute(f"SELECT id, decayed_at FROM decay_state WHERE id IN ({marks})", chunk):
                decayed[r[0]] = float(r[1])
    finally:
        conn.execute("COMMIT")
    if len(mems) > max_records():
        raise SnapshotError(f"{len(mems):,} memories exceed the snapshot limit of {max_records():,}",
                            hint="export fewer scopes/branches, or raise MNEMO_SNAPSHOT_MAX_RECORDS")
    lines = []
    by_scope: dict[str, int] = {}
    by_branch: dict[str, int] = {}
    models: dict[str, int] = {}
    withheld = []
    for m in list(mems):
        kinds = secret_kinds(m.text)
        if kinds:  # secrets never leave the store (SPEC §7)
            withheld.append({"id": m.id, "secrets": kinds})
            mems.remove(m)
    for m in mems:
        rec = memory_record(m, vec_rows.get(m.id), decayed.get(m.id))
        lines.append(canonical({"record": rec, "sha256": sha256(canonical(rec))}) + b"\n")
        by_scope[m.scope] = by_scope.get(m.scope, 0) + 1
        by_branch[m.branch or "(all branches)"] = by_branch.get(m.branch or "(all branches)", 0) + 1
        if m.id in vec_rows:
            mid = vec_rows[m.id]["model_id"]
            models[mid] = models.get(mid, 0) + 1
    body = b"".join(lines)
    model_id = max(models, key=lambda k: models[k]) if models else (engine.model_id if mems else None)
    manifest = {
        "created_at": time.time(), "mnemo_version": __version__, "model_id": model_id,
        "source": {"project_id": ctx.project_id, "project_name": ctx.project_name, "branch": ctx.branch,
                   "default_branch": ctx.default_branch, "user": ctx.user, "origin": ctx.origin},
        "filters": {"scopes": list(scopes or ["project", "global"]), "branches": list(branches or [])},
        "counts": {"records": len(lines), "memories": len(mems), "by_scope": by_scope, "by_branch": by_branch},
        "body_bytes": len(body), "body_sha256": sha256(body),
    }
    head = {"format": MAGIC, "version": FORMAT_VERSION, "manifest": manifest,
            "manifest_sha256": sha256(canonical(manifest))}
    head_line = canonical(head) + b"\n"
    if len(head_line) + len(body) > max_snapshot_bytes():
        raise SnapshotError(f"the snapshot would be {len(head_line) + len(body):,} bytes, over the limit of "
                            f"{max_snapshot_bytes():,}", hint="export fewer scopes/branches, or raise "
                                                              "MNEMO_SNAPSHOT_MAX_BYTES")
    write_atomic(target, [head_line, body])
    return {"path": str(target), "bytes": len(head_line) + len(body), "memories": len(mems),
            "by_scope": by_scope, "by_branch": by_branch, "model_id": model_id, "sha256": manifest["body_sha256"],
            "withheld_secrets": withheld}


# -- read and validate -----------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    vectors: dict[str, tuple[str, Any]] = field(default_factory=dict)  # id -> (model_id, np.ndarray)

    def info(self) -> dict[str, Any]:
        m = self.manifest
        return {"file": self.path.name, "created_at": m.get("created_at"), "mnemo_version": m.get("mnemo_version"),
                "model_id": m.get("model_id"), "source": m.get("source"), "counts": m.get("counts"),
                "sha256": m.get("body_sha256")}


def _bad(msg: str, hint: str | None = None) -> SnapshotError:
    return SnapshotError(f"{msg}; {NOT_CHANGED}", hint=hint or "re-export the snapshot from its source and copy it "
                                                                "again (it must be transferred byte for byte)")


ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_NUM = (int, float)


def _is_num(v: Any) -> bool:
    return isinstance(v, _NUM) and not isinstance(v, bool) and math.isfinite(v)


def _check_json_size(v: Any, cap: int) -> bool:
    try:
        return len(canonical(v)) <= cap
    except (TypeError, ValueError, RecursionError):
        return False


def _check_record(rec: Any, n: int) -> dict[str, Any]:
    """Validate one memory record; returns it or raises SnapshotError naming the record and the field."""
    from mnemo.core.engine import MAX_TEXT_CHARS, clean_text

    where = f"record {n}"
    if not isinstance(rec, dict) or rec.get("record_type") != "memory":
        raise _bad(f"{where} is not a memory record")

    def need(key: str, ok: bool, what: str) -> None:
        if not ok:
            raise _bad(f"{where}: field {key!r} {what}")

    need("id", isinstance(rec.get("id"), str) and bool(ID_RE.match(rec["id"])), "is not a valid id")
    where = f"record {n} ({rec['id']})"
    text = rec.get("text")
    need("text", isinstance(text, str) and 0 < len(text) <= MAX_TEXT_CHARS, f"must be 1..{MAX_TEXT_CHARS} chars")
    cleaned, flags = clean_text(text)
    need("text", bool(cleaned), "is empty")
    need("kind", isinstance(rec.get("kind"), str) and 0 < len(rec["kind"].strip()) <= 64, "must be a short word")
    need("type", rec.get("type") in MEMORY_TYPES, f"must be one of {', '.join(MEMORY_TYPES)}")
    need("scope", rec.get("scope") in STORED_SCOPES and rec.get("scope") != "team", "must be project or global")
    for key in ("project_id", "project_name"):
        need(key, isinstance(rec.get(key), str) and 0 < len(rec[key]) <= 256, "must be a short string")
    need("branch", "branch" in rec and (rec["branch"] is None or (isinstance(rec["branch"], str)
                                                                  and 0 < len(rec["branch"]) <= 256)),
         "must be a branch name or null")
    need("importance", _is_num(rec.get("importance")) and 0.0 <= rec["importance"] <= 1.0, "must be in 0..1")
    need("confirmations", isinstance(rec.get("confirmations"), int) and not isinstance(rec["confirmations"], bool)
         and 1 <= rec["confirmations"] <= 10**9, "must be a positive integer")
    need("access_count", isinstance(rec.get("access_count"), int) and not isinstance(rec["access_count"], bool)
         and 0 <= rec["access_count"] <= 10**12, "must be a non-negative integer")
    for key in ("created_at", "updated_at", "last_accessed"):
        need(key, _is_num(rec.get(key)) and 0 <= rec[key] < 10**11, "must be a time in epoch seconds")
    if "decayed_at" in rec:
        need("decayed_at", _is_num(rec["decayed_at"]) and 0 <= rec["decayed_at"] < 10**11, "must be a time")
    need("source", rec.get("source") in SOURCES, f"must be one of {', '.join(SOURCES)}")
    need("tier", rec.get("tier") in TIERS, f"must be one of {', '.join(TIERS)}")
    need("trust", rec.get("trust") in TRUST, f"must be one of {', '.join(TRUST)}")
    need("status", rec.get("status") in STATUSES, f"must be one of {', '.join(STATUSES)}")
    need("deprecated", isinstance(rec.get("deprecated"), bool), "must be true or false")
    need("deprecated_reason", rec.get("deprecated_reason") is None or (isinstance(rec["deprecated_reason"], str)
                                                                       and len(rec["deprecated_reason"]) <= 2000),
         "must be a short string or null")
    need("superseded_by", rec.get("superseded_by") is None or (isinstance(rec["superseded_by"], str)
                                                               and bool(ID_RE.match(rec["superseded_by"]))),
         "must be an id or null")
    need("author", isinstance(rec.get("author"), str) and len(rec["author"]) <= 256, "must be a short string")
    need("provenance", isinstance(rec.get("provenance"), dict) and _check_json_size(rec["provenance"], 64 * 1024),
         "must be an object (at most 64 KiB)")
    for key in ("tags", "flags"):
        need(key, isinstance(rec.get(key), list) and len(rec[key]) <= 64
             and all(isinstance(t, str) and len(t) <= 128 for t in rec[key]), "must be a list of short strings")
    anchors = rec.get("anchors")
    need("anchors", isinstance(anchors, list) and len(anchors) <= 64 and _check_json_size(anchors, 64 * 1024),
         "must be a list (at most 64)")
    for a in anchors:
        need("anchors", isinstance(a, dict) and isinstance(a.get("path"), str), "entries need a path")
        p = a["path"].replace("\\", "/")
        need("anchors", not p.startswith("/") and not re.match(r"^[A-Za-z]:", p) and ".." not in p.split("/")
             and "\x00" not in p and len(p) <= 1024, f"path {p[:60]!r} points outside the project")
    need("content_hash", isinstance(rec.get("content_hash"), str) and rec["content_hash"] == content_hash(text),
         "does not match the text")
    if cleaned != text:  # invisible characters smuggled in: strip and flag, as on any write
        rec = dict(rec, text=cleaned, content_hash=content_hash(cleaned),
                   flags=sorted(set(rec["flags"]) | set(flags)))
    return rec


def _check_vector(rec: dict[str, Any], n: int):
    import numpy as np

    v = rec.get("vector")
    if v is None:
        return None
    if not (isinstance(v, dict) and isinstance(v.get("model_id"), str) and isinstance(v.get("dim"), int)
            and 1 <= v["dim"] <= 8192 and isinstance(v.get("b64"), str)):
        raise _bad(f"record {n} ({rec['id']}): the vector is malformed")
    try:
        raw = base64.b64decode(v["b64"], validate=True)
    except (ValueError, TypeError) as exc:
        raise _bad(f"record {n} ({rec['id']}): the vector is not base64") from exc
    if len(raw) != v["dim"] * 4:
        raise _bad(f"record {n} ({rec['id']}): the vector has {len(raw)} bytes, expected {v['dim'] * 4}")
    vec = np.frombuffer(raw, dtype=np.float32)
    if not np.all(np.isfinite(vec)):
        raise _bad(f"record {n} ({rec['id']}): the vector holds non-finite numbers")
    return v["model_id"], vec


def read_snapshot(path: str | Path) -> Snapshot:
    """Read and fully validate a snapshot; raises SnapshotError (nothing changed) on anything wrong."""
    p = _abs_path(path, "snapshot import")
    try:
        st = p.stat()
    except FileNotFoundError as exc:
        raise NotFound(f"no snapshot file at {p}", hint="check the path") from exc
    except OSError as exc:
        raise _bad(f"cannot read {p}: {exc.strerror}", hint="check the path and permissions") from exc
    if not p.is_file():
        raise _bad(f"{p} is not a regular file", hint="pass a snapshot written by `mnemo snapshot export`")
    cap = max_snapshot_bytes()
    if st.st_size > cap:
        raise _bad(f"{p.name} is {st.st_size:,} bytes, over the snapshot limit of {cap:,}",
                   hint="raise MNEMO_SNAPSHOT_MAX_BYTES if you trust this file")
    try:
        with open(p, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise _bad(f"cannot read {p}: {exc.strerror}", hint="check the path and permissions") from exc
    if len(data) > cap:
        raise _bad(f"{p.name} grew past the snapshot limit of {cap:,} bytes while being read")
    if not data:
        raise _bad(f"{p.name} is empty: not a Mnemo snapshot", hint="pass a file written by `mnemo snapshot export`")
    nl = data.find(b"\n", 0, MAX_MANIFEST_BYTES + 1)
    if nl < 0:
        if not data.startswith(b'{"format":"' + MAGIC.encode()):
            raise _bad(f"{p.name} is not a Mnemo snapshot", hint="pass a file written by `mnemo snapshot export`")
        raise _bad(f"{p.name} is truncated or damaged (the manifest line is incomplete)")
    head_raw = data[:nl]
    try:
        head = json.loads(head_raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: a JSON nesting bomb
        if not data.startswith(b'{"format":"' + MAGIC.encode()):
            raise _bad(f"{p.name} is not a Mnemo snapshot",
                       hint="pass a file written by `mnemo snapshot export`") from exc
        raise _bad(f"{p.name} is damaged: the manifest is not valid JSON ({exc})") from exc
    if not isinstance(head, dict) or head.get("format") != MAGIC:
        raise _bad(f"{p.name} is not a Mnemo snapshot", hint="pass a file written by `mnemo snapshot export`")
    version = head.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _bad(f"{p.name} is damaged: bad format version {version!r}")
    if version > FORMAT_VERSION:
        raise _bad(f"{p.name} uses snapshot format {version}, newer than this Mnemo understands "
                   f"(up to {FORMAT_VERSION})", hint="upgrade mnemo on this machine, or export with the older "
                                                     "version on the other side")
    manifest = head.get("manifest")
    try:
        canon_ok = canonical(head) == head_raw
    except (TypeError, ValueError, RecursionError):
        canon_ok = False
    if not isinstance(manifest, dict) or not canon_ok or head.get("manifest_sha256") != sha256(canonical(manifest)):
        raise _bad(f"{p.name} is damaged: the manifest checksum does not match")
    body = data[nl + 1:]
    want_bytes = manifest.get("body_bytes")
    counts = manifest.get("counts") or {}
    n_records = counts.get("records") if isinstance(counts, dict) else None
    if not isinstance(want_bytes, int) or not isinstance(n_records, int):
        raise _bad(f"{p.name} is damaged: the manifest lacks sizes")
    if n_records > max_records():
        raise _bad(f"{p.name} holds {n_records:,} records, over the limit of {max_records():,}",
                   hint="raise MNEMO_SNAPSHOT_MAX_RECORDS if you trust this file")
    if len(body) != want_bytes:
        what = "truncated" if len(body) < want_bytes else "longer than its manifest says"
        raise _bad(f"{p.name} is {what}: {len(body):,} bytes of records, the manifest says {want_bytes:,}")
    if sha256(body) != manifest.get("body_sha256"):
        raise _bad(f"{p.name} is damaged: the whole-file checksum does not match")
    if body and not body.endswith(b"\n"):
        raise _bad(f"{p.name} is damaged: the last record is incomplete")
    lines = body.split(b"\n")[:-1] if body else []
    if len(lines) != n_records:
        raise _bad(f"{p.name} is damaged: {len(lines)} records, the manifest says {n_records}")
    snap = Snapshot(p, manifest)
    seen: set[str] = set()
    rec_cap = max_record_bytes()
    for n, line in enumerate(lines, start=1):
        if len(line) > rec_cap:
            raise _bad(f"record {n} is {len(line):,} bytes, over the record limit of {rec_cap:,}",
                       hint="raise MNEMO_SNAPSHOT_MAX_RECORD_BYTES if you trust this file")
        try:
            wrapped = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: a JSON nesting bomb
            raise _bad(f"record {n} is not valid JSON") from exc
        if not isinstance(wrapped, dict) or not isinstance(wrapped.get("record"), dict):
            raise _bad(f"record {n} is malformed")
        rec = wrapped["record"]
        try:
            ok = sha256(canonical(rec)) == wrapped.get("sha256")
        except (TypeError, ValueError, RecursionError):
            ok = False
        if not ok:
            raise _bad(f"record {n} is damaged: its checksum does not match")
        rec = _check_record(rec, n)
        if rec["id"] in seen:
            raise _bad(f"record {n}: the id {rec['id']} appears twice")
        seen.add(rec["id"])
        vec = _check_vector(rec, n)
        if vec is not None:
            snap.vectors[rec["id"]] = vec
        snap.records.append(rec)
    dims = {v.shape[0] for _, v in snap.vectors.values()}
    if len(dims) > 1:
        raise _bad(f"{p.name} mixes vectors of different sizes {sorted(dims)}")
    return snap


# -- plan and merge --------------------------------------------------------------------------------------------
MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(Memory))


@dataclass
class Action:
    op: str  # insert | replace | copy | skip_duplicate | skip_local | skip_forgotten | skip_secret
    mem: Memory
    local: Memory | None = None
    reason: str = ""
    conflict: bool = False
    decayed_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"op": self.op, "id": self.mem.id, "text": self.mem.text, "scope": self.mem.scope,
               "branch": self.mem.branch, "reason": self.reason}
        if self.local is not None:
            out["local"] = {"id": self.local.id, "text": self.local.text, "updated_at": self.local.updated_at}
            out["remote_updated_at"] = self.mem.updated_at
        return out


def _derived_id(*parts: str) -> str:
    return "mem-" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


def _place(m: Memory) -> tuple:
    return (m.scope, m.project_id if m.scope == "project" else None, m.branch if m.scope == "project" else None)


def _remote_memory(rec: dict[str, Any], snap: Snapshot, ctx: Context, now: float) -> Memory:
    d = {k: rec[k] for k in MEMORY_FIELDS if k in rec}
    src = (snap.manifest.get("source") or {})
    src_pid = src.get("project_id")
    if d["scope"] == "project" and d["project_id"] == src_pid:
        # The snapshot's own project lands in this workspace's project (ids by path differ across machines).
        d["project_id"], d["project_name"] = ctx.project_id, ctx.project_name
    prov = dict(d.get("provenance") or {})
    prov["imported_from"] = {"snapshot": snap.path.name, "snapshot_sha256": snap.manifest.get("body_sha256"),
                             "exported_at": snap.manifest.get("created_at"), "exported_by": src.get("user"),
                             "project_id": rec["project_id"], "project_name": rec["project_name"],
                             "id": rec["id"], "imported_at": now}
    d["provenance"] = prov
    if d["scope"] == "global":
        d["branch"] = None
    # Imported memories are untrusted until a person accepts the import in Review (SPEC §7); one that reads like
    # instructions to the agent waits in Review on its own.
    from mnemo.core.safety import injection_flags, is_suspicious

    d["flags"] = sorted(set(d.get("flags") or []) | set(injection_flags(d["text"])))
    d["trust"] = "untrusted"
    if is_suspicious(d["flags"]) and d.get("status") == "active":
        d["status"] = "pending"
    return Memory(**d)


def plan_merge(engine: Engine, ctx: Context, snap: Snapshot, strategy: str) -> list[Action]:
    store = engine.store
    now = time.time()
    remote = [(_remote_memory(r, snap, ctx, now), r) for r in snap.records]
    ids = [m.id for m, _ in remote]
    local = store.get_memories(ids)
    conn = store.conn()
    tomb: set[str] = set()
    hashes = sorted({m.content_hash for m, _ in remote})
    places: dict[tuple, set[str]] = {}  # (hash, place) -> local ids holding that content there
    for i in range(0, max(len(ids), len(hashes)), 500):
        chunk = ids[i:i + 500]
        if chunk:
            tomb |= {r[0] for r in conn.execute(
                f"SELECT id FROM tombstones WHERE id IN ({','.join('?' * len(chunk))})", chunk)}
        hchunk = hashes[i:i + 500]
        if hchunk:
            for r in conn.execute(f"SELECT * FROM memories WHERE content_hash IN ({','.join('?' * len(hchunk))})",
                                  hchunk):
                lm = Memory.from_row(r)
                places.setdefault((lm.content_hash, *_place(lm)), set()).add(lm.id)
    copies = store.get_memories(_derived_id(m.id, m.content_hash) for m, _ in remote)
    # Content-hash dedup is against what is here already; records inside one snapshot are distinct by id (the
    # source may hold the same text twice, e.g. a deprecated note and a newer one).
    # Local memories this merge replaces with the remote version no longer hold their old content afterwards: they
    # must not make another record of the snapshot a "duplicate" (it would be skipped now and imported next time).
    replaced: set[str] = set()
    secrets_of = {m.id: secret_kinds(m.text) for m, _ in remote}
    for m, _rec in remote:
        lm = local.get(m.id)
        if lm is not None and m.id not in tomb and not secrets_of[m.id] and lm.content_hash != m.content_hash and (
                strategy == "remote_wins" or (strategy == "newer_wins" and m.updated_at > lm.updated_at)):
            replaced.add(m.id)

    def held_here(key: tuple) -> bool:
        return bool(places.get(key, set()) - replaced)

    actions: list[Action] = []
    for m, rec in remote:
        key = (m.content_hash, *_place(m))
        lm = local.get(m.id)
        dec = rec.get("decayed_at")
        if m.id in tomb:
            actions.append(Action("skip_forgotten", m, reason="forgotten here (tombstone)"))
            continue
        kinds = secrets_of[m.id]
        if kinds:
            actions.append(Action("skip_secret", m, reason="holds what looks like a secret: " + ", ".join(kinds)))
            continue
        if lm is not None:
            if lm.content_hash == m.content_hash:
                actions.append(Action("skip_duplicate", m, lm, "same memory, same content"))
                continue
            take_remote = {"local_wins": False, "remote_wins": True, "keep_both": None,
                           "newer_wins": m.updated_at > lm.updated_at}[strategy]
            if take_remote is None:
                cid = _derived_id(m.id, m.content_hash)
                copy = dataclasses.replace(m, id=cid)
                if cid in copies or held_here(key):
                    actions.append(Action("skip_duplicate", copy, lm, "both kept by an earlier merge",
                                          conflict=True))
                else:
                    actions.append(Action("copy", copy, lm, f"kept both: remote imported as {cid}", conflict=True,
                                          decayed_at=dec))
            elif take_remote:
                why = "remote is newer" if strategy == "newer_wins" else "remote wins"
                actions.append(Action("replace", m, lm, f"took remote ({why})", conflict=True, decayed_at=dec))
            else:
                why = "local is newer or as new" if strategy == "newer_wins" else "local wins"
                actions.append(Action("skip_local", m, lm, f"kept local ({why})", conflict=True))
            continue
        if held_here(key):
            actions.append(Action("skip_duplicate", m, None, "same content already here"))
            continue
        actions.append(Action("insert", m, None, "new", decayed_at=dec))
    return actions


def _summary(actions: list[Action], strategy: str, snap: Snapshot, detail: bool = True) -> dict[str, Any]:
    count = {op: 0 for op in ("insert", "replace", "copy", "skip_duplicate", "skip_local", "skip_forgotten",
                              "skip_secret")}
    for a in actions:
        count[a.op] += 1
    conflicts = [a for a in actions if a.conflict]
    out = {
        "strategy": strategy, "snapshot": snap.info(),
        "imported": count["insert"] + count["copy"], "replaced": count["replace"],
        "skipped_duplicates": count["skip_duplicate"] - sum(1 for a in conflicts if a.op == "skip_duplicate"),
        "skipped_forgotten": count["skip_forgotten"], "skipped_secrets": count["skip_secret"],
        "conflicts": len(conflicts),
        "resolutions": {"kept_local": count["skip_local"], "took_remote": count["replace"],
                        "kept_both": count["copy"] + sum(1 for a in conflicts if a.op == "skip_duplicate")},
        "changes": count["insert"] + count["copy"] + count["replace"],
    }
    if detail:
        out["conflict_details"] = [a.to_dict() for a in conflicts]
        out["new"] = [a.to_dict() for a in actions if a.op in ("insert",)]
        out["secrets"] = [{"id": a.mem.id, "reason": a.reason} for a in actions if a.op == "skip_secret"]
    return out


VECTOR_MATCH = 0.99  # a stored vector and the text's own embedding agree to ~1e-3 (onnx vs torch, same model id)


def _vectors_for(engine: Engine, snap: Snapshot, mems: list[Memory]) -> tuple[dict[str, Any], list[str]]:
    """Every imported text is embedded here (before any transaction starts), and that vector is the one stored: a
    snapshot's vector is never trusted, as a forged one could hide a note from recall or pull it into every
    answer. Returns the vectors and the ids whose stored vector (under our model id) did not match its text."""
    import numpy as np

    out: dict[str, Any] = {}
    mismatched: list[str] = []
    for i in range(0, len(mems), 256):
        chunk = mems[i:i + 256]
        for m, vec in zip(chunk, engine.embed([m.text for m in chunk]), strict=True):
            out[m.id] = vec
            orig = m.provenance.get("imported_from", {}).get("id", m.id)
            given = snap.vectors.get(orig)
            if given is not None and given[0] == engine.model_id and (
                    given[1].shape != np.shape(vec) or float(np.dot(given[1], vec)) < VECTOR_MATCH):
                mismatched.append(m.id)
    return out, mismatched


def diff_snapshot(engine: Engine, ctx: Context, path: str, strategy: str = "newer_wins") -> dict[str, Any]:
    """What `merge_snapshot` would do; writes nothing."""
    strategy = check_strategy(strategy)
    snap = read_snapshot(path)
    actions = plan_merge(engine, ctx, snap, strategy)
    out = _summary(actions, strategy, snap)
    out["dry_run"] = True
    return out


def merge_snapshot(engine: Engine, ctx: Context, path: str, strategy: str = "newer_wins",
                   progress=None) -> dict[str, Any]:
    """Import a snapshot: validated first, then ONE transaction; duplicates skipped; provenance kept."""
    strategy = check_strategy(strategy)
    snap = read_snapshot(path)
    lifecycle.ensure_schema(engine.store)
    actions = plan_merge(engine, ctx, snap, strategy)
    writes = [a for a in actions if a.op in ("insert", "replace", "copy")]
    vecs, mismatched = _vectors_for(engine, snap, [a.mem for a in writes])
    store = engine.store
    model_id = engine.model_id
    summary = _summary(actions, strategy, snap)
    summary["vectors_replaced"] = mismatched  # stored vectors that did not match their text (re-embedded)
    with store.write() as c:
        for n, a in enumerate(writes, start=1):
            m = a.mem
            if a.op == "replace":
                old = c.execute("SELECT part FROM memories WHERE id=?", (m.id,)).fetchone()
                store.delete_item(c, m.id)
                store.insert_memory(c, m, vecs[m.id], model_id)
                new_part = partition_for(m.scope, m.project_id)
                if old is not None and old["part"] != new_part:  # the index drops the copy in the old partition
                    store.log_change(c, m.id, old["part"], "upsert")
            else:
                store.insert_memory(c, m, vecs[m.id], model_id)
            if a.decayed_at is not None:
                c.execute("INSERT INTO decay_state(id, decayed_at) VALUES(?, ?) ON CONFLICT(id) DO UPDATE SET"
                          " decayed_at=excluded.decayed_at", (m.id, a.decayed_at))
            if a.op == "copy" and a.local is not None:  # kept apart on purpose: compaction must never merge them
                lifecycle.add_review(c, "conflict", m.id, a.local.id, ctx.project_id,
                                     {"source": "snapshot_merge", "file": snap.path.name,
                                      "new_text": m.text, "existing_text": a.local.text}, resolution="keep_both")
            if m.status == "pending":  # flagged (or pending at the source): a person decides
                lifecycle.add_review(c, "pending", m.id, None, ctx.project_id,
                                     {"source": "import", "flags": m.flags, "file": snap.path.name})
            if progress and n % 200 == 0:
                progress({"done": n, "total": len(writes)})
        if writes:
            brief = {k: summary[k] for k in ("imported", "replaced", "skipped_duplicates", "conflicts")}
            summary["review_id"] = lifecycle.add_review(
                c, "snapshot_merge", None, None, ctx.project_id,
                {"file": snap.path.name, "strategy": strategy, "summary": brief,
                 "sha256": snap.manifest.get("body_sha256"),
                 "conflicts": [a.to_dict() for a in actions if a.conflict][:50]})
    engine._wake.set()
    summary["dry_run"] = False
    return summary


# -- branch memory ---------------------------------------------------------------------------------------------
def _check_branch(name: Any, what: str = "branch") -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 256 or name.startswith("-") \
            or any(ch in name for ch in "\x00\n\r"):
        raise InvalidInput(f"{what} name {name!r} is not valid", hint="e.g. feature/auth")
    return name.strip()


def _branch_plan(engine: Engine, ctx: Context, source: str, target: str) -> dict[str, Any]:
    store = engine.store
    src = store.query_memories("scope='project' AND project_id=? AND branch=? AND superseded_by IS NULL AND"
                               " deprecated=0 AND status!='rejected'", (ctx.project_id, source), order="created_at, id")
    tgt = store.query_memories("scope='project' AND project_id=? AND (branch=? OR branch IS NULL) AND"
                               " status!='rejected'", (ctx.project_id, target))
    tgt_hashes = {m.content_hash for m in tgt if not m.superseded_by and not m.deprecated}
    tgt_ids = {m.id for m in tgt}
    to_copy, dups, pending = [], [], []
    for m in src:
        if m.status == "pending":
            pending.append(m)
        elif m.content_hash in tgt_hashes or _derived_id(m.id, target) in tgt_ids:
            dups.append(m)
        else:
            to_copy.append(m)
            tgt_hashes.add(m.content_hash)
    # Overrides the branch made over the target's memories become supersedes on merge (git merge for memory).
    supersede, carry = [], []
    if to_copy:
        rows = store.conn().execute(
            f"SELECT id, item_id, other_id FROM review WHERE kind='override' AND (resolution IS NULL OR"
            f" resolution='accept') AND item_id IN ({','.join('?' * len(to_copy))})",
            [m.id for m in to_copy]).fetchall()
        others = store.get_memories({r["other_id"] for r in rows})
        for r in rows:
            o = others.get(r["other_id"])
            if o is None:
                continue
            if o.scope == "project" and o.branch == target:
                supersede.append((r["item_id"], o, int(r["id"])))
            else:
                carry.append((r["item_id"], o, int(r["id"])))
    return {"copy": to_copy, "duplicates": dups, "pending": pending, "supersede": supersede, "carry": carry}


def _brief(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "text": m.text, "type": m.type, "kind": m.kind, "branch": m.branch,
            "updated_at": m.updated_at}


def _plan_dict(plan: dict[str, Any], source: str, target: str) -> dict[str, Any]:
    return {"source": source, "target": target,
            "imported": len(plan["copy"]), "skipped_duplicates": len(plan["duplicates"]),
            "skipped_pending": len(plan["pending"]), "supersedes": len(plan["supersede"]),
            "new": [_brief(m) for m in plan["copy"]], "duplicates": [_brief(m) for m in plan["duplicates"]],
            "pending": [_brief(m) for m in plan["pending"]],
            "superseded": [{"by": src_id, "memory": _brief(o)} for src_id, o, _ in plan["supersede"]]}


def _target(ctx: Context, source: str) -> str:
    if not ctx.branch:
        raise InvalidInput("this workspace is not on a git branch", hint="branch memory needs a git checkout")
    if ctx.branch == source:
        raise InvalidInput(f"you are on {source}: a branch cannot merge into itself",
                           hint=f"check out the target branch (e.g. {ctx.default_branch or 'main'}) and run the "
                                f"merge from there")
    return ctx.branch


def branch_diff(engine: Engine, ctx: Context, source: str) -> dict[str, Any]:
    """What merging `source`'s memories into the current branch would do; writes nothing."""
    source = _check_branch(source)
    target = _target(ctx, source)
    out = _plan_dict(_branch_plan(engine, ctx, source, target), source, target)
    out["dry_run"] = True
    return out


def branch_merge(engine: Engine, ctx: Context, source: str, *, _review_id: int | None = None) -> dict[str, Any]:
    """Copy `source`'s active memories into the current branch (one transaction; duplicates skipped; provenance
    `merged_from`); what the branch overrode on the target is superseded by the copy."""
    source = _check_branch(source)
    target = _target(ctx, source)
    store = engine.store
    lifecycle.ensure_schema(store)
    plan = _branch_plan(engine, ctx, source, target)
    ids = [m.id for m in plan["copy"]]
    vec_rows, decayed = {}, {}
    conn = store.conn()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(f"SELECT item_id, model_id, vec FROM vectors WHERE item_id IN ({marks})", chunk):
            vec_rows[r["item_id"]] = r
        for r in conn.execute(f"SELECT id, decayed_at FROM decay_state WHERE id IN ({marks})", chunk):
            decayed[r[0]] = float(r[1])
    missing = [m for m in plan["copy"] if m.id not in vec_rows]
    fresh = dict(zip([m.id for m in missing], engine.embed([m.text for m in missing]), strict=True)) if missing else {}
    now = time.time()
    copy_of: dict[str, str] = {}
    with store.write() as c:
        for m in plan["copy"]:
            cid = _derived_id(m.id, target)
            copy_of[m.id] = cid
            prov = dict(m.provenance)
            prov["merged_from"] = {"branch": source, "id": m.id, "merged_at": now}
            copy = dataclasses.replace(m, id=cid, branch=target, provenance=prov)
            if m.id in vec_rows:
                store.insert_memory(c, copy, blob_to_vec(vec_rows[m.id]["vec"]), vec_rows[m.id]["model_id"])
            else:
                store.insert_memory(c, copy, fresh[m.id], engine.model_id)
            if m.id in decayed:
                c.execute("INSERT OR REPLACE INTO decay_state(id, decayed_at) VALUES(?, ?)", (cid, decayed[m.id]))
        for src_id, o, rid in plan["supersede"]:
            store.update_memory(c, o.id, reindex=True, superseded_by=copy_of[src_id], updated_at=now)
            c.execute("UPDATE review SET resolved_at=?, resolution='merged' WHERE id=? AND resolved_at IS NULL",
                      (now, rid))
        for pair in lifecycle.kept_apart_pairs(c):  # a pair kept apart on the branch stays apart on the target
            x, y = sorted(pair) if len(pair) == 2 else (None, None)
            if x in copy_of and y in copy_of:
                lifecycle.add_review(c, "conflict", copy_of[x], copy_of[y], ctx.project_id,
                                     {"source": "branch_merge", "branch": source}, resolution="keep_both", now=now)
        for src_id, o, _rid in plan["carry"]:
            lifecycle.add_review(c, "override", copy_of[src_id], o.id, ctx.project_id,
                                 {"level": "scope", "branch": target, "overridden_scope": o.scope,
                                  "carried_from": src_id}, now=now)
        opened = c.execute("SELECT id, payload FROM review WHERE kind='branch_merge' AND resolved_at IS NULL AND"
                           " project_id=?", (ctx.project_id,)).fetchall()
        done = [r["id"] for r in opened if json.loads(r["payload"]).get("source") == source
                and json.loads(r["payload"]).get("target", target) == target]
        if _review_id is not None:
            done.append(_review_id)
        for rid in done:
            c.execute("UPDATE review SET resolved_at=?, resolution='merge' WHERE id=? AND resolved_at IS NULL",
                      (now, rid))
    engine._wake.set()
    out = _plan_dict(plan, source, target)
    out["dry_run"] = False
    out["copies"] = copy_of
    return out


def branch_delete(engine: Engine, ctx: Context, name: str, force: bool = False) -> dict[str, Any]:
    """Delete one branch's memories (explicit; tombstones kept). Branch-independent and global memories are never
    touched. Refuses the default branch and the checked-out branch unless `force`."""
    name = _check_branch(name)
    if not force and name == ctx.default_branch:
        raise InvalidInput(f"{name} is the default branch: deleting its memories is refused",
                           hint="pass --force if you really mean it")
    if not force and name == ctx.branch:
        raise InvalidInput(f"you are on {name}", hint="check out another branch first, or pass --force")
    store = engine.store
    lifecycle.ensure_schema(store)
    mems = store.query_memories("scope='project' AND project_id=? AND branch=?", (ctx.project_id, name))
    default_hashes = set()
    if ctx.default_branch and ctx.default_branch != name:
        default_hashes = {m.content_hash for m in store.query_memories(
            "scope='project' AND project_id=? AND (branch=? OR branch IS NULL)", (ctx.project_id, ctx.default_branch))}
    unmerged = [m for m in mems if m.status == "active" and not m.superseded_by and not m.deprecated
                and m.content_hash not in default_hashes]
    now = time.time()
    with store.write() as c:
        for m in mems:
            c.execute("INSERT OR REPLACE INTO tombstones(id, content_hash, project_id, scope, forgotten_at, reason)"
                      " VALUES(?,?,?,?,?,?)", (m.id, m.content_hash, m.project_id, m.scope, now,
                                               f"branch {name} deleted"))
            store.delete_item(c, m.id)
            c.execute("DELETE FROM decay_state WHERE id=?", (m.id,))
            c.execute("UPDATE review SET resolved_at=?, resolution='branch_deleted' WHERE resolved_at IS NULL AND"
                      " (item_id=? OR other_id=?)", (now, m.id, m.id))
        opened = c.execute("SELECT id, payload FROM review WHERE kind='branch_merge' AND resolved_at IS NULL AND"
                           " project_id=?", (ctx.project_id,)).fetchall()
        for r in opened:
            if json.loads(r["payload"]).get("source") == name:
                c.execute("UPDATE review SET resolved_at=?, resolution='branch_deleted' WHERE id=?", (now, r["id"]))
    engine._wake.set()
    return {"branch": name, "deleted": len(mems), "unmerged": len(unmerged),
            "unmerged_memories": [_brief(m) for m in unmerged]}


# -- merged-branch detection (git) -----------------------------------------------------------------------------
def _git(root: str, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=15,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def _head(root: str, branch: str) -> str | None:
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        r = _git(root, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if r is not None and r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    return None


def merged_branches(engine: Engine, ctx: Context, queue: bool = True) -> dict[str, Any]:
    """Branches with memories whose git head the default branch contains (`git merge-base --is-ancestor`); with
    `queue`, each one that still has memories to merge gets one `branch_merge` review item (once per head)."""
    if not ctx.root or not ctx.default_branch:
        return {"default_branch": ctx.default_branch, "branches": [], "note": "not a git workspace"}
    rows = engine.store.conn().execute(
        "SELECT branch, COUNT(*) FROM memories WHERE scope='project' AND project_id=? AND branch IS NOT NULL AND"
        " branch != ? AND status='active' AND superseded_by IS NULL AND deprecated=0 GROUP BY branch ORDER BY branch",
        (ctx.project_id, ctx.default_branch)).fetchall()
    default_head = _head(ctx.root, ctx.default_branch)
    out = []
    if default_head is None:
        return {"default_branch": ctx.default_branch, "branches": [],
                "note": f"cannot resolve {ctx.default_branch} in git"}
    tctx = dataclasses.replace(ctx, branch=ctx.default_branch)
    for branch, count in rows:
        if branch.startswith("detached@"):
            continue
        head = _head(ctx.root, branch)
        entry: dict[str, Any] = {"branch": branch, "head": head, "memories": int(count)}
        if head is None:
            entry["state"] = "gone"
        else:
            r = _git(ctx.root, "merge-base", "--is-ancestor", head, default_head)
            entry["state"] = "merged" if r is not None and r.returncode == 0 else "unmerged"
        if entry["state"] == "merged":
            plan = _branch_plan(engine, tctx, branch, ctx.default_branch)
            entry["unmerged_memories"] = len(plan["copy"])
            if queue and plan["copy"]:
                entry["review_id"] = _queue_branch_merge(engine, ctx, branch, head, len(plan["copy"]))
        out.append(entry)
    return {"default_branch": ctx.default_branch, "default_head": default_head, "branches": out}


def _queue_branch_merge(engine: Engine, ctx: Context, branch: str, head: str, unmerged: int) -> int:
    with engine.store.write() as c:
        for r in c.execute("SELECT id, payload, resolved_at FROM review WHERE kind='branch_merge' AND project_id=?",
                           (ctx.project_id,)).fetchall():
            p = json.loads(r["payload"])
            if p.get("source") == branch and (p.get("head") == head or r["resolved_at"] is None):
                return int(r["id"])
        return lifecycle.add_review(c, "branch_merge", None, None, ctx.project_id,
                                    {"source": branch, "target": ctx.default_branch, "head": head,
                                     "unmerged": unmerged})


__all__ = ["export_snapshot", "read_snapshot", "diff_snapshot", "merge_snapshot", "branch_diff", "branch_merge",
           "branch_delete", "merged_branches", "STRATEGIES", "FORMAT_VERSION", "write_atomic"]
