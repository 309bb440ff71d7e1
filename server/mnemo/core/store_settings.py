"""Store-wide settings: one file, `<home>/config.json`, read and written by `mnemo config get|set|list|unset`.

A store-wide setting shapes the store itself (how fast memories decay, when backups run, which model embeds them),
so every client of a store sees the same value. Its environment variable still overrides it, for the process that
reads it (the owner, or a `--no-daemon` command): `effective()` says which source won. Settings that shape one
request (write policy, conflict resolution, author, secrets mode) are not here: they travel with each request in
its `Context` (see `mnemo.core.identity.detect_context` and docs/reliability.md, "The settings model").

The owner re-reads the file when it changes (a stat per read), so a `live` key applies at once; a `restart` key
(the embedding model, its threads) is read when the owner starts and `mnemo config set` says so. Stdlib only: the
language server imports this without the engine.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.core import environment
from mnemo.core.api_types.results import DoctorCheck
from mnemo.core.errors import InvalidInput
from mnemo.core.files.agent_rules import TARGETS as PUBLISH_TARGETS
from mnemo.core.files.agent_rules import check_targets_text
from mnemo.core.identity import request_settings

log = logging.getLogger("mnemo.config")

FILE = "config.json"
EMBEDDERS = ("onnx", "onnx-int8", "torch", "hash")  # mnemo.core.embedding.embedder.KINDS, without importing it


@dataclass(frozen=True)
class Key:
    name: str
    env: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    applies: str = "live"  # "live": the running owner applies a change at once; "restart": at its next start
    check: Any = None  # a str key checked by this function (raises ValueError) instead of `choices`
    accepts: str = ""  # what `check` accepts, for the error message

    def accepted(self) -> str:
        if self.accepts:
            return self.accepts
        if self.kind is bool:
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        what = "a whole number" if self.kind is int else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{what} from {_num(self.minimum)} to {_num(self.maximum)}"
        if self.minimum is not None:
            return f"{what} >= {_num(self.minimum)}"
        return what


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("idle_timeout", "MNEMO_IDLE_TIMEOUT", float, 900.0,
        "seconds without a client before the owner exits (0: never)", minimum=0),
    Key("backup_interval", "MNEMO_BACKUP_INTERVAL", float, 86400.0,
        "seconds between rolling backups of mnemo.db (0: no backups)", minimum=0),
    Key("backup_keep", "MNEMO_BACKUP_KEEP", int, 7, "daily backups kept", minimum=1, maximum=1000),
    Key("backup_writes", "MNEMO_BACKUP_WRITES", int, 500,
        "writes since the newest backup that trigger a write-volume backup (0: off)", minimum=0),
    Key("backup_write_interval", "MNEMO_BACKUP_WRITE_INTERVAL", float, 3600.0,
        "seconds after which anything written since the newest backup triggers one (0: off)", minimum=0),
    Key("backup_min_gap", "MNEMO_BACKUP_MIN_GAP", float, 300.0,
        "fewest seconds between two write-volume backups", minimum=0),
    Key("backup_keep_recent", "MNEMO_BACKUP_KEEP_RECENT", int, 4, "write-volume backups kept", minimum=1,
        maximum=1000),
    Key("conflict_threshold", "MNEMO_CONFLICT_THRESHOLD", float, 0.34,
        "cosine from which a nearby note is compared with a new one on write (duplicate / refinement / conflict: "
        "core/relation/compare.py decides)", minimum=0, maximum=1),
    Key("min_confidence", "MNEMO_MIN_CONFIDENCE", float, 0.15,
        "recall's minimum confidence when a call gives none (0 shows every hit; `--min-confidence` per call)",
        minimum=0, maximum=1),
    Key("half_life_hours", "MNEMO_HALF_LIFE_HOURS", float, 168.0,
        "half-life of a memory's strength without use, in hours (decay)", minimum=0.001, maximum=1e6),
    Key("tombstone_threshold", "MNEMO_TOMBSTONE_THRESHOLD", float, 0.05,
        "strength below which decay moves a memory to the cold tier", minimum=0, maximum=1),
    Key("hot_max", "MNEMO_HOT_MAX", int, 10, "most memories in the hot tier of a project", minimum=0,
        maximum=10000),
    Key("hot_min_importance", "MNEMO_HOT_MIN_IMPORTANCE", float, 0.7,
        "importance a memory needs to enter the hot tier", minimum=0, maximum=1),
    Key("compact_dup_threshold", "MNEMO_COMPACT_DUP_THRESHOLD", float, 0.95,
        "cosine above which `compact` merges two memories", minimum=0, maximum=1),
    Key("verbose_chars", "MNEMO_VERBOSE_CHARS", int, 1500,
        "memories longer than this get a summary on compaction", minimum=100, maximum=1_000_000),
    Key("forget_retention_days", "MNEMO_FORGET_RETENTION_DAYS", float, 30.0,
        "days a forgotten memory can be brought back with `mnemo restore ID`; after that its text and history are "
        "purged (the tombstone stays; 0: purged at once)", minimum=0, maximum=36500),
    Key("starter_skills", "MNEMO_STARTER_SKILLS", bool, True, "offer Mnemo's starter skills in every project"),
    Key("context_always_share", "MNEMO_CONTEXT_ALWAYS_SHARE", float, 0.25,
        "share of a context block's token budget the always-apply rules may fill together; past it, those least "
        "related to the request go in by reference (never pushing out a rule the request chose)", minimum=0,
        maximum=1),
    Key("team_timeout", "MNEMO_TEAM_TIMEOUT", float, 1.5, "seconds to wait for the team server to connect",
        minimum=0.1, maximum=120),
    Key("team_retry", "MNEMO_TEAM_RETRY", float, 30.0,
        "seconds between attempts while the team server is unreachable", minimum=0.05, maximum=86400),
    Key("embedder", "MNEMO_EMBEDDER", str, "onnx-int8", "the embedding backend of memories (onnx-int8: MiniLM "
        "quantized to int8, the default; onnx: the float model; changing it re-embeds the store at the next owner "
        "start)", choices=EMBEDDERS, applies="restart"),
    Key("skill_embedder", "MNEMO_SKILL_EMBEDDER", str, "auto", "the embedding backend of skill activation (auto: "
        "the int8 export, the memory embedder's own session when memories use onnx-int8; same: the memory "
        "embedder)", choices=("auto", "same", *EMBEDDERS),
        applies="restart"),
    Key("publish_on_change", "MNEMO_PUBLISH_ON_CHANGE", str, "off",
        "publish the reviewed memories to these agent files after a change (an edit, a deprecation, a Review "
        "answer, a new memory), a second later in the owner: off, all, or targets separated by commas",
        check=check_targets_text, accepts="off, all, or some of " + ", ".join(PUBLISH_TARGETS) + " separated by "
        "commas"),
    Key("embed_threads", "MNEMO_EMBED_THREADS", int, 1, "threads of one embedding call", minimum=1, maximum=64,
        applies="restart"),
    Key("ann_min_rows", "MNEMO_ANN_MIN_ROWS", int, 200_000, "the owner opens chroma's ANN index only once a "
        "partition holds more vectors than this; smaller ones are searched exactly in the mapped vector file (an "
        "int8 copy of large partitions, the candidates re-scored in float32; 0: always open it)", minimum=0,
        maximum=100_000_000, applies="restart"),
)}

# Read from the owner's own environment only (limits, paths, test knobs): a client's value cannot reach a running
# owner, so a client whose value differs is warned (`mismatches`) instead of being silently ignored.
OWNER_ENV = environment.names("owner")
SECRET_ENV = frozenset({"MNEMO_TEAM_TOKEN"})

_bound: Path | None = None
_cache: dict[Path, tuple[tuple[int, int, int], dict[str, Any], list[str]]] = {}
_lock = threading.Lock()
_logged: set[tuple[str, str]] = set()


# -- where -------------------------------------------------------------------------------------------------------
def default_home() -> Path:
    return Path(environment.raw("MNEMO_HOME") or Path.home() / ".mnemo")


def bind(home: Path) -> None:
    """The store this process serves (the engine calls it): call sites without a home read its settings."""
    global _bound
    _bound = Path(home)


def _home(home: Path | None) -> Path:
    return Path(home) if home is not None else (_bound or default_home())


def path(home: Path | None = None) -> Path:
    return _home(home) / FILE


# -- values ------------------------------------------------------------------------------------------------------
def key(name: str) -> Key:
    k = KEYS.get(name)
    if k is None:
        raise InvalidInput(f"unknown setting {name!r}", hint="store-wide settings: " + ", ".join(KEYS))
    return k


def parse(name: str, raw: Any) -> Any:
    """A value for `name` from text (command line, environment) or JSON; InvalidInput names what is accepted."""
    k = key(name)
    bad = InvalidInput(f"{name} = {raw!r} is not valid", hint=f"{name} takes {k.accepted()}")
    if k.kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise bad
    if k.check is not None:
        try:
            return k.check(raw)
        except ValueError:
            raise bad from None
    if k.kind is str:
        text = str(raw).strip().lower()
        if text not in k.choices:
            raise bad
        return text
    if isinstance(raw, bool):
        raise bad
    try:
        num = float(raw)
    except (TypeError, ValueError):
        raise bad from None
    if not math.isfinite(num) or (k.kind is int and not num.is_integer()):
        raise bad
    if (k.minimum is not None and num < k.minimum) or (k.maximum is not None and num > k.maximum):
        raise bad
    return int(num) if k.kind is int else num


def _read(home: Path) -> tuple[dict[str, Any], list[str]]:
    """The valid values of config.json and the problems of the rest (cached until the file changes)."""
    p = home / FILE
    try:
        st = p.stat()
    except OSError:
        return {}, []
    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _lock:
        hit = _cache.get(p)
        if hit is not None and hit[0] == sig:
            return hit[1], hit[2]
    values, problems = {}, []
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        data = {}
        problems.append(f"{p} cannot be read ({exc}); using defaults: fix or delete it, then `mnemo config list`")
    for name, raw in data.items():
        try:
            values[name] = parse(name, raw)
        except InvalidInput as exc:
            problems.append(f"{p}: {exc.message} ({exc.hint}); using the default")
    for msg in problems:
        log.warning("%s", msg)
    with _lock:
        _cache[p] = (sig, values, problems)
    return values, problems


def _from_env(k: Key) -> tuple[Any, str | None]:
    """(value, problem) of the key's environment variable; (None, None) when it is unset."""
    raw = environment.raw(k.env)
    if raw is None or raw.strip() == "":
        return None, None
    try:
        return parse(k.name, raw), None
    except InvalidInput:
        problem = f"{k.env}={raw!r} is not valid ({k.name} takes {k.accepted()}); it is not applied"
        if (k.env, raw) not in _logged:
            _logged.add((k.env, raw))
            log.warning("%s", problem)
        return None, problem


def stored(name: str, home: Path | None = None) -> Any:
    """The value config.json holds (the default when it holds none), whatever the environment says."""
    return _read(_home(home))[0].get(name, key(name).default)


def value(name: str, home: Path | None = None) -> Any:
    """The effective value: this process's environment variable, else config.json, else the default."""
    k = key(name)
    env, _problem = _from_env(k)
    if env is not None:
        return env
    stored, _ = _read(_home(home))
    return stored.get(name, k.default)


def effective(home: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every key: value, source (env | file | default), the stored value, the default, problems."""
    stored, file_problems = _read(_home(home))
    out: dict[str, dict[str, Any]] = {}
    for name, k in KEYS.items():
        env, problem = _from_env(k)
        source = "env" if env is not None else "file" if name in stored else "default"
        val = env if env is not None else stored.get(name, k.default)
        out[name] = {"value": val, "source": source, "env": k.env, "stored": stored.get(name),
                     "default": k.default, "applies": k.applies, "help": k.help,
                     "problems": [problem] if problem else []}
    for msg in file_problems:
        out.setdefault("_file", {"problems": []})["problems"].append(msg)
    return out


def problems(home: Path | None = None) -> list[str]:
    return [p for v in effective(home).values() for p in v.get("problems", [])]


# -- writes ------------------------------------------------------------------------------------------------------
def _write(home: Path, data: dict[str, Any]) -> None:
    p = home / FILE
    tmp = p.with_name(f".{FILE}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)


def _update(home: Path | None, change) -> dict[str, Any]:
    from filelock import FileLock

    where = _home(home)
    where.mkdir(parents=True, exist_ok=True)
    with FileLock(str(where / f".{FILE}.lock"), timeout=10):
        try:
            data = json.loads((where / FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data = {n: v for n, v in data.items() if n in KEYS}  # unknown keys were reported; a write drops them
        change(data)
        _write(where, data)
    return data


def set_value(home: Path | None, name: str, raw: Any) -> Any:
    """Validate and store; returns the stored value. Refuses unknown keys and bad values (nothing changes)."""
    val = parse(name, raw)
    _update(home, lambda d: d.__setitem__(name, val))
    return val


def unset(home: Path | None, name: str) -> None:
    key(name)
    _update(home, lambda d: d.pop(name, None))


# -- the owner and its clients -----------------------------------------------------------------------------------
def owner_view(home: Path) -> dict[str, Any]:
    """What the owner reports in `health`: its effective settings and the owner-only environment it runs with."""
    env = {}
    for name in OWNER_ENV:
        raw = environment.raw(name)
        if raw is not None:
            env[name] = "(set)" if name in SECRET_ENV else raw
    return {"settings": {n: {"value": v["value"], "source": v["source"]} for n, v in effective(home).items()
                         if not n.startswith("_")},
            "env": env, "problems": problems(home)}


def mismatches(owner: dict[str, Any]) -> list[str]:
    """Store-wide settings this process's environment sets that the running owner does not apply (a client's
    environment cannot reach an owner started by someone else): one sentence each, saying what to do."""
    view = owner.get("config") or {}
    settings, env = view.get("settings"), view.get("env") or {}
    if settings is None:
        return []  # an older owner: it does not say
    pid = owner.get("pid")
    out = []
    for name, k in KEYS.items():
        mine, _ = _from_env(k)
        theirs = (settings.get(name) or {}).get("value")
        if mine is None or mine == theirs:
            continue
        fix = f"`mnemo config set {name} {show(mine)}` stores it for every client"
        if k.applies == "restart":
            fix += " (then `mnemo daemon stop`: it applies at the owner's next start)"
        out.append(f"{k.env}={environment.raw(k.env)} in this environment is not applied: the running owner (pid {pid}) "
                   f"uses {name} = {show(theirs)}; {fix}")
    for name in OWNER_ENV:
        mine_raw = environment.raw(name)
        if mine_raw is None:
            continue
        mine_cmp = "(set)" if name in SECRET_ENV else mine_raw
        if env.get(name) != mine_cmp:
            theirs_raw = env.get(name)
            out.append(f"{name} in this environment is not applied: the running owner (pid {pid}) was started "
                       f"{'with ' + name + '=' + theirs_raw if theirs_raw is not None else 'without it'}; "
                       "stop it (`mnemo daemon stop`) so the next command starts one with this environment")
    return out


def show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _num(v)
    return str(v)




# -- reports (`mnemo config list`, `mnemo daemon status`, `mnemo doctor`) --------------------------------------
def report(home: Path | None = None, owner: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every key as this store applies it: the running owner's value when one answers (`owner` is its `health`),
    else what an owner started from here would use; with the stored value, the default and why they differ."""
    local = effective(home)
    view = (owner or {}).get("config") or {}
    theirs = view.get("settings") or {}
    out = {}
    for name, k in KEYS.items():
        mine = local[name]
        row = {"value": mine["value"], "source": mine["source"], "stored": mine["stored"], "default": k.default,
               "env": k.env, "applies": k.applies, "help": k.help, "notes": list(mine["problems"])}
        if name in theirs:
            row["value"], row["source"] = theirs[name]["value"], "owner " + theirs[name]["source"]
        if mine["source"] == "env":
            row["notes"].append(f"{k.env}={environment.raw(k.env)} is set in this environment: it overrides the stored "
                                "value for processes started from here")
        out[name] = row
    return out


def settings_check(home: Path | None = None, owner: dict[str, Any] | None = None) -> DoctorCheck:
    """A `mnemo doctor` check: what is set (stored, environment), and every setting that is not applied."""
    rows = report(home, owner)
    stored = [f"{n}={show(r['stored'])}" for n, r in rows.items() if r["stored"] is not None]
    env = [n for n, r in rows.items() if r["source"].endswith("env")]
    issues = [*problems(home), *mismatches(owner or {})]
    detail = (f"store-wide ({path(home)}): " + (", ".join(stored) if stored else "all defaults")
              + (f"; overridden by the environment: {', '.join(env)}" if env else ""))
    req = {k: v for k, v in request_settings().items() if v}
    detail += "; this environment's request settings: " + (", ".join(f"{k}={v}" for k, v in req.items())
                                                            if req else "defaults")
    if issues:
        detail += ". Not applied: " + " | ".join(issues)
    return {"name": "settings", "status": "warn" if issues else "ok", "detail": detail,
            "fix": "`mnemo config list` shows every setting; `mnemo config set KEY VALUE` stores one" if issues
            else None}


__all__ = ["KEYS", "OWNER_ENV", "Key", "bind", "effective", "key", "mismatches", "owner_view", "parse", "problems",
           "report", "set_value", "settings_check", "show", "stored", "unset", "value"]


# -- docs/settings.md ----------------------------------------------------------------------------------------------
DOC_BEGIN = "<!-- environment variables: generated by `python -m mnemo.core.store_settings --markdown` -->"
DOC_END = "<!-- end of the generated environment variables -->"


def _doc_default(k: Key) -> str:
    if k.kind is bool:
        return "true" if k.default else "false"
    return _num(k.default) if isinstance(k.default, int | float) else str(k.default)


def markdown() -> str:
    """docs/settings.md's environment-variable part, from the two declarations: `environment.VARIABLES` and
    `KEYS` (tests/unit/test_environment.py keeps the file equal to it)."""
    head = "| variable | values | read | what it does |\n|---|---|---|---|"
    out = [DOC_BEGIN, "## Outside the editor: every environment variable", "",
           "Every variable is declared once: core/environment.py (`VARIABLES`) and, for the store-wide ones, "
           "core/store_settings.py (`KEYS`). `read`: `live` on every use, `start` once when the process starts. "
           "The model is in docs/reliability.md, \"The settings model\".", ""]
    for kind, title in (("request", "Request-shaped"), ("hooks", "The hooks' and `mnemo context`'s own")):
        out += [f"**{title}**: {environment.KINDS[kind]}", "", head, *environment.markdown_rows(kind), ""]
    out += ["**Store-wide**: one value per store in `<store>/config.json`, read and written by `mnemo config "
            "list|get|set|unset` (validated: an unknown key or a bad value is refused with the accepted ones named), "
            "shown by `mnemo daemon status` and `mnemo doctor`. The variable overrides the stored value for the "
            "process that reads it (the owner, or a `--no-daemon` command) and is shown as an override. A running "
            "owner re-reads the file when it changes (`live`), or applies the key at its next start (`restart`; "
            "`mnemo config set` says so). A client whose variable the running owner does not apply gets a warning "
            "naming the `mnemo config set` command.", "",
            "| key | variable | default | applies | accepted | what it does |", "|---|---|---|---|---|---|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in (f"`{k.name}`", f"`{k.env}`", _doc_default(k), k.applies,
                                                              k.accepted(), k.help)) + " |" for k in KEYS.values()]
    out += ["", "The team server (`MNEMO_TEAM_URL`, `MNEMO_TEAM_TOKEN`, `MNEMO_TEAM_NAMESPACE`) is store-wide too "
            "but kept in `<store>/team.json`, written by `mnemo team connect` (which checks the server and keeps "
            "the token out of `config.json`); `mnemo config list` shows its URL. The variables override it.", ""]
    for kind, title in (("owner", "The owner's own process"), ("process", "Each process's own")):
        out += [f"**{title}**: {environment.KINDS[kind]}", "", head, *environment.markdown_rows(kind), ""]
    out += ["`CLAUDE_CONFIG_DIR` (not Mnemo's) says where `mnemo hooks --user` finds Claude Code's settings, as "
            "Claude Code does (default `~/.claude`).", DOC_END]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m mnemo.core.store_settings --markdown  (docs/settings.md's environment variables)")
    sys.stdout.write(markdown())
