"""Markdown docs as recall sources: `index_docs` splits every Markdown file of a project into blocks (by heading),
embeds them and keeps them current (unchanged files are skipped by their hash, vanished files removed).

A secret in a doc (a token pasted into a README) never reaches the store: every block's text, title and headings
are redacted (`[REDACTED:<kind>]`) before they are embedded and stored, whatever MNEMO_SECRETS says (refusing would
leave the whole file out of recall; the file itself is the owner's), and the summary says where (`secrets`). A store
indexed before this check re-reads every file once (meta `docs_secrets_checked`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.documents import blocks as md
from mnemo.core.errors import InvalidInput
from mnemo.core.models import Context
from mnemo.core.safety import screen as safety

if TYPE_CHECKING:
    from mnemo.core.api_types.results import IndexDocsResult
    from mnemo.core.engine import Engine

ProgressFn = Callable[[dict[str, Any]], None]


def index_docs(engine: Engine, ctx: Context, root: str | None = None,
               progress: ProgressFn | None = None) -> IndexDocsResult:
    base = Path(root or ctx.root or ".").resolve()
    if not base.is_dir():
        raise InvalidInput(f"{base} is not a directory", hint="pass the repository root")
    files = md.find_markdown_files(base)
    known = engine.store.file_hashes(ctx.project_id)
    # blocks stored before docs were screened for secrets: every file is read again once
    screened = engine.store.get_meta(SECRETS_CHECKED) == SECRETS_CHECK_VERSION
    seen: set[str] = set()
    counts = {"added": 0, "updated": 0, "unchanged": 0, "skipped": 0, "blocks_written": 0}
    problems: list[dict[str, str]] = []
    secrets: list[dict[str, Any]] = []
    now = time.time()
    for i, path in enumerate(files, start=1):
        rel = path.relative_to(base).as_posix()
        seen.add(rel)
        if progress:
            progress({"done": i - 1, "total": len(files), "path": rel})
        _index_file(engine, ctx, path, rel, known, now, counts, problems, secrets, force=not screened)
    removed = 0
    for rel in set(known) - seen:
        with engine.store.write() as c:
            for old in engine.store.file_blocks(ctx.project_id, rel):
                engine.store.delete_item(c, old["id"])
        removed += 1
    if progress:
        progress({"done": len(files), "total": len(files), "path": None})
    if not screened:
        with engine.store.write() as c:
            engine.store.set_meta(c, SECRETS_CHECKED, SECRETS_CHECK_VERSION)
    engine.changed()
    return {"root": str(base), "files": len(files), "added": counts["added"], "updated": counts["updated"],
            "unchanged": counts["unchanged"], "removed": removed, "skipped": counts["skipped"],
            "blocks_written": counts["blocks_written"], "problems": problems, "secrets": secrets}


SECRETS_CHECKED = "docs_secrets_checked"
SECRETS_CHECK_VERSION = "1"


def _redacted(b: md.Block, rel: str, secrets: list[dict[str, Any]]) -> md.Block:
    """The block with every secret in its text, title and headings replaced; each one recorded (file, line, kind,
    a masked preview)."""
    text, found = safety.redact_secrets(b.text)
    title, found_t = safety.redact_secrets(b.title)
    heads = [safety.redact_secrets(h) for h in b.heading_path]
    for f in found:
        secrets.append({"path": rel, "line": b.start_line + f.line - 1, "kind": f.kind, "preview": f.preview})
    for f in [*found_t, *(f for _h, fs in heads for f in fs)]:
        secrets.append({"path": rel, "line": b.start_line, "kind": f.kind, "preview": f.preview})
    if not (found or found_t or any(fs for _h, fs in heads)):
        return b
    return dataclasses.replace(b, text=text, title=title, heading_path=tuple(h for h, _fs in heads))


def _index_file(engine: Engine, ctx: Context, path: Path, rel: str, known: dict[str, str], now: float,
                counts: dict[str, int], problems: list[dict[str, str]], secrets: list[dict[str, Any]],
                force: bool = False) -> None:
    """(Re)write one file's blocks in one transaction unless its content is unchanged or it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.append({"path": rel, "reason": str(exc)})
        counts["skipped"] += 1
        return
    if len(data) > md.MAX_DOC_BYTES:
        problems.append({"path": rel, "reason": f"larger than {md.MAX_DOC_BYTES:,} bytes; skipped (raise "
                                                "MNEMO_MAX_DOC_BYTES to index it)"})
        counts["skipped"] += 1
        return
    fh = md.file_hash(data)
    if known.get(rel) == fh and not force:
        counts["unchanged"] += 1
        return
    blocks = [_redacted(b, rel, secrets) for b in md.split_blocks(data.decode("utf-8", errors="replace"), rel)]
    vecs = engine.embed([" > ".join(b.heading_path) + "\n" + b.text for b in blocks]) if blocks else []
    with engine.store.write() as c:
        for old in engine.store.file_blocks(ctx.project_id, rel):
            engine.store.delete_item(c, old["id"])
        for b, v in zip(blocks, vecs, strict=True):
            engine.store.insert_block(c, {
                "id": md.block_id(ctx.project_id, rel, b.ordinal, b.text), "project_id": ctx.project_id,
                "source_path": rel, "ordinal": b.ordinal, "title": b.title, "heading_path": list(b.heading_path),
                "text": b.text, "start_line": b.start_line, "end_line": b.end_line, "file_hash": fh,
                "updated_at": now}, v, engine.model_id)
    counts["blocks_written"] += len(blocks)
    counts["unchanged" if known.get(rel) == fh else "updated" if rel in known else "added"] += 1
