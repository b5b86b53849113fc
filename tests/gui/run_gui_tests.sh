#!/usr/bin/env bash
# Runs the GUI test binary on a virtual X display with a private runtime dir (Qt insists on 0700).
# Screenshots go to $ATTNSCOPE_SCREENSHOT_DIR when set (e.g. docs/screenshots).
set -euo pipefail
bin="$1"
shift
rt="$(mktemp -d)"
chmod 700 "$rt"
trap 'rm -rf "$rt"' EXIT
export XDG_RUNTIME_DIR="$rt" QT_QPA_PLATFORM=xcb
exec xvfb-run -a -s "-screen 0 1600x1000x24" "$bin" "$@"
