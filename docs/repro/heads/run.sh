#!/usr/bin/env bash
# Head-role atlas of the embedded default-text model over the held-out King James chapters
# (models/train/kjv.py's held-out split, 30 chapters, the split its model card was measured on),
# with every head zero-ablated alone on the same windows; then activation patching on one
# clean/corrupt pair. JSON and figures land beside this script.
# Usage: docs/repro/heads/run.sh [path/to/attnscope]   (needs Debian's bible-kjv for the text)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
bin="${1:-$root/build/release/app/attnscope}"
out="${OUT:-$root/build/repro/heads}"
mkdir -p "$out"
(cd "$root/models/train" && /usr/bin/python3 -c \
  'import kjv, sys; sys.stdout.write(kjv.split_text()[1])') > "$out/kjv_heldout.txt"
# The card's protocol: 32 windows of BOS + 255 tokens at evenly spaced offsets, 32 sequences
# BOS + R + R with |R| = 50; 1000 bootstrap resamples over windows (sequences) for the 95%
# intervals.
"$bin" heads --model default-text --text-file "$out/kjv_heldout.txt" --ablate-each zero \
  --json "$here/atlas.json" --figure "$here/atlas.png" --ablation-figure "$here/ablation_zero.png" \
  | tee "$here/atlas.txt"
"$bin" heads --model default-text --text-file "$out/kjv_heldout.txt" --ablate-each mean \
  --repeats 0 --json "$here/ablation_mean.json" --ablation-figure "$here/ablation_mean.png" \
  > "$here/ablation_mean.txt"
"$bin" heads --model default-text --text-file "$out/kjv_heldout.txt" --ablate-each corpus-mean \
  --repeats 0 --json "$here/ablation_corpus_mean.json" > "$here/ablation_corpus_mean.txt"
clean='And the LORD spake unto Moses, saying, Speak unto the children of'
corrupt='And the LORD spake unto Aaron, saying, Speak unto the children of'
for over in heads positions patterns; do
  "$bin" patch --model default-text --clean "$clean" --corrupt "$corrupt" \
    --target ' Israel' --foil ' Aaron' --over "$over" \
    --json "$here/patch_$over.json" --figure "$here/patch_$over.png" | tee "$here/patch_$over.txt"
done
