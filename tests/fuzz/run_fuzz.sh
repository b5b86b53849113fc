#!/usr/bin/env bash
# Runs fuzz targets built by the `fuzz` preset.
#   run_fuzz.sh smoke BUILD TARGET [SECONDS]   ctest's smoke run (label fuzz): the seeds and the
#       committed crash regressions (tests/fuzz/regressions/TARGET), then SECONDS (default 5) of
#       fuzzing into a throw-away corpus. Fails on any crash, leak, timeout or sanitizer report;
#       the input that caused it is kept in BUILD/fuzz-artifacts/TARGET/.
#   run_fuzz.sh run BUILD SECONDS [RUNS] [TARGET...]   `make fuzz`: each target (all by default)
#       for SECONDS or RUNS executions, whichever comes first, growing a corpus kept in
#       BUILD/fuzz-corpus/TARGET; a crashing input is written to BUILD/fuzz-artifacts/TARGET/ and
#       the last libFuzzer lines of every run go to BUILD/fuzz-logs/TARGET.log.
# BUILD is the fuzz build folder (build/fuzz); its tests/fuzz/seeds/ holds the seed corpora and
# dictionaries (make_corpus.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=$1
build=$(cd "$2" && pwd)
bin=$build/tests/fuzz
seeds=$bin/seeds
# Any UB report fails the run (the targets are also built with -fno-sanitize-recover=undefined).
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
TARGETS="npy npz safetensors safetensors_index hf_config model_config tokenizer_json gpt2_vocab
  wordpiece_vocab sentencepiece tokenize_text image session spec sweep idx jsonl"

# Options every run shares: the target's dictionary, a per-input time limit, no leak of a
# scratch file descriptor into the report.
options() {
  local t=$1
  local o=(-timeout=25 -rss_limit_mb=2560 -print_final_stats=1)
  [ -f "$seeds/$t.dict" ] && o+=("-dict=$seeds/$t.dict")
  echo "${o[@]}"
}

case $mode in
  smoke)
    t=$3
    seconds=${4:-5}
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    artifacts=$build/fuzz-artifacts/$t
    mkdir -p "$artifacts"
    dirs=("$seeds/$t")
    [ -d "$here/regressions/$t" ] && dirs+=("$here/regressions/$t")
    # shellcheck disable=SC2046
    "$bin/fuzz_$t" $(options "$t") -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
      "$scratch" "${dirs[@]}"
    ;;
  run)
    seconds=$3
    runs=${4:-10000000}
    shift 4 || shift $#
    targets=${*:-$TARGETS}
    mkdir -p "$build/fuzz-logs"
    failed=0
    for t in $targets; do
      corpus=$build/fuzz-corpus/$t
      artifacts=$build/fuzz-artifacts/$t
      mkdir -p "$corpus" "$artifacts"
      dirs=("$corpus" "$seeds/$t")
      [ -d "$here/regressions/$t" ] && dirs+=("$here/regressions/$t")
      echo "== fuzz_$t: up to $seconds s or $runs runs"
      # shellcheck disable=SC2046
      if "$bin/fuzz_$t" $(options "$t") -max_total_time="$seconds" -runs="$runs" \
          -artifact_prefix="$artifacts/" "${dirs[@]}" > "$build/fuzz-logs/$t.log" 2>&1; then
        grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs|stat::(number_of_executed_units|peak_rss))' \
          "$build/fuzz-logs/$t.log"
      else
        failed=1
        tail -40 "$build/fuzz-logs/$t.log"
        echo "fuzz_$t FAILED: see $build/fuzz-logs/$t.log and $artifacts/"
      fi
    done
    exit $failed
    ;;
  *)
    echo "usage: run_fuzz.sh smoke BUILD TARGET [SECONDS] | run BUILD SECONDS [RUNS] [TARGET...]" >&2
    exit 2
    ;;
esac
