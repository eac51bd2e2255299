#!/usr/bin/env bash
# Smoke test: rpc_sink_server (each marshaller) + `zest-bench grpc --objects --json`.
# Checks the JSON line, zero errors, and the sink's copy counters (0 for zerocopy).
set -eu
sink=$1 bench=$2
for m in zerocopy copy; do
	out=$(mktemp)
	"$sink" --marshaller "$m" >"$out" &
	pid=$!
	for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
	port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out")
	json=$("$bench" grpc --datanode "127.0.0.1:$port" --obj.size 3MiB --concurrent 3 \
		--objects 12 --json --insecure)
	kill "$pid"
	wait "$pid"
	echo "$m: $json"
	echo "$m: $(tail -1 "$out")"
	echo "$json" | grep -q '"operation":"grpc-put","objects":12,"bytes":37748736,'
	echo "$json" | grep -q '"errors":0'
	tail -1 "$out" | grep -q 'received_bytes=37748736 '
	if [ "$m" = zerocopy ]; then
		tail -1 "$out" | grep -q 'copied_gather=0 copied_unpack=0 copied_align=0'
	else
		tail -1 "$out" | grep -q 'copied_align=37748736'
	fi
	rm -f "$out"
done
