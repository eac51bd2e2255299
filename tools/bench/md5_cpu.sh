#!/usr/bin/env bash
# md5_cpu.sh BUILD_DIR [ROUNDS] [DURATION] [SIZE] [ARMS...]: the gateway's CPU per PUT GiB,
# arms alternating within each round, at 1 and 8 streams (override with CONC="1 8").
# One datanode (4+2, six drive folders on tmpfs under /dev/shm) stays up; each arm starts a
# fresh zest-s3gw, runs `zest-bench s3 put`, and reads the gateway's utime+stime from
# /proc/PID/stat and its payload bytes in (zest_s3_payload_bytes_total) from /metrics around
# the load, warm-up included on both sides, so CPU-s per GiB is the gateway's own.
# An arm is NAME=GATEWAY_BINARY[:FLAGS] (flags comma-separated), default:
#   serial=BUILD/s3gw/zest-s3gw:--md5,serial  multi=BUILD/s3gw/zest-s3gw:--md5,multi
# Prints one line per run and the medians per arm and stream count.
set -eu
build=${1:?usage: md5_cpu.sh BUILD_DIR [ROUNDS] [DURATION] [SIZE] [ARMS...]}
rounds=${2:-3}
dur=${3:-10s}
size=${4:-16MiB}
shift $(($# < 4 ? $# : 4))
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=("serial=$build/s3gw/zest-s3gw:--md5,serial"
	"multi=$build/s3gw/zest-s3gw:--md5,multi")
conc=${CONC:-1 8}
tmp=$(mktemp -d /dev/shm/md5cpu.XXXXXX)
dn= gw=
cleanup() {
	[ -n "$gw" ] && kill "$gw" 2>/dev/null && wait "$gw" 2>/dev/null
	[ -n "$dn" ] && kill "$dn" 2>/dev/null && wait "$dn" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
port=$((20000 + RANDOM % 20000))
drives=()
for i in 0 1 2 3 4 5; do
	mkdir -p "$tmp/d$i"
	drives+=(--drive "$tmp/d$i")
done
"$build/datanode/zest-datanode" --listen "127.0.0.1:$port" --ec 4+2 "${drives[@]}" \
	2>"$tmp/dn.err" &
dn=$!
export ZEST_ACCESS_KEY=bench ZEST_SECRET_KEY=benchsecret
echo "# md5_cpu.sh $build $rounds $dur $size; commit" \
	"$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null);" \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bytes_in() { curl -s "http://127.0.0.1:$1/metrics" |
	awk '/^zest_s3_payload_bytes_total\{dir="in"\}/ {print $2}'; }
printf '%-8s %-3s %-5s %9s %9s %11s %s\n' arm c round MiB/s cpu_s CPUs_per_GiB lanes
for r in $(seq "$rounds"); do
	for c in $conc; do
		for a in "${arms[@]}"; do
			name=${a%%=*} rest=${a#*=}
			bin=${rest%%:*} flags=
			[ "$rest" != "$bin" ] && flags=${rest#*:}
			"$bin" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --datanode "127.0.0.1:$port" \
				--access-key bench --secret-key benchsecret ${flags//,/ } \
				>"$tmp/gw.out" 2>"$tmp/gw.err" &
			gw=$!
			for _ in $(seq 300); do grep -q listening "$tmp/gw.out" && break; sleep 0.1; done
			if ! grep -q listening "$tmp/gw.out"; then
				echo "# $name c$c round $r: the gateway did not start: $(tail -1 "$tmp/gw.err")"
				kill "$gw" 2>/dev/null; wait "$gw" 2>/dev/null || true
				gw=
				continue
			fi
			gport=$(grep -o ' port=[0-9]*' "$tmp/gw.out" | cut -d= -f2)
			mport=$(grep -o 'metrics_port=[0-9]*' "$tmp/gw.out" | cut -d= -f2)
			b0=$(bytes_in "$mport") t0=$(cpu "$gw")
			"$build/tools/zest-bench" s3 put --host "127.0.0.1:$gport" --obj.size "$size" \
				--concurrent "$c" --duration "$dur" --warmup 1s --json >"$tmp/bench.json" || {
				echo "# $name c$c round $r: zest-bench exit $? (port '$gport'), run skipped"
				kill "$gw"; wait "$gw" 2>/dev/null || true
				gw=
				continue
			}
			t1=$(cpu "$gw") b1=$(bytes_in "$mport")
			lanes=$(curl -s "http://127.0.0.1:$mport/metrics" | awk -F'[{}" ]+' '
				/^zest_s3_md5_blocks_total/ {v[$3] = $NF}
				END {t = v["x8"] + v["serial"]; if (t) printf "x8=%.2f,fill=%.2f",
				     v["x8"] / t, v["x8"] + v["x8_idle"] ? v["x8"] / (v["x8"] + v["x8_idle"]) : 0}')
			kill "$gw"
			wait "$gw" || echo "# $name: gateway exit $?"
			gw=
			tck=$(getconf CLK_TCK)
			mibs=$(grep -o '"mib_per_s":[0-9.]*' "$tmp/bench.json" | head -1 | cut -d: -f2)
			awk -v n="$name" -v c="$c" -v r="$r" -v m="${mibs:-0}" -v t=$((t1 - t0)) \
				-v b=$((b1 - b0)) -v k="$tck" -v l="${lanes:--}" 'BEGIN {
				printf "%-8s %-3s %-5s %9.1f %9.2f %11.3f %s\n", n, c, r, m, t / k,
				       b ? t / k / (b / 1073741824) : 0, l }' | tee -a "$tmp/runs"
		done
	done
done
echo "# medians per arm and stream count"
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for c in $conc; do
	for a in "${arms[@]}"; do
		name=${a%%=*}
		cs=$(awk -v n="$name" -v c="$c" '$1 == n && $2 == c {print $6}' "$tmp/runs" | median)
		ms=$(awk -v n="$name" -v c="$c" '$1 == n && $2 == c {print $4}' "$tmp/runs" | median)
		echo "$name c$c: $cs CPU-s/GiB, $ms MiB/s"
	done
done
