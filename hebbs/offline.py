"""hebbs makes no network connection: the switches that keep its libraries offline, set before they load.

onnxruntime (1.29 and later, Linux wheels included) carries 1DS telemetry that is on by default: a
background thread resolves mobile.events.data.microsoft.com every few seconds and the library writes
a device id and an event database under ~/.cache/Microsoft/. Measured on 1.31.1 (tests/reliability/
test_daemon_offline.py traces it): only ORT_DISABLE_TELEMETRY=1 in the environment *before the
library is imported* stops all of it. `disable_telemetry_events()` after the import, or the variable
set after the import, still left the lookups and the files. So every import of onnxruntime in hebbs
goes through import_onnxruntime().
"""

from __future__ import annotations

import logging
import os
import sys
from types import ModuleType

log = logging.getLogger("hebbs.offline")

# What onnxruntime reads when it loads; set for this process and every child it starts.
OFFLINE_ENV = {"ORT_DISABLE_TELEMETRY": "1"}


def disable_telemetry() -> None:
    """Set the switches now, so that whatever imports the libraries later loads them offline."""
    already_loaded = "onnxruntime" in sys.modules
    if already_loaded and any(os.environ.get(k) != v for k, v in OFFLINE_ENV.items()):
        # The decision is latched when the library loads: too late to make it for this process.
        log.warning("onnxruntime was imported before hebbs could disable its telemetry; set %s in the "
                    "environment (or import hebbs.offline first) to keep this process offline",
                    " ".join(f"{k}={v}" for k, v in OFFLINE_ENV.items()))
    os.environ.update(OFFLINE_ENV)


def import_onnxruntime() -> ModuleType:
    """onnxruntime, loaded with its telemetry off."""
    disable_telemetry()
    import onnxruntime

    # Also turn off the events the API controls (a no-op once the variable latched everything off).
    onnxruntime.disable_telemetry_events()
    return onnxruntime
