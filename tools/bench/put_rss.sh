#!/usr/bin/env bash
# put_rss.sh BUILD_DIR [SIZE_GIB] [TRIALS]: peak RSS and time of the gateway for one big PUT.
# Runs zest-s3gw-mem (the gateway over the in-memory TEST DOUBLE) with a discard-* bucket,
# whose objects keep no bytes, so the numbers are the gateway's own: read buffers,
# decoding, checksums (MD5 ETag), SigV4. The client is curl --aws-sigv4 sending a sparse
# file (Content-Length framing) and then stdin (chunked framing). Prints the median of
# TRIALS per framing, the peak RSS (VmHWM) and zest_payload_copied_bytes_total.
set -eu
build=${1:?usage: put_rss.sh BUILD_DIR [SIZE_GIB] [TRIALS]}
gib=${2:-1}
trials=${3:-3}
tmp=$(mktemp -d)
gw=
cleanup() { [ -n "$gw" ] && kill "$gw" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
bytes=$((gib * 1073741824))
truncate -s "$bytes" "$tmp/sparse"
"$build/tests/unit/s3gw/zest-s3gw-mem" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 \
	--access-key bench --secret-key benchsecret >"$tmp/out" 2>"$tmp/err" &
gw=$!
for _ in $(seq 50); do grep -q 'listening' "$tmp/out" && break; sleep 0.1; done
port=$(grep -o ' port=[0-9]*' "$tmp/out" | cut -d= -f2)
mport=$(grep -o 'metrics_port=[0-9]*' "$tmp/out" | cut -d= -f2)
c() { curl -s --aws-sigv4 "aws:amz:us-east-1:s3" --user bench:benchsecret \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"; }
c -X PUT "http://127.0.0.1:$port/discard-bench" >/dev/null
echo "# put_rss.sh $build $gib $trials; commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null);" \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for mode in content-length chunked; do
	for t in $(seq "$trials"); do
		if [ $mode = content-length ]; then
			c -o /dev/null -w '%{time_total}\n' -T "$tmp/sparse" "http://127.0.0.1:$port/discard-bench/o"
		else
			head -c "$bytes" /dev/zero | c -o /dev/null -w '%{time_total}\n' -T - \
				"http://127.0.0.1:$port/discard-bench/o"
		fi
	done | median | awk -v g="$gib" -v m=$mode '{printf "%-15s %d GiB PUT: %.2f s median, %.2f GiB/s\n", m, g, $1, g / $1}'
done
echo "gateway peak RSS (VmHWM): $(awk '/VmHWM/ {print $2, $3}' /proc/$gw/status)"
curl -s "http://127.0.0.1:$mport/metrics" | grep '^zest_payload_copied_bytes_total'
