#!/usr/bin/env bash
# Accuracy against attention density of training-free sparse attention in the default vision
# model, over the 10,000 Fashion-MNIST test images (Debian's dataset-fashion-mnist).
# Writes the table (with bootstrap 95% intervals) and the accuracy-vs-density plot.
#   bash docs/repro/vision-sparsity/run.sh [build/release]
set -euo pipefail
cd "$(dirname "$0")/../../.."
exe="${1:-build/release}/app/attnscope"
"$exe" sweep --model default-vision --dataset /usr/share/datasets/fashion-mnist \
  --variant "topk(k=4|8|12|16|24|32|40|48)" \
  --variant "top_p(block=4,p=0.5|0.7|0.8|0.9|0.95|0.99)" \
  --variant "window(size=4|8|16|24|32)" \
  --variant "block_topk(block=4,k=1|2|4|6|8)" \
  --out docs/repro/vision-sparsity/fashion-mnist-test.csv \
  --figure docs/repro/vision-sparsity/fashion-mnist-test.png
