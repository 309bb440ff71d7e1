"""Safety checks on text that leaves the user's hands: secrets (API keys, tokens, private keys) before a memory is
stored, promoted or exported.

`find_secrets(text)` runs detect-secrets' precise detectors in-process (AWS, GitHub, Slack, Stripe, JWT, private
keys, keyword assignments, credentials in URLs ...) plus a few patterns it misses (OpenAI/Anthropic `sk-` keys,
`NAME_KEY=value` assignments, long random tokens). Its entropy detectors flag nearly every word of prose when
scanning ad-hoc lines, so they are replaced by a stricter check of our own. A finding never carries the secret
itself, only a redacted preview.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass

log = logging.getLogger("mnemo.safety")

# detect-secrets detectors that are too noisy for prose (or are not secrets).
_SKIPPED_DETECTORS = frozenset({"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"})
_PLACEHOLDER = re.compile(r"^(<.*>|\$\{.*\}|\$\(.*\)|\{\{.*\}\}|x+|\*+|\.+|changeme|example|dummy|redacted|none|null|"
                          r"true|false|your[-_a-z]*|os\.environ.*|process\.env.*|env\(.*\))$", re.I)
_EXTRA_PATTERNS = (
    ("Anthropic API Key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("OpenAI-style API Key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{20,}")),
    ("Google API Key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("Hugging Face Token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
)
_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Za-z0-9_.\-]*(?:api[_\-]?key|secret|token|passw(?:or)?d|pwd|access[_\-]?key|private[_\-]?key|"
    r"client[_\-]?secret|auth)[A-Za-z0-9_.\-]*)\s*[:=]\s*[\"']?([^\s\"']{6,})")
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/_\-]{32,}={0,2}")

_scan_lock = threading.Lock()


@dataclass(frozen=True)
class SecretFinding:
    kind: str
    line: int
    preview: str  # redacted: the first and last characters only

    def to_dict(self) -> dict:
        return asdict(self)


def _redact(value: str) -> str:
    value = value.strip()
    if len(value) <= 8:
        return "*" * len(value)
    return f"{value[:3]}…{value[-2:]} ({len(value)} chars)"


def shannon_entropy(s: str) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _looks_random(token: str) -> bool:
    """A long token mixing upper case, lower case and digits with high entropy: a key, not a word or a hash."""
    if len(token) < 32 or re.fullmatch(r"[0-9a-fA-F\-]+", token):  # hex: commit SHAs, UUIDs, checksums
        return False
    if "/" in token and token.count("/") >= 2 and not re.search(r"[+=]", token):  # a path
        return False
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes == 3 and shannon_entropy(token) >= 4.3


def _detect_secrets_lines(lines: list[str]) -> list[tuple[int, str, str]]:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:  # optional: our own patterns still run
        return []
    out = []
    with _scan_lock, default_settings():  # detect-secrets keeps its settings in module globals
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                for s in scan_line(line):
                    if s.type not in _SKIPPED_DETECTORS:
                        out.append((i, s.type, s.secret_value or ""))
            except Exception as exc:  # noqa: BLE001 - a detector bug must not block every write
                log.warning("detect-secrets failed on a line: %s", exc)
    return out


def find_secrets(text: str) -> list[SecretFinding]:
    """What in `text` looks like a credential. Empty when nothing does."""
    if not text:
        return []
    lines = text.splitlines() or [text]
    found: dict[tuple[int, str], SecretFinding] = {}

    def add(line_no: int, kind: str, value: str) -> None:
        key = (line_no, value)
        if key not in found:
            found[key] = SecretFinding(kind, line_no, _redact(value))

    for line_no, kind, value in _detect_secrets_lines(lines):
        add(line_no, kind, value)
    for i, line in enumerate(lines, start=1):
        for kind, pattern in _EXTRA_PATTERNS:
            for m in pattern.finditer(line):
                add(i, kind, m.group(0))
        for m in _ASSIGNMENT.finditer(line):
            value = m.group(2).rstrip(",;)")
            if _PLACEHOLDER.match(value):
                continue
            if re.search(r"(?i)passw|pwd", m.group(1)) and len(value) >= 6 and not value.isalpha():
                add(i, f"Password assignment ({m.group(1)})", value)
            elif shannon_entropy(value) >= 3.0 and re.search(r"[0-9]", value) and re.search(r"[A-Za-z]", value):
                add(i, f"Secret assignment ({m.group(1)})", value)
        for m in _LONG_TOKEN.finditer(line):
            if _looks_random(m.group(0)):
                add(i, "High-entropy token", m.group(0))
    # One finding per secret: detect-secrets and our patterns may both see the same value.
    unique: dict[tuple[int, str], SecretFinding] = {}
    for f in found.values():
        unique.setdefault((f.line, f.preview), f)
    return sorted(unique.values(), key=lambda f: (f.line, f.kind))


def describe_findings(findings: list[SecretFinding], limit: int = 3) -> str:
    parts = [f"{f.kind} on line {f.line} ({f.preview})" for f in findings[:limit]]
    more = len(findings) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


__all__ = ["SecretFinding", "describe_findings", "find_secrets", "shannon_entropy"]
