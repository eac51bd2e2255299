#!/usr/bin/env bash
# Real S3 clients against zest-s3gw-mem (the gateway over the in-memory TEST DOUBLE
# backend), plain HTTP and TLS: curl --aws-sigv4, the machine's python3 boto3 (recent:
# flexible checksums, trailers over TLS), Debian's /usr/bin/python3 boto3 (older), awscli
# (aws s3 cp both ways, multipart). A client that is not installed is skipped and named;
# the test fails if none of the boto3 clients ran. Usage: test_s3_clients.sh MEMGW SCRIPT_DIR
set -u
memgw=$1
here=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
AK=clientkey SK=clientsecret

start() { # name extra-args...
	local name=$1
	shift
	"$memgw" --listen 127.0.0.1:0 --access-key $AK --secret-key $SK "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=($!)
	for _ in $(seq 50); do
		grep -q 'listening port=' "$tmp/$name.out" 2>/dev/null && break
		sleep 0.1
	done
	grep -o ' port=[0-9]*' "$tmp/$name.out" | cut -d= -f2
}

port=$(start plain --metrics 127.0.0.1:0) || fail "gateway did not start"
[ -n "$port" ] || fail "gateway did not start: $(cat "$tmp/plain.err")"
mport=$(grep -o 'metrics_port=[0-9]*' "$tmp/plain.out" | cut -d= -f2)
url=http://127.0.0.1:$port
ran=0 skipped=""

# --- curl --aws-sigv4 (curl does not send x-amz-content-sha256 by itself)
if command -v curl >/dev/null; then
	c() { curl -s --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"; }
	head -c 300000 /dev/urandom >"$tmp/blob"
	[ "$(c -o /dev/null -w '%{http_code}' -X PUT "$url/curlb")" = 200 ] || fail "curl create bucket"
	[ "$(c -o /dev/null -w '%{http_code}' -T "$tmp/blob" "$url/curlb/k%28x%29%20y")" = 200 ] || fail "curl put"
	c -o "$tmp/blob.back" "$url/curlb/k(x)%20y"
	cmp -s "$tmp/blob" "$tmp/blob.back" || fail "curl get bytes differ"
	c "$url/curlb?list-type=2&encoding-type=url" | grep -q '<Key>k%28x%29%20y</Key>' || fail "curl list"
	code=$(curl -s -o "$tmp/err" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:wrong" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$url/curlb?list-type=2")
	[ "$code" = 403 ] && grep -q SignatureDoesNotMatch "$tmp/err" || fail "curl bad signature: $code"
	md5=$(printf 'AAAAAAAAAAAAAAAAAAAAAA==')
	code=$(c -o "$tmp/err" -w '%{http_code}' -H "Content-MD5: $md5" -T "$tmp/blob" "$url/curlb/md5")
	[ "$code" = 400 ] && grep -q BadDigest "$tmp/err" || fail "curl Content-MD5: $code"
	[ "$(c -o /dev/null -w '%{http_code}' "$url/curlb/md5")" = 404 ] || fail "bad-digest object stored"
	c -X DELETE "$url/curlb/k(x)%20y" && c -X DELETE "$url/curlb"
	echo "OK [curl]"
	ran=$((ran + 1))
else
	skipped+=" curl"
fi

# --- boto3, both interpreters, plain HTTP
b3=0
for py in python3 /usr/bin/python3; do
	if command -v "$py" >/dev/null && "$py" -c 'import boto3' 2>/dev/null; then
		(cd "$tmp" && timeout 300 "$py" -W ignore "$here/e2e_boto3.py" "$url" $AK $SK) || fail "$py boto3"
		b3=$((b3 + 1))
	else
		skipped+=" $py-boto3"
	fi
done

# --- awscli: aws s3 cp both ways (20 MB goes multipart with awscli's 8 MiB default)
if command -v aws >/dev/null && aws --version >/dev/null 2>&1; then
	export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_DEFAULT_REGION=us-east-1
	a() { aws --endpoint-url "$url" "$@" >/dev/null; }
	head -c 20000000 /dev/urandom >"$tmp/f20"
	a s3 mb s3://awscli || fail "aws mb"
	a s3 cp "$tmp/f20" "s3://awscli/dir/f 20" || fail "aws cp up"
	a s3 cp "s3://awscli/dir/f 20" "$tmp/f20.back" || fail "aws cp down"
	cmp -s "$tmp/f20" "$tmp/f20.back" || fail "aws bytes differ"
	aws --endpoint-url "$url" s3api head-object --bucket awscli --key "dir/f 20" | grep -q '"ETag": "\\"[0-9a-f]*-3\\""' ||
		fail "aws multipart etag"
	a s3 rm --recursive s3://awscli && a s3 rb s3://awscli || fail "aws cleanup"
	echo "OK [awscli]"
	ran=$((ran + 1))
else
	skipped+=" awscli"
fi

# --- TLS endpoint: boto3 (recent botocore sends aws-chunked with trailers over TLS), awscli
if command -v openssl >/dev/null; then
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
		-subj /CN=127.0.0.1 2>/dev/null || fail "openssl req"
	tport=$(start tls --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem")
	[ -n "$tport" ] || fail "TLS gateway did not start: $(cat "$tmp/tls.err")"
	for py in python3 /usr/bin/python3; do
		if command -v "$py" >/dev/null && "$py" -c 'import boto3' 2>/dev/null; then
			(cd "$tmp" && timeout 300 "$py" -W ignore "$here/e2e_boto3.py" "https://127.0.0.1:$tport" \
				$AK $SK --tls) || fail "$py boto3 over TLS"
		fi
	done
	if command -v aws >/dev/null; then
		t() { aws --endpoint-url "https://127.0.0.1:$tport" --no-verify-ssl "$@" >/dev/null 2>&1; }
		t s3 mb s3://tlsb && t s3 cp "$tmp/f20" s3://tlsb/f && t s3 cp s3://tlsb/f "$tmp/f20.tls" &&
			cmp -s "$tmp/f20" "$tmp/f20.tls" && t s3 rm s3://tlsb/f && t s3 rb s3://tlsb ||
			fail "awscli over TLS"
		echo "OK [awscli tls]"
	fi
else
	skipped+=" tls(openssl)"
fi

# --- metrics endpoint and zero-copy accounting
curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/metrics" || fail "metrics"
grep -q 'zest_s3_requests_total{op="put_object",code="2x"}' "$tmp/metrics" || fail "metrics content"
grep -q 'zest_payload_copied_bytes_total{stage="rbuf_carry"}' "$tmp/metrics" || fail "copy metric"

[ "$b3" -gt 0 ] || fail "no boto3 found (install python3-boto3)"
echo "clients ran: curl/awscli=$ran boto3=$b3; skipped:${skipped:- none}"
