"""The Mnemo language server: a pygls `LanguageServer` subclass owning the state, one registration per LSP method.

Each LSP method is registered once here and fanned out to the feature objects in `mnemo.lsp.features` (the
esbonio shape): a failing feature is logged and skipped, never takes the others down. Handlers are coroutines;
every blocking call (the owner's socket, tree-sitter) runs in `self.executor`, so the event loop only reads
messages, converts and answers. The store lives in the owner process (`mnemo.daemon`); this process imports no
model, no chromadb and no numpy.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from mnemo import __version__
from mnemo.core.errors import MnemoError
from mnemo.lsp import capabilities, convert
from mnemo.lsp.owner import READY, STARTING, UNAVAILABLE, OwnerLink, Unavailable, resolve_home
from mnemo.lsp.stdio import ResyncingStdin
from mnemo.settings import Settings, describe_problems, parse_settings

log = logging.getLogger("mnemo.lsp")

HEAVY_MODULES = ("numpy", "chromadb", "onnxruntime", "torch", "sentence_transformers", "transformers",
                 "tokenizers", "scipy")
SKILLS_TTL = 20.0  # seconds an active-skills answer is reused for the same file and branch
RECALL_TTL = 15.0  # seconds a hover's recall answer is reused for the same query (writes here clear it at once)
RECALL_CACHE = 512


def _converter_factory():
    """pygls' converter, but params/results of custom methods stay plain dicts (not namedtuples)."""
    from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
    from pygls.protocol import default_converter as base

    conv = base()
    keep = lambda obj, cls: cls(**obj)  # noqa: E731
    for cls in (JsonRPCRequestMessage, JsonRPCResponseMessage, JsonRPCNotification):
        conv.register_structure_hook(cls, keep)
    return conv


class _Answered:
    """A message already answered with an error while it was being read; pygls ignores it (no `jsonrpc`)."""

    jsonrpc = None


class MnemoProtocol(LanguageServerProtocol):
    """pygls' protocol, but a request whose params do not fit the LSP types gets an InvalidParams answer instead
    of no answer at all (which would leave the client waiting)."""

    def structure_message(self, data: Any) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                log.warning("malformed %s request: %s", data.get("method"), exc)
                self._send_response(data["id"], error=JsonRpcInvalidParams(
                    f"invalid params for {data.get('method')}", data={"code": "invalid_params"}).to_response_error())
                return _Answered()
            raise


class LanguageFeature:
    """Base of a feature: override the hooks it serves. `commands()`/`requests()`/`notifications()` map names to
    coroutines taking the params object."""

    def __init__(self, server: MnemoLanguageServer):
        self.server = server

    def commands(self) -> dict[str, Callable[[dict], Awaitable[Any]]]:
        return {}

    def requests(self) -> dict[str, Callable[[dict], Awaitable[Any]]]:
        return {}

    def notifications(self) -> dict[str, Callable[[dict], Awaitable[Any]]]:
        return {}


class MnemoLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(capabilities.SERVER_NAME, __version__,
                         text_document_sync_kind=t.TextDocumentSyncKind(capabilities.TEXT_DOCUMENT_SYNC_KIND),
                         converter_factory=_converter_factory, protocol_cls=MnemoProtocol)
        self.settings = Settings()
        self.settings_problems: list[str] = []
        self.executor = ThreadPoolExecutor(max_workers=6, thread_name_prefix="mnemo-lsp")
        self.owner: OwnerLink | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self.features: list[LanguageFeature] = []
        self._tasks: set[asyncio.Task] = set()
        self._initialization_options: dict[str, Any] = {}
        self._warned_outage: float | None = None
        self._retry_task: asyncio.Task | None = None
        self._skills_cache: dict[tuple, tuple[float, dict]] = {}
        self._recall_cache: dict[tuple, tuple[float, dict]] = {}
        self.recall_stats = {"hits": 0, "misses": 0}
        self._last_state: dict[str, Any] = {}
        self.active_uri: str | None = None
        self.started_at = time.monotonic()
        self.test_delay_s = float(os.environ.get("MNEMO_LSP_TEST_DELAY_MS", "0") or 0) / 1000.0
        # the pre-handshake's report (preinit.py): did it answer `initialize`, did pygls agree
        self.preinit: dict[str, Any] = {"answered": False}
        # set by features at registration
        self.documents: Any = None
        self.anchors: Any = None

    # -- plumbing --------------------------------------------------------------------------------------------
    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors outside a request's answer (unparsable input, a failing notification handler) go to the log,
        never to a pop-up. Failed requests already carry their error in the response."""
        from pygls.exceptions import FeatureRequestError

        level = logging.DEBUG if source is FeatureRequestError else logging.ERROR
        log.log(level, "%s: %s", getattr(source, "__name__", source), error)

    def add_feature(self, feature: LanguageFeature) -> LanguageFeature:
        self.features.append(feature)
        return feature

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task:
        """Run a background task, held (so it is not garbage collected) and with its exception logged."""
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)

        def done(tk: asyncio.Task) -> None:
            self._tasks.discard(tk)
            if not tk.cancelled() and tk.exception() is not None:
                log.error("background task %s failed", name, exc_info=tk.exception())

        task.add_done_callback(done)
        return task

    async def run_blocking(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kw))

    async def run_cancellable(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Like run_blocking, passing `cancelled=` (a callable) that turns true when the awaiting task is
        cancelled, so long work (parsing) can stop early."""
        flag = threading.Event()
        try:
            return await self.run_blocking(fn, *args, cancelled=flag.is_set, **kw)
        except asyncio.CancelledError:
            flag.set()
            raise

    async def service(self, method: str, *args: Any, **kw: Any) -> Any:
        """A call to the owner, off the event loop. Raises Unavailable / MnemoError."""
        if self.owner is None:
            raise Unavailable("Mnemo unavailable: the language server is starting",
                              hint="wait a moment; it connects after `initialized`")
        return await self.run_blocking(self.owner.call, method, *args, **kw)

    @property
    def ready(self) -> bool:
        return self.owner is not None and self.owner.state == READY

    def send_threadsafe(self, method: str, params: Any) -> None:
        """Send a notification from any thread (pygls' writer is not thread-safe)."""
        loop = self.loop
        if loop is None or self.protocol.writer is None:
            return
        try:
            if threading.current_thread() is self._loop_thread:
                self.protocol.notify(method, params)
            else:
                loop.call_soon_threadsafe(self.protocol.notify, method, params)
        except RuntimeError:  # loop closed during shutdown
            pass

    async def test_delay(self) -> None:
        """MNEMO_LSP_TEST_DELAY_MS: a cancellable pause before requests reach the store (tests of cancellation)."""
        if self.test_delay_s > 0:
            await asyncio.sleep(self.test_delay_s)

    def link_cancellation(self) -> None:
        """pygls runs a command handler as a sub-task of the `workspace/executeCommand` request; cancelling the
        request only cancels its outer future. Tie the handler's task to it so `$/cancelRequest` stops the work."""
        task = asyncio.current_task()
        msg_id = self.protocol.msg_id
        outer = self.protocol._request_futures.get(msg_id) if msg_id is not None else None  # noqa: SLF001
        if task is None or outer is None or outer is task:
            return

        def on_done(fut: Any) -> None:
            if fut.cancelled() and not task.done():
                task.get_loop().call_soon_threadsafe(task.cancel)

        outer.add_done_callback(on_done)

    # -- workspace and context -------------------------------------------------------------------------------
    def workspace_roots(self) -> list[Path]:
        roots: list[Path] = []
        try:
            ws = self.workspace
        except RuntimeError:
            return roots
        for folder in (ws.folders or {}).values():
            p = to_fs_path(folder.uri)
            if p:
                roots.append(Path(p))
        if not roots and ws.root_path:
            roots.append(Path(ws.root_path))
        return roots

    def root_for(self, uri: str | None) -> Path:
        roots = self.workspace_roots()
        path = Path(to_fs_path(uri) or "") if uri else None
        if path is not None:
            best = None
            for r in roots:
                try:
                    path.relative_to(r)
                except ValueError:
                    continue
                if best is None or len(str(r)) > len(str(best)):
                    best = r
            if best is not None:
                return best
            if path.parent.exists():
                return path.parent
        if roots:
            return roots[0]
        return Path(os.getcwd())

    def ctx_for(self, uri: str | None = None) -> dict[str, Any]:
        """The Context of the workspace holding `uri`, read live (branch from .git/HEAD) on every call."""
        from mnemo.core.identity import detect_context

        ctx = detect_context(self.root_for(uri or self.active_uri)).to_dict()
        ctx["write_policy"] = self.settings.write_policy  # the editor's setting travels with each request
        return ctx

    @staticmethod
    def rel_path(uri: str | None, ctx: dict[str, Any]) -> str | None:
        if not uri:
            return None
        p = to_fs_path(uri)
        if not p:
            return None
        root = ctx.get("root")
        if root:
            try:
                return Path(p).resolve().relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                pass
        return Path(p).as_posix()

    # -- skills (cached per file and branch) -----------------------------------------------------------------
    async def active_skills(self, uri: str | None, message: str | None = None, *, fresh: bool = False,
                            ctx: dict | None = None) -> dict[str, Any]:
        if not self.settings.skills.enabled:
            return {"file": None, "activations": [], "total_tokens": 0, "disabled": True}
        ctx = ctx or self.ctx_for(uri)
        rel = self.rel_path(uri, ctx)
        key = (ctx.get("project_id"), ctx.get("branch"), rel, message)
        hit = self._skills_cache.get(key)
        now = time.monotonic()
        if hit and not fresh and now - hit[0] < SKILLS_TTL:
            return hit[1]
        try:
            result = await self.service("activate_skills", ctx, rel, message,
                                        max_skills=self.settings.skills.max_active,
                                        token_budget=self.settings.skills.token_budget)
        except Unavailable:
            raise
        except MnemoError as exc:  # e.g. the skills engine is not installed on the owner yet
            log.warning("skills: %s", exc)
            result = {"activations": [], "total_tokens": 0, "error": str(exc)}
        result = dict(result or {})
        result["file"] = rel
        self._skills_cache[key] = (now, result)
        if len(self._skills_cache) > 256:
            self._skills_cache.pop(next(iter(self._skills_cache)))
        return result

    async def recall_cached(self, ctx: dict[str, Any], query: str, **kw: Any) -> dict[str, Any]:
        """`recall` for interactive features (hover, code actions): the same query on the same project and branch
        within RECALL_TTL seconds is answered from memory. Writes through this server clear the cache; other
        processes' writes show within the TTL."""
        key = (ctx.get("project_id"), ctx.get("branch"), query, tuple(sorted(kw.items())))
        now = time.monotonic()
        hit = self._recall_cache.get(key)
        if hit is not None and now - hit[0] < RECALL_TTL:
            self.recall_stats["hits"] += 1
            return hit[1]
        self.recall_stats["misses"] += 1
        result = await self.service("recall", ctx, query, **kw)
        self._recall_cache[key] = (now, result)
        if len(self._recall_cache) > RECALL_CACHE:
            self._recall_cache.pop(next(iter(self._recall_cache)))
        return result

    def forget_caches(self) -> None:
        self._recall_cache.clear()
        self._skills_cache.clear()
        if self.anchors is not None:
            self.anchors.invalidate()

    # -- state -----------------------------------------------------------------------------------------------
    def state_payload(self, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
        owner = self.owner
        state = owner.state if owner is not None else STARTING
        ctx = ctx or self.ctx_for(None)
        return {
            "state": state, "reason": owner.reason if owner else None, "hint": owner.hint if owner else None,
            "project": {"id": ctx.get("project_id"), "name": ctx.get("project_name"), "root": ctx.get("root")},
            "branch": ctx.get("branch"), "defaultBranch": ctx.get("default_branch"),
            "activeFile": self.rel_path(self.active_uri, ctx),
        }

    async def publish_state(self, *, force: bool = False, skills: bool = True) -> dict[str, Any]:
        ctx = await self.run_blocking(self.ctx_for, None)
        payload = self.state_payload(ctx)
        names: list[str] = []
        if skills and self.ready and self.active_uri:
            try:
                res = await self.active_skills(self.active_uri, ctx=ctx)
                names = [a.get("name") for a in res.get("activations", [])]
            except MnemoError:
                pass
        payload["activeSkillCount"] = len(names)
        payload["activeSkills"] = names
        if force or payload != self._last_state:
            self._last_state = payload
            self.protocol.notify("mnemo/stateChanged", payload)
        return payload

    def memories_changed(self, reason: str, ids: list[str] | None = None) -> None:
        self.forget_caches()
        if self.documents is not None:
            self.documents.invalidate_lenses()
        self.protocol.notify("mnemo/memoriesChanged", {"reason": reason, "ids": ids or []})
        self.refresh_code_lenses()

    def refresh_code_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.spawn(self._refresh_lenses(), "codeLens/refresh")

    async def _refresh_lenses(self) -> None:
        try:
            await self.workspace_code_lens_refresh_async(None)
        except Exception as exc:  # noqa: BLE001 - a client may refuse; lenses then update on the next request
            log.debug("codeLens/refresh: %s", exc)

    def show(self, message: str, kind: t.MessageType = t.MessageType.Info) -> None:
        self.window_show_message(t.ShowMessageParams(type=kind, message=message))

    def on_owner_state(self, state: str, reason: str | None, hint: str | None) -> None:
        """Called from worker threads by OwnerLink: hop onto the loop."""
        loop = self.loop
        if loop is not None:
            loop.call_soon_threadsafe(self._owner_state_changed, state, reason, hint)

    def _owner_state_changed(self, state: str, reason: str | None, hint: str | None) -> None:
        if state == UNAVAILABLE:
            if self._warned_outage is None:
                self._warned_outage = time.time()
                self.show(f"Mnemo unavailable: {reason} — {hint}", t.MessageType.Warning)
            self.ensure_retry()
        elif state == READY and self._warned_outage is not None:
            self._warned_outage = None
            self.show("Mnemo is available again.", t.MessageType.Info)
            self.forget_caches()
            self.refresh_code_lenses()
        self.spawn(self.publish_state(), "stateChanged")

    def ensure_retry(self) -> None:
        if self._retry_task is None or self._retry_task.done():
            self._retry_task = self.spawn(self._retry_loop(), "owner-retry")

    async def _retry_loop(self) -> None:
        delay = min(1.0, self.settings.owner.retry_seconds)  # an owner that just died is restarted at once
        while self.owner is not None and self.owner.state != READY:
            await asyncio.sleep(delay)
            delay = self.settings.owner.retry_seconds
            if self.owner is None or self.owner.state == READY:
                return
            log.info("retrying the connection to the Mnemo owner")
            await self.run_blocking(self.owner.connect)

    async def reconnect(self) -> dict[str, Any]:
        if self.owner is None:
            return {"state": STARTING, "reason": None, "hint": None}
        await self.run_blocking(self.owner.connect)
        return {k: v for k, v in self.owner.status().items() if k in ("state", "reason", "hint")}

    # -- settings --------------------------------------------------------------------------------------------
    def apply_settings(self, *sources: Any) -> None:
        settings, problems = parse_settings(self._initialization_options, *sources)
        self.settings = settings
        level = getattr(logging, settings.log_level.upper(), logging.INFO)
        logging.getLogger("mnemo").setLevel(level)
        if problems and problems != self.settings_problems:
            self.show(describe_problems(problems), t.MessageType.Warning)
            for p in problems:
                log.warning("settings: %s", p)
        self.settings_problems = problems

    async def pull_configuration(self) -> None:
        caps = self.client_capabilities.workspace
        if not (caps and caps.configuration):
            return
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(t.ConfigurationParams(
                items=[t.ConfigurationItem(section="mnemo")])), timeout=5)
        except Exception as exc:  # noqa: BLE001 - clients without a `mnemo` section, timeouts
            log.info("workspace/configuration: %s", exc)
            return
        section = result[0] if result else None
        if isinstance(section, dict) and section:
            self.apply_settings(section)

    # -- lifecycle -------------------------------------------------------------------------------------------
    def on_initialize(self, params: t.InitializeParams) -> None:
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.current_thread()
        opts = convert.plain(params.initialization_options)
        if opts is not None and not isinstance(opts, dict):
            self.settings_problems = [f"initializationOptions must be an object, got {type(opts).__name__}"]
            opts = {}
        self._initialization_options = opts or {}
        self.settings, problems = parse_settings(self._initialization_options)
        self.settings_problems = problems
        logging.getLogger("mnemo").setLevel(getattr(logging, self.settings.log_level.upper(), logging.INFO))

    async def startup(self) -> None:
        if self.settings_problems:
            self.show(describe_problems(self.settings_problems), t.MessageType.Warning)
        await self.pull_configuration()
        home = resolve_home(self.settings.home)
        self.owner = OwnerLink(home, autostart=self.settings.owner.autostart, on_state=self.on_owner_state)
        await self.publish_state(force=True, skills=False)
        ok = await self.run_blocking(self.owner.connect)
        if not ok:
            return  # on_owner_state warned and started the retry loop
        for f in self.features:
            hook = getattr(f, "owner_ready", None)
            if hook is not None:
                self.spawn(hook(), f"{type(f).__name__}.owner_ready")

    async def branch_watch(self) -> None:
        """Notice a `git checkout` made outside the editor: requests read the branch live anyway; this pushes a
        `mnemo/stateChanged` and refreshes lenses."""
        while True:
            await asyncio.sleep(self.settings.branch_poll_seconds)
            try:
                ctx = await self.run_blocking(self.ctx_for, None)
            except Exception as exc:  # noqa: BLE001
                log.debug("branch watch: %s", exc)
                continue
            key = (ctx.get("project_id"), ctx.get("branch"))
            published = self._last_state
            if published and key != ((published.get("project") or {}).get("id"), published.get("branch")):
                log.info("branch changed: %s -> %s", published.get("branch"), key[1])
                try:
                    self.memories_changed("branch")
                    await self.publish_state()
                except Exception:  # noqa: BLE001 - keep watching
                    log.exception("branch watch")

    async def fan_out(self, hook: str, *args: Any) -> list[Any]:
        """Call `hook` on every feature that has it; a failing feature is logged and skipped."""
        results = []
        for f in self.features:
            fn = getattr(f, hook, None)
            if fn is None:
                continue
            try:
                results.append(await fn(*args))
            except (asyncio.CancelledError, JsonRpcException):
                raise
            except Unavailable:
                results.append(None)
            except Exception:  # noqa: BLE001
                log.exception("%s.%s failed", type(f).__name__, hook)
        return results

    def status_extras(self) -> dict[str, Any]:
        return {"lsp": {"pid": os.getpid(), "version": __version__, "rssMb": rss_mb(),
                        "uptimeS": round(time.monotonic() - self.started_at, 1),
                        "recallCache": dict(self.recall_stats), "preinit": dict(self.preinit),
                        "heavyModules": sorted(m for m in HEAVY_MODULES if m in sys.modules)}}


def rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    try:
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except Exception:  # noqa: BLE001
        return 0.0


class LspLogHandler(logging.Handler):
    """Forward Python logging to `window/logMessage`, skipping pygls' own records (which would loop: pygls logs
    every message it sends)."""

    LEVELS = {logging.ERROR: t.MessageType.Error, logging.WARNING: t.MessageType.Warning,
              logging.INFO: t.MessageType.Info, logging.DEBUG: t.MessageType.Log}

    def __init__(self, server: MnemoLanguageServer):
        super().__init__()
        self.server = server
        self._local = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("pygls", "asyncio")) or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            level = max((lv for lv in self.LEVELS if lv <= record.levelno), default=logging.DEBUG)
            self.server.send_threadsafe(t.WINDOW_LOG_MESSAGE, t.LogMessageParams(
                type=self.LEVELS[level], message=self.format(record)))
        except Exception:  # noqa: BLE001 - logging must never raise
            pass
        finally:
            self._local.busy = False


# lsprotocol types of the registration options declared (as LSP JSON) in capabilities.LSP_METHODS
_OPTION_TYPES = {t.TEXT_DOCUMENT_CODE_LENS: t.CodeLensOptions, t.TEXT_DOCUMENT_CODE_ACTION: t.CodeActionOptions,
                 t.TEXT_DOCUMENT_HOVER: t.HoverOptions, t.TEXT_DOCUMENT_DID_SAVE: t.SaveOptions}


def _options(server: MnemoLanguageServer, method: str) -> Any:
    value = capabilities.LSP_METHODS[method]
    return None if value is None else server.protocol._converter.structure(value, _OPTION_TYPES[method])  # noqa: SLF001


def _check_declarations(server: MnemoLanguageServer) -> None:
    """The registrations must be what capabilities.py declares: the pre-handshake answers `initialize` from there."""
    fm = server.protocol.fm
    custom = {name for f in server.features for name in (*f.requests(), *f.notifications())}
    standard = [m for m in fm.features if m not in custom]
    problems = []
    if set(standard) != set(capabilities.LSP_METHODS):
        problems.append(f"LSP methods registered {sorted(set(standard) ^ set(capabilities.LSP_METHODS))} "
                        "differ from capabilities.LSP_METHODS")
    if list(fm.commands) != list(capabilities.COMMANDS):
        problems.append(f"commands registered {list(fm.commands)} differ from capabilities.COMMANDS")
    if problems:
        raise RuntimeError("mnemo.lsp.capabilities is out of date: " + "; ".join(problems))


def readable_initialize(server: MnemoLanguageServer, msg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The pre-handshake's replay of `initialize`, made readable for pygls: the client was already told the session
    started, so a client capability section lsprotocol cannot read (pygls would answer InvalidParams and never set
    up the workspace) is dropped and named, keeping what the early answer was computed from (`positionEncodings`,
    `willSave*`). Returns (the message, the dropped sections)."""
    conv = server.protocol._converter  # noqa: SLF001

    def readable(m: dict[str, Any]) -> bool:
        try:
            conv.structure(m, t.InitializeRequest)
        except Exception:  # noqa: BLE001 - cattrs' validation errors
            return False
        return True

    if readable(msg):
        return msg, []
    params = msg.get("params")
    caps = params.get("capabilities") if isinstance(params, dict) else None
    if not isinstance(caps, dict):
        return msg, []
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in caps.items():
        if readable({**msg, "params": {**params, "capabilities": {key: value}}}):
            kept[key] = value
        else:
            dropped.append(key)
    encodings = (caps.get("general") or {}).get("positionEncodings") if isinstance(caps.get("general"), dict) else None
    if "general" in dropped and encodings is not None:
        kept["general"] = {"positionEncodings": encodings}
    text = caps.get("textDocument")
    sync = text.get("synchronization") if isinstance(text, dict) else None
    if "textDocument" in dropped and isinstance(sync, dict):
        kept["textDocument"] = {"synchronization": {k: v for k, v in sync.items()
                                                    if k in ("willSave", "willSaveWaitUntil")}}
    fixed = {**msg, "params": {**params, "capabilities": kept}}
    return (fixed, dropped) if readable(fixed) else (msg, [])


def load_features() -> None:
    """Import the feature modules (the pre-handshake's import thread does it while the client waits for nothing)."""
    from mnemo.lsp.features import code_actions, code_lens, commands, documents, hover, sidebar  # noqa: F401


def create_server() -> MnemoLanguageServer:
    from mnemo.lsp.features.code_actions import CodeActionsFeature
    from mnemo.lsp.features.code_lens import CodeLensFeature
    from mnemo.lsp.features.commands import CommandsFeature
    from mnemo.lsp.features.documents import AnchorIndex, DocumentsFeature
    from mnemo.lsp.features.hover import HoverFeature
    from mnemo.lsp.features.sidebar import SidebarFeature

    server = MnemoLanguageServer()
    server.documents = server.add_feature(DocumentsFeature(server))
    server.anchors = AnchorIndex(server)
    server.add_feature(HoverFeature(server))
    server.add_feature(CodeLensFeature(server))
    server.add_feature(CodeActionsFeature(server))
    server.add_feature(CommandsFeature(server))
    server.add_feature(SidebarFeature(server))

    @server.feature(t.INITIALIZE)
    def on_initialize(ls: MnemoLanguageServer, params: t.InitializeParams) -> None:
        ls.on_initialize(params)

    @server.feature(t.INITIALIZED)
    async def on_initialized(ls: MnemoLanguageServer, params: t.InitializedParams) -> None:
        ls.spawn(ls.startup(), "startup")
        ls.spawn(ls.branch_watch(), "branch-watch")

    @server.feature(t.SHUTDOWN)
    async def on_shutdown(ls: MnemoLanguageServer, params: Any) -> None:
        for task in list(ls._tasks):
            task.cancel()
        if ls.owner is not None:
            ls.owner.close()

    @server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(ls: MnemoLanguageServer, params: t.DidChangeConfigurationParams) -> None:
        settings = convert.plain(params.settings)
        if isinstance(settings, dict) and settings.get("mnemo") is not None:
            ls.apply_settings(settings)
        else:
            await ls.pull_configuration()
        ls.forget_caches()
        ls.refresh_code_lenses()

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: MnemoLanguageServer, params: t.DidOpenTextDocumentParams) -> None:
        await ls.fan_out("did_open", params)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: MnemoLanguageServer, params: t.DidChangeTextDocumentParams) -> None:
        await ls.fan_out("did_change", params)

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: MnemoLanguageServer, params: t.DidSaveTextDocumentParams) -> None:
        await ls.fan_out("did_save", params)

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: MnemoLanguageServer, params: t.DidCloseTextDocumentParams) -> None:
        await ls.fan_out("did_close", params)

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    async def hover(ls: MnemoLanguageServer, params: t.HoverParams) -> t.Hover | None:
        for result in await ls.fan_out("hover", params):
            if result is not None:
                return result
        return None

    @server.feature(t.TEXT_DOCUMENT_CODE_LENS, _options(server, t.TEXT_DOCUMENT_CODE_LENS))
    async def code_lens(ls: MnemoLanguageServer, params: t.CodeLensParams) -> list[t.CodeLens]:
        out: list[t.CodeLens] = []
        for result in await ls.fan_out("code_lens", params):
            out.extend(result or [])
        return out

    @server.feature(t.CODE_LENS_RESOLVE)
    async def code_lens_resolve(ls: MnemoLanguageServer, lens: t.CodeLens) -> t.CodeLens:
        for result in await ls.fan_out("code_lens_resolve", lens):
            if result is not None:
                return result
        return lens

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION, _options(server, t.TEXT_DOCUMENT_CODE_ACTION))
    async def code_action(ls: MnemoLanguageServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        out: list[t.CodeAction] = []
        for result in await ls.fan_out("code_action", params):
            out.extend(result or [])
        return out

    for feature in server.features:
        for name, fn in feature.commands().items():
            server.command(name)(_command(server, name, fn))
        for name, fn in feature.requests().items():
            server.feature(name)(_request(server, name, fn))
        for name, fn in feature.notifications().items():
            server.feature(name)(_notification(server, name, fn))
    _check_declarations(server)
    return server


def _command(server: MnemoLanguageServer, name: str, fn: Callable[[dict], Awaitable[Any]]):
    async def handler(*args: Any) -> Any:
        server.link_cancellation()
        params = convert.params_object(list(args), name)
        await server.test_delay()
        return await _call(name, fn, params)

    handler.__name__ = f"command_{name}"
    return handler


def _request(server: MnemoLanguageServer, name: str, fn: Callable[[dict], Awaitable[Any]]):
    async def handler(params: Any) -> Any:
        p = convert.params_object(params, name)
        await server.test_delay()
        return await _call(name, fn, p)

    handler.__name__ = f"request_{name}"
    return handler


def _notification(server: MnemoLanguageServer, name: str, fn: Callable[[dict], Awaitable[Any]]):
    async def handler(params: Any) -> None:
        try:
            await fn(convert.params_object(params, name))
        except (JsonRpcException, MnemoError) as exc:
            log.warning("%s: %s", name, exc)

    handler.__name__ = f"notification_{name}"
    return handler


async def _call(name: str, fn: Callable[[dict], Awaitable[Any]], params: dict) -> Any:
    try:
        return await fn(params)
    except MnemoError as exc:
        log.info("%s failed: %s", name, exc)
        raise convert.lsp_error(exc) from exc
    except (TypeError, KeyError, ValueError) as exc:
        if isinstance(exc, JsonRpcException):
            raise
        log.info("%s: bad params: %s", name, exc)
        raise JsonRpcInvalidParams(f"{name}: {exc}", data={"code": "invalid_params"}) from exc


def _expected_errors_filter(record: logging.LogRecord) -> bool:
    """pygls logs every request that ends in an error with a full traceback at ERROR. The errors Mnemo answers on
    purpose (store unavailable or starting, not found, invalid params: a JsonRpcException other than an internal
    error) are normal states already carried by the response; they are not logged. Real failures still are."""
    from pygls.exceptions import JsonRpcException, JsonRpcInternalError

    exc = record.exc_info[1] if record.exc_info else None
    return not (isinstance(exc, JsonRpcException) and not isinstance(exc, JsonRpcInternalError))


def setup_logging(server: MnemoLanguageServer | None) -> None:
    """stderr gets warnings (editors show it in the output channel); the client gets `mnemo.*` records."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    err.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root.addHandler(err)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message body at INFO
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_expected_errors_filter)
    if server is not None:
        handler = LspLogHandler(server)
        handler.setLevel(logging.DEBUG)
        logging.getLogger("mnemo").addHandler(handler)


def main(tcp: bool = False, host: str = "127.0.0.1", port: int = 2087, *, server: MnemoLanguageServer | None = None,
         stdin: Any = None, stdout: Any = None) -> int:
    """Run the server. The pre-handshake (preinit.py) passes the server it built and its own stdin/stdout."""
    server = server or create_server()
    setup_logging(server)
    if tcp:
        server.start_tcp(host, port)
        return 0
    # stdout belongs to the protocol: keep the real stream for pygls, send stray prints to stderr.
    if stdout is None:
        stdout = sys.stdout.buffer
    stdin = stdin or ResyncingStdin(sys.stdin.buffer)
    sys.stdout = sys.stderr
    server.start_io(stdin, stdout)
    return 0


__all__ = ["MnemoLanguageServer", "LanguageFeature", "ResyncingStdin", "create_server", "main", "rss_mb"]
