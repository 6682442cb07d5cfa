#!/usr/bin/env bash
# Fuzzes cordon's parsers of untrusted input with cargo-fuzz (libFuzzer):
# config.json validation, policy files (parse, check, BPF compile), and the
# supervisor's decoders of container memory. See fuzz/README.md.
#
#   tools/fuzz.sh [--smoke] [TARGET...]     (targets: config policy decode)
#
# --smoke: a short run of every target (CI); new corpus entries go to a
# temporary directory. Without it: FUZZ_SECONDS per target (default 300),
# new entries kept in fuzz/corpus-grown/TARGET (not committed).
# Committed seeds (fuzz/corpus/TARGET) are read, never written.
# A crash, a hang (FUZZ_TIMEOUT seconds for one input) or an input using
# more than FUZZ_RSS_MB fails the run; the input is in fuzz/artifacts/TARGET.
#
# Toolchain: FUZZ_TOOLCHAIN=auto (nightly when rustup has one, else the
# default toolchain with RUSTC_BOOTSTRAP=1), nightly or stable. Sanitizer:
# FUZZ_SANITIZER (default address; "none" is used when the address
# sanitizer cannot be built). Build jobs: FUZZ_BUILD_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(config policy decode)
smoke=0
targets=()
for a in "$@"; do
  case "$a" in
    --smoke) smoke=1 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0
      ;;
    -*)
      echo "fuzz.sh: unknown option $a" >&2
      exit 2
      ;;
    *)
      case " ${ALL_TARGETS[*]} " in
        *" $a "*) targets+=("$a") ;;
        *)
          echo "fuzz.sh: unknown target $a (targets: ${ALL_TARGETS[*]})" >&2
          exit 2
          ;;
      esac
      ;;
  esac
done
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")

if ((smoke)); then
  seconds=${FUZZ_SECONDS:-25}
else
  seconds=${FUZZ_SECONDS:-300}
fi
timeout_s=${FUZZ_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
export CARGO_BUILD_JOBS=${FUZZ_BUILD_JOBS:-2}

if ! command -v cargo-fuzz >/dev/null; then
  echo "fuzz.sh: cargo-fuzz is missing: cargo install --locked cargo-fuzz (tools/install-deps.sh does it)" >&2
  exit 1
fi

# cargo-fuzz passes -Z flags to rustc: nightly, or stable told to accept them.
toolchain=${FUZZ_TOOLCHAIN:-auto}
if [[ $toolchain == auto ]]; then
  toolchain=stable
  if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=nightly
  fi
fi
if [[ $toolchain == nightly ]]; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  toolchain="$(rustc --version | cut -d' ' -f2) with RUSTC_BOOTSTRAP=1"
fi

sanitizer=${FUZZ_SANITIZER:-address}
logs=fuzz/target/logs
mkdir -p "$logs"
build() {
  "${fuzz[@]}" build --fuzz-dir fuzz -s "$1" >"$logs/build.log" 2>&1
}
t0=$(date +%s)
echo "fuzz: building the targets ($toolchain, sanitizer $sanitizer, $CARGO_BUILD_JOBS jobs)"
if ! build "$sanitizer"; then
  if [[ $sanitizer != none ]] && grep -qiE 'sanitizer|asan' "$logs/build.log"; then
    grep -m 3 -E '^error' "$logs/build.log" || true
    echo "fuzz: the $sanitizer sanitizer cannot be built here; building without a sanitizer"
    sanitizer=none
  fi
  if [[ $sanitizer != none ]] || ! build none; then
    grep -E '^(error|warning: unused)' -A 5 "$logs/build.log" | head -n 40 >&2 || true
    echo "fuzz: build failed (log: $logs/build.log)" >&2
    exit 1
  fi
fi
echo "fuzz: built in $(($(date +%s) - t0)) s"

tmp=""
if ((smoke)); then
  tmp=$(mktemp -d -t cordon-fuzz.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
fi
failed=()
for t in "${targets[@]}"; do
  if ((smoke)); then
    grown="$tmp/$t"
  else
    grown="fuzz/corpus-grown/$t"
  fi
  mkdir -p "$grown"
  log="$logs/$t.log"
  echo "fuzz: $t for $seconds s (seeds fuzz/corpus/$t, new entries in $grown)"
  # libFuzzer runs in fuzz/: give it absolute corpus paths. The first
  # directory receives new entries; the seeds are only read.
  if "${fuzz[@]}" run --fuzz-dir fuzz -s "$sanitizer" "$t" "$(realpath "$grown")" "$(realpath "fuzz/corpus/$t")" -- \
    -max_total_time="$seconds" -timeout="$timeout_s" -rss_limit_mb="$rss_mb" \
    -print_final_stats=1 >"$log" 2>&1; then
    runs=$(grep -a '^stat::number_of_executed_units' "$log" | sed 's/.*: *//')
    cov=$(grep -a -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 | sed -E 's/.*cov: ([0-9]+).*/\1/')
    echo "fuzz: $t ok: ${runs:-?} inputs, coverage ${cov:-?} edges"
  else
    failed+=("$t")
    grep -a -A 1 -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | cut -c 1-300 |
      head -n 20 | sed "s/^/fuzz: $t: /" >&2
    echo "fuzz: $t FAILED (log: $log; replay: ${fuzz[*]} run --fuzz-dir fuzz -s $sanitizer $t fuzz/artifacts/$t/FILE)" >&2
  fi
done

echo "fuzz: done in $(($(date +%s) - t0)) s"
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
