#!/usr/bin/env bash
# The main job behind `make run`: a datanode with six drive folders under var/ (RS 4+2)
# and the S3 gateway on 127.0.0.1:9000. Ctrl-C stops both cleanly.
set -eu
build=${1:-build}
cd "$(dirname "$0")/.."

dn=${ZEST_DATANODE_BIN:-$build/datanode/zest-datanode}
gw=$build/s3gw/zest-s3gw
if [ ! -x "$dn" ] || [ ! -x "$gw" ]; then
	echo "zest: the datanode or the S3 gateway is not built yet; running what exists:"
	echo "zest: the erasure-coding benchmark, $build/tools/zest-bench ec"
	exec "$build/tools/zest-bench" ec
fi

: "${ZEST_ACCESS_KEY:=zestadmin}"
: "${ZEST_SECRET_KEY:=zestsecret}"
: "${ZEST_LISTEN:=127.0.0.1:9000}"
: "${ZEST_DATANODE:=127.0.0.1:7480}"
export ZEST_ACCESS_KEY ZEST_SECRET_KEY

drives=()
for i in 0 1 2 3 4 5; do
	mkdir -p "var/drive$i"
	drives+=(--drive "var/drive$i")
done
mkdir -p var/log

pids=()
stop() {
	trap - INT TERM EXIT
	echo
	echo "zest: stopping"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	exit 0
}
trap stop INT TERM EXIT

"$dn" --listen "$ZEST_DATANODE" --metrics 127.0.0.1:7481 --ec 4+2 "${drives[@]}" \
	2> >(tee -a var/log/datanode.log >&2) &
pids+=($!)
"$gw" --listen "$ZEST_LISTEN" --datanode "$ZEST_DATANODE" --metrics 127.0.0.1:9001 \
	2> >(tee -a var/log/s3gw.log >&2) &
pids+=($!)

sleep 1
cat <<MSG

zest is running
  S3 endpoint   http://$ZEST_LISTEN   (region us-east-1, path-style)
  access key    $ZEST_ACCESS_KEY
  secret key    $ZEST_SECRET_KEY
  datanode      $ZEST_DATANODE (gRPC), drives var/drive0..5, RS 4+2
  metrics       http://127.0.0.1:7481/metrics (datanode), http://127.0.0.1:9001/metrics (gateway)
  logs          var/log/

  try: AWS_ACCESS_KEY_ID=$ZEST_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$ZEST_SECRET_KEY \\
       aws --endpoint-url http://$ZEST_LISTEN s3 mb s3://demo
       build/tools/zest-bench s3 put --host $ZEST_LISTEN --duration 10s

Ctrl-C stops both.
MSG
wait -n "${pids[@]}"
echo "zest: a daemon exited; stopping the other"
