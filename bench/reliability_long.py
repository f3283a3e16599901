"""The long reliability run: every storage fault test including the heavy variants (the whole
corruption matrix, 20 kills during remember batches, 12 during indexing), then the daemon's.

    .venv/bin/python -m bench.reliability_long [extra pytest arguments]

The default `pytest` run leaves the tests marked slow out; this runs them all and prints pytest's
summary with the time each took.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-m", "", "--durations=15", "-q",
                              str(ROOT / "tests" / "reliability"), *sys.argv[1:]], cwd=ROOT))
