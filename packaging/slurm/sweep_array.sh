#!/usr/bin/env bash
# A parameter sweep of attention variants as a Slurm array job: every array task runs one shard
# of the sweep (`attnscope sweep --shard i/n`), and a merge step joins the shard tables into the
# table (and trade-off plot) that a single run would have written.
#
#   sbatch packaging/slurm/sweep_array.sh                  # 8 shards, tasks 0..7
#   sbatch --dependency=afterok:<job id> packaging/slurm/sweep_array.sh merge
#
# Settings come from the environment (defaults in brackets): ATTNSCOPE [attnscope on PATH],
# MODEL [default-text], TEXT [input text file: input.txt], OUT [sweep-out].
# Without Slurm, `SHARD=0 SHARDS=2 bash sweep_array.sh` runs one shard by hand.
#SBATCH --job-name=attnscope-sweep
#SBATCH --array=0-7
#SBATCH --cpus-per-task=8
#SBATCH --mem=8G
#SBATCH --time=02:00:00
#SBATCH --output=attnscope-sweep-%A_%a.log
set -euo pipefail

ATTNSCOPE=${ATTNSCOPE:-attnscope}
MODEL=${MODEL:-default-text}
TEXT=${TEXT:-input.txt}
OUT=${OUT:-sweep-out}
mkdir -p "$OUT"

if [ "${1:-}" = "merge" ]; then
  exec "$ATTNSCOPE" sweep --merge "$OUT"/shard-*.csv --out "$OUT/sweep.csv" \
    --figure "$OUT/tradeoff.pdf"
fi

# Shard index and count: Slurm's array variables, or SHARD/SHARDS by hand.
if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  SHARD=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))
  SHARDS=${SLURM_ARRAY_TASK_COUNT:-$((SLURM_ARRAY_TASK_MAX - ${SLURM_ARRAY_TASK_MIN:-0} + 1))}
fi
SHARD=${SHARD:-0}
SHARDS=${SHARDS:-1}

# Every shard must expand the same list of variants (same --variant flags, same order).
"$ATTNSCOPE" sweep --model "$MODEL" --text-file "$TEXT" \
  --variant "window(size=16..1024:x2)" \
  --variant "sinks_window(sinks=4,window=16..1024:x2)" \
  --variant "block_topk(block=64,k=1..16:x2)" \
  --variant "top_p(p=0.5|0.8|0.9|0.95|0.99)" \
  --threads "${SLURM_CPUS_PER_TASK:-0}" \
  --shard "$SHARD/$SHARDS" --out "$OUT/shard-$SHARD.csv"
