#!/usr/bin/env bash
# Reproduce the panel's vendored front-end files from the npm registry, at pinned versions.
# The panel never loads anything from the network: these files are committed as package data and
# tests/daemon/test_panel_assets.py checks their sha256 against hebbs/daemon/panel/static/vendor/SHA256SUMS.
set -euo pipefail
cd "$(dirname "$0")/.."
CYTOSCAPE_VERSION=3.34.4
dest=hebbs/daemon/panel/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "cytoscape@${CYTOSCAPE_VERSION}" >/dev/null && tar xzf "cytoscape-${CYTOSCAPE_VERSION}.tgz")
mkdir -p "$dest"
cp "$work/package/dist/cytoscape.min.js" "$dest/cytoscape.min.js"
cp "$work/package/LICENSE" "$dest/cytoscape.LICENSE"
(cd "$dest" && sha256sum cytoscape.min.js cytoscape.LICENSE > SHA256SUMS)
echo "vendored cytoscape ${CYTOSCAPE_VERSION} into $dest:"
cat "$dest/SHA256SUMS"
