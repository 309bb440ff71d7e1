"""The snapshot file (format 1): UTF-8 JSON Lines, written atomically, read and validated completely before a
merge touches the store.

    line 1     {"format": "mnemo-snapshot", "version": 1, "manifest": {...}, "manifest_sha256": "..."}
    lines 2..  {"record": {...memory fields, "vector": {"model_id", "dim", "b64"}}, "sha256": "..."}

Every line is canonical JSON (sorted keys, no spaces). `manifest_sha256` covers the manifest; the manifest holds
the format, the model id, counts, the filters, and `body_sha256` / `body_bytes` over every byte after line 1; each
record carries the sha256 of its own canonical JSON. Vectors travel as base64 float32; an import embeds every text
itself and only compares them (a snapshot's vector is never trusted, core/sharing/snapshot.py). The writer goes through a temp file in the target directory, fsync,
rename, fsync of the directory. The reader checks size caps, the manifest, the whole-body checksum, every record's
checksum and every field BEFORE a transaction starts; a merge is then applied in ONE transaction.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.core.environment import env_int
from mnemo.core.errors import InvalidInput, NotFound, SnapshotError
from mnemo.core.models import MEMORY_TYPES, SOURCES, STATUSES, STORED_SCOPES, TIERS, TRUST, Memory
from mnemo.core.policy import MAX_TEXT_CHARS
from mnemo.core.safety.screen import clean_text, find_secrets
from mnemo.core.store import blob_to_vec
from mnemo.core.text import content_hash

MAGIC = "mnemo-snapshot"
FORMAT_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024
NOT_CHANGED = "nothing was changed"


def max_snapshot_bytes() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_BYTES")


def max_records() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_RECORDS")


def max_record_bytes() -> int:
    return env_int("MNEMO_SNAPSHOT_MAX_RECORD_BYTES")


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    """Kinds of secrets in `text` (core/safety/screen.py), behind a cheap pre-filter: most notes are prose."""
    if not _SECRET_HINT.search(text):
        return []
    return sorted({f.kind for f in find_secrets(text)})


HISTORY_FIELDS = ("version", "text", "type", "kind", "importance", "tags", "written_at", "written_by", "why",
                  "replaced_at")
MAX_HISTORY = 1000


def memory_record(m: Memory, vec_row: Any | None, decayed_at: float | None,
                  history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One memory as a snapshot record, with its earlier versions (`history`: `store.versions` rows; a version
    that holds what looks like a secret is left out, like a memory)."""
    rec: dict[str, Any] = {**m.to_dict(), "record_type": "memory"}
    kept = [{k: v[k] for k in HISTORY_FIELDS} for v in history or [] if not secret_kinds(v["text"])]
    if kept:
        rec["history"] = kept[-MAX_HISTORY:]
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
    assert isinstance(text, str)  # `need` raised otherwise
    cleaned, flags = clean_text(text)
    need("text", bool(cleaned), "is empty")
    _check_kinds(rec, need)
    _check_numbers(rec, need)
    _check_states(rec, need)
    _check_metadata(rec, need)
    if "history" in rec:
        rec = dict(rec, history=_check_history(rec["history"], need))
    need("content_hash", isinstance(rec.get("content_hash"), str) and rec["content_hash"] == content_hash(text),
         "does not match the text")
    if cleaned != text:  # invisible characters smuggled in: strip and flag, as on any write
        rec = dict(rec, text=cleaned, content_hash=content_hash(cleaned),
                   flags=sorted(set(rec["flags"]) | set(flags)))
    return rec


def _check_kinds(rec: dict[str, Any], need) -> None:
    need("kind", isinstance(rec.get("kind"), str) and 0 < len(rec["kind"].strip()) <= 64, "must be a short word")
    need("type", rec.get("type") in MEMORY_TYPES, f"must be one of {', '.join(MEMORY_TYPES)}")
    need("scope", rec.get("scope") in STORED_SCOPES and rec.get("scope") != "team", "must be project or global")
    for key in ("project_id", "project_name"):
        need(key, isinstance(rec.get(key), str) and 0 < len(rec[key]) <= 256, "must be a short string")
    need("branch", "branch" in rec and (rec["branch"] is None or (isinstance(rec["branch"], str)
                                                                  and 0 < len(rec["branch"]) <= 256)),
         "must be a branch name or null")


def _check_numbers(rec: dict[str, Any], need) -> None:
    need("importance", _is_num(rec.get("importance")) and 0.0 <= rec["importance"] <= 1.0, "must be in 0..1")
    need("confirmations", isinstance(rec.get("confirmations"), int) and not isinstance(rec["confirmations"], bool)
         and 1 <= rec["confirmations"] <= 10**9, "must be a positive integer")
    need("access_count", isinstance(rec.get("access_count"), int) and not isinstance(rec["access_count"], bool)
         and 0 <= rec["access_count"] <= 10**12, "must be a non-negative integer")
    for key in ("created_at", "updated_at", "last_accessed"):
        need(key, _is_num(rec.get(key)) and 0 <= rec[key] < 10**11, "must be a time in epoch seconds")
    if "decayed_at" in rec:
        need("decayed_at", _is_num(rec["decayed_at"]) and 0 <= rec["decayed_at"] < 10**11, "must be a time")


def _check_states(rec: dict[str, Any], need) -> None:
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


def _check_metadata(rec: dict[str, Any], need) -> None:
    need("provenance", isinstance(rec.get("provenance"), dict) and _check_json_size(rec["provenance"], 64 * 1024),
         "must be an object (at most 64 KiB)")
    for key in ("tags", "flags"):
        need(key, isinstance(rec.get(key), list) and len(rec[key]) <= 64
             and all(isinstance(t, str) and len(t) <= 128 for t in rec[key]), "must be a list of short strings")
    anchors = rec.get("anchors")
    need("anchors", isinstance(anchors, list) and len(anchors) <= 64 and _check_json_size(anchors, 64 * 1024),
         "must be a list (at most 64)")
    assert isinstance(anchors, list)  # `need` raised otherwise
    for a in anchors:
        need("anchors", isinstance(a, dict) and isinstance(a.get("path"), str), "entries need a path")
        p = a["path"].replace("\\", "/")
        need("anchors", not p.startswith("/") and not re.match(r"^[A-Za-z]:", p) and ".." not in p.split("/")
             and "\x00" not in p and len(p) <= 1024, f"path {p[:60]!r} points outside the project")


def _check_history(history: Any, need) -> list[dict[str, Any]]:
    """The earlier versions of a record: each checked like the memory's own fields, its text cleaned."""
    need("history", isinstance(history, list) and len(history) <= MAX_HISTORY, f"must be a list (at most "
         f"{MAX_HISTORY})")
    out = []
    for v in history:
        need("history", isinstance(v, dict) and set(HISTORY_FIELDS) <= set(v), "entries need " +
             ", ".join(HISTORY_FIELDS))
        need("history", isinstance(v["version"], int) and not isinstance(v["version"], bool)
             and 1 <= v["version"] <= 10**6, "versions must be positive integers")
        need("history", isinstance(v["text"], str) and 0 < len(v["text"]) <= MAX_TEXT_CHARS
             and bool(clean_text(v["text"])[0]), f"texts must be 1..{MAX_TEXT_CHARS} chars")
        need("history", v["type"] in MEMORY_TYPES and isinstance(v["kind"], str) and 0 < len(v["kind"]) <= 64,
             "entries need a known type and a short kind")
        need("history", _is_num(v["importance"]) and 0 <= v["importance"] <= 1, "importance must be in 0..1")
        need("history", isinstance(v["tags"], list) and len(v["tags"]) <= 64
             and all(isinstance(t, str) and len(t) <= 128 for t in v["tags"]), "tags must be short strings")
        need("history", all(_is_num(v[k]) and 0 <= v[k] < 10**11 for k in ("written_at", "replaced_at")),
             "times must be epoch seconds")
        need("history", all(isinstance(v[k], str) and len(v[k]) <= 2000 for k in ("written_by", "why")),
             "written_by and why must be short strings")
        text = clean_text(v["text"])[0]
        out.append({**{k: v[k] for k in HISTORY_FIELDS}, "text": text, "content_hash": content_hash(text)})
    return out


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


def _read_file(p: Path) -> bytes:
    """The whole file, within the size cap."""
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
    return data


def _read_head(p: Path, data: bytes) -> tuple[int, dict[str, Any]]:
    """Where line 1 ends, and the manifest it holds (magic, version and checksum checked)."""
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
    return nl, manifest


def _body_lines(p: Path, manifest: dict[str, Any], body: bytes) -> list[bytes]:
    """The record lines, once the body's size, checksum and count match the manifest."""
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
    return lines


def _read_records(snap: Snapshot, lines: list[bytes]) -> None:
    """Every record checked (size, JSON, checksum, fields, unique id, vector) and added to `snap`."""
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


def read_snapshot(path: str | Path) -> Snapshot:
    """Read and fully validate a snapshot; raises SnapshotError (nothing changed) on anything wrong."""
    p = _abs_path(path, "snapshot import")
    data = _read_file(p)
    nl, manifest = _read_head(p, data)
    lines = _body_lines(p, manifest, data[nl + 1:])
    snap = Snapshot(p, manifest)
    _read_records(snap, lines)
    dims = {v.shape[0] for _, v in snap.vectors.values()}
    if len(dims) > 1:
        raise _bad(f"{p.name} mixes vectors of different sizes {sorted(dims)}")
    return snap
