#!/usr/bin/env bash
# zest-certs.sh: a throwaway cluster CA and certificates for zest's internal mTLS, made
# with the openssl CLI. `make run` and the tests use it; `make cluster` will too.
#
#   zest-certs.sh DIR                     CA + datanode (server) + gateway (client) in DIR
#   zest-certs.sh ca DIR                  DIR/ca.pem, DIR/ca.key (kept if already there)
#   zest-certs.sh server DIR NAME [SAN]   DIR/NAME.pem, DIR/NAME.key for a datanode
#   zest-certs.sh client DIR NAME         DIR/NAME.pem, DIR/NAME.key for a gateway or tool
#
# SAN defaults to IP:127.0.0.1,DNS:localhost: a client checks the datanode's certificate
# against the address it dials, so name every address clients use. DNS:NAME is always
# added: in a cluster NAME is the datanode's --node, its identity (peers and gateways
# count a node only when its certificate names it). A server certificate also acts as a
# client (serverAuth,clientAuth): datanodes talk to each other.
# Keys are EC P-256, certificates valid for 30 days; keys are mode 0600. Not for
# production: there, the operator's own CA signs the certificates (docs/operations.md).
set -eu

days=30
umask 077

die() {
	echo "zest-certs: $*" >&2
	exit 2
}

make_ca() {
	local dir=$1
	mkdir -p "$dir"
	[ -s "$dir/ca.pem" ] && [ -s "$dir/ca.key" ] && return 0
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
		-subj "/CN=zest cluster CA $(date -u +%Y%m%dT%H%M%SZ)-$$" \
		-addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null ||
		die "openssl could not make the CA in $dir"
}

# sign DIR NAME EXTENSIONS
sign() {
	local dir=$1 name=$2 ext=$3
	[ -s "$dir/ca.pem" ] || die "no CA in $dir (run: zest-certs.sh ca $dir)"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-subj "/CN=$name" -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null ||
		die "openssl could not make the key for $name"
	printf '%b' "$ext" >"$dir/$name.ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-CAcreateserial -days "$days" -extfile "$dir/$name.ext" \
		-out "$dir/$name.pem" 2>/dev/null || die "openssl could not sign $name"
	rm -f "$dir/$name.csr" "$dir/$name.ext"
}

server() {
	local san=${3:-IP:127.0.0.1,DNS:localhost}
	case ",$san," in
	*",DNS:$2,"*) ;;
	*) san="$san,DNS:$2" ;;
	esac
	sign "$1" "$2" "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=$san\n"
}

client() {
	sign "$1" "$2" "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
}

command -v openssl >/dev/null || die "the openssl command is not installed (Debian: openssl)"
case ${1:-} in
ca)
	[ $# -eq 2 ] || die "usage: zest-certs.sh ca DIR"
	make_ca "$2"
	;;
server)
	[ $# -ge 3 ] && [ $# -le 4 ] || die "usage: zest-certs.sh server DIR NAME [SAN]"
	server "$2" "$3" "${4:-}"
	;;
client)
	[ $# -eq 3 ] || die "usage: zest-certs.sh client DIR NAME"
	client "$2" "$3"
	;;
"" | -h | --help)
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
	[ $# -eq 1 ] && exit 0
	exit 2
	;;
*)
	[ $# -eq 1 ] || die "usage: zest-certs.sh DIR (or ca|server|client ...; see --help)"
	make_ca "$1"
	[ -s "$1/datanode.pem" ] || server "$1" datanode
	[ -s "$1/gateway.pem" ] || client "$1" gateway
	;;
esac
