"""Every `MNEMO_*` environment variable, declared once, and the one place that reads them.

A variable is declared here with its default, its type, who reads it and when (`live`: on every use, so a change
applies at once; `start`: once, when the process starts), and one line of documentation. The store-wide settings
(`<store>/config.json`, `mnemo config`) are declared beside their key in core/store_settings.py (`KEYS`, each
naming its variable) and read through `raw` too. docs/settings.md's environment-variable part is generated from
both declarations (`python -m mnemo.core.store_settings --markdown`; tests/unit/test_environment.py keeps them
equal and checks that no other module reads a `MNEMO_*` variable itself and that
every name a module reads is declared.

Stdlib only: the Claude Code hooks' fast path imports it.
"""

from __future__ import annotations

import os

KINDS = {
    "request": "the client process reads them and sends them with each request (in its `Context`); "
               "the owner applies the client's own value to that client's writes. A bad value is refused (nothing "
               "stored), never replaced. An owner started by a client does not inherit these (`spawn_owner` drops "
               "them): one client's choice never becomes the default of every other client.",
    "hooks": "read by the process that builds the context block. A bad value "
             "is refused (nothing injected).",
    "owner": "limits and paths the owner reads. They apply to the owner started with them; "
             "a client whose value differs from the running owner's is warned (\"... is not applied: the running "
             "owner was started without it; stop it (`mnemo daemon stop`) so the next command starts one with this "
             "environment\").",
    "process": "read by the process itself (the CLI, the language server, the MCP server, `mnemo team serve`).",
}


class Var:
    """One environment variable: name, default (None: unset means "not given"), type, kind (`KINDS`), when it is
    read (`live` or `start`) and what it does."""

    __slots__ = ("name", "default", "type", "kind", "read", "doc")

    def __init__(self, name: str, default: object, type: str, kind: str, read: str, doc: str) -> None:
        self.name, self.default, self.type, self.kind, self.read, self.doc = name, default, type, kind, read, doc


_MiB = 1024 * 1024
VARIABLES: dict[str, Var] = {v.name: v for v in (
    # request-shaped
    Var("MNEMO_WRITE_POLICY", "auto", "auto | confirm", "request", "live",
        "`confirm`: this client's agent writes wait in Review. The language server sends `mnemo.writePolicy` "
        "instead."),
    Var("MNEMO_ON_CONFLICT", "review", "review | supersede | keep_both | keep_existing", "request", "live",
        "how this client's conflicting write is resolved"),
    Var("MNEMO_SECRETS", "block", "block | redact", "request", "live",
        "refuse a note holding a secret, or store it with the secret replaced"),
    Var("MNEMO_USER", None, "a name (default: the OS user)", "request", "live",
        "the author of this client's notes and team promotions"),
    Var("MNEMO_PROJECT_ROOT", None, "a directory", "request", "live", "the project this client acts for"),
    Var("MNEMO_PROJECT_ID", None, "an id", "request", "live", "the project's id (default: from its origin URL)"),
    Var("MNEMO_PROJECT_NAME", None, "a name", "request", "live", "the project's name"),
    Var("MNEMO_DEFAULT_BRANCH", None, "a branch", "request", "live", "the project's default branch"),
    # the hooks
    Var("MNEMO_LEARN_CORRECTIONS", None, "confirm | auto | off", "hooks", "live",
        "what a prompt's corrections and stated preferences become: `feedback` memories waiting in Review "
        "(`confirm`, the hooks' default), landing at once (`auto`), or nothing (`off`). Read by `mnemo hook prompt` "
        "and `mnemo context --message` (whose default is `off` unless this is set; `--learn` per call)"),
    Var("MNEMO_CONTEXT_BUDGET", 2000, "tokens, 100..20000", "hooks", "live",
        "the token budget of the block a hook injects (`mnemo context --budget N` per call); the block never "
        "exceeds 9,500 characters (Claude Code keeps hook output up to 10,000 in context)"),
    Var("MNEMO_HOOK_TIMEOUT", 0.8, "seconds, 0.1..30", "hooks", "live",
        "a hook answers within this many seconds of its process's start, whatever the owner does (then: nothing "
        "injected, one line on stderr, exit 0)"),
    Var("MNEMO_HOOKS", None, "off", "hooks", "live", "the installed hooks do nothing (without uninstalling them)"),
    Var("MNEMO_HOOK_START_WAIT", 4.0, "seconds, 0..30", "hooks", "live",
        "how long a hook that had to start the owner waits for its answer (from the hook's process start)"),
    # the owner's own
    Var("MNEMO_MAX_TEXT_CHARS", 20000, "characters", "owner", "start", "the longest note stored"),
    Var("MNEMO_MAX_META_BYTES", 64 * 1024, "bytes", "owner", "start", "the largest metadata of a note"),
    Var("MNEMO_MAX_ANCHORS", 64, "anchors", "owner", "start", "the most anchors of a note"),
    Var("MNEMO_MAX_BATCH_ITEMS", 1000, "notes", "owner", "start",
        "notes in one `remember_batch` call (`mnemo import` sends 500 at a time)"),
    Var("MNEMO_MAX_DOC_BYTES", 1_000_000, "bytes", "owner", "start", "a Markdown doc larger than this is skipped"),
    Var("MNEMO_MAX_SKILL_BYTES", _MiB, "bytes", "owner", "start", "a rule file larger than this is skipped"),
    Var("MNEMO_MAX_FRONTMATTER_BYTES", 64 * 1024, "bytes", "owner", "start", "the largest frontmatter parsed"),
    Var("MNEMO_MAX_FRONTMATTER_NODES", 2000, "YAML nodes", "owner", "start", "the most YAML nodes of a frontmatter"),
    Var("MNEMO_SNAPSHOT_MAX_BYTES", 512 * _MiB, "bytes", "owner", "live", "the largest snapshot file"),
    Var("MNEMO_SNAPSHOT_MAX_RECORDS", 500_000, "records", "owner", "live", "the most records of a snapshot"),
    Var("MNEMO_SNAPSHOT_MAX_RECORD_BYTES", 512 * 1024, "bytes", "owner", "live", "the largest snapshot record"),
    Var("MNEMO_USER_SKILLS", None, "a directory (default ~/.mnemo/skills)", "owner", "live",
        "the user's own skills"),
    Var("MNEMO_BUILTIN_SKILLS", None, "a directory", "owner", "live", "the starter skills (default: the package's)"),
    Var("MNEMO_MODEL_CACHE", None, "a directory (default ~/.cache/mnemo/models)", "owner", "live",
        "where the ONNX export of the embedding model is kept"),
    Var("MNEMO_BACKUP_DELAY", 60.0, "seconds", "owner", "live", "the backups' first look after the owner starts"),
    Var("MNEMO_BACKUP_POLL", 60.0, "seconds", "owner", "live", "how often the backups look"),
    Var("MNEMO_PUBLISH_DELAY", 1.0, "seconds", "owner", "start",
        "quiet after the last change before a publish on change (`publish_on_change`) runs"),
    Var("MNEMO_TEAM_URL", None, "a URL", "owner", "live",
        "the team server (else `<store>/team.json`, written by `mnemo team connect`)"),
    Var("MNEMO_TEAM_TOKEN", None, "a token", "owner", "live", "the team server's token"),
    Var("MNEMO_TEAM_NAMESPACE", None, "a name (default `default`)", "owner", "live", "the team's namespace"),
    Var("MNEMO_TEAM_CA", None, "a file", "owner", "live", "a CA certificate for an https team URL"),
    # each process's own
    Var("MNEMO_HOME", None, "a directory (default ~/.mnemo)", "process", "live",
        "the store (the editor's `mnemo.home` wins when set)"),
    Var("MNEMO_START_TIMEOUT", 30.0, "seconds", "process", "start", "how long a client waits for an owner to start"),
    Var("MNEMO_NATIVE", "1", "0 | 1", "process", "start",
        "0: run the relation check from its Python source even where `scripts/setup.sh` compiled it (mypyc; "
        "mnemo/native.py). Another value is refused at start"),
    Var("MNEMO_NO_DAEMON", None, "1", "process", "live", "CLI commands run in process (as `--no-daemon`)"),
    Var("MNEMO_LSP_TEST_DELAY_MS", 0.0, "milliseconds", "process", "start",
        "a cancellable pause before requests reach the store: for the cancellation tests only"),
    Var("MNEMO_LSP_PREINIT", "1", "0 | 1", "process", "start",
        "`0` turns off the language server's early `initialize` answer"),
    Var("MNEMO_TRACE_FILE", None, "a file", "process", "live",
        "benchmarks only: each hover of the language server and each request of the owner appends its stages' "
        "timings to this file (one JSON line each; an owner started by the process inherits it). Unset: nothing is "
        "timed"),
    Var("MNEMO_LSP_MAX_MESSAGE_BYTES", 64 * _MiB, "bytes", "process", "start", "the largest LSP message read"),
    Var("MNEMO_MCP_MAX_MESSAGE_BYTES", 32 * _MiB, "bytes", "process", "start", "the largest MCP message read"),
    Var("MNEMO_LOG_LEVEL", "WARNING", "a logging level", "process", "start", "the MCP server's log level"),
    Var("MNEMO_VSIX", None, "a file", "process", "live",
        "the `.vsix` `mnemo vscode install` takes when no `--vsix` is given"),
    Var("MNEMO_NGINX", None, "a file", "process", "live", "the nginx binary `mnemo team serve` runs"),
)}


def names(kind: str) -> tuple[str, ...]:
    """The declared variables of one kind, in declaration order."""
    return tuple(v.name for v in VARIABLES.values() if v.kind == kind)


def raw(name: str) -> str | None:
    """The variable as set in this process's environment (None when unset): the one read of `os.environ`."""
    return os.environ.get(name)


def text(name: str) -> str:
    """The variable, else its declared default as text ("" when it has none)."""
    value = os.environ.get(name)
    if value is None:
        default = VARIABLES[name].default
        return "" if default is None else str(default)
    return value


def _parsed(name: str, convert: type, what: str):
    value = (os.environ.get(name) or "").strip()
    if not value:
        return convert(VARIABLES[name].default)
    try:
        return convert(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not {what}; unset it or give one "
                         f"(default {VARIABLES[name].default})") from None


def integer(name: str) -> int:
    """A whole-number variable; unset or empty is the declared default. A value that is not a whole number is
    refused with what to do (the process does not start on a limit it cannot read)."""
    return _parsed(name, int, "a whole number")


def number(name: str) -> float:
    """A number variable; unset or empty is the declared default; a value that is not a number is refused."""
    return _parsed(name, float, "a number")


def env_float(name: str, default: float | None = None) -> float:
    """A number read where a bad value must not stop a thread (the backups): unset or unparsable is the default."""
    try:
        return float(os.environ.get(name, "").strip() or VARIABLES[name].default)  # type: ignore[arg-type]
    except ValueError:
        return float(VARIABLES[name].default if default is None else default)  # type: ignore[arg-type]


def env_int(name: str, default: int | None = None) -> int:
    """A whole number read where a bad value must not fail an operation: unset or unparsable is the default."""
    try:
        return int(os.environ.get(name, "").strip() or VARIABLES[name].default)  # type: ignore[call-overload]
    except ValueError:
        return int(VARIABLES[name].default if default is None else default)  # type: ignore[call-overload]


def markdown_rows(kind: str) -> list[str]:
    """The rows of docs/settings.md's table of one kind of variable."""
    out = []
    for v in VARIABLES.values():
        if v.kind != kind:
            continue
        default = "" if v.default is None else f" (default {v.default})"
        cells = (f"`{v.name}`", v.type + default, v.read, v.doc)
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out
