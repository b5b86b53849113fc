#!/usr/bin/env bash
# Next-token loss against attention density of training-free sparse attention in the default
# text model, over the held-out King James chapters of models/train/kjv.py (the split its model
# card was measured on), in records of 5 verses. Writes the table (bootstrap 95% intervals over
# the records) and the loss-vs-density plot beside this script.
# Usage: docs/repro/text-sparsity/run.sh [build/release]   (needs Debian's bible-kjv)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
exe="${1:-$root/build/release}/app/attnscope"
out="${OUT:-$root/build/repro/text-sparsity}"
mkdir -p "$out"
(cd "$root/models/train" && /usr/bin/python3 -c '
import json, kjv, sys
lines = [l for l in kjv.split_text()[1].split("\n") if l.strip()]
for i in range(0, len(lines), 5):
    sys.stdout.write(json.dumps({"text": "\n".join(lines[i:i + 5])}) + "\n")
') > "$out/kjv_heldout.jsonl"
"$exe" sweep --model default-text --dataset "$out/kjv_heldout.jsonl" \
  --variant "window(size=8|16|32|64)" \
  --variant "sinks_window(sinks=4,window=8|16|32|64)" \
  --variant "topk(k=8|16|32)" \
  --variant "block_topk(block=16,k=1|2|4)" \
  --variant "h2o(heavy=8|16,recent=8)" \
  --out "$here/kjv-heldout.csv" --figure "$here/kjv-heldout.png"
