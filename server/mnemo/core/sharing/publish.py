"""Publish the memories a project reviewed into the rule files agents already read, and read a person's edits of
them back (format: core/files/agent_rules.py).

What is published: this project's active memories meant for agents (types feedback and project; kinds decision,
pattern, lesson, and facts of type feedback) that a person wrote, accepted in Review or confirmed; never pending,
rejected, untrusted, deprecated, superseded, archived (cold) or stale-anchored ones, never one on another branch,
and never a text in which the secret scanner finds a secret (scanned again here, whatever the write allowed).

Where: a managed section in CLAUDE.md and AGENTS.md (everything else in those files is the person's), and whole
files of Mnemo's own in `.cursor/rules/mnemo*.mdc`, `.github/instructions/mnemo*.instructions.md`,
`.windsurf/rules/mnemo*.md` and `.continue/rules/mnemo*.md`, one per glob group: a memory anchored to
`src/payments/x.py` applies under `src/payments/**`; the rest always apply. A file of that name that is not
Mnemo's (no `mnemo: published` header) is never touched. `.github/copilot-instructions.md` is never touched
(it is the person's; `mnemo.instructions.md` with `applyTo: '**'` carries the always-apply memories).

Each file keeps to a token budget: the most confirmed and most important memories are kept first (and written
oldest first, so the lines do not move when importance decays); what the budget left out is reported. Nothing
in the output depends on the time: publishing twice writes nothing the second time.

Round trip: before writing, every managed section already published is read back against what was published
there (kept per project in `<home>/publish/`): a changed line is an edit (`update`: every check, the history), a
line gone is a `publish_removed` Review item ("deprecate?", the memory is withheld meanwhile), a new `- ` line is
a new memory (`remember`, the person's). A line whose id comment was lost is matched to the memory it most
resembles. Every outcome is in the report.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import posixpath
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.results import PublishReport
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.files import agent_rules as fmt
from mnemo.core.models import Context, Memory
from mnemo.core.safety.secrets import find_secrets, redact_secrets
from mnemo.core.search import memory_visible
from mnemo.core.text import estimate_tokens, strip_controls

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

TARGETS = fmt.TARGETS
SECTION_FILES = {"claude": "CLAUDE.md", "agents": "AGENTS.md"}
FILE_PLACES = {"cursor": (".cursor/rules", ".mdc"), "copilot": (".github/instructions", ".instructions.md"),
               "windsurf": (".windsurf/rules", ".md"), "continue": (".continue/rules", ".md")}
# The glob semantics each tool applies (core/skills/globs.py): published globs are checked with them.
GLOB_MODES = {"cursor": "minimatch_dot", "copilot": "vscode", "windsurf": "minimatch_dot", "continue": "minimatch"}
TOOL_NAMES = {"claude": "Claude Code", "agents": "Codex and AGENTS.md readers", "cursor": "Cursor",
              "copilot": "GitHub Copilot", "windsurf": "Windsurf", "continue": "Continue"}
DEFAULT_BUDGET = 1500
MIN_BUDGET, MAX_BUDGET = 100, 100_000
WINDSURF_MAX_CHARS = 6000  # Windsurf reads at most this many characters of a rule file (its docs: 6,000-12,000)
PUBLISHED_TYPES = frozenset({"feedback", "project"})
PUBLISHED_KINDS = {"feedback": frozenset({"decision", "pattern", "lesson", "fact"}),
                   "project": frozenset({"decision", "pattern", "lesson"})}
REVIEW_KIND = "publish_removed"
ADDED_TYPE, ADDED_KIND = "feedback", "pattern"
MATCH_RATIO = 0.6  # how alike a line without its id must be to a missing line to count as its edit
_GLOB_SPECIAL = re.compile(r"[*?\[\]{}()!\\,]")


# -- which targets -----------------------------------------------------------------------------------------------
def check_targets(targets: list[str] | str | None) -> tuple[str, ...] | None:
    if targets is None:
        return None
    if isinstance(targets, str):
        targets = [t for t in re.split(r"[,\s]+", targets) if t]
    if not isinstance(targets, list) or not targets:
        raise InvalidInput("publish needs at least one target", hint=f"targets: {', '.join(TARGETS)} (or all)")
    out: list[str] = []
    for t in targets:
        t = str(t).strip().lower()
        if t == "all":
            out += list(TARGETS)
        elif t in TARGETS:
            out.append(t)
        else:
            raise InvalidInput(f"unknown publish target {t!r}; nothing was written",
                               hint=f"targets: {', '.join(TARGETS)} (or all)")
    return tuple(t for t in TARGETS if t in out)


def _default_targets(root: Path, state: dict[str, Any]) -> tuple[str, ...]:
    """The targets of the last publish; the first time: AGENTS.md and every tool the repository already uses."""
    before = set(state.get("targets") or []) | {f["target"] for f in state.get("files", {}).values()}
    if before:
        return tuple(t for t in TARGETS if t in before)
    used = {"agents"}
    if (root / "CLAUDE.md").exists() or (root / ".claude").is_dir():
        used.add("claude")
    for t, (folder, _) in FILE_PLACES.items():
        if (root / folder.split("/")[0]).is_dir():
            used.add(t)
    return tuple(t for t in TARGETS if t in used)


def check_budget(budget: int | None) -> int:
    if budget is None:
        return DEFAULT_BUDGET
    if isinstance(budget, bool) or not isinstance(budget, int) or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget {budget!r} is not a number of tokens from {MIN_BUDGET} to {MAX_BUDGET}",
                           hint=f"e.g. --budget {DEFAULT_BUDGET}")
    return budget


# -- what is published -------------------------------------------------------------------------------------------
def _accepted_by_person(engine: Engine, ctx: Context) -> set[str]:
    rows = engine.store.review_items(ctx.project_id, None, True, 100_000)
    return {r["item_id"] for r in rows if r["item_id"] and r["resolution"] in ("accept", "supersede", "keep_both")
            and r["kind"] in ("pending", "conflict", "override")}


def withheld(engine: Engine, ctx: Context) -> dict[str, int]:
    """Memories a person removed from a published file, waiting in Review: memory id -> review id."""
    return {r["item_id"]: int(r["id"]) for r in engine.store.review_items(ctx.project_id, REVIEW_KIND, False, 100_000)
            if r["item_id"]}


def _priority(m: Memory) -> tuple:
    return (-m.confirmations, -round(m.importance, 6), m.created_at, m.id)


def select(engine: Engine, ctx: Context) -> tuple[list[Memory], list[dict[str, Any]]]:
    """(the memories to publish, most confirmed and most important first; those meant for agents left out, why)."""
    accepted = _accepted_by_person(engine, ctx)
    held = withheld(engine, ctx)
    out: list[Memory] = []
    left: list[dict[str, Any]] = []
    for m in engine.store.listed(ctx.project_id, ("project",), status=None):
        if m.type not in PUBLISHED_TYPES or m.kind not in PUBLISHED_KINDS[m.type]:
            continue
        if m.status == "rejected" or m.deprecated or m.superseded_by or not memory_visible(
                m, ctx, include_pending=True, include_cold=True):
            continue  # not part of what the project knows now (or on another branch): not mentioned
        reason = None
        if m.status == "pending":
            reason = "pending: waiting in `mnemo review`"
        elif m.tier == "cold":
            reason = "archived (cold): `mnemo restore` brings it back"
        elif m.trust != "trusted":
            reason = "untrusted: accept it in `mnemo review`"
        elif "stale_anchor" in m.flags:
            reason = "its anchored code changed: answer the stale anchor in `mnemo review` (or edit the note)"
        elif any(f.startswith("injection:") or f in ("hidden_text", "bidi_control") for f in m.flags):
            reason = "flagged as a possible prompt injection"
        elif m.source == "agent" and m.confirmations < 2 and m.id not in accepted:
            reason = "written by an agent and not confirmed or accepted by a person"
        elif m.id in held:
            reason = f"removed from a published file by hand: waiting in `mnemo review` (item {held[m.id]})"
        elif find_secrets(m.text):
            reason = "the secret scanner finds a secret in it"
        elif "<!--" in m.text or "-->" in m.text:
            reason = "it contains an HTML comment marker (it could hide text in the published file)"
        if reason:
            left.append({"id": m.id, "text": _title(m.text), "reason": reason})
        else:
            out.append(m)
    out.sort(key=_priority)
    left.sort(key=lambda d: d["id"])
    return out, left


def _title(text: str, n: int = 80) -> str:
    first = fmt.normalize(strip_controls(text)).split("\n")[0]
    return first if len(first) <= n else first[: n - 1] + "…"


def _clean(text: str) -> str:
    return fmt.normalize(strip_controls(text, keep="\n"))


def memory_globs(m: Memory) -> tuple[str, ...]:
    """Where a memory applies: the folder of each anchored file (`src/payments/**`), a root file itself; () when
    unanchored, or when a folder's name has glob characters (it then applies everywhere, said in the report)."""
    out = set()
    for a in m.anchors:
        p = str(a.get("path") or "").strip().strip("/")
        if not p:
            continue
        d = posixpath.dirname(p)
        glob = f"{d}/**" if d else p
        if _GLOB_SPECIAL.search(glob.replace("/**", "")):
            return ()
        out.add(glob)
    return tuple(sorted(out))


# -- rendering ---------------------------------------------------------------------------------------------------
@dataclass
class Planned:
    target: str
    rel: str  # the file, relative to the project root
    globs: tuple[str, ...]
    ids: list[str] = field(default_factory=list)  # memory ids, in file order
    texts: dict[str, str] = field(default_factory=dict)  # short id -> published text
    left: list[dict[str, Any]] = field(default_factory=list)
    content: str = ""  # the whole new file
    before: str | None = None  # the file as it is (None: absent)
    status: str = ""  # new | changed | unchanged | skipped
    reason: str = ""


def _slug(globs: tuple[str, ...]) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", "-".join(g.replace("/**", "") for g in globs).lower()).strip("-")[:60].strip("-")
    if len(globs) > 1 or not s:
        s = (s[:50].strip("-") + "-" if s else "") + hashlib.sha256("\n".join(globs).encode()).hexdigest()[:6]
    return s


def _file_rel(target: str, globs: tuple[str, ...]) -> str:
    folder, suffix = FILE_PLACES[target]
    return f"{folder}/mnemo{'-' + _slug(globs) if globs else ''}{suffix}"


def _fit(mems: list[Memory], budget: int, rel: str, max_chars: int | None) -> tuple[list[Memory], list[dict]]:
    """The memories that fit `budget` tokens (and `max_chars`), in priority order; the rest with why."""
    kept, left, used, chars = [], [], estimate_tokens(fmt.BEGIN_LINE) + 10, len(fmt.BEGIN_LINE) + 400
    for m in mems:
        line = fmt.render_item(_clean(m.text), fmt.short_id(m.id))
        cost = estimate_tokens(line) + 1
        if used + cost > budget or (max_chars is not None and chars + len(line) + 1 > max_chars):
            why = f"over the {budget}-token budget of {rel}" if used + cost > budget else \
                f"over the {max_chars}-character limit of a Windsurf rule file ({rel})"
            left.append({"id": m.id, "text": _title(m.text), "reason": why})
            continue
        kept.append(m)
        used += cost
        chars += len(line) + 1
    # written oldest first: the budget chooses by priority, the order in the file does not follow it (a decay or a
    # confirmation would reorder the lines and fill a pull request with moves)
    kept.sort(key=lambda m: (m.created_at, m.id))
    return kept, left


def _groups(mems: list[Memory]) -> list[fmt.Group]:
    by: dict[tuple[str, ...], list[Memory]] = {}
    for m in mems:
        by.setdefault(memory_globs(m), []).append(m)
    return [fmt.Group(k, tuple((fmt.short_id(m.id), _clean(m.text)) for m in by[k])) for k in sorted(by)]


def plan_files(root: Path, targets: tuple[str, ...], mems: list[Memory], budget: int) -> list[Planned]:
    """Every file the targets get, with its new content (reads the files as they are; writes nothing)."""
    out: list[Planned] = []
    reals: dict[str, str] = {}
    for t in targets:
        if t in SECTION_FILES:
            rel = SECTION_FILES[t]
            real = os.path.realpath(root / rel)
            if real in reals:  # a link to a file already written (CLAUDE.md -> AGENTS.md): written once
                p = Planned(t, rel, (), status="skipped", reason=f"{rel} is the same file as {reals[real]} (a link): "
                                                                 "written once")
                p.before = p.content = _read(root / rel) or ""
                out.append(p)
                continue
            reals[real] = rel
            kept, left = _fit(mems, budget, rel, None)
            p = Planned(t, rel, (), [m.id for m in kept], {fmt.short_id(m.id): _clean(m.text) for m in kept}, left)
            body = fmt.section_body(_groups(kept), headings=True)
            p.before = _read(root / rel)
            p.content = fmt.splice(p.before, fmt.section(body))
            out.append(p)
            continue
        by: dict[tuple[str, ...], list[Memory]] = {}
        for m in mems:
            by.setdefault(memory_globs(m), []).append(m)
        if () not in by:
            by[()] = []  # the always-apply file exists even when empty: it says how to add a line
        for globs in sorted(by):
            rel = _file_rel(t, globs)
            kept, left = _fit(by[globs], budget, rel, WINDSURF_MAX_CHARS if t == "windsurf" else None)
            p = Planned(t, rel, globs, [m.id for m in kept], {fmt.short_id(m.id): _clean(m.text) for m in kept},
                        left)
            where = ", ".join(globs) if globs else "every file"
            head = fmt.header(t, globs, f"Mnemo: {where}"[:100],
                              f"Project memory reviewed in Mnemo that applies to {where} (generated by mnemo "
                              "publish)")
            body = fmt.section_body([fmt.Group(globs, tuple(p.texts.items()))], headings=False)
            p.before = _read(root / rel)
            if p.before is not None and not fmt.is_published_file(p.before):
                p.status, p.reason = "skipped", f"{rel} exists and is not Mnemo's (no `mnemo: published` header): " \
                                                "left alone"
                p.content = p.before
            else:
                p.content = fmt.splice(p.before, fmt.section(body), head)
            out.append(p)
    top = os.path.realpath(root)
    for p in out:
        real = os.path.realpath(root / p.rel)
        if not p.status and real != top and not real.startswith(top + os.sep):
            p.status, p.reason = "skipped", f"{p.rel} leads outside the repository (a link): left alone"
            p.content = p.before or ""
        if not p.status:
            p.status = "new" if p.before is None else ("unchanged" if p.before == p.content else "changed")
    return out


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text; nothing was written",
                           hint="fix its encoding, or leave this target out (--to)") from exc


def _write_atomic(path: Path, text: str) -> None:
    if path.is_symlink():  # a person's link (CLAUDE.md -> AGENTS.md) stays a link: write the file it names
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def diff(p: Planned) -> str:
    """The unified diff of one file (empty when unchanged)."""
    if p.before == p.content or p.status == "skipped":
        return ""
    a = (p.before or "").splitlines(keepends=True)
    b = p.content.splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, fromfile=f"a/{p.rel}" if p.before is not None else "/dev/null",
                                        tofile=f"b/{p.rel}"))


# -- what was published (per project, in the store's home) ------------------------------------------------------
def state_path(home: Path, ctx: Context) -> Path:
    return fmt.state_file(home, ctx.project_id)


def load_state(home: Path, ctx: Context) -> dict[str, Any]:
    try:
        data = json.loads(state_path(home, ctx).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {"files": {}}
    except (OSError, ValueError):
        return {"files": {}}


def _save_state(home: Path, ctx: Context, state: dict[str, Any]) -> None:
    path = state_path(home, ctx)
    text = json.dumps(state, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    if _read(path) != text:
        _write_atomic(path, text)


# -- the round trip ------------------------------------------------------------------------------------------------
def _resolve(engine: Engine, ctx: Context, sid: str, known: dict[str, str]) -> Memory | None:
    mid = known.get(sid)
    if mid is None:
        for m in engine.store.listed(ctx.project_id, ("project",), status=None):
            if fmt.short_id(m.id) == sid:
                mid = m.id
                break
    return engine.store.get_memory(mid) if mid else None


def plan_sync(engine: Engine, ctx: Context, root: Path, state: dict[str, Any]) -> dict[str, list]:
    """What the hand edits of the published sections mean: edits, removals, additions (nothing written)."""
    plan: dict[str, list] = {"edited": [], "removed": [], "added": [], "skipped": [], "sections_missing": []}
    seen_edit: dict[str, str] = {}  # memory id -> the edited text (normalized)
    edit_where: dict[str, str] = {}  # memory id -> where that edit was made
    added_texts: set[str] = set()
    entries = dict(state.get("files", {}))
    for rel in _discover(root):  # published elsewhere (a teammate's store, a fresh clone): read back too
        entries.setdefault(rel, {"target": "", "ids": {}, "texts": {}, "unknown": True})
    real_seen: set[str] = set()
    for rel, entry in sorted(entries.items()):
        real = os.path.realpath(root / rel)
        if real in real_seen:  # CLAUDE.md linked to AGENTS.md: one file, read back once
            continue
        real_seen.add(real)
        text = _read(root / rel)
        published: dict[str, str] = dict(entry.get("texts") or {})  # short id -> text
        known: dict[str, str] = dict(entry.get("ids") or {})  # short id -> memory id
        if text is None or not fmt.has_section(text):
            if published:
                plan["sections_missing"].append({"file": rel, "memories": len(published)})
            continue
        items = fmt.parse_section(text) or []
        present = {it.sid for it in items if it.sid}
        missing = {sid: t for sid, t in published.items() if sid not in present}
        for it in items:
            where = f"{rel}:{it.line}"
            sid = it.sid
            if sid is None and missing:  # the id comment was lost: the missing line it most resembles
                best = max(missing, key=lambda s: difflib.SequenceMatcher(None, missing[s], it.text).ratio())
                if difflib.SequenceMatcher(None, missing[best], it.text).ratio() >= MATCH_RATIO:
                    sid = best
                    missing.pop(best)
            if sid is None:
                if fmt.normalize(it.text) not in added_texts:  # the same line added to two files: one memory
                    added_texts.add(fmt.normalize(it.text))
                    plan["added"].append({"where": where, "file": rel, "text": it.text})
                continue
            before = published.get(sid)
            m = _resolve(engine, ctx, sid, known)
            if m is None:
                plan["skipped"].append({"where": where, "text": it.text,
                                        "reason": f"no memory {sid} in this store (forgotten, or published from "
                                                  "another store); the line is not read back: add it again as a "
                                                  "new \"- \" line to keep it"})
                continue
            if before is None:  # not published from this store (or copied from another file)
                if fmt.normalize(it.text) == fmt.normalize(_clean(m.text)) or \
                        fmt.normalize(it.text) in _older_texts(engine, m.id):
                    continue  # the memory as it is, or as it was: not an edit (the publish brings it up to date)
                before = _clean(m.text)
            if fmt.normalize(it.text) in (fmt.normalize(before), fmt.normalize(_clean(m.text))):
                continue
            if seen_edit.get(m.id) == fmt.normalize(it.text):
                continue  # the same edit made in another file too
            if m.id in seen_edit:
                plan["skipped"].append({"where": where, "id": m.id, "text": it.text,
                                        "reason": f"edited differently in {edit_where[m.id]}; that edit is applied "
                                                  "(this text is shown here so it is not lost)"})
                continue
            seen_edit[m.id] = fmt.normalize(it.text)
            edit_where[m.id] = where
            plan["edited"].append({"where": where, "file": rel, "id": m.id, "text": it.text,
                                   "changed_since": fmt.normalize(_clean(m.text)) != fmt.normalize(before)})
        for sid, t in sorted(missing.items()):
            m = _resolve(engine, ctx, sid, known)
            if m is None:
                continue
            plan["removed"].append({"file": rel, "id": m.id, "text": _title(t)})
    # a memory removed from one file but edited in another: the edit stands, no deprecation is proposed
    edited_ids = {e["id"] for e in plan["edited"]}
    plan["removed"] = [r for r in plan["removed"] if r["id"] not in edited_ids]
    return plan


def _discover(root: Path) -> list[str]:
    """The published files in the repository (managed sections, Mnemo's own files), whoever published them."""
    out = [rel for rel in SECTION_FILES.values() if (t := _read(root / rel)) is not None and fmt.has_section(t)]
    for folder, suffix in FILE_PLACES.values():
        d = root / folder
        if d.is_dir():
            for f in sorted(d.glob(f"mnemo*{suffix}")):
                if f.is_file() and (t := _read(f)) is not None and fmt.is_published_file(t):
                    out.append(f"{folder}/{f.name}")
    return out


def _older_texts(engine: Engine, mem_id: str) -> set[str]:
    return {fmt.normalize(_clean(v.get("text") or "")) for v in engine.store.versions(mem_id)}


def apply_sync(engine: Engine, ctx: Context, plan: dict[str, list]) -> None:
    """Carry out `plan_sync`'s plan: `update` for an edit, a Review item for a removal, `remember` for a line."""
    from mnemo.core.edits import settle_rewritten
    from mnemo.core.memory.history import update
    from mnemo.core.memory.write import remember

    for e in plan["edited"]:
        try:
            res = update(engine, ctx, e["id"], text=e["text"], source="user",
                         reason=f"edited in {e['file']} (mnemo publish --sync)")
            e["status"] = res["status"]
            if res.get("message") and res["status"] != "updated":
                e["message"] = res["message"]
            if res["status"] == "updated":
                settle_rewritten(engine, e["id"])
        except MnemoError as exc:
            e["status"], e["message"] = "refused", exc.message
            e["text"] = redact_secrets(e["text"])[0]  # a refused secret is not echoed back
    held = withheld(engine, ctx)
    new_items = []
    for r in plan["removed"]:
        if r["id"] in held:
            r["review_id"] = held[r["id"]]
            continue
        new_items.append(r)
    if new_items:
        with engine.store.write() as c:
            for r in new_items:
                r["review_id"] = engine.store.add_review(c, REVIEW_KIND, r["id"], None, ctx.project_id,
                                                         {"file": r["file"], "text": r["text"]})
                held[r["id"]] = r["review_id"]
        engine.changed()
    for a in plan["added"]:
        try:
            added = remember(engine, ctx, a["text"], type=ADDED_TYPE, kind=ADDED_KIND, source="user",
                             provenance={"published_file": a["file"]})
            a["status"] = added["status"]
            a["id"] = added["memory"]["id"]
            if added.get("message"):
                a["message"] = added["message"]
        except MnemoError as exc:
            a["status"], a["message"] = "refused", exc.message
            a["text"] = redact_secrets(a["text"])[0]


# -- the operation -------------------------------------------------------------------------------------------------
def publish(engine: Engine, ctx: Context, targets: list[str] | str | None = None, *, dry_run: bool = False,
            budget: int | None = None, sync: bool = False) -> PublishReport:
    """Read hand edits back, then write each target's files. `dry_run`: the plan, the sync and the diff only.
    `sync`: read back and refresh only the files published before (no new target)."""
    if not ctx.root:
        raise InvalidInput("publish needs a project folder", hint="run it inside the repository (or -C DIR)")
    root = Path(ctx.root)
    chosen = check_targets(targets)
    budget = check_budget(budget)
    home = Path(engine.home)
    state = load_state(home, ctx)
    if sync and chosen is None:
        chosen = tuple(t for t in TARGETS if t in set(state.get("targets") or []))
    if chosen is None:
        chosen = _default_targets(root, state)
    plan = plan_sync(engine, ctx, root, state)
    if not dry_run:
        apply_sync(engine, ctx, plan)
    mems, left = select(engine, ctx)
    if dry_run:  # the preview shows the files as they will be: the hand edits applied
        mems = _as_synced(ctx, mems, plan)
    files = plan_files(root, chosen, mems, budget)
    for p in files:
        if p.status == "skipped":
            continue
        bad = _check_file(root, p)
        if bad:
            raise InvalidInput(f"{p.rel}: {bad}; nothing was written",
                               hint="report this: a published file must be valid for its tool")
    written = []
    if not dry_run:
        for p in files:
            if p.status in ("new", "changed"):
                _write_atomic(root / p.rel, p.content)
                written.append(p.rel)
        for p in files:
            if p.status != "skipped":
                state["files"][p.rel] = {"target": p.target, "globs": list(p.globs),
                                         "ids": {fmt.short_id(i): i for i in p.ids}, "texts": p.texts,
                                         "sha256": hashlib.sha256(p.content.encode()).hexdigest()}
        _retire(root, state, chosen, files, written)
        state["targets"] = list(chosen)  # what `mnemo publish` without --to repeats
        _save_state(home, ctx, state)
    budget_left = [d for p in files for d in p.left]
    return {
        "dry_run": bool(dry_run), "targets": list(chosen), "budget": budget, "root": str(root),
        "files": [{"path": p.rel, "target": p.target, "tool": TOOL_NAMES[p.target], "globs": list(p.globs),
                   "status": p.status, "memories": len(p.ids), "reason": p.reason,
                   "tokens": _section_tokens(p.content)} for p in files],
        "published": len({i for p in files for i in p.ids}), "written": written,
        "left_out": left + _dedup(budget_left),
        "sync": plan,
        "diff": "".join(diff(p) for p in files) if dry_run else "",
    }


def _as_synced(ctx: Context, mems: list[Memory], plan: dict[str, list]) -> list[Memory]:
    """What `select` would give after the sync (for a dry run's diff): edited texts, deleted lines withheld, new
    lines as memories to be (`new-1` ...)."""
    import dataclasses

    edited = {e["id"]: e["text"] for e in plan["edited"]}
    removed = {r["id"] for r in plan["removed"]}
    out = [dataclasses.replace(m, text=edited.get(m.id, m.text)) for m in mems if m.id not in removed]
    for i, a in enumerate(plan["added"], 1):
        out.append(Memory(id=f"new-{i}", text=a["text"], type=ADDED_TYPE, kind=ADDED_KIND, scope="project",
                          project_id=ctx.project_id, project_name=ctx.project_name, branch=None, importance=0.5,
                          confirmations=1, created_at=float("inf"), updated_at=0.0, last_accessed=0.0,
                          access_count=0, content_hash="", source="user"))
    return out


def _section_tokens(text: str) -> int:
    span = fmt.find_section(text)
    return estimate_tokens(text[span[0]:span[1]]) if span else 0


def _dedup(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for d in items:
        key = (d["id"], d["reason"])
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _retire(root: Path, state: dict[str, Any], chosen: tuple[str, ...], files: list[Planned],
            written: list[str]) -> None:
    """A glob group that no longer has memories: its Mnemo file is removed when nothing but Mnemo's header and
    section is in it, else only its section is emptied (the person's text stays); it leaves the state."""
    current = {p.rel for p in files}
    for rel, entry in list(state["files"].items()):
        if entry["target"] not in chosen or rel in current:
            continue
        text = _read(root / rel)
        if text is not None and fmt.is_published_file(text):
            head_end = text.find("\n---\n", 3) + 5
            if not fmt.without_section(text[head_end:]).strip():
                (root / rel).unlink()
                written.append(rel)
            else:
                new = fmt.splice(text, fmt.section(fmt.section_body([], headings=False)), text[:head_end])
                if new != text:
                    _write_atomic(root / rel, new)
                    written.append(rel)
        del state["files"][rel]


def _check_file(root: Path, p: Planned) -> str | None:
    """The file as its tool reads it: Mnemo's own reader for the format (core/skills/sources.py) must find the
    header and the globs, and each glob must match the anchored paths with the tool's own semantics."""
    from mnemo.core.skills import globs as g
    from mnemo.core.skills.frontmatter import split_frontmatter
    from mnemo.core.skills.sources import read_skill_text

    if fmt.parse_section(p.content) is None:
        return "the managed section does not read back"
    if p.target in SECTION_FILES:
        return None  # the rest of the file is the person's, read as before
    skill, problems = read_skill_text(root / p.rel, p.content)
    bad = [x.reason for x in problems if x.severity == "error"]
    if skill is None or bad:
        return "Mnemo's reader for this format finds: " + "; ".join(bad or ["nothing"])
    if not skill.published or tuple(skill.globs) != (p.globs or (("**",) if p.target == "copilot" else ())) \
            or skill.always_apply != (not p.globs):
        return f"the reader does not see what was meant (globs {list(skill.globs)}, always {skill.always_apply})"
    fm = split_frontmatter(p.content)
    if not fm.present or fm.yaml_valid is not True:
        return "its header is not valid YAML"
    d = fm.data
    want = list(p.globs)
    if p.target == "cursor":
        got = g.split_patterns(str(d.get("globs") or "")) if d.get("globs") else []
        ok = d.get("alwaysApply") is (not want) and got == want
    elif p.target == "copilot":
        got = g.split_patterns(str(d.get("applyTo")))
        ok = got == (want or ["**"])
    elif p.target == "windsurf":
        got = g.split_patterns(str(d.get("globs") or "")) if d.get("globs") else []
        ok = d.get("trigger") == ("glob" if want else "always_on") and got == want
    else:
        got = g.split_patterns(str(d.get("globs") or "")) if d.get("globs") else []
        ok = d.get("alwaysApply") is (not want) and got == want and bool(d.get("name"))
    if not ok:
        return f"its header does not say what was meant (globs {want})"
    if skill.glob_mode != GLOB_MODES[p.target]:
        return f"read with {skill.glob_mode} globs, not {GLOB_MODES[p.target]}"
    for glob in want:
        sample = glob[:-3] + "/x.py" if glob.endswith("/**") else glob
        if g.matcher_for([glob], skill.glob_mode).match(sample, str(root / sample)) is None:
            return f"glob {glob!r} does not match {sample} with {p.target}'s semantics"
    return None


def status(engine: Engine, ctx: Context) -> dict[str, Any]:
    """Which published files are out of date (the memories changed), edited by hand, or missing: a dry run of the
    files published before. Cheap: no model, no writes."""
    if not ctx.root:
        return {"published": False, "files": []}
    state = load_state(Path(engine.home), ctx)
    if not state["files"]:
        return {"published": False, "files": []}
    files = fmt.files_status(publish(engine, ctx, None, dry_run=True))
    return {"published": True, "files": files, "out_of_date": sum(f["state"] != "up to date" for f in files)}


__all__ = ["DEFAULT_BUDGET", "REVIEW_KIND", "TARGETS", "check_targets", "load_state", "memory_globs", "plan_files",
           "plan_sync", "publish", "select", "status", "withheld"]
