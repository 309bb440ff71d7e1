"""The exception tree of Mnemo. Every error a user can fix says what happened, why, and what to do.

    MnemoError                      base; `.hint` says what to do, `.code` is a stable machine name
    ├── InvalidInput                bad argument: empty text, unknown scope/type, too large ...
    │   └── ScopeError              e.g. a direct write to `global` (promote instead)
    ├── NotFound                    no memory / block / skill with that id
    ├── StoreError                  the store cannot be opened or written
    │   ├── StoreNotWritable        directory permissions
    │   ├── StoreLocked             another process holds the store and is not a compatible owner
    │   └── StoreCorrupt            SQLite damaged; `mnemo doctor` repairs
    ├── DaemonError                 the owner process could not be reached or started
    │   └── VersionMismatch         the owner speaks another protocol version
    ├── ModelError                  the embedding model could not be loaded
    ├── SnapshotError               a snapshot is invalid (checksums, format, size); nothing changed
    ├── SecretDetected              the text contains what looks like a secret; nothing stored
    └── TeamUnavailable             the team server is unreachable; local scopes keep working
"""

from __future__ import annotations


class MnemoError(Exception):
    code = "mnemo_error"

    def __init__(self, message: str, hint: str | None = None, **details):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, "code": self.code, "message": self.message, "hint": self.hint,
                "details": self.details}

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidInput(MnemoError):
    code = "invalid_input"


class ScopeError(InvalidInput):
    code = "scope_error"


class NotFound(MnemoError):
    code = "not_found"


class StoreError(MnemoError):
    code = "store_error"


class StoreNotWritable(StoreError):
    code = "store_not_writable"


class StoreLocked(StoreError):
    code = "store_locked"


class StoreCorrupt(StoreError):
    code = "store_corrupt"


class DaemonError(MnemoError):
    code = "daemon_error"


class VersionMismatch(DaemonError):
    code = "version_mismatch"


class ModelError(MnemoError):
    code = "model_error"


class SnapshotError(MnemoError):
    code = "snapshot_error"


class SecretDetected(MnemoError):
    code = "secret_detected"


class TeamUnavailable(MnemoError):
    code = "team_unavailable"


ERRORS_BY_NAME: dict[str, type[MnemoError]] = {
    cls.__name__: cls
    for cls in [MnemoError, InvalidInput, ScopeError, NotFound, StoreError, StoreNotWritable, StoreLocked,
                StoreCorrupt, DaemonError, VersionMismatch, ModelError, SnapshotError,
                SecretDetected, TeamUnavailable]
}


def error_from_dict(data: dict) -> MnemoError:
    cls = ERRORS_BY_NAME.get(data.get("type", ""), MnemoError)
    err = cls(data.get("message", "unknown error"), data.get("hint"), **(data.get("details") or {}))
    return err
