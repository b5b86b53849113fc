#!/usr/bin/env bash
# Builds the seed corpora and dictionaries of the fuzz targets in OUT (the build tree):
#   OUT/<target>/      seeds: the project's own files of that kind (reference models' configs,
#                      tokenizers and weights, sessions, images, .npy goldens), the files
#                      fuzz_make_seeds writes, SentencePiece models trained here when
#                      python3-sentencepiece is installed, and tests/fuzz/seeds/<target>/
#   OUT/<target>.dict  tests/fuzz/dict/json.dict (JSON targets) + dict/<target>.dict
# Usage: make_corpus.sh SOURCE_DIR OUT FUZZ_MAKE_SEEDS
set -euo pipefail
src=$1
out=$2
make_seeds=$3
here=$src/tests/fuzz
goldens=$src/tests/ref/goldens
rm -rf "$out"
mkdir -p "$out"

copy() {  # copy TARGET FILE... (under a name that keeps the source folder)
  local target=$1; shift
  mkdir -p "$out/$target"
  for f in "$@"; do
    [ -f "$f" ] || continue
    cp "$f" "$out/$target/$(basename "$(dirname "$f")")_$(basename "$f")"
  done
}

"$make_seeds" "$out" "$src"

copy npy "$goldens"/*/golden_ids.npy "$goldens"/gpt2/golden_pattern_0.npy "$goldens"/resize/*.npy
copy safetensors "$goldens"/deit/model.safetensors "$goldens"/bert/model.safetensors
copy hf_config "$goldens"/*/config.json "$src"/assets/models/*/config.json
# model_config: config.json, and for vision models config.json NUL preprocessor_config.json.
mkdir -p "$out/model_config"
for d in "$goldens"/*/ "$src"/assets/models/*/; do
  [ -f "$d/config.json" ] || continue
  name=$(basename "$d")
  cp "$d/config.json" "$out/model_config/$name.json"
  if [ -f "$d/preprocessor_config.json" ]; then
    { cat "$d/config.json"; printf '\0'; cat "$d/preprocessor_config.json"; } \
      > "$out/model_config/$name.with_preprocessor"
  fi
done
copy tokenizer_json "$src"/assets/models/default-text/tokenizer.json
mkdir -p "$out/gpt2_vocab"
for d in "$goldens/gpt2" "$src/assets/models/default-text"; do
  { cat "$d/vocab.json"; printf '\0'; cat "$d/merges.txt"; } > "$out/gpt2_vocab/$(basename "$d")"
done
copy wordpiece_vocab "$goldens"/bert/vocab.txt
copy tokenize_text "$src"/assets/samples/*.txt
copy image "$goldens"/deit/image.png "$src"/assets/images/coat_1.png \
  "$src"/assets/images/sneaker_1.png
copy session "$src"/docs/sessions/*.attnscope.json "$src"/docs/figures/*.attnscope.json
copy sweep "$src"/docs/figures/tradeoff.csv
# The Fashion-MNIST test labels (5 KB gzipped) where Debian's dataset-fashion-mnist is installed.
copy idx /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz

# SentencePiece models, trained as the tokenizer tests train theirs.
mkdir -p "$out/sentencepiece"
if /usr/bin/python3 -c 'import sentencepiece' 2>/dev/null; then
  tmp=$(mktemp -d)
  /usr/bin/python3 "$src/tests/models/sentencepiece_ref.py" train "$tmp" >/dev/null 2>&1 &&
    cp "$tmp"/bpe.model "$tmp"/unigram.model "$out/sentencepiece/" || true
  rm -rf "$tmp"
fi
if [ -z "$(ls -A "$out/sentencepiece")" ]; then
  echo "make_corpus.sh: python3-sentencepiece missing; sentencepiece seeds are only the" \
       "committed ones" >&2
fi

for d in "$here"/seeds/*/; do copy "$(basename "$d")" "$d"/*; done

for t in "$out"/*/; do
  t=$(basename "$t")
  : > "$out/$t.dict"
  case $t in
    hf_config | model_config | session | tokenizer_json | safetensors | safetensors_index | jsonl | \
      gpt2_vocab) cat "$here/dict/json.dict" >> "$out/$t.dict" ;;
  esac
  [ -f "$here/dict/$t.dict" ] && cat "$here/dict/$t.dict" >> "$out/$t.dict"
  [ -s "$out/$t.dict" ] || rm -f "$out/$t.dict"
done
touch "$out/.done"
