"""Where the team server is: `MNEMO_TEAM_URL` (e.g. http://127.0.0.1:8765), `MNEMO_TEAM_TOKEN`,
`MNEMO_TEAM_NAMESPACE` (default "default"), `MNEMO_TEAM_CA` (a CA certificate for an https URL), else
`<store>/team.json` (written by `mnemo team connect`). The token goes as `Authorization: Bearer` and
`X-Chroma-Token` to the nginx that `mnemo team serve` puts in front of Chroma (core/team/server.py)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mnemo.core import environment
from mnemo.core import store_settings as config
from mnemo.core.errors import InvalidInput

CONFIG_FILE = "team.json"
DEFAULT_NAMESPACE = "default"


def connect_timeout() -> float:
    """Store-wide: `mnemo config set team_timeout`, MNEMO_TEAM_TIMEOUT."""
    return float(config.value("team_timeout"))


def retry_interval() -> float:
    return float(config.value("team_retry"))


# -- settings ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TeamSettings:
    url: str | None = None
    token: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    source: str = "none"  # env | file | none
    ca_cert: str | None = None  # PEM file to trust for an https URL (else the default CA bundle)

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def endpoint(self) -> tuple[str, int, bool]:
        u = urlsplit(self.url if "://" in (self.url or "") else f"http://{self.url}")
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidInput(f"the team server URL {self.url!r} is not valid",
                               hint="use http://HOST:PORT, e.g. MNEMO_TEAM_URL=http://127.0.0.1:8765")
        ssl = u.scheme == "https"
        return u.hostname, u.port or (443 if ssl else 8000), ssl

    def base_url(self) -> str:
        host, port, ssl = self.endpoint()
        return f"{'https' if ssl else 'http'}://{host}:{port}"

    def headers(self) -> dict[str, str]:
        # Chroma's own token header and the standard bearer form, for a server behind an authenticating proxy.
        if not self.token:
            return {}
        return {"Authorization": f"Bearer {self.token}", "X-Chroma-Token": self.token}

    def validate(self) -> None:
        """The URL parses, and a CA certificate (only for https) loads: refused now, not at the first promotion."""
        _host, _port, ssl = self.endpoint()
        if self.ca_cert and not ssl:
            raise InvalidInput("a CA certificate is only used with an https:// team URL",
                               hint="use the https URL that `mnemo team serve --tls-cert` printed, or drop"
                                    " --ca-cert")
        self.verify()

    def verify(self):
        """What TLS trusts: the configured CA certificate, else the default bundle."""
        if not self.ca_cert:
            return True
        import ssl

        try:
            return ssl.create_default_context(cafile=self.ca_cert)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInput(f"cannot load the team CA certificate {self.ca_cert}: {exc}",
                               hint="pass a PEM file with `mnemo team connect URL --ca-cert FILE` or"
                                    " MNEMO_TEAM_CA") from exc

    def public(self) -> dict[str, Any]:
        return {"url": self.url, "namespace": self.namespace, "token": "set" if self.token else "not set",
                "source": self.source, "ca_cert": self.ca_cert}


def check_namespace(ns: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,62}", ns or ""):
        raise InvalidInput(f"team namespace {ns!r} is not valid", hint="use letters, digits, - and _ (max 63)")
    return ns


def config_path(home: Path) -> Path:
    return Path(home) / CONFIG_FILE


_read_cache: dict[Path, tuple[tuple[int, int, int], Any]] = {}


def _file_data(path: Path) -> Any:
    """team.json's parsed content, None when absent or unreadable; read again only when the file changed (its
    mtime, size or inode: `save_settings` replaces it): every write's neighbour check and every recall ask, and
    a read and parse per call was ~3 % of an imported note's CPU (issue 22, fifth pass)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _read_cache.get(path)
    if hit is not None and hit[0] == sig:
        return hit[1]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = None
    _read_cache[path] = (sig, data)
    return data


def load_settings(home: Path | None) -> TeamSettings:
    """Environment first (`MNEMO_TEAM_*`), then `<store>/team.json`; the environment's token/namespace win."""
    env_url = environment.text("MNEMO_TEAM_URL").strip()
    env_token = environment.raw("MNEMO_TEAM_TOKEN") or None
    env_ns = environment.raw("MNEMO_TEAM_NAMESPACE") or None
    env_ca = environment.raw("MNEMO_TEAM_CA") or None
    if env_url:
        return TeamSettings(env_url, env_token, env_ns or DEFAULT_NAMESPACE, "env", env_ca)
    if home is not None:
        data = _file_data(config_path(home))
        if isinstance(data, dict) and data.get("url"):
            return TeamSettings(str(data["url"]), env_token or data.get("token") or None,
                                env_ns or data.get("namespace") or DEFAULT_NAMESPACE, "file",
                                env_ca or data.get("ca_cert") or None)
    return TeamSettings()


def save_settings(home: Path, url: str, token: str | None = None, namespace: str = DEFAULT_NAMESPACE,
                  ca_cert: str | None = None) -> Path:
    s = TeamSettings(url, token, check_namespace(namespace), "file", ca_cert)
    s.validate()
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    path = config_path(home)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the token is a credential
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token, "namespace": namespace, "ca_cert": ca_cert}, f)
    os.replace(tmp, path)
    return path


def clear_settings(home: Path) -> bool:
    try:
        config_path(home).unlink()
        return True
    except FileNotFoundError:
        return False
