#!/usr/bin/env bash
# Regenerates the README figures: one per preset, drawn by the attnscope CLI from the sessions in
# docs/sessions/ (every figure gets a sidecar <figure>.attnscope.json that regenerates it).
#   bash docs/figures/make_figures.sh            # uses build/release/app/attnscope
set -euo pipefail
cd "$(dirname "$0")/../.."
CLI=${ATTNSCOPE:-build/release/app/attnscope}
S=docs/sessions
O=docs/figures

"$CLI" render --session $S/text.attnscope.json --view heatmap --width 1000 --out $O/heatmap.png
"$CLI" render --session $S/text.attnscope.json --view variants --out $O/variants.png
"$CLI" render --session $S/text.attnscope.json --view grid --out $O/grid.png
"$CLI" render --session $S/text.attnscope.json --view sinks --height 640 --out $O/sinks.png
"$CLI" render --session $S/text.attnscope.json --view tokens --out $O/tokens.png
"$CLI" render --session $S/image.attnscope.json --view image --out $O/image.png
# A parameter sweep on the same input: its table and its trade-off plot.
"$CLI" sweep --session $S/text.attnscope.json --threads 1 \
  --variant "window(size=2..32:x2)" --variant "sinks_window(sinks=1,window=2..32:x2)" \
  --variant "block_topk(block=4,k=1..8:+1)" \
  --out $O/tradeoff.csv --figure $O/tradeoff.png --width 1400 --height 640 --dpi 200
