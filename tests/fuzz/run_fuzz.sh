#!/usr/bin/env bash
# run_fuzz.sh FUZZER CORPUS WORK SECONDS: runs FUZZER over every input of CORPUS (each must
# pass), then fuzzes for SECONDS more starting from a sample of it, new inputs going to WORK
# (a copy, so the repository's corpus stays as committed). Any crash, leak or sanitizer
# report fails.
set -euo pipefail
fuzzer=$1 corpus=$2 work=$3 seconds=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# 1. the corpus as it is: every seed and regression input once
"$fuzzer" -runs=0 -rss_limit_mb=4096 -timeout=60 -artifact_prefix="$work/artifacts/" "$corpus"
# 2. a few seconds of fuzzing from 256 of its inputs (the first by name: their names are
# hashes, so a sample of the whole): libFuzzer runs every input it starts from before it
# mutates any, and starting from all of them ran the corpus twice (fuzz_api's 3,300 inputs
# take ~37 s under the sanitizers, five seconds of fuzzing after them)
find "$corpus" -maxdepth 1 -type f | sort | sed -n '1,256p' | xargs -d '\n' cp -t "$work/corpus/"
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=60 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
