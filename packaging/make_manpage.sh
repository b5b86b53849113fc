#!/usr/bin/env bash
# Writes the man page attnscope.1 from the built program's --help (help2man), with a section per
# verb taken from `attnscope VERB --help`, so the page cannot drift from the program.
# Usage: make_manpage.sh BUILT_ATTNSCOPE OUT.1
set -euo pipefail
exe=$(realpath "$1")
out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Run it as plain `attnscope` (found on PATH) so usage lines do not show the build directory.
mkdir "$work/bin"
ln -s "$exe" "$work/bin/attnscope"
export PATH="$work/bin:$PATH" QT_QPA_PLATFORM=offscreen

# help2man's include file: one [section] per verb, the verb's help as preformatted text.
verbs=$(attnscope --help | awk '/^Subcommands:/ {on = 1; next} on && NF == 0 {on = 0} on {print $1}')
{
  echo "[name]"
  echo "attnscope \\- run, compare and measure attention variants"
  echo "[description]"
  echo "With no verb, attnscope opens the desktop app; with a session file"
  echo "(\\fIFILE\\fR.attnscope.json) as its only argument, the app opens that session."
  echo "Every verb prints its options with \\fBattnscope\\fR \\fIVERB\\fR \\fB\\-\\-help\\fR."
  echo
  echo "[verbs]"
  for v in $verbs; do
    echo ".SS \"attnscope $v\""
    echo ".nf"
    # Drop each verb's copy of the exit codes (printed once under EXIT STATUS); escape backslashes
    # and leading dots for roff.
    attnscope "$v" --help | grep -v '^Exit codes:' | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./'
    echo ".fi"
  done
  echo "[environment]"
  echo ".TP"
  echo ".B ATTNSCOPE_MODELS"
  echo "A folder holding default\\-text and default\\-vision, looked in first."
  echo "[files]"
  echo ".TP"
  echo ".I /usr/share/attnscope/models"
  echo "The embedded models default\\-text and default\\-vision."
  echo ".TP"
  echo ".I /usr/share/attnscope/samples, /usr/share/attnscope/images"
  echo "Sample text and images."
  echo "[see also]"
  echo "The README and the session format: /usr/share/doc/attnscope."
} > "$work/verbs.h2m"

help2man --no-info --no-discard-stderr --section 1 --source "attnscope" \
  --manual "User Commands" --include "$work/verbs.h2m" --output "$out" attnscope
