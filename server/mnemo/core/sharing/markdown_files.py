"""Export the memories as Markdown files a person reads and edits, and import them back (format: core/sharing/markdown_format.py).

Export: the active memories this project sees (every branch and tier; not deprecated, superseded, pending or
rejected), one file per scope and type, each written atomically. Import: every file is read and checked before
anything is written; then an entry whose id is here and whose text or metadata differ becomes an edit
(`core/edits.py`), an entry whose id is not here is restored with its id only when this store held that id once (its change log,
history, a review item, or a repair's list of lost memories names it; a tombstone keeps a forgotten one out), an
entry naming any other id, or none, is a new memory with a new id (reported as such) (`remember`: every check of a write), and a memory of the
same scope and type that is here but in no file is reported as `removed` (nothing is deleted).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.results import (
    MarkdownExport,
    MarkdownFile,
    MarkdownImport,
    MarkdownNew,
    MarkdownRestored,
    MarkdownUnreadable,
)
from mnemo.core.edits import edit_memory
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.lifecycle.anchors import rel_path
from mnemo.core.memory.write import draft, find_duplicate, remember
from mnemo.core.models import MEMORY_TYPES, Context, Memory
from mnemo.core.safety import screen as safety
from mnemo.core.search import memory_visible
from mnemo.core.sharing import markdown_format as memory_md

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

MD_SCOPES = ("project", "global")
MAX_FILES = 64


def _check_scopes(scopes: list[str] | None) -> tuple[str, ...]:
    if scopes is None:
        return MD_SCOPES
    if not isinstance(scopes, list) or not scopes or any(s not in MD_SCOPES for s in scopes):
        raise InvalidInput(f"scopes {scopes!r}: export takes project and/or global",
                           hint="team memories live on the team server: `mnemo team status`")
    return tuple(dict.fromkeys(scopes))


def exported(engine: Engine, ctx: Context, scopes: tuple[str, ...]) -> dict[tuple[str, str], list[Memory]]:
    """The memories an export writes, by (scope, type)."""
    out: dict[tuple[str, str], list[Memory]] = {}
    for m in engine.store.listed(ctx.project_id, scopes, status="active"):
        if memory_visible(m, ctx, include_cold=True, all_branches=True):
            out.setdefault((m.scope, m.type), []).append(m)
    return out


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_markdown(engine: Engine, ctx: Context, path: str, scopes: list[str] | None = None) -> MarkdownExport:
    """Write `<scope>-<type>.md` files into directory `path` (created if missing; other files left alone)."""
    chosen = _check_scopes(scopes)
    out = Path(os.path.expanduser(str(path)))
    if out.exists() and not out.is_dir():
        raise InvalidInput(f"{path} is a file", hint="export Markdown into a directory: mnemo export --format md DIR")
    out.mkdir(parents=True, exist_ok=True)
    files: list[MarkdownFile] = []
    for (scope, type_), mems in sorted(exported(engine, ctx, chosen).items()):
        name = memory_md.file_name(scope, type_)
        _write_atomic(out / name, memory_md.render_file(scope, type_, [m.to_dict() for m in mems]))
        files.append({"name": name, "scope": scope, "type": type_, "memories": len(mems)})
    return {"path": str(out.resolve()), "files": files, "memories": sum(f["memories"] for f in files),
            "scopes": list(chosen)}


# -- import ------------------------------------------------------------------------------------------------------
def _read_text(f: Path, unreadable: list[MarkdownUnreadable] | None) -> str | None:
    """The file's text; a file that is not UTF-8 text (a binary file named .md) is refused with the byte and its
    offset: alone it stops the import, in a folder it is listed in `unreadable` and the other files still go in."""
    data = f.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = (f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); nothing was read from it")
    if unreadable is None:
        raise InvalidInput(f"{f.name} is {reason}", hint="import a Markdown file saved as UTF-8 (as `mnemo export "
                                                         "--format md` writes them)")
    unreadable.append({"file": f.name, "reason": reason})
    return None


def read_files(path: str, unreadable: list[MarkdownUnreadable] | None = None,
               ) -> list[tuple[str, str, str, list[dict[str, Any]] | None]]:
    """(file name, scope, type, entries) of `path` (a file, or the `*.md` files of a directory), all checked. A
    folder's file that is not UTF-8 text goes to `unreadable` (when given) instead of stopping the import; another
    Markdown file of a directory (not a memories file) has entries None."""
    p = Path(os.path.expanduser(str(path)))
    if p.is_dir():
        files = sorted(f for f in p.glob("*.md") if f.is_file())
        if not files:
            raise InvalidInput(f"no .md files in {path}", hint="export some with `mnemo export --format md DIR`")
    elif p.is_file():
        files = [p]
    else:
        raise InvalidInput(f"{path} does not exist", hint="pass a directory of exported .md files or one .md file")
    if len(files) > MAX_FILES:
        raise InvalidInput(f"{len(files)} .md files in {path}; the limit is {MAX_FILES}",
                           hint="import the files of one export (one per scope and type)")
    out: list[tuple[str, str, str, list[dict[str, Any]] | None]] = []
    seen: dict[str, str] = {}  # id -> file:line of its first entry
    for f in files:
        text = _read_text(f, unreadable if p.is_dir() else None)
        if text is None:
            continue
        if p.is_dir() and not memory_md.is_memories_file(text, f.name):
            out.append((f.name, "", "", None))  # another Markdown file in the folder (a README): left alone
            continue
        scope, type_, entries = memory_md.parse_file(text, f.name)
        if scope not in MD_SCOPES or type_ not in MEMORY_TYPES:
            raise InvalidInput(f"{f.name}: scope {scope!r}, type {type_!r}; nothing was imported",
                               hint=f"scopes: {', '.join(MD_SCOPES)}; types: {', '.join(MEMORY_TYPES)}")
        for e in entries:
            if "id" in e and e["id"] in seen:
                raise InvalidInput(f"{f.name}:{e['line']}: id {e['id']} is also at {seen[e['id']]}; nothing was "
                                   "imported", hint="keep one entry per id (remove the id line of a copy)")
            if "id" in e:
                seen[e["id"]] = f"{f.name}:{e['line']}"
        out.append((f.name, scope, type_, entries))
    if all(entries is None for _, _, _, entries in out):
        also = f" ({len(unreadable)} file(s) not UTF-8 text: {', '.join(u['file'] for u in unreadable)})" \
            if unreadable else ""
        raise InvalidInput(f"no Mnemo memories files in {path}{also}",
                           hint="export some with `mnemo export --format md DIR`")
    return out


def _changes(ctx: Context, e: dict[str, Any], m: Memory, type_: str) -> dict[str, Any]:
    """What an entry changes in the memory it names (the argument names of `edit_memory`)."""
    wanted = {"text": e["text"], "kind": e.get("kind", "fact"), "tags": e.get("tags", []),
              "anchors": [{**a, "path": rel_path(ctx, a.get("path"))} for a in e.get("anchors", [])],
              "importance": e.get("importance", memory_md.DEFAULT_IMPORTANCE), "type": type_}
    have = {"text": m.text, "kind": m.kind, "tags": m.tags, "anchors": m.anchors, "importance": m.importance,
            "type": m.type}
    return {k: v for k, v in wanted.items() if v != have[k]}


def plan_import(engine: Engine, ctx: Context, files) -> dict[str, list]:
    """Which entries edit, restore, create or are skipped; which memories are in no file (`removed`)."""
    plan: dict[str, list] = {"edit": [], "restore": [], "new": [], "unchanged": [], "skipped": [], "removed": []}
    ids = [e["id"] for _, _, _, entries in files for e in entries if "id" in e]
    here = engine.store.get_memories(ids)
    gone = engine.store.tombstoned([i for i in ids if i not in here])
    seen = engine.store.seen_ids([i for i in ids if i not in here and i not in gone])
    for name, scope, type_, entries in files:
        for e in entries:
            where = f"{name}:{e['line']}"
            m = here.get(e.get("id", ""))
            if "id" not in e:
                plan["new"].append((where, scope, type_, e))
            elif m is None and e["id"] in gone:
                plan["skipped"].append({"id": e["id"], "where": where,
                                        "reason": "forgotten here (a tombstone keeps it out)"})
            elif m is None and e["id"] not in seen:  # an id this store never held: a new memory, a new id
                plan["new"].append((where, scope, type_, {k: v for k, v in e.items() if k != "id"} |
                                    {"unknown_id": e["id"]}))
            elif m is None:
                plan["restore"].append((where, scope, type_, e))
            elif m.scope == "project" and m.project_id != ctx.project_id:
                plan["skipped"].append({"id": m.id, "where": where, "reason": "a memory of another project"})
            elif m.scope != scope:
                plan["skipped"].append({"id": m.id, "where": where,
                                        "reason": f"it is in the {m.scope} scope here (move it with promote)"})
            elif e.get("branch") != m.branch:
                plan["skipped"].append({"id": m.id, "where": where, "reason": f"it is on branch {m.branch or '(all)'} "
                                        "here; a branch is not changed by an import (`mnemo branch merge`)"})
            else:
                changes = _changes(ctx, e, m, type_)
                if changes:
                    plan["edit"].append((where, m.id, changes, type_, e))
                else:
                    plan["unchanged"].append(m.id)
    listed = {e["id"] for _, _, _, entries in files for e in entries if "id" in e}
    pairs = {(scope, type_) for _, scope, type_, _ in files}
    current = exported(engine, ctx, tuple(sorted({s for s, _ in pairs})))
    for pair in sorted(pairs):
        plan["removed"] += [{"id": m.id, "title": memory_md.title(m.text), "file": memory_md.file_name(*pair)}
                            for m in current.get(pair, []) if m.id not in listed]
    return plan


def _drafted(ctx: Context, where: str, name: str, scope: str, type_: str, e: dict[str, Any]) -> Memory:
    """The memory an entry describes, checked as a write is (text, kind, tags, anchors, secrets); errors name the
    file and line."""
    try:
        mem, _ = draft(ctx, e["text"], type=type_, kind=e.get("kind", "fact"), tags=e.get("tags", []),
                       importance=e.get("importance", memory_md.DEFAULT_IMPORTANCE), source="import",
                       anchors=[{**a, "path": rel_path(ctx, a.get("path"))} for a in e.get("anchors", [])],
                       provenance={"imported_from": {"file": name, "format": "markdown"}})
    except MnemoError as exc:  # InvalidInput, SecretDetected
        exc.message = f"{where}: {exc.message}; nothing was imported"
        raise
    if "id" not in e:
        return mem
    created = e.get("created")
    at = (_dt.datetime.strptime(created, "%Y-%m-%d").replace(tzinfo=_dt.UTC).timestamp() if created
          else mem.created_at)
    # a project memory whose entry names no branch is on the current one (a global memory has no branch)
    branch = None if mem.branch is None or scope != "project" else e.get("branch", mem.branch)
    try:  # the metadata line is free text too: the note's secrets policy (`draft` checked text, kind, tags, anchors)
        branch = safety.screen_field(branch, "branch", "import", mode=ctx.secrets)
    except MnemoError as exc:
        exc.message = f"{where}: {exc.message}; nothing was imported"
        raise
    return dataclasses.replace(mem, id=e["id"], scope=scope, branch=branch, created_at=at)


def _restore(engine: Engine, ctx: Context, mems: list[Memory], report: MarkdownImport, wheres: list[str]) -> None:
    """Insert memories with their ids (one transaction); the same text already here is skipped."""
    fresh = []
    for m in mems:
        dup = find_duplicate(engine, ctx, m.content_hash, m.branch)
        if dup is not None:
            report["skipped"].append({"id": m.id, "reason": f"the same text is here as {dup.id}"})
        else:
            fresh.append(m)
    if not fresh:
        return
    vecs = engine.embed([m.text for m in fresh])
    store = engine.store
    with store.write() as c:
        for m, vec in zip(fresh, vecs, strict=True):
            store.insert_memory(c, m, vec, engine.model_id)
            if m.status == "pending":
                store.add_review(c, "pending", m.id, None, ctx.project_id,
                                 {"source": "import", "flags": m.flags, "file": m.provenance["imported_from"]["file"]})
    engine.changed()
    report["restored"] += [m.id for m in fresh]
    report["restored_detail"] += [_restored_detail(where, m) for where, m in zip(wheres, mems, strict=True)
                                  if m in fresh]


def import_markdown(engine: Engine, ctx: Context, path: str, dry_run: bool = False) -> MarkdownImport:
    """Read exported (and perhaps edited) Markdown back; see the module's docstring. `dry_run`: plan only."""
    unreadable: list[MarkdownUnreadable] = []
    read = read_files(path, unreadable)
    files = [(n, s, t, entries) for n, s, t, entries in read if entries is not None]
    plan = plan_import(engine, ctx, files)
    names = {f"{n}:{e['line']}": n for n, _, _, entries in files for e in entries}
    # every entry is checked before anything is written
    checked = {w: _drafted(ctx, w, names[w], s, t, e) for w, s, t, e in plan["restore"] + plan["new"]}
    for where, _mid, _changes, type_, e in plan["edit"]:
        _drafted(ctx, where, names[where], "project", type_, e)
    report: MarkdownImport = {
        "files": [n for n, _, _, _ in files], "ignored": [n for n, _, _, e in read if e is None],
        "dry_run": bool(dry_run), "unchanged": len(plan["unchanged"]),
        "edited": [{"id": mid, "where": w, "fields": sorted(ch)} for w, mid, ch, _, _ in plan["edit"]],
        "restored": [] if not dry_run else [e["id"] for _, _, _, e in plan["restore"]],
        "restored_detail": [] if not dry_run else [_restored_detail(w, checked[w]) for w, _, _, _ in
                                                   plan["restore"]],
        "created": [] if not dry_run else [_unknown({"where": w}, e) for w, _, _, e in plan["new"]],
        "skipped": list(plan["skipped"]), "removed": plan["removed"], "unreadable": unreadable}
    if dry_run:
        return report
    for entry, (_where, mid, changes, _type, _e) in zip(report["edited"], plan["edit"], strict=True):
        res = edit_memory(engine, ctx, mid, **changes)
        entry["status"] = res["status"]  # edited, or conflict / pending / kept_existing with why
        if res.get("message"):
            entry["message"] = res["message"]
    _restore(engine, ctx, [checked[w] for w, _, _, _ in plan["restore"]], report,
             [w for w, _, _, _ in plan["restore"]])
    for where, _scope, type_, _e in plan["new"]:
        m = checked[where]
        made = remember(engine, ctx, m.text, type=type_, kind=m.kind, tags=m.tags, importance=m.importance,
                        source="import", anchors=m.anchors, provenance=m.provenance)
        report["created"].append(_unknown({"where": where, "id": made["memory"]["id"], "status": made["status"]},
                                          _e))
    return report


def _unknown(entry: MarkdownNew, e: dict[str, Any]) -> MarkdownNew:
    """A created entry whose file named an id this store never held says so."""
    if e.get("unknown_id"):
        entry["requested_id"] = e["unknown_id"]
        entry["reason"] = (f"id {e['unknown_id']} is not one this store has held (no history, change or tombstone): "
                           "created as a new memory with a new id")
    return entry


def _restored_detail(where: str, m: Memory) -> MarkdownRestored:
    return {"id": m.id, "where": where, "branch": m.branch, "title": memory_md.title(m.text),
            "reason": "this store held this id before (its history or change log names it): restored with it"}


__all__ = ["export_markdown", "exported", "import_markdown", "plan_import", "read_files"]
