"""Every error hebbs raises on purpose derives from HebbsError and carries a status code.

The status code is the protocol's name for the failure, so the daemon can turn any of these into an
error frame without a lookup table, and the SDK can turn an error frame back into the same class.
"""

from __future__ import annotations

import re


class HebbsError(Exception):
    """Base of every error hebbs raises on purpose."""

    status_code = "INTERNAL"


class InvalidInput(HebbsError, ValueError):
    """The call's arguments are wrong: nothing was changed."""

    status_code = "INVALID_REQUEST"


class KeyReused(InvalidInput):
    """An idempotency key already stored with another text: nothing was stored. The message names the
    memory stored under the key and its text; `memory_id` is that memory's id."""

    status_code = "KEY_REUSED"

    def __init__(self, message: str, memory_id: str | None = None) -> None:
        super().__init__(message)
        if memory_id is None:  # an error frame carries the message alone, which names the memory
            found = re.search(r"\bmemory ([0-9A-HJKMNP-TV-Z]{26})\b", message)
            memory_id = found[1] if found else None
        self.memory_id = memory_id


class Conflict(HebbsError):
    """A note changed since the version the caller last read (a person saved it in their editor, or another
    agent wrote it): nothing was written. The message names the note's current version; `version` is it
    (None: the note no longer exists). Read the note again, merge, and write with that version."""

    status_code = "CONFLICT"

    def __init__(self, message: str, version: str | None = None) -> None:
        super().__init__(message)
        if version is None:  # an error frame carries the message alone, which names the version first
            found = re.search(r"\bversion ([0-9a-f]{16})\b", message)
            version = found[1] if found else None
        self.version = version


class NotFound(HebbsError, KeyError):
    """A memory, session or candidate that does not exist."""

    status_code = "NOT_FOUND"

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else "not found"


class VaultBusy(HebbsError):
    """Another process holds the vault's RocksDB lock."""

    status_code = "VAULT_BUSY"


class VaultNotInitialized(HebbsError):
    """No vault where one was expected."""

    status_code = "VAULT_NOT_INITIALIZED"


class ModelMismatch(HebbsError):
    """The vault was built with another embedding model than the one asked for."""

    status_code = "MODEL_MISMATCH"


class ModelBudgetExceeded(HebbsError):
    """Opening a vault would load its model past the daemon's model memory budget ([daemon] model_memory_mb):
    the models warm for the vaults open now take it. Close those vaults, or raise the budget."""

    status_code = "MODEL_BUDGET"


class CorruptVault(HebbsError):
    """The vault's files cannot be read as a hebbs vault."""

    status_code = "CORRUPT_VAULT"


class DiskFull(HebbsError):
    """The disk holding the vault has no space left: nothing of the write was kept, the vault is not
    damaged, reads go on; the next write after space is freed succeeds."""

    status_code = "DISK_FULL"


class LLMNotConfigured(HebbsError):
    """A command needs an LLM and none is configured; the message names the agent-driven way instead."""

    status_code = "LLM_NOT_CONFIGURED"


class LLMError(HebbsError):
    """The configured LLM server failed (after retries) or refused the request."""

    status_code = "LLM_ERROR"


class ModelError(HebbsError):
    """An embedding model is missing, corrupt or unusable."""

    status_code = "MODEL_ERROR"


class StoreUnavailable(HebbsError):
    """The vault's PostgreSQL cannot be reached (down, restarting, failing over), or every connection of
    the daemon's pool to it stayed busy: nothing of the call was kept; the same call succeeds once the
    server answers again, so it may be retried."""

    status_code = "STORE_UNAVAILABLE"


class AccessDenied(HebbsError):
    """The vault's PostgreSQL refuses this role the vault: its credentials were not granted it (`hebbs team
    grant`), or were revoked. Not retryable: a team lead grants it."""

    status_code = "ACCESS_DENIED"


# Errors that only the daemon protocol raises (the engine never does); hebbs.protocol re-exports them.

class MessageTooLarge(HebbsError):
    """A frame over 16 MiB: the daemon refuses it and closes the connection."""

    status_code = "MESSAGE_TOO_LARGE"


class IndexingInProgress(HebbsError):
    """An index run on this vault is already going; try again when it ends."""

    status_code = "INDEXING_IN_PROGRESS"


class Cancelled(HebbsError):
    """The run was cancelled (Ctrl-C, `hebbs index --cancel` or the Memory Palace's cancel button); what it
    committed stays, and the next run resumes."""

    status_code = "CANCELLED"


class DaemonUnavailable(HebbsError):
    """No daemon answers and none could be started (see $HEBBS_HOME/daemon.log)."""

    status_code = "DAEMON_UNAVAILABLE"
    # Raised by a remember whose outcome is unknown: the idempotency key of each of its memories, in
    # order, to send it again with (hebbs/writekeys.py).
    keys: list[str] = []


class DaemonBusy(DaemonUnavailable):
    """The daemon serves as many connections as it is allowed to; close idle clients or try again shortly."""

    status_code = "BUSY"


class ProtocolError(HebbsError):
    """The other side sent something that is not a valid frame or reply."""

    status_code = "PROTOCOL_ERROR"


ERRORS_BY_CODE: dict[str, type[HebbsError]] = {
    cls.status_code: cls
    for cls in (HebbsError, InvalidInput, KeyReused, Conflict, NotFound, VaultBusy, VaultNotInitialized, ModelMismatch,
                ModelBudgetExceeded,
                CorruptVault, DiskFull, LLMNotConfigured, LLMError, ModelError, MessageTooLarge, IndexingInProgress,
                Cancelled, DaemonUnavailable, DaemonBusy, ProtocolError, StoreUnavailable, AccessDenied)
}
