#!/usr/bin/env bash
# Runs every suite: all tests on the normal build and, side by side with it, the unit and
# integration tests again under ASan+UBSan (the daemons then exit non-zero on any leak or UB).
# The netfaults suite (13 daemons in namespaces per test) runs in the normal build only:
# docs/reliability.md, "The test suite's time".
# Ends with "N passed, N failed" and exits non-zero on any failure.
#
# Each build runs ZEST_TEST_JOBS tests at a time (default 2), the longest integration tests
# first (their meson priority); a test declared is_parallel : false runs alone within its
# build's run. Every integration test has its own temp dir, its own ports (drawn below the
# ephemeral range) and, for the cluster tests, its own 127.a.b.0/24, so the two builds' tests
# share the machine and nothing else. Lines are prefixed with the build's label.
# ZEST_TEST_SIDE_BY_SIDE=0 runs the two builds one after the other instead.
set -u
build=${1:-build}
asan=${2:-build-asan}
jobs=${ZEST_TEST_JOBS:-2}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

run_suite() { # build-dir label tag [meson test args...]
	local dir=$1 label=$2 tag=$3 rc t0=$SECONDS
	shift 3
	echo "== $label ($dir), $jobs at a time"
	# A stale log must never count: a failed rebuild runs no test but leaves the last one.
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@" 2>&1 |
		sed -u "s/^/[$tag] /"
	rc=${PIPESTATUS[0]}
	echo "== $label: done in $((SECONDS - t0)) s (exit $rc)"
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
t0=$SECONDS
if [ "${ZEST_TEST_SIDE_BY_SIDE:-1}" = 0 ]; then
	run_suite "$build" "all tests" plain
	ZEST_SANITIZED=1 run_suite "$asan" "unit and integration tests, ASan+UBSan" asan \
		--suite unit --suite integration
else
	run_suite "$build" "all tests" plain &
	plain=$!
	ZEST_SANITIZED=1 run_suite "$asan" "unit and integration tests, ASan+UBSan" asan \
		--suite unit --suite integration &
	wait "$plain" $!
fi

read -r passed failed < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$tally")
[ "$(wc -l <"$tally")" -eq 2 ] || failed=$((failed + 1)) # a half that never reported
echo "$passed passed, $failed failed ($((SECONDS - t0)) s)"
[ "$failed" -eq 0 ]
