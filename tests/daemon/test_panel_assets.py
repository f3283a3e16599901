"""The panel's vendored front-end files are exactly what scripts/vendor_panel_assets.sh fetches from npm."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import hebbs.daemon.panel

STATIC = Path(hebbs.daemon.panel.__file__).parent / "static"
VENDOR = STATIC / "vendor"
# Cytoscape.js 3.34.4 from the npm registry (dist/cytoscape.min.js and its LICENSE).
EXPECTED = {
    "cytoscape.min.js": "081591ab735b2b6a3b31a3c60f8f3a3e2fee8c92939e0c7820ad1208571b6cd8",
    "cytoscape.LICENSE": "eb319c6e6f233607f71e8e2f450391751883cfc0eeb3ca7ef574c13d1d9c2203",
}


def test_vendored_files_match_their_pinned_checksums() -> None:
    for name, digest in EXPECTED.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    listed = dict(reversed(line.split()) for line in (VENDOR / "SHA256SUMS").read_text().splitlines())
    assert listed == EXPECTED


def test_the_vendor_script_pins_the_same_version_and_the_license_ships() -> None:
    script = (Path(__file__).parents[2] / "scripts" / "vendor_panel_assets.sh").read_text()
    assert re.search(r"^CYTOSCAPE_VERSION=3\.34\.4$", script, re.M)
    assert "Permission is hereby granted" in (VENDOR / "cytoscape.LICENSE").read_text()


def test_no_page_asset_points_outside_the_panel() -> None:
    """Works offline: no script, style or font is loaded from another origin."""
    for path in STATIC.glob("*.*"):
        text = path.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), path
        assert "@import" not in text and "url(http" not in text, path
    pages = (STATIC.parent / "pages.py").read_text()
    assert not re.search(r"""(src|href)=["'](https?:)?//""", pages)
