#!/bin/sh
# The daemons carry fault symbols exactly when built with -Dtest_faults=true (common/
# zc_fault.h): usage fault_symbols.sh true|false BINARY...
# With the option, zc_fault_hit must be there (the points are compiled in); without it,
# no symbol of the registry nor of the hooks it replaced may be.
set -u
want=$1
shift
pattern='zc_fault|rpc_client_fault|dn_drive_inject|dn_admission_inject|dn_meta_inject|dn_compose_fault|dn_test_hooks'
command -v nm >/dev/null || { echo "SKIP: nm not found (Debian package binutils)"; exit 77; }
rc=0
for bin in "$@"; do
	syms=$(nm "$bin" | grep -E "$pattern")
	if [ "$want" = true ]; then
		if ! printf '%s\n' "$syms" | grep -q ' zc_fault_hit$'; then
			echo "FAIL: $bin: a test build without zc_fault_hit"
			rc=1
		else
			echo "ok: $bin has the fault points ($(printf '%s\n' "$syms" | wc -l) symbols)"
		fi
	elif [ -n "$syms" ]; then
		echo "FAIL: $bin: fault symbols in a build without -Dtest_faults:"
		printf '%s\n' "$syms"
		rc=1
	else
		echo "ok: $bin has no fault symbol"
	fi
done
exit $rc
