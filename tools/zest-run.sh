#!/usr/bin/env bash
# The main job behind `make run`: a datanode with six drive folders under var/ (RS 4+2)
# and the S3 gateway on 127.0.0.1:9000. Ctrl-C stops both cleanly. The gateway talks to
# the datanode over the datanode's Unix socket var/run/datanode.sock (the local link: no
# TLS, the socket file is private to this user); ZEST_LOCAL_LINK=0 sends it over TCP
# instead. The datanode's TCP port takes mutual TLS with a throwaway CA made under
# var/certs/ (tools/zest-certs.sh); ZEST_INSECURE=1 runs plaintext gRPC there instead.
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
mkdir -p var/log var/run

certs=var/certs
if [ "${ZEST_INSECURE:-0}" = 1 ]; then
	dn_tls=(--insecure)
	gw_tls=(--insecure)
	tls_msg="plaintext (ZEST_INSECURE=1)"
else
	# kept across runs; delete var/certs for new ones (they last 30 days)
	if ! openssl x509 -checkend 86400 -noout -in "$certs/datanode.pem" >/dev/null 2>&1; then
		rm -rf "$certs"
	fi
	tools/zest-certs.sh "$certs"
	dn_tls=(--tls-ca "$certs/ca.pem" --tls-cert "$certs/datanode.pem" --tls-key "$certs/datanode.key")
	gw_tls=(--cluster-ca "$certs/ca.pem" --cluster-cert "$certs/gateway.pem"
		--cluster-key "$certs/gateway.key")
	tls_msg="mutual TLS, CA and certificates in $certs/"
fi

sock=var/run/datanode.sock
if [ "${ZEST_LOCAL_LINK:-1}" = 1 ]; then
	dn_link=(--unix-socket "$sock")
	gw_link=(--datanode "unix:$sock")
	link_msg="gateway -> datanode over $sock (local: no TLS, only this user connects)"
else
	dn_link=()
	gw_link=(--datanode "$ZEST_DATANODE" "${gw_tls[@]}")
	link_msg="gateway -> datanode over $ZEST_DATANODE (ZEST_LOCAL_LINK=0)"
fi

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

"$dn" --listen "$ZEST_DATANODE" --metrics 127.0.0.1:7481 --ec 4+2 "${drives[@]}" "${dn_tls[@]}" \
	"${dn_link[@]}" \
	2> >(tee -a var/log/datanode.log >&2) &
pids+=($!)
"$gw" --listen "$ZEST_LISTEN" "${gw_link[@]}" --metrics 127.0.0.1:9001 \
	2> >(tee -a var/log/s3gw.log >&2) &
pids+=($!)

sleep 1
cat <<MSG

zest is running
  S3 endpoint   http://$ZEST_LISTEN   (region us-east-1, path-style)
  access key    $ZEST_ACCESS_KEY
  secret key    $ZEST_SECRET_KEY
  datanode      $ZEST_DATANODE (gRPC), drives var/drive0..5, RS 4+2
  internal gRPC $link_msg;
                datanode's TCP port: $tls_msg
  metrics       http://127.0.0.1:7481/metrics (datanode), http://127.0.0.1:9001/metrics (gateway)
  logs          var/log/

  try: AWS_ACCESS_KEY_ID=$ZEST_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$ZEST_SECRET_KEY \\
       aws --endpoint-url http://$ZEST_LISTEN s3 mb s3://demo
       build/tools/zest-bench s3 put --host $ZEST_LISTEN --duration 10s
       build/tools/zest-bench grpc --datanode $ZEST_DATANODE ${gw_tls[*]}

Ctrl-C stops both.
MSG
wait -n "${pids[@]}"
echo "zest: a daemon exited; stopping the other"
