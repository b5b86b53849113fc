#!/usr/bin/env bash
# Streaming perplexity of the embedded default-text model (GPT-2 shape, learned positions,
# context 256) over held-out King James chapters (models/train/kjv.py's held-out split: its
# first chapters, ~26,000 characters, 7,039 tokens), token by token under KV-cache policies.
# Full curves go to OUT (JSON, CSV); the figures and summary.json land beside this script.
# Usage: docs/repro/streaming/run.sh [path/to/attnscope] (OUT defaults to build/repro/streaming)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../../../build/release/app/attnscope}"
out="${OUT:-$here/../../../build/repro/streaming}"
mkdir -p "$out"
text="$here/kjv_heldout.txt"

# Eviction at equal budgets (64 and 128 entries per layer and head, the current token included).
# The stream starts with <|endoftext|> (--bos), the token every training window began with.
"$bin" stream --model default-text --text-file "$text" --bos --threads 1 \
  -p kv_full \
  -p 'kv_recent(window=64)' -p 'kv_streaming(sinks=1,window=63)' \
  -p 'kv_streaming(sinks=4,window=60)' \
  -p 'kv_h2o(budget=64,recent=32)' -p 'kv_tova(budget=64)' \
  -p 'kv_recent(window=128)' -p 'kv_streaming(sinks=4,window=124)' \
  -p 'kv_h2o(budget=128,recent=64)' -p 'kv_tova(budget=128)' \
  --json "$out/eviction.json" --csv "$out/eviction.csv" --figure "$here/eviction.png"

# The same text without the leading <|endoftext|>: the first text tokens are the sinks.
"$bin" stream --model default-text --text-file "$text" --threads 1 \
  -p 'kv_recent(window=64)' -p 'kv_streaming(sinks=4,window=60)' \
  --json "$out/no_bos.json"

# KV precision at one eviction policy (sinks + window, 128 entries).
base='kv_streaming(sinks=4,window=124)'
"$bin" stream --model default-text --text-file "$text" --bos --threads 1 \
  -p "$base" -p "$base+kv_fp16" -p "$base+kv_bf16" \
  -p "$base+kv_fp8(format=e4m3)" -p "$base+kv_fp8(format=e5m2)" \
  -p "$base+kv_quant(bits=8,group=32)" -p "$base+kv_quant(bits=4,group=32)" \
  -p "$base+kv_quant(bits=2,group=32)" \
  -p "$base+kv_quant(bits=2,group=32,k_axis=token)" \
  --json "$out/precision.json" --csv "$out/precision.csv" --figure "$here/precision.png"

# What layer 1, KV head 0 holds at every step under four policies (first 600 tokens, a prefill
# of 100 that kv_snapkv compresses).
"$bin" stream --model default-text --text-file "$text" --bos --threads 1 --max-tokens 600 \
  --prefill 100 -p 'kv_streaming(sinks=4,window=60)' -p 'kv_h2o(budget=64,recent=32)' \
  -p 'kv_tova(budget=64)' -p 'kv_snapkv(budget=64,window=16,kernel=5)' \
  --timeline "$here/timeline.png" --timeline-layer 1 > /dev/null

# One generation step in detail: H2O (48 entries, 16 recent) continuing the text's first 300
# characters; layer 1, query head 2 (the model card's sink head) at step 100.
"$bin" generate --model default-text --prompt "$(head -c 300 "$text")" \
  -p 'kv_h2o(budget=48,recent=16)' --temperature 0.8 --seed 1 --max-new-tokens 120 --threads 1 \
  --figure "$here/decode_h2o.png" --layer 1 --head 2 --step 100 > /dev/null

/usr/bin/python3 "$here/summarise.py" "$out"/eviction.json "$out"/no_bos.json \
  "$out"/precision.json > "$here/summary.json"

# The same stream on teaching-text, whose L1H3 is a first-token sink (0.995 of its mass).
"$bin" stream --model teaching-text --text-file "$text" --bos --threads 1 \
  -p kv_full -p 'kv_recent(window=64)' -p 'kv_streaming(sinks=4,window=60)' \
  -p 'kv_recent(window=32)' -p 'kv_streaming(sinks=4,window=28)' \
  --json "$out/teaching.json" --figure "$here/teaching_eviction.png"
