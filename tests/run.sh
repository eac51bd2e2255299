#!/usr/bin/env bash
# Runs every suite: all tests on the normal build, then the unit and integration tests
# again under ASan+UBSan (the daemons then exit non-zero on any leak or UB). Ends with "N passed, N failed" and exits non-zero on any failure.
set -u
build=${1:-build}
asan=${2:-build-asan}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

run_suite() { # build-dir label [meson test args...]
	local dir=$1 label=$2 rc
	shift 2
	echo "== $label ($dir)"
	# A stale log must never count: a failed rebuild runs no test but leaves the last one.
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
	rc=$?
	python3 - "$dir/meson-logs/testlog.json" "$label" "$rc" >>"$tally" <<'PY'
import json, os, sys
ok = bad = 0
if not os.path.exists(sys.argv[1]):
    print("FAILED", sys.argv[2], "meson test ran nothing (exit %s)" % sys.argv[3], file=sys.stderr)
    print(0, 1)
    sys.exit(0)
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL", "SKIP"):
        ok += r != "SKIP"
    else:
        bad += 1
        print("FAILED", sys.argv[2], json.loads(line)["name"], file=sys.stderr)
if sys.argv[3] != "0" and bad == 0:  # meson failed without a failed test: count it
    print("FAILED", sys.argv[2], "meson test exited %s" % sys.argv[3], file=sys.stderr)
    bad = 1
print(ok, bad)
PY
}

tally=$(mktemp)
trap 'rm -f "$tally"' EXIT
run_suite "$build" "all tests"
ZEST_SANITIZED=1 run_suite "$asan" "unit and integration tests, ASan+UBSan" --suite unit \
	--suite integration

read -r passed failed < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$tally")
[ -s "$tally" ] || failed=1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
