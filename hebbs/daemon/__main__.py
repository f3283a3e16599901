"""`python -m hebbs.daemon`: run the daemon in the foreground (auto-start spawns exactly this)."""

from __future__ import annotations

import logging
import os
import sys

from .main import main

code = main()
# Every vault is closed and the socket is gone by now. Skipping interpreter teardown (which spends
# over a second unloading onnxruntime and friends) lets whoever waits for us to exit go on sooner.
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
