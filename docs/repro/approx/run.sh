#!/usr/bin/env bash
# Top-Theta thresholds and delta correction on the embedded default-text model (GPT-2 shape,
# 2 layers, context 256), substituted in every layer and head, over consecutive 800-character
# windows of the held-out King James chapters (docs/repro/streaming/kjv_heldout.txt). For each
# window `attnscope analyze` runs dense and every variant end to end; summarise.py averages the
# kept fraction, next-token KL, top-1 agreement and perplexity over the windows.
# Usage: docs/repro/approx/run.sh [path/to/attnscope] (OUT defaults to build/repro/approx)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../../../build/release/app/attnscope}"
out="${OUT:-$here/../../../build/repro/approx}"
windows="${WINDOWS:-20}"
mkdir -p "$out"
text="$here/../streaming/kjv_heldout.txt"

variants='top_theta(calibrate=0.05);top_theta(calibrate=0.1);top_theta(calibrate=0.2)'
variants+=';top_theta(calibrate=0.3);top_theta(calibrate=0.5)'
variants+=';sinks_window(sinks=4,window=16)'
variants+=';sinks_window(sinks=4,window=16)+delta(stride=16)'
variants+=';sinks_window(sinks=4,window=16)+delta(stride=8)'
variants+=';sinks_window(sinks=4,window=16)+delta(stride=4)'
variants+=';sinks_window(sinks=4,window=32)'
variants+=';sinks_window(sinks=4,window=32)+delta(stride=16)'
variants+=';sinks_window(sinks=4,window=32)+delta(stride=8)'

for ((w = 0; w < windows; ++w)); do
  head -c $(((w + 1) * 800)) "$text" | tail -c 800 > "$out/window_$w.txt"
  "$bin" analyze --model default-text --text-file "$out/window_$w.txt" --threads 1 \
    --variants "$variants" --json "$out/window_$w.json" > /dev/null
done
python3 "$here/summarise.py" "$out" "$windows" > "$here/summary.json"
cat "$here/summary.json"
