"""`MnemoLanguageServer`: the pygls `LanguageServer` subclass that owns the state every feature shares.

The executor, the owner link, the settings, the workspace's project and branch, the published state, the open
documents (`documents`, a feature) and the store's answers for the editor (`editor`, with its caches). Features see
it through `mnemo.lsp.feature.Server`. Handlers are coroutines; blocking calls (the owner's socket, a tree-sitter
parse) run in `self.executor`, except on a hover's path, which makes no thread hop: its owner call goes over the
loop's own connection (`owner.LoopChannel`), its code lookup reads the parse kept for the document's version and
its workspace context is kept while `.git` is unchanged (`WorkspaceContexts`); messages come in with one hop each
(`FrameReader`). The store lives
in the owner process (`mnemo.daemon`); this process imports no model, no chromadb and no numpy.
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
from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mnemo import __version__
from mnemo.core import environment
from mnemo.core.errors import MnemoError
from mnemo.editor_settings import Settings, describe_problems, parse_settings
from mnemo.lsp import capabilities, convert
from mnemo.lsp.editor import EditorContext
from mnemo.lsp.feature import LanguageFeature
from mnemo.lsp.features.documents import DocumentsFeature
from mnemo.lsp.jsonrpc import MnemoProtocol, converter_factory
from mnemo.lsp.logs import rss_mb
from mnemo.lsp.owner import (
    FIRST_CONNECT_WAIT_S,
    LOOP_METHODS,
    READY,
    STARTING,
    UNAVAILABLE,
    OwnerLink,
    Unavailable,
    resolve_home,
)
from mnemo.lsp.stdio import ResyncingStdin

log = logging.getLogger("mnemo.lsp")

HEAVY_MODULES = ("numpy", "chromadb", "onnxruntime", "torch", "sentence_transformers", "transformers",
                 "tokenizers", "scipy")


class WorkspaceContexts:
    """`detect_context(root)` per workspace root, kept while the files it read are unchanged.

    `detect_context` reads `.git` (HEAD for the branch, the config for the origin, the default branch's refs) and
    this process's `MNEMO_*` variables; an entry is reused while every one of those files has the same
    (inode, size, modification time) and the variables the same values: a checkout rewrites HEAD, a new origin the
    config, so the next call reads them again. The check is about ten `stat` calls (~70 us), where reading
    and parsing them costs ~0.5 ms: cheap enough for the event loop, so a hover does not hop to a worker thread
    (and contend for the GIL with its own code lookup) to learn the branch."""

    ENV = environment.names("request")  # the variables detect_context reads (the project, the user, settings)
    SIZE = 64

    def __init__(self) -> None:
        self._items: dict[str, tuple[dict[str, Any], tuple[Path, ...], tuple, tuple]] = {}
        self._lock = threading.Lock()

    @classmethod
    def _env(cls) -> tuple:
        return tuple(environment.raw(n) for n in cls.ENV)

    @staticmethod
    def watched(root: Path, project: Path) -> tuple[Path, ...]:
        """Every file `detect_context(root)` reads or looks for (identity.py) when `project` is the project root it
        finds: `.git` from `root` up to the project (every ancestor's when it is not in git), the git dir's HEAD and
        `commondir`, the common dir's config, origin's HEAD, packed-refs and the candidate default branches'
        refs."""
        from mnemo.core import identity

        gd = identity._git_dir(project)  # noqa: SLF001 - the same resolution detect_context makes
        levels = [root, *root.parents]
        if gd is not None and project in levels:
            levels = levels[: levels.index(project) + 1]
        paths = [p / ".git" for p in levels]
        if gd is not None:
            common = identity._common_dir(gd)  # noqa: SLF001
            paths += [gd / "HEAD", gd / "commondir", common / "config", common / "packed-refs",
                      common / "refs" / "remotes" / "origin" / "HEAD",
                      *(common / "refs" / "heads" / n for n in ("main", "master", "trunk", "develop"))]
        return tuple(dict.fromkeys(paths))

    def get(self, root: Path) -> dict[str, Any]:
        """The context of the workspace at `root` (a copy of the kept one is not needed: callers spread it)."""
        from mnemo.core import identity  # lazy for start-up speed (~70 ms with core.models)

        key = str(root)
        env = self._env()
        hit = self._items.get(key)
        if hit is not None and hit[3] == env and identity.file_states(hit[1]) == hit[2]:
            return hit[0]
        # the files' state is taken before they are read: a change made meanwhile is seen by the next call
        env_root = environment.raw("MNEMO_PROJECT_ROOT")
        base = Path(env_root).resolve() if env_root else root.resolve()
        project = identity.find_git_root(base) or base
        paths = self.watched(base, project)
        stats = identity.file_states(paths)
        ctx = dict(identity.detect_context(root).to_dict())
        if Path(str(ctx["root"])) != project:  # the tree changed between the two looks: keep nothing this time
            return ctx
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = (ctx, paths, stats, env)
            while len(self._items) > self.SIZE:
                self._items.pop(next(iter(self._items)))
        return ctx


class FrameReader:
    """What pygls' message loop reads from (`pygls.io_.run_async`): `ResyncingStdin` through one worker-thread
    hop per message. pygls' own reader (`StdinAsyncReader`) takes a hop for every line and for the body, three per
    message, each one waking a pool thread and then the event loop; `ResyncingStdin` holds a whole frame once its
    first line is read, so the blank line and the body are answered here without leaving the loop."""

    def __init__(self, stdin: ResyncingStdin, executor: Any):
        self.stdin = stdin
        self.executor = executor

    async def readline(self) -> bytes:
        if self.stdin.buffered:
            return self.stdin.readline()
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.readline)

    async def readexactly(self, n: int) -> bytes:
        if self.stdin.buffered >= n:
            return self.stdin.read(n)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.read, n)


class MnemoLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(capabilities.SERVER_NAME, __version__,
                         text_document_sync_kind=t.TextDocumentSyncKind(capabilities.TEXT_DOCUMENT_SYNC_KIND),
                         converter_factory=converter_factory, protocol_cls=MnemoProtocol)
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
        self._last_state: dict[str, Any] = {}
        self.active_uri: str | None = None
        self.stdin: Any = None  # what pygls reads (`start_io`)
        self.started_at = time.monotonic()
        self.test_delay_s = environment.number("MNEMO_LSP_TEST_DELAY_MS") / 1000.0
        # the pre-handshake's report (preinit.py): did it answer `initialize`, did pygls agree
        self.preinit: dict[str, Any] = {"answered": False}
        self.owner_starter: Any = None  # preinit.OwnerStarter: the owner it started while pygls loaded, if any
        self.contexts = WorkspaceContexts()  # `ctx_for`'s reads of `.git`, kept while the files are unchanged
        self.documents = DocumentsFeature(self)  # a feature too: `create_server` registers it first
        self.editor = EditorContext(self)

    # -- plumbing --------------------------------------------------------------------------------------------
    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """pygls' `start_io`, reading with `FrameReader` (one thread hop per message, not three)."""
        from pygls import IS_WASM
        from pygls.io_ import StdoutWriter, run_async

        self.stdin = stdin  # its `frame_at` starts a traced request's clock (bench runs, MNEMO_TRACE_FILE)
        if IS_WASM or not isinstance(stdin, ResyncingStdin):
            super().start_io(stdin, stdout)
            return
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(run_async(stop_event=self._stop_event, reader=FrameReader(stdin, self.thread_pool),
                                  protocol=self.protocol, logger=logging.getLogger("pygls.server"),
                                  error_handler=self.report_server_error))
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors outside a request's answer (unparsable input, a failing notification handler) go to the log,
        never to a pop-up. Failed requests already carry their error in the response."""
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
        if self.owner is None or self.owner.state == STARTING:  # the first connection (which may start the owner)
            await self.until_connected(FIRST_CONNECT_WAIT_S)   # is under way: wait for it, then answer
        if self.owner is None:
            raise Unavailable("Mnemo unavailable: the language server is starting",
                              hint="wait a moment; it connects after `initialized`")
        if method in LOOP_METHODS and self.owner.channel.free:  # no thread hop (a second one meanwhile: the pool)
            return await self.owner.channel.call(method, *args, **kw)
        return await self.run_blocking(self.owner.call, method, *args, **kw)

    @property
    def ready(self) -> bool:
        return self.owner is not None and self.owner.state == READY

    async def until_connected(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) while the owner link is still being made: after `initialized` the
        first connection may start the owner, and a hover asked meanwhile should get the answer, not nothing.
        True when the link is ready."""
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:
            if self.owner is not None and self.owner.state != STARTING:
                break  # unavailable: the degraded answer, at once
            await asyncio.sleep(0.01)
        return self.ready

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
        """The Context of the workspace holding `uri`, as live as reading `.git` on every call (the branch from
        .git/HEAD): read once per workspace, then reused while none of the git files it was read from changed
        (`WorkspaceContexts`: a few `stat` calls instead of reading and parsing them, so a hover can ask on the
        event loop)."""
        # the editor's setting travels with each request
        return {**self.contexts.get(self.root_for(uri or self.active_uri)), "write_policy": self.settings.write_policy}

    @staticmethod
    def rel_path(uri: str | None, ctx: dict[str, Any]) -> str | None:
        if not uri:
            return None
        p = to_fs_path(uri)
        return convert.rel_path(p, ctx) if p else None

    def forget_caches(self) -> None:
        self.editor.forget()

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
                res = await self.editor.active_skills(self.active_uri, ctx=ctx)
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
        """After a write: caches dropped, every feature's `invalidate` hook, the client told, lenses refreshed."""
        self.forget_caches()
        for f in self.features:
            try:
                f.invalidate()
            except Exception:  # noqa: BLE001 - one feature must not stop the others
                log.exception("%s.invalidate failed", type(f).__name__)
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

    async def on_initialized(self) -> None:
        self.spawn(self.startup(), "startup")
        self.spawn(self.branch_watch(), "branch-watch")

    async def on_shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.owner is not None:
            self.owner.close()
            self.owner.channel.close()  # (on the loop, which owns it)

    async def on_configuration(self, params: t.DidChangeConfigurationParams) -> None:
        settings = convert.plain(params.settings)
        if isinstance(settings, dict) and settings.get("mnemo") is not None:
            self.apply_settings(settings)
        else:
            await self.pull_configuration()
        self.forget_caches()
        self.refresh_code_lenses()

    async def startup(self) -> None:
        if self.settings_problems:
            self.show(describe_problems(self.settings_problems), t.MessageType.Warning)
        await self.pull_configuration()
        home = resolve_home(self.settings.home)
        starting = None
        starter = self.owner_starter
        if starter is not None:
            await self.run_blocking(starter.join, FIRST_CONNECT_WAIT_S)
            self.preinit["ownerStart"] = starter.outcome
            if starter.proc is not None and starter.home == home and self.settings.owner.autostart:
                starting = starter.proc
        self.owner = OwnerLink(home, autostart=self.settings.owner.autostart, on_state=self.on_owner_state,
                               starting=starting)
        await self.publish_state(force=True, skills=False)
        ok = await self.run_blocking(self.owner.connect)
        if not ok:
            return  # on_owner_state warned and started the retry loop
        self.spawn(self.owner.channel.open(), "owner-loop-channel")
        for f in self.features:
            if type(f).owner_ready is not LanguageFeature.owner_ready:
                self.spawn(f.owner_ready(), f"{type(f).__name__}.owner_ready")

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
        """Call the coroutine hook `hook` (a `LanguageFeature` method) on every feature, in registration order; a
        failing feature is logged and skipped."""
        results = []
        for f in self.features:
            fn = getattr(f, hook)
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
                        "recallCache": dict(self.editor.stats), "preinit": dict(self.preinit),
                        "ownerCalls": self.owner.call_counts() if self.owner is not None else {},
                        "heavyModules": sorted(m for m in HEAVY_MODULES if m in sys.modules)}}


__all__ = ["HEAVY_MODULES", "MnemoLanguageServer"]
