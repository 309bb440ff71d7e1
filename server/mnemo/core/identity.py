"""Project identity (normalized origin URL, else root-path hash, `MNEMO_PROJECT_*` overrides) and live git branch.

Reads `.git` files directly (no subprocess on the hot path) so the language server can re-check the branch on every
request cheaply; worktrees and submodules (`.git` as a file with `gitdir:`) are followed.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from mnemo.core import environment
from mnemo.core.models import Context


def find_git_root(start: Path) -> Path | None:
    start = start.resolve()
    for p in [start, *start.parents]:
        if (p / ".git").exists():
            return p
    return None


def _git_dir(root: Path) -> Path | None:
    dotgit = root / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():
        try:
            content = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None
        if content.startswith("gitdir:"):
            gd = Path(content[len("gitdir:"):].strip())
            return gd if gd.is_absolute() else (root / gd).resolve()
    return None


def _common_dir(git_dir: Path) -> Path:
    # Linked worktrees keep refs/config in the common dir.
    common = git_dir / "commondir"
    if common.is_file():
        try:
            rel = common.read_text(encoding="utf-8").strip()
            return (git_dir / rel).resolve()
        except OSError:
            pass
    return git_dir


def normalize_origin(url: str) -> str:
    """`git@github.com:Owner/Repo.git`, `https://github.com/owner/repo/`, `ssh://git@github.com/owner/repo` -> one id."""
    u = url.strip()
    u = re.sub(r"^[a-z+]+://", "", u, flags=re.I)  # scheme
    u = re.sub(r"^[^@/]+@", "", u)  # user@
    if ":" in u.split("/", 1)[0]:  # scp-like host:path  or host:port/path
        host, _, rest = u.partition(":")
        if re.match(r"^\d+/", rest):  # host:port/path
            rest = rest.split("/", 1)[1]
        u = f"{host}/{rest}"
    u = u.rstrip("/")
    if u.endswith(".git"):
        u = u[:-4]
    return u.lower()


def read_origin_url(root: Path) -> str | None:
    gd = _git_dir(root)
    if gd is None:
        return None
    cfg = _common_dir(gd) / "config"
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    section = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s
            continue
        if section and re.match(r'\[remote\s+"origin"\]', section) and s.startswith("url"):
            _, _, val = s.partition("=")
            return val.strip()
    return None


def read_branch(root: Path) -> str | None:
    """The checked-out branch, `detached@<sha8>` for a detached HEAD, None outside git."""
    gd = _git_dir(root)
    if gd is None:
        return None
    try:
        head = (gd / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    return f"detached@{head[:8]}" if head else None


def _ref_exists(common: Path, branch: str) -> bool:
    if (common / "refs" / "heads" / branch).exists():
        return True
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return f" refs/heads/{branch}\n" in packed + "\n"


_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def read_ref(root: Path | str, branch: str) -> str | None:
    """The commit a local branch points at, read from `.git` (the loose ref, else packed-refs): no subprocess, so
    the owner can look on every request for a change of the default branch's head. None when unknown."""
    gd = _git_dir(Path(root))
    if gd is None or not branch or ".." in branch:
        return None
    common = _common_dir(gd)
    try:
        sha = (common / "refs" / "heads" / branch).read_text(encoding="utf-8").strip()
        return sha if _SHA.match(sha) else None
    except OSError:
        pass
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.strip() == f"refs/heads/{branch}" and _SHA.match(sha):
            return sha
    return None


_REFS_KEPT: dict[tuple[str, str], tuple[tuple[Path, ...], tuple, str | None]] = {}
_REFS_LOCK = threading.Lock()


def file_states(paths: tuple[Path, ...]) -> tuple:
    """(inode, size, modification time in ns) of each file, None for one that cannot be stat'ed: what tells a
    file read before from one changed since (git writes a ref or HEAD to a new file and renames it)."""
    out: list[tuple[int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def read_ref_kept(root: Path | str, branch: str) -> str | None:
    """`read_ref`, kept per (root, branch) while the files it reads (`.git`, `commondir`, the loose ref,
    packed-refs) keep their inode, size and modification time: a few `stat` calls instead of opening and parsing
    them, for the owner's look at the default branch before every request (git replaces a ref file when it moves
    it, so a moved ref is read again)."""
    key = (str(root), branch)
    hit = _REFS_KEPT.get(key)
    if hit is not None and file_states(hit[0]) == hit[1]:
        return hit[2]
    paths: tuple[Path, ...] = (Path(root) / ".git",)
    gd = _git_dir(Path(root))
    if gd is not None and branch and ".." not in branch:
        common = _common_dir(gd)
        paths += (gd / "commondir", common / "refs" / "heads" / branch, common / "packed-refs")
    states = file_states(paths)  # before the read: a change meanwhile is read again by the next call
    sha = read_ref(root, branch)
    with _REFS_LOCK:
        _REFS_KEPT[key] = (paths, states, sha)
        while len(_REFS_KEPT) > 256:
            _REFS_KEPT.pop(next(iter(_REFS_KEPT)))
    return sha


def read_branch_start(root: Path | str, branch: str) -> str | None:
    """The commit `branch` was created at: the new commit of the first line of its reflog
    (`logs/refs/heads/<branch>`). None when git kept no reflog for it (a fresh clone's remote branches)."""
    gd = _git_dir(Path(root))
    if gd is None or not branch or ".." in branch:
        return None
    try:
        with open(_common_dir(gd) / "logs" / "refs" / "heads" / branch, encoding="utf-8", errors="replace") as f:
            first = f.readline().split()
    except OSError:
        return None
    return first[1] if len(first) > 1 and _SHA.match(first[1]) else None


def read_default_branch(root: Path, current: str | None) -> str | None:
    env = environment.raw("MNEMO_DEFAULT_BRANCH")
    if env:
        return env
    gd = _git_dir(root)
    if gd is None:
        return current
    common = _common_dir(gd)
    try:
        head = (common / "refs" / "remotes" / "origin" / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: refs/remotes/origin/"):
            return head[len("ref: refs/remotes/origin/"):]
    except OSError:
        pass
    for name in ("main", "master", "trunk", "develop"):
        if _ref_exists(common, name):
            return name
    return current


REQUEST_ENV = {"write_policy": "MNEMO_WRITE_POLICY", "on_conflict": "MNEMO_ON_CONFLICT", "secrets": "MNEMO_SECRETS"}


def request_settings() -> dict[str, str | None]:
    """This process's request-shaped settings, sent with every request in its Context (docs/reliability.md, "The
    settings model"); None when unset (the default applies). Validated where they are applied: a bad value is
    refused with the variable's name, never ignored."""
    return {field: (environment.raw(env) or "").strip().lower() or None for field, env in REQUEST_ENV.items()}


def _user() -> str:
    env = environment.raw("MNEMO_USER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return "local"


@dataclass(frozen=True)
class ProjectIdentity:
    project_id: str
    project_name: str
    root: Path
    origin: str | None


def project_identity(start: Path | str | None = None) -> ProjectIdentity:
    env_root = environment.raw("MNEMO_PROJECT_ROOT")
    base = Path(env_root) if env_root else Path(start or os.getcwd())
    base = base.resolve()
    root = find_git_root(base) or base
    origin = read_origin_url(root)
    if origin:
        norm = normalize_origin(origin)
        pid = "git-" + hashlib.sha256(norm.encode()).hexdigest()[:16]
        name = norm.rsplit("/", 1)[-1] or root.name
    else:
        pid = "path-" + hashlib.sha256(str(root).encode()).hexdigest()[:16]
        name = root.name or "root"
    pid = environment.raw("MNEMO_PROJECT_ID") or pid
    name = environment.raw("MNEMO_PROJECT_NAME") or name
    return ProjectIdentity(pid, name, root, origin)


def detect_context(start: Path | str | None = None) -> Context:
    """The full context of a workspace, with the branch read live from `.git/HEAD`."""
    ident = project_identity(start)
    branch = read_branch(ident.root)
    default = read_default_branch(ident.root, branch)
    if branch is None:
        branch = default = None
    return Context(
        project_id=ident.project_id,
        project_name=ident.project_name,
        root=str(ident.root),
        branch=branch,
        default_branch=default,
        user=_user(),
        origin=ident.origin,
        **request_settings(),
    )
