"""Secrets in text that enters or leaves the store (`find_secrets`, `redact_secrets`, `screen_secrets`).

Provider patterns of our own (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Google, Hugging Face,
SendGrid, npm, PyPI, Azure, Mailgun, Shopify, DigitalOcean, Vault, Discord, Telegram ...), private key blocks, JWTs,
credentials in URLs and auth headers, `name = value` assignments and passwords in prose, plus detect-secrets'
precise detectors in-process (its entropy detectors flag nearly every word of prose on ad-hoc lines, so a stricter
entropy check of our own replaces them). Hex strings (commit SHAs, sha256, UUIDs, Mnemo's own ids and hashes) are
never secrets by entropy alone; base64 that decodes to text or a known file format (JSON, config, PNG, SSH public
keys, SRI hashes) is data, and the decoded text is scanned in turn. A finding never carries the secret itself,
only a redacted preview; nothing here logs a value.

Policy (`MNEMO_SECRETS`): `block` (default) refuses the write with `SecretDetected`; `redact` stores the text with
each secret replaced by `[REDACTED:<kind>]` and the flag `secret_redacted`. core/safety/screen.py is the one place the
rest of Mnemo imports these from.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from mnemo.core import environment
from mnemo.core.errors import InvalidInput, SecretDetected

log = logging.getLogger("mnemo.safety")

# -- secrets ----------------------------------------------------------------------------------------------------

# detect-secrets plugins we run (its entropy and IP detectors are too noisy for prose, see the module docstring).
_DS_PLUGINS = (
    "ArtifactoryDetector", "AWSKeyDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "CloudantDetector",
    "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector", "IbmCloudIamDetector",
    "IbmCosHmacDetector", "JwtTokenDetector", "KeywordDetector", "MailchimpDetector", "NpmDetector",
    "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector", "SendGridDetector", "SlackDetector",
    "SoftlayerDetector", "SquareOAuthDetector", "StripeDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)
_PLACEHOLDER = re.compile(
    r"^(<.*>|\$\{.*\}?|\$\(.*\)?|\{\{.*\}\}|%\(?\w+\)?s?|x+|\*+|\.+|changeme|example|dummy|redacted|none|null|true|"
    r"false|your[-_a-z]*|my[-_a-z]*|os\.environ.*|process\.env.*|env\(.*\)|\$[A-Z_][A-Z0-9_]*|\[redacted.*)$", re.I)

# Precise provider formats: (kind, pattern, group holding the secret (0 = whole match)).
_PROVIDER_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = tuple(
    (k, re.compile(p), g) for k, p, g in (
        ("Private key block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*"
                              r"PRIVATE KEY(?: BLOCK)?-----|$)", 0),
        ("AWS access key id", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z2-7]{16}\b", 0),
        ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", 0),
        ("GitHub fine-grained token", r"\bgithub_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}\b", 0),
        ("GitLab token", r"\bgl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent)-[A-Za-z0-9_\-]{20,}", 0),
        ("Slack token", r"\bxox[abposre]-(?:\d+-)+[A-Za-z0-9\-]{10,}", 0),
        ("Slack webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}", 0),
        ("Stripe key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", 0),
        ("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", 0),
        ("OpenAI-style API key", r"\bsk-(?:proj-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", 0),
        ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b", 0),
        ("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}\b", 0),
        ("SendGrid key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", 0),
        ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
        ("PyPI token", r"\bpypi-AgE[A-Za-z0-9_\-]{40,}", 0),
        ("Azure storage key", r"(?i)\bAccountKey=([A-Za-z0-9+/]{40,}={0,2})", 1),
        ("Azure SAS signature", r"[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})", 1),
        ("Mailgun key", r"\bkey-[0-9a-f]{32}\b", 0),
        ("Shopify token", r"\bshp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}\b", 0),
        ("DigitalOcean token", r"\bdo[opr]_v1_[0-9a-f]{64}\b", 0),
        ("Vault token", r"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}", 0),
        ("Discord bot token", r"\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}\b", 0),
        ("Telegram bot token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{32,33}\b", 0),
        ("Square token", r"\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,43}", 0),
        ("Databricks token", r"\bdapi[0-9a-f]{32}\b", 0),
        ("Linear API key", r"\blin_api_[A-Za-z0-9]{40}\b", 0),
        ("Postman API key", r"\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}\b", 0),
        ("Grafana token", r"\bgl(?:sa|c)_[A-Za-z0-9_\-+/=]{32,}", 0),
        ("New Relic key", r"\bNRAK-[A-Z0-9]{27}\b", 0),
        ("Doppler token", r"\bdp\.(?:st|ct|sa|scim|audit)\.[A-Za-z0-9_\-.]{40,}", 0),
        ("Atlassian token", r"\bATATT3[A-Za-z0-9_\-=]{100,}", 0),
        ("Sentry token", r"\bsntry[su]_[A-Za-z0-9+/=_\-]{40,}", 0),
        ("JSON Web Token", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{10,}", 0),
    )
)
_URL_CREDENTIALS = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://([^\s:/@'\"<>]*):([^\s@/'\"<>]+)@[\w.\-\[\]]+")
_AUTH_HEADER = re.compile(r"(?i)\b(?:authorization\s*[:=]\s*[\"']?)?\b(bearer|basic|token)\s+([A-Za-z0-9\-._~+/]{16,}=*)")
_KEYWORD = (r"api[_\-]?key|apikey|secret(?:[_\-]?key)?|client[_\-]?secret|token|access[_\-]?token|auth[_\-]?token|"
            r"refresh[_\-]?token|passw(?:or)?d|passphrase|pwd|pass(?![a-z])|access[_\-]?key|private[_\-]?key|credentials?|auth|"
            r"signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|key")
_ASSIGNMENT = re.compile(
    r"(?i)([\"']?)\b([A-Za-z0-9_.\-]*(?:" + _KEYWORD + r")[A-Za-z0-9_]*)\1\s*(?::=|=>|[:=])\s*[\"']?([^\s\"',;]{6,})")
_PASSWORD_PROSE = re.compile(
    r"(?i)\b(password|passwd|passphrase|pwd|pass ?code|pin code)\b(?:\s+(?:is|was|=|:)|\s*[:=]|\s+for\s+[\w\- ]{1,30}?"
    r"(?:is|:)|)\s+[\"']?([^\s\"']{6,})")
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{32,}={0,2}(?![A-Za-z0-9+/_\-])")
# Cheap pre-filter: lines with none of these cannot hold a secret we detect (most notes are prose).
_HINT = re.compile(r"[A-Za-z0-9_\-+/=.]{16,}|key|token|secret|pass|pwd|passphrase|auth|bearer|BEGIN|://[^\s]*@|"
                   r"credential|pin code", re.I)
_DATA_CONTEXT = re.compile(r"(?:sha(?:1|224|256|384|512)-|base64,|ssh-(?:rsa|ed25519|dss)\s+|ecdsa-sha2-\S+\s+|"
                           r"sk-ssh-\S+\s+|sha256:|md5:)\s*$", re.I)
_SRI_PREFIX = re.compile(r"(?i)sha(?:1|224|256|384|512)-")
_PUBLIC_BLOCK = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*(?:PUBLIC KEY|CERTIFICATE|CERTIFICATE REQUEST|PGP PUBLIC KEY "
                           r"BLOCK|PGP SIGNATURE|X509 CRL)-----[\s\S]*?-----END [^-]+-----")
_BINARY_MAGIC = (b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"\x1f\x8b", b"PK\x03\x04", b"%PDF", b"RIFF", b"\x00\x00\x00",
                 b"BM", b"OggS", b"fLaC", b"wOF", b"\x00asm", b"\x30\x82")

_ds_lock = threading.Lock()
_ds_settings: dict[str, Any] | None = None


SECRETS_MODES = ("block", "redact")


def secrets_mode(mode: str | None = None) -> str:
    """`block` (default) or `redact`: the caller's value (a client's MNEMO_SECRETS travels in its Context), else
    this process's MNEMO_SECRETS. Anything else is refused (nothing is stored), never silently replaced."""
    mode = (mode if mode is not None else environment.text("MNEMO_SECRETS")).strip().lower() or "block"
    if mode not in SECRETS_MODES:
        raise InvalidInput(f"secrets mode {mode!r} is not one of {', '.join(SECRETS_MODES)}; nothing was stored",
                           hint="fix MNEMO_SECRETS: block (refuse notes holding a secret) or redact")
    return mode


@dataclass(frozen=True)
class SecretFinding:
    kind: str
    line: int
    preview: str  # redacted: the first and last characters only

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Hit:
    kind: str
    start: int
    end: int

    def value(self, text: str) -> str:
        return text[self.start:self.end]


def _redact(value: str) -> str:
    value = value.strip()
    if len(value) <= 12:
        return "*" * min(len(value), 8)
    return f"{value[:3]}…{value[-2:]} ({len(value)} chars)"


def shannon_entropy(s: str) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_PLACEHOLDER_WORDS = frozenset({
    "password", "passwd", "pass", "secret", "changeme", "example", "test", "testing", "admin", "root", "user",
    "username", "pwd", "token", "apikey", "api_key", "xxx", "none", "null", "undefined", "string", "str", "hidden",
    "redacted", "placeholder", "mypassword", "yourpassword", "secretpassword", "passw0rd", "secret_key", "key"})
_PLACEHOLDER_PARTS = re.compile(r"(?i)your[-_ ]?|example|placeholder|[-_]here\b|xxxx|\.\.\.|…|<|>|\*\*\*")


_DOC_PLACEHOLDER = re.compile(r"(?i)your[-_]?|[-_]here\b|xxxx|\.\.\.|…")


def _clean_value(value: str) -> str:
    return value.strip().strip("\"'`*_").rstrip(".,;:)]}*`'\"").lstrip("([{")


def _is_placeholder(value: str) -> bool:
    v = _clean_value(value)
    return (not v or bool(_PLACEHOLDER.match(v)) or v.startswith("[REDACTED")
            or bool(re.match(r"\$\{|\$\(|\$[A-Za-z_]\w*$|%[A-Za-z_]\w*%|\{\{|\{[A-Za-z_]\w*\}|<[^>]*>$", v))
            or v.lower() in _PLACEHOLDER_WORDS or bool(_PLACEHOLDER_PARTS.search(v)))


def _code_like(value: str) -> bool:
    """A code expression or a name, not a literal: `req.body.password`, `String(x)`, `DB_PASS`, `string)`."""
    v = _clean_value(value)
    return (any(c in v for c in "()[]{}<>") or (bool(re.fullmatch(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+", v)) and not re.search(r"\d", v))
            or bool(re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", v)) or bool(re.fullmatch(r"/[\w./-]+", v)))


def _identifier_like(token: str) -> bool:
    """CamelCase or snake_case words (`Jackson2ObjectMapperBuilderCustomizer`, `V20240315__add_column`)."""
    chunks = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", token)
    long_words = sum(len(c) for c in chunks if len(c) >= 4 and c.isalpha())
    return long_words / max(1, len(token)) >= 0.7


def _wordy(value: str) -> bool:
    """Words joined by separators (a header name, a slug, `oauth2-client-credentials`): not a random secret."""
    if re.fullmatch(r"[A-Za-z]+(?:[-_.][A-Za-z]+)*", value):
        return True
    runs = sum(len(r) for r in re.findall(r"[A-Za-z]{4,}", value))
    return runs / max(1, len(value)) > 0.6 and not re.search(r"[A-Z].*[a-z].*[0-9]|[0-9].*[A-Z]", value)


def _printable_ratio(data: bytes) -> float:
    if not data:
        return 0.0
    ok = sum(1 for b in data if 32 <= b < 127 or b in (9, 10, 13))
    return ok / len(data)


def _b64decode(token: str) -> bytes | None:
    t = token.rstrip("=")
    if len(t) < 16:
        return None
    alt = "-_" if ("-" in t or "_" in t) else None
    if alt and ("+" in t or "/" in t):
        return None
    try:
        padded = t + "=" * (-len(t) % 4)
        return base64.urlsafe_b64decode(padded) if alt else base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _looks_random(token: str) -> bool:
    """A long token mixing upper case, lower case and digits with high entropy: a key, not a word or a hash."""
    core = token.rstrip("=")
    if len(core) < 32 or re.fullmatch(r"[0-9a-fA-F\-]+", core):  # hex: commit SHAs, UUIDs, checksums, Mnemo ids
        return False
    if core.count("/") >= 2 and not re.search(r"[+=]", token) and re.search(r"/[a-z]{2,}", core):  # a path
        return False
    if re.fullmatch(r"[a-z0-9_\-]+", core) or re.fullmatch(r"[A-Z0-9_\-]+", core):  # identifiers, slugs
        return False
    if "_" in core and re.fullmatch(r"[A-Za-z]+(?:_[A-Za-z]+)+", core):  # snake/CONSTANT words
        return False
    if _identifier_like(core):
        return False
    classes = sum(bool(re.search(p, core)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes == 3 and shannon_entropy(core) >= 4.2


def _data_not_secret(text: str, start: int, token: str) -> tuple[bool, str | None]:
    """Is this long token encoded data rather than a key? Returns (is_data, decoded text to scan in turn)."""
    before = text[max(0, start - 40):start]
    if _DATA_CONTEXT.search(before) or _SRI_PREFIX.match(token):
        return True, None
    raw = _b64decode(token)
    if raw is None:
        return False, None
    if raw.startswith(_BINARY_MAGIC):
        return True, None
    if len(raw) >= 12 and _printable_ratio(raw) >= 0.95:
        return True, raw.decode("ascii", errors="replace")
    return False, None


def _ds_scan(line: str) -> list[tuple[str, str]]:
    """detect-secrets' precise detectors on one line: [(kind, value)]."""
    global _ds_settings
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import cache_bust, configure_settings_from_baseline
    except ImportError:  # optional: our own patterns still run
        return []
    out = []
    with _ds_lock:  # detect-secrets keeps its settings in module globals
        if _ds_settings is None:  # configured once per process (nothing else here uses detect-secrets): setting
            # them per line (`transient_settings`) cleared its caches and recompiled its patterns every time
            _ds_settings = {"plugins_used": [{"name": n} for n in _DS_PLUGINS]}
            cache_bust()
            configure_settings_from_baseline(_ds_settings)
        try:
            for s in scan_line(line):
                if s.secret_value:
                    out.append((s.type, s.secret_value))
        except Exception as exc:  # noqa: BLE001 - a detector bug must not block every write
            log.warning("detect-secrets failed on a line (%s)", type(exc).__name__)
    return out


def _scan(text: str, depth: int = 0) -> list[_Hit]:
    hits: list[_Hit] = []
    if not text or not _HINT.search(text):
        return hits
    public = [(m.start(), m.end()) for m in _PUBLIC_BLOCK.finditer(text)]

    def add(kind: str, start: int, end: int) -> None:
        if end > start and not any(a <= start < b for a, b in public):
            hits.append(_Hit(kind, start, end))

    _scan_providers(text, add)
    _scan_credentials(text, add)
    _scan_assignments(text, add)
    _scan_tokens(text, depth, add)
    _scan_detect_secrets(text, add)
    return hits


def _scan_providers(text: str, add) -> None:
    for kind, pat, group in _PROVIDER_PATTERNS:
        for m in pat.finditer(text):
            if kind != "Private key block" and _DOC_PLACEHOLDER.search(m.group(group)):
                continue  # `sk-your-key-here`, `AKIA...EXAMPLE`-style documentation
            add(kind, m.start(group), m.end(group))


def _scan_credentials(text: str, add) -> None:
    """Credentials in URLs and in authorization headers."""
    for m in _URL_CREDENTIALS.finditer(text):
        pw = m.group(2)
        if not _is_placeholder(pw) and pw.lower() not in ("password", "pass", "pw", "secret", "token"):
            add("Credentials in URL", m.start(2), m.end(2))
    for m in _AUTH_HEADER.finditer(text):
        scheme, value = m.group(1).lower(), m.group(2)
        if _is_placeholder(value):
            continue
        if scheme == "basic":
            raw = _b64decode(value)
            if raw is not None and b":" in raw:
                add("Basic auth credentials", m.start(2), m.end(2))
        elif len(value) >= 20 and re.search(r"[0-9]", value) and re.search(r"[A-Za-z]", value):
            add("Bearer token", m.start(2), m.end(2))


def _scan_assignments(text: str, add) -> None:
    """`name = value` assignments of secret-sounding names, and passwords in prose."""
    for m in _ASSIGNMENT.finditer(text):
        name, value = m.group(2), _clean_value(m.group(3))
        if _is_placeholder(value) or _code_like(m.group(3)) or value.lower() in ("true", "false", "null", "none"):
            continue
        vstart = m.start(3) + max(0, m.group(3).find(value))
        if re.search(r"(?i)passw|pwd|passphrase|pass$", name):
            if len(value) >= 6 and re.search(r"[0-9!@#$%^&*+=?~]", value):
                add(f"Password ({name})", vstart, vstart + len(value))
        elif re.fullmatch(r"(?i)key", name):  # a bare `key:` is usually not a credential: only random values
            if _looks_random(value):
                add("Secret assignment (key)", vstart, vstart + len(value))
        elif (len(value) >= 12 and shannon_entropy(value) >= 3.0 and re.search(r"[0-9]", value)
              and re.search(r"[A-Za-z]", value) and not _wordy(value)):
            add(f"Secret assignment ({name})", vstart, vstart + len(value))
    for m in _PASSWORD_PROSE.finditer(text):
        value = _clean_value(m.group(2))
        if _code_like(m.group(2)):
            continue
        if (len(value) >= 6 and not _is_placeholder(value) and not value.isalpha()
                and re.search(r"[0-9!@#$%^&*_\-.]", value) and not re.fullmatch(r"[\w\-]+\.(?:md|py|yml|yaml|json|txt|toml)", value)):
            vstart = m.start(2) + max(0, m.group(2).find(value))
            add("Password", vstart, vstart + len(value))


def _scan_tokens(text: str, depth: int, add) -> None:
    """Long random-looking tokens; base64 that decodes to data is scanned in turn (once)."""
    for m in _LONG_TOKEN.finditer(text):
        token = m.group(0)
        if not _looks_random(token):
            continue
        is_data, decoded = _data_not_secret(text, m.start(), token)
        if is_data:
            if decoded and depth == 0 and _scan(decoded, depth + 1):
                add("Base64-encoded secret", m.start(), m.end())
            continue
        add("High-entropy token", m.start(), m.end())


def _scan_detect_secrets(text: str, add) -> None:
    """detect-secrets on the lines that may hold something."""
    offset = 0
    for line in text.split("\n"):
        if _HINT.search(line):
            for kind, value in _ds_scan(line):
                if _is_placeholder(value) or (kind in ("Secret Keyword", "Basic Auth Credentials") and (
                        _code_like(value) or len(_clean_value(value)) < 6
                        or not re.search(r"[0-9!@#$%^&*+=?~]", value) and len(value) < 20)):
                    continue
                pos = line.find(value)
                if pos >= 0:
                    add(kind, offset + pos, offset + pos + len(value))
        offset += len(line) + 1


def _merge(hits: list[_Hit]) -> list[_Hit]:
    """Overlapping hits become one (the most specific kind: the first found, i.e. a provider pattern)."""
    out: list[_Hit] = []
    for h in sorted(hits, key=lambda h: (h.start, -(h.end - h.start))):
        if out and h.start < out[-1].end:
            last = out[-1]
            if h.end > last.end:
                out[-1] = _Hit(last.kind, last.start, h.end)
            continue
        out.append(h)
    return out


def find_secrets(text: str) -> list[SecretFinding]:
    """What in `text` looks like a credential. Empty when nothing does. Findings carry redacted previews only."""
    if not isinstance(text, str) or not text:
        return []
    out = []
    for h in _merge(_scan(text)):
        out.append(SecretFinding(h.kind, text.count("\n", 0, h.start) + 1, _redact(h.value(text))))
    return sorted(out, key=lambda f: (f.line, f.kind))


def _kind_slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", kind.lower().split(" (")[0]).strip("-") or "secret"


def redact_secrets(text: str) -> tuple[str, list[SecretFinding]]:
    """`text` with every secret replaced by `[REDACTED:<kind>]`, and what was replaced."""
    if not isinstance(text, str) or not text:
        return text, []
    hits = _merge(_scan(text))
    if not hits:
        return text, []
    findings = [SecretFinding(h.kind, text.count("\n", 0, h.start) + 1, _redact(h.value(text))) for h in hits]
    parts, last = [], 0
    for h in hits:
        parts.append(text[last:h.start])
        parts.append(f"[REDACTED:{_kind_slug(h.kind)}]")
        last = h.end
    parts.append(text[last:])
    return "".join(parts), findings


def describe_findings(findings: list[SecretFinding], limit: int = 3) -> str:
    parts = [f"{f.kind} on line {f.line} ({f.preview})" for f in findings[:limit]]
    more = len(findings) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _strings(obj: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string leaf of a JSON-like value with its path (metadata to scan)."""
    if isinstance(obj, str):
        return [(path, obj)]
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out += _strings(v, f"{path}.{k}" if path else str(k))
        return out
    if isinstance(obj, list | tuple):
        out = []
        for i, v in enumerate(obj):
            out += _strings(v, f"{path}[{i}]")
        return out
    return []


def _redact_tree(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact_secrets(obj)[0]
    if isinstance(obj, dict):
        return {k: _redact_tree(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_redact_tree(v) for v in obj]
    return obj


def screen_field(value: Any, name: str, action: str, *, mode: str | None = None) -> Any:
    """One free-text side field a person or agent writes (a reason, an anchor's symbol, a branch name) through the
    note's policy: refused under `block`, the secret replaced under `redact`; anything not a string unchanged."""
    if not isinstance(value, str) or not value:
        return value
    return screen_secrets({name: value}, action, mode=mode)[0][name]


def screen_field_tree(value: Any, name: str, action: str, *, mode: str | None = None) -> Any:
    """`screen_field` for a structured field (an anchor: path, symbol, ...): every string in it."""
    return screen_secrets({name: value}, action, mode=mode)[0][name]


def screen_secrets(fields: dict[str, Any], action: str, *, mode: str | None = None) -> tuple[dict[str, Any], bool]:
    """Check every field (text, tags, kind, anchors, provenance ...) before `action` (remember, promote, ...).

    `block`: raises SecretDetected naming the fields and redacted previews. `redact`: returns the fields with the
    secrets replaced and True. Nothing found: the fields unchanged and False.
    """
    mode = secrets_mode(mode)
    found: list[tuple[str, SecretFinding]] = []
    for name, value in fields.items():
        for path, s in _strings(value, name):
            for f in find_secrets(s):
                found.append((path, f))
    if not found:
        return fields, False
    if mode == "redact":
        return {k: _redact_tree(v) for k, v in fields.items()}, True
    where = sorted({p for p, _ in found})
    desc = describe_findings([f for _, f in found])
    raise SecretDetected(
        f"refused to {action}: {', '.join(where)} look{'s' if len(where) == 1 else ''} like {'it holds' if len(where) == 1 else 'they hold'} a secret"
        f" ({desc}); nothing was stored",
        hint="remove the secret and point to where it lives instead (e.g. \"the key is in 1Password: payments/prod\");"
             " or set MNEMO_SECRETS=redact to store the note with the secret replaced by [REDACTED]",
        findings=[{"field": p, **f.to_dict()} for p, f in found][:20])
