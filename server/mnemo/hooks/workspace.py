"""The workspace context a hook sends with its request, computed with the standard library only.

`mnemo.core.identity.detect_context` is the definition (normalized `origin` URL or root-path hash, `MNEMO_PROJECT_*`
overrides, the branch read live from `.git/HEAD`, the default branch, the user, the request-shaped settings);
importing it costs a hook more than the rest of its work (dataclasses, the data model), so this mirrors it for
the hook's fast path. `tests/unit/test_hook_workspace.py` checks both give the same context on the cases that
matter (ssh/https origins, no origin, worktrees, detached HEAD, overrides); a change to one is a change to both.
The owner's socket path is mirrored the same way (`mnemo.daemon.paths.socket_path`).
"""

from __future__ import annotations

import hashlib
import os
import re

from mnemo.core import environment

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (no `typing` import: a hook's start-up)
    from mnemo import api

_MAX_SUN_PATH = 100
REQUEST_ENV = {"write_policy": "MNEMO_WRITE_POLICY", "on_conflict": "MNEMO_ON_CONFLICT", "secrets": "MNEMO_SECRETS"}


def socket_path(home: str) -> str:
    p = os.path.join(home, "mnemo.sock")
    if len(p) < _MAX_SUN_PATH:
        return p
    digest = hashlib.sha256(os.path.realpath(home).encode()).hexdigest()[:16]
    return os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"mnemo-{os.getuid()}-{digest}.sock")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def find_git_root(start: str) -> str | None:
    p = os.path.realpath(start)
    while True:
        if os.path.exists(os.path.join(p, ".git")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def git_dir(root: str) -> str | None:
    dotgit = os.path.join(root, ".git")
    if os.path.isdir(dotgit):
        return dotgit
    if os.path.isfile(dotgit):
        content = (_read(dotgit) or "").strip()
        if content.startswith("gitdir:"):
            gd = content[len("gitdir:"):].strip()
            return gd if os.path.isabs(gd) else os.path.realpath(os.path.join(root, gd))
    return None


def common_dir(gd: str) -> str:
    rel = _read(os.path.join(gd, "commondir"))
    return os.path.realpath(os.path.join(gd, rel.strip())) if rel is not None else gd


def normalize_origin(url: str) -> str:
    u = url.strip()
    u = re.sub(r"^[a-z+]+://", "", u, flags=re.I)
    u = re.sub(r"^[^@/]+@", "", u)
    if ":" in u.split("/", 1)[0]:
        host, _, rest = u.partition(":")
        if re.match(r"^\d+/", rest):
            rest = rest.split("/", 1)[1]
        u = f"{host}/{rest}"
    u = u.rstrip("/")
    if u.endswith(".git"):
        u = u[:-4]
    return u.lower()


def origin_url(root: str) -> str | None:
    gd = git_dir(root)
    text = _read(os.path.join(common_dir(gd), "config")) if gd else None
    section = None
    for line in (text or "").splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s
            continue
        if section and re.match(r'\[remote\s+"origin"\]', section) and s.startswith("url"):
            return s.partition("=")[2].strip()
    return None


def branch(root: str) -> str | None:
    gd = git_dir(root)
    raw = _read(os.path.join(gd, "HEAD")) if gd else None
    if raw is None:
        return None
    head = raw.strip()
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    return f"detached@{head[:8]}" if head else None


def default_branch(root: str, current: str | None) -> str | None:
    env = environment.raw("MNEMO_DEFAULT_BRANCH")
    if env:
        return env
    gd = git_dir(root)
    if gd is None:
        return current
    common = common_dir(gd)
    head = (_read(os.path.join(common, "refs", "remotes", "origin", "HEAD")) or "").strip()
    if head.startswith("ref: refs/remotes/origin/"):
        return head[len("ref: refs/remotes/origin/"):]
    packed = (_read(os.path.join(common, "packed-refs")) or "") + "\n"
    for name in ("main", "master", "trunk", "develop"):
        if os.path.exists(os.path.join(common, "refs", "heads", name)) or f" refs/heads/{name}\n" in packed:
            return name
    return current


def user() -> str:
    env = environment.raw("MNEMO_USER")
    if env:
        return env
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import pwd

        return pwd.getpwuid(os.getuid())[0]
    except (ImportError, KeyError):
        return "local"


def context(start: str | None) -> api.Ctx:
    """What `detect_context(start).to_dict()` returns."""
    env_root = environment.raw("MNEMO_PROJECT_ROOT")
    base = os.path.realpath(env_root or start or os.getcwd())
    root = find_git_root(base) or base
    origin = origin_url(root)
    if origin:
        norm = normalize_origin(origin)
        pid = "git-" + hashlib.sha256(norm.encode()).hexdigest()[:16]
        name = norm.rsplit("/", 1)[-1] or os.path.basename(root)
    else:
        pid = "path-" + hashlib.sha256(root.encode()).hexdigest()[:16]
        name = os.path.basename(root) or "root"
    pid = environment.raw("MNEMO_PROJECT_ID") or pid
    name = environment.raw("MNEMO_PROJECT_NAME") or name
    br = branch(root)
    default = default_branch(root, br)
    if br is None:
        br = default = None
    def setting(field: str) -> str | None:
        return (environment.raw(REQUEST_ENV[field]) or "").strip().lower() or None

    return {"project_id": pid, "project_name": name, "root": root, "branch": br, "default_branch": default,
            "user": user(), "origin": origin, "write_policy": setting("write_policy"),
            "on_conflict": setting("on_conflict"), "secrets": setting("secrets")}
