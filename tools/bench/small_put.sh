#!/usr/bin/env bash
# small_put.sh ROUNDS DURATION ARM...: small-object PUTs through the gateway, `make run`'s
# shape (one zest-datanode, RS 4+2 over six drive folders on the VM's disk, mutual TLS
# between the gateway and the datanode), arms alternating within each round. An arm is
# NAME=BUILD_DIR[:VAR=VALUE,...]: that build's zest-datanode (with those variables in its
# environment) and zest-s3gw. Each run starts both daemons afresh on new drive folders
# under $ZEST_SMALL_DIR (default /var/tmp/zest-small), then
#   zest-bench s3 put --obj.size $SIZE --concurrent $CONC --duration DURATION --warmup 1s --noclear
# and reads around the load (warm-up included on both sides):
#   - utime+stime of both daemons from /proc/PID/stat            -> CPU-ms per object
#   - zest_objects_committed_total from the datanode's /metrics    -> objects
#   - ext4:ext4_sync_file_enter of the datanode's threads (perf stat): every fsync and
#     fdatasync, as syscalls (LMDB) or io_uring SQEs (on the process's io-wq threads), and
#     every O_DSYNC / RWF_DSYNC write, which syncs through the same call -> fsyncs per object
#   - zest_meta_txns_total and zest_drive_syncs_total{kind} (builds that have them)
# Prints one line per run and the medians per arm. Env: SIZE (4KiB), CONC (16), KEEP=1
# keeps the work folder.
set -eu
rounds=${1:?usage: small_put.sh ROUNDS DURATION NAME=BUILD...}
dur=${2:?duration}
shift 2
arms=("$@")
size=${SIZE:-4KiB}
conc=${CONC:-16}
root=${ZEST_SMALL_DIR:-/var/tmp/zest-small}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root"
tmp=$(mktemp -d "$root/run.XXXXXX")
hz=$(getconf CLK_TCK)
dn= gw=
stop_daemons() {
	[ -n "$gw" ] && kill "$gw" 2>/dev/null && wait "$gw" 2>/dev/null
	[ -n "$dn" ] && kill "$dn" 2>/dev/null && wait "$dn" 2>/dev/null
	gw= dn=
	return 0
}
trap 'stop_daemons; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
"$here/tools/zest-certs.sh" "$tmp/certs" >/dev/null
export ZEST_ACCESS_KEY=bench ZEST_SECRET_KEY=benchsecret
echo "# small_put.sh $rounds $dur $*; size=$size conc=$conc;" \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPU," \
	"kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }
# the ring's sync requests and metadata transactions (0 for builds without the counters)
rings() { curl -s "http://127.0.0.1:$1/metrics" | awk '
	/^zest_meta_txns_total / {t = $2}
	/^zest_drive_syncs_total\{kind="file"\}/ {f = $2}
	/^zest_drive_syncs_total\{kind="dir"\}/ {d = $2}
	/^zest_drive_syncs_total\{kind="write"\}/ {w = $2}
	END {print t + 0, f + 0, d + 0, w + 0}'; }
# obj/txn: objects per metadata transaction; rings/obj: the rings' fdatasyncs, folder fsyncs
# and writes with their own sync per object (from /metrics; "-" and 0 for older builds)
printf '%-10s %-5s %9s %9s %9s %10s %10s %10s %8s %s\n' arm round obj/s p50_ms p99_ms fsync/obj \
	dn_cpu_ms gw_cpu_ms obj/txn rings/obj
res=$tmp/results
: >"$res"
for r in $(seq "$rounds"); do
	for a in "${arms[@]}"; do
		name=${a%%=*} build=${a#*=} env=()
		if [ "${build#*:}" != "$build" ]; then
			IFS=, read -ra env <<<"${build#*:}"
			build=${build%%:*}
		fi
		# Fresh folders, removed only at the end: on ext4 without a journal, inodes freed
		# in the last seconds are skipped by the allocator at a CPU cost (recently_deleted)
		# that would land on the next run.
		d=$tmp/drives-$name-$r
		drives=()
		for i in 0 1 2 3 4 5; do
			mkdir -p "$d/d$i"
			drives+=(--drive "$d/d$i")
		done
		sync
		port=$((20000 + RANDOM % 20000))
		mport=$((port + 1))
		env "${env[@]}" "$build/datanode/zest-datanode" --listen "127.0.0.1:$port" \
			--metrics "127.0.0.1:$mport" --ec 4+2 "${drives[@]}" \
			--tls-ca "$tmp/certs/ca.pem" --tls-cert "$tmp/certs/datanode.pem" \
			--tls-key "$tmp/certs/datanode.key" 2>"$tmp/dn.err" &
		dn=$!
		"$build/s3gw/zest-s3gw" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 \
			--datanode "127.0.0.1:$port" --cluster-ca "$tmp/certs/ca.pem" \
			--cluster-cert "$tmp/certs/gateway.pem" --cluster-key "$tmp/certs/gateway.key" \
			>"$tmp/gw.out" 2>"$tmp/gw.err" &
		gw=$!
		for _ in $(seq 300); do grep -q listening "$tmp/gw.out" && break; sleep 0.1; done
		for _ in $(seq 100); do [ -n "$(metric "$mport" zest_objects_committed_total)" ] &&
			break; sleep 0.1; done
		gport=$(grep -o ' port=[0-9]*' "$tmp/gw.out" | cut -d= -f2)
		if [ -z "$gport" ]; then
			echo "# $name round $r: the gateway did not start: $(tail -1 "$tmp/gw.err")"
			stop_daemons
			continue
		fi
		o0=$(metric "$mport" zest_objects_committed_total)
		read -r t0 f0 d0 w0 < <(rings "$mport")
		c0=$(cpu "$dn") g0=$(cpu "$gw")
		perf stat -x, -e ext4:ext4_sync_file_enter -p "$dn" -o "$tmp/perf.out" &
		pf=$!
		sleep 0.2
		if ! "$build/tools/zest-bench" s3 put --host "127.0.0.1:$gport" --obj.size "$size" \
			--concurrent "$conc" --duration "$dur" --warmup 1s --noclear --json \
			>"$tmp/bench.json"; then
			echo "# $name round $r: zest-bench failed, run skipped"
			kill -INT "$pf"; wait "$pf" || true
			stop_daemons
			continue
		fi
		kill -INT "$pf"
		wait "$pf" || true
		c1=$(cpu "$dn") g1=$(cpu "$gw")
		o1=$(metric "$mport" zest_objects_committed_total)
		read -r t1 f1 d1 w1 < <(rings "$mport")
		stop_daemons
		syncs=$(awk -F, '/ext4_sync_file_enter/ {print $1}' "$tmp/perf.out")
		python3 - "$name" "$r" "$tmp/bench.json" "$((o1 - o0))" "$syncs" "$((c1 - c0))" \
			"$((g1 - g0))" "$hz" "$((t1 - t0))" "$((f1 - f0))" "$((d1 - d0))" "$((w1 - w0))" \
			>>"$res" <<'PY'
import json, sys
name, r, path, objs, syncs, dn, gw, hz, txns, fs, ds, ws = sys.argv[1:]
b = json.load(open(path))["ops"][0]
objs = max(int(objs), 1)
ms = 1000.0 / int(hz)
print(name, r, "%.1f" % b["obj_per_s"], "%.2f" % b["latency_ms"]["p50"],
      "%.2f" % b["latency_ms"]["p99"], "%.2f" % (int(syncs or 0) / objs),
      "%.3f" % (int(dn) * ms / objs), "%.3f" % (int(gw) * ms / objs), b["errors"],
      "%.1f" % (objs / int(txns)) if int(txns) else "-",
      "%.2f/%.2f/%.2f" % (int(fs) / objs, int(ds) / objs, int(ws) / objs))
PY
		tail -1 "$res" | awk '{printf "%-10s %-5s %9s %9s %9s %10s %10s %10s %8s %s%s\n",
			$1, $2, $3, $4, $5, $6, $7, $8, $10, $11, ($9 > 0 ? "  errors=" $9 : "")}'
	done
done
echo "# medians"
python3 - "$res" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append([float(x) for x in f[2:8]] +
                                     [float(f[9]) if f[9] != "-" else 0.0])
base = None
for name, v in rows.items():
    med = [statistics.median(c) for c in zip(*v)]
    if base is None:
        base = med
    print("%-10s n=%d obj/s %.1f (x%.2f)  p50 %.2f ms  p99 %.2f ms  fsync/obj %.2f  "
          "cpu-ms/obj datanode %.3f gateway %.3f  obj/txn %s" % (name, len(v), med[0],
          med[0] / base[0], med[1], med[2], med[3], med[4], med[5],
          "%.1f" % med[6] if med[6] else "-"))
PY
