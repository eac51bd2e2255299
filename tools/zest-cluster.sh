#!/usr/bin/env bash
# The job behind `make cluster`: etcd (one member, or three with ETCD_MEMBERS=3) and six
# datanodes with two drive folders each, every daemon on its own loopback address, all
# under var/cluster/. The datanodes register in etcd (--cluster/--node, docs/cluster.md).
# The datanodes coordinate every Write (RS(4,2) over the six, docs/cluster.md), so the
# gateway in front of them runs in cluster mode (--cluster: records in etcd, cells from the
# nodes); a gateway built without --cluster is not started. Ctrl-C stops everything (the
# datanodes first, so they deregister).
#
#   ETCD_MEMBERS=1|3   etcd members (default 1)
#   ZEST_NO_GATEWAY=1  do not start the gateway
#   ZEST_INSECURE=1    plaintext etcd and internal gRPC instead of TLS with client
#                      certificates (var/cluster/certs/)
#   ZEST_CLUSTER_DIR   where everything lives instead of var/cluster (the tests' own folder)
set -eu
build=${1:-build}
cd "$(dirname "$0")/.."

dn=${ZEST_DATANODE_BIN:-$build/datanode/zest-datanode}
gw=$build/s3gw/zest-s3gw
etcd=${ZEST_ETCD:-$(command -v etcd || true)}
members=${ETCD_MEMBERS:-1}
if [ ! -x "$dn" ]; then
	echo "zest-cluster: $dn is not built (make build)" >&2
	exit 1
fi
if [ -z "$etcd" ]; then
	echo "zest-cluster: etcd is not installed (Debian package etcd-server; make deps)" >&2
	exit 1
fi
if [ "$members" != 1 ] && [ "$members" != 3 ]; then
	echo "zest-cluster: ETCD_MEMBERS must be 1 or 3" >&2
	exit 2
fi

: "${ZEST_ACCESS_KEY:=zestadmin}"
: "${ZEST_SECRET_KEY:=zestsecret}"
: "${ZEST_LISTEN:=127.0.0.1:9000}"
export ZEST_ACCESS_KEY ZEST_SECRET_KEY

root=${ZEST_CLUSTER_DIR:-var/cluster}
mkdir -p "$root/log"

# Internal gRPC and etcd over TLS with client certificates: a throwaway CA under $root/certs
# (tools/zest-certs.sh), one certificate per datanode naming its node (DNS:dn-N, its identity:
# peers and the gateway check it) and its own address, usable as server and client (the datanodes dial each
# other and etcd), one per etcd member naming its address (serverAuth and clientAuth: the
# members are each other's peers), and client certificates for the gateway and etcdctl.
# Whoever reaches etcd without one is refused in the handshake. ZEST_INSECURE=1 keeps
# plaintext.
certs=$root/certs
scheme=https
if [ "${ZEST_INSECURE:-0}" = 1 ]; then
	scheme=http
	gw_tls=(--insecure)
	tls_msg="plaintext (ZEST_INSECURE=1)"
	etcd_msg="plaintext, no client authentication (ZEST_INSECURE=1)"
else
	# kept across runs; delete $root/certs for new ones (they last 30 days)
	for f in "$certs"/dn-{1,2,3,4,5,6}.pem "$certs/gateway.pem" "$certs/etcdctl.pem" \
		"$certs"/etcd-{1,2,3}.pem; do
		if ! openssl x509 -checkend 86400 -noout -in "$f" >/dev/null 2>&1; then
			rm -rf "$certs"
			break
		fi
	done
	# a datanode's certificate names its node (its identity in the cluster): older sets
	# without DNS:dn-N are made again
	for n in 1 2 3 4 5 6; do
		if [ -s "$certs/dn-$n.pem" ] && ! openssl x509 -noout -ext subjectAltName \
			-in "$certs/dn-$n.pem" 2>/dev/null | grep -q "DNS:dn-$n\(,\|\$\)"; then
			rm -f "$certs"/dn-*.pem "$certs"/dn-*.key
			break
		fi
	done
	tools/zest-certs.sh ca "$certs"
	for n in 1 2 3 4 5 6; do
		[ -s "$certs/dn-$n.pem" ] ||
			tools/zest-certs.sh server "$certs" "dn-$n" "IP:127.0.0.1$n,DNS:localhost,DNS:dn-$n"
	done
	for i in 1 2 3; do
		[ -s "$certs/etcd-$i.pem" ] ||
			tools/zest-certs.sh server "$certs" "etcd-$i" "IP:127.0.1.$i,DNS:localhost"
	done
	[ -s "$certs/gateway.pem" ] || tools/zest-certs.sh client "$certs" gateway
	[ -s "$certs/etcdctl.pem" ] || tools/zest-certs.sh client "$certs" etcdctl
	gw_tls=(--cluster-ca "$certs/ca.pem" --cluster-cert "$certs/gateway.pem"
		--cluster-key "$certs/gateway.key")
	tls_msg="mutual TLS, CA and certificates in $certs/ (dn-N.pem/.key, gateway.pem/.key)"
	etcd_msg="TLS, client certificates of the CA required (etcd-N.pem/.key, etcdctl.pem/.key)"
fi

# a member's data dir remembers its peer URLs (scheme included): one made over the other
# scheme would not rejoin its peers, so say so rather than start half a cluster
for i in $(seq 1 "$members"); do
	was=http # the data dirs before there was TLS have no mark
	[ -f "$root/etcd$i.scheme" ] && was=$(cat "$root/etcd$i.scheme")
	if [ -d "$root/etcd$i/member" ] && [ "$was" != $scheme ]; then
		echo "zest-cluster: $root/etcd$i was made with $was etcd, this run is $scheme" \
			"(ZEST_INSECURE): delete $root for a new cluster" >&2
		exit 1
	fi
	echo $scheme >"$root/etcd$i.scheme"
done

pids=()
etcd_pids=()
stop() {
	trap - INT TERM EXIT
	echo
	echo "zest-cluster: stopping"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for p in "${etcd_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${etcd_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	exit 0
}
trap stop INT TERM EXIT

# etcd member i on 127.0.1.i: clients on :2379, peers on :2380
initial=""
endpoints=""
for i in $(seq 1 "$members"); do
	initial+="${initial:+,}e$i=$scheme://127.0.1.$i:2380"
	endpoints+="${endpoints:+,}$scheme://127.0.1.$i:2379"
done
for i in $(seq 1 "$members"); do
	a=127.0.1.$i
	etcd_tls=()
	if [ $scheme = https ]; then
		etcd_tls=(--cert-file "$certs/etcd-$i.pem" --key-file "$certs/etcd-$i.key"
			--trusted-ca-file "$certs/ca.pem" --client-cert-auth
			--peer-cert-file "$certs/etcd-$i.pem" --peer-key-file "$certs/etcd-$i.key"
			--peer-trusted-ca-file "$certs/ca.pem" --peer-client-cert-auth)
	fi
	# its own session: Ctrl-C reaches the datanodes, and etcd stays until they deregistered
	setsid "$etcd" --name "e$i" --data-dir "$root/etcd$i" \
		--listen-client-urls "$scheme://$a:2379" --advertise-client-urls "$scheme://$a:2379" \
		--listen-peer-urls "$scheme://$a:2380" --initial-advertise-peer-urls "$scheme://$a:2380" \
		--initial-cluster "$initial" --initial-cluster-token zest-cluster "${etcd_tls[@]}" \
		>>"$root/log/etcd$i.log" 2>&1 &
	etcd_pids+=($!)
done

etcdctl_ok=0
if command -v etcdctl >/dev/null; then etcdctl_ok=1; fi
ctl_tls=()
curl_tls=()
if [ $scheme = https ]; then
	ctl_tls=(--cacert "$certs/ca.pem" --cert "$certs/etcdctl.pem" --key "$certs/etcdctl.key")
	curl_tls=(--cacert "$certs/ca.pem" --cert "$certs/etcdctl.pem" --key "$certs/etcdctl.key")
fi
ctl() { ETCDCTL_API=3 etcdctl --endpoints "$endpoints" "${ctl_tls[@]}" "$@"; }
# the datanodes refuse to start without etcd (docs/cluster.md): wait for a leader first
for _ in $(seq 1 100); do
	if [ $etcdctl_ok = 1 ]; then
		ctl endpoint health >/dev/null 2>&1 && break
	elif curl -sf "${curl_tls[@]}" "$scheme://127.0.1.1:2379/health" >/dev/null 2>&1; then
		break
	fi
	sleep 0.2
done

# datanode n on 127.0.0.1n: gRPC :7480, metrics :7481, drives var/cluster/dn-n/drive0..1.
# Two drives per node for their cell stores; each node coordinates RS(4,2) over the six.
for n in 1 2 3 4 5 6; do
	a=127.0.0.1$n
	mkdir -p "$root/dn-$n/drive0" "$root/dn-$n/drive1"
	dn_tls=(--insecure)
	if [ "${ZEST_INSECURE:-0}" != 1 ]; then
		dn_tls=(--tls-ca "$certs/ca.pem" --tls-cert "$certs/dn-$n.pem" --tls-key "$certs/dn-$n.key")
	fi
	"$dn" --listen "$a:7480" --metrics "$a:7481" --ec 4+2 \
		--drive "$root/dn-$n/drive0" --drive "$root/dn-$n/drive1" \
		--cluster "$endpoints" --node "dn-$n" "${dn_tls[@]}" >>"$root/log/dn-$n.log" 2>&1 &
	pids+=($!)
done

gw_msg="not started (ZEST_NO_GATEWAY=1)"
if [ "${ZEST_NO_GATEWAY:-0}" != 1 ] && [ -x "$gw" ] && ! "$gw" --help | grep -q '^ *--cluster '; then
	gw_msg="not started: this zest-s3gw has no --cluster (the datanodes coordinate every Write)"
elif [ "${ZEST_NO_GATEWAY:-0}" != 1 ] && [ -x "$gw" ]; then
	sleep 1 # the datanodes bind first
	"$gw" --listen "$ZEST_LISTEN" --cluster "$endpoints" --metrics 127.0.0.1:9001 "${gw_tls[@]}" \
		>>"$root/log/s3gw.log" 2>&1 &
	pids+=($!)
	gw_msg="http://$ZEST_LISTEN (region us-east-1, path-style), metrics http://127.0.0.1:9001/metrics
                cluster mode over etcd $endpoints"
fi

sleep 2
cat <<MSG

zest cluster is running (docs/cluster.md, Status: what works today)
  etcd          $endpoints ($members member(s)), data $root/etcd*
                $etcd_msg
  datanodes     dn-1..dn-6 on 127.0.0.11..16: gRPC :7480, metrics :7481
                drives $root/dn-N/drive0..1 (cell stores; Writes coordinated as 4+2)
  internal gRPC $tls_msg
  S3 gateway    $gw_msg
  access key    $ZEST_ACCESS_KEY / $ZEST_SECRET_KEY
  logs          $root/log/ (etcdN.log, dn-N.log, s3gw.log)

  try: ETCDCTL_API=3 etcdctl --endpoints $endpoints ${ctl_tls[*]:+${ctl_tls[*]} }get --prefix /zest/nodes/ --keys-only
       curl -s http://127.0.0.11:7481/metrics | grep zest_cluster_

Ctrl-C stops everything.
MSG
if [ $etcdctl_ok = 1 ]; then
	for _ in $(seq 1 50); do
		[ "$(ctl get --prefix /zest/nodes/ --keys-only 2>/dev/null | grep -c .)" -ge 6 ] && break
		sleep 0.2
	done
	echo "registered in /zest/nodes/ now:" \
		$(ctl get --prefix /zest/nodes/ --keys-only | sed -n 's|^/zest/nodes/||p')
fi
wait -n "${pids[@]}"
echo "zest-cluster: a daemon exited; stopping the others"
