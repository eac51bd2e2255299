#!/usr/bin/env bash
# The job behind `make scale`: the cluster scale simulation (tools/zest_scale.py). For each
# scheme (RS 4+2 and 8+4), etcd, 16 datanodes x 10 drive folders on tmpfs (/dev/shm), the
# gateway --cluster, and zest-bench s3 put with 64 MiB objects, 40 streams, 60 s; prints
# per-node ingest, datanode CPU-seconds per payload GiB (from /proc) and network bytes per
# payload byte (from the forwarded-bytes metrics). Not part of `make test`.
#
#   zest-scale.sh [BUILD]          (default build)
#   ZEST_SCALE_SECONDS=10 ZEST_SCALE_STREAMS=8 ZEST_SCALE_SCHEMES=4+2   a quick run
#   ZEST_SCALE_NODES, ZEST_SCALE_DRIVES, ZEST_SCALE_SIZE, ZEST_SCALE_DIR, ZEST_SCALE_JSON
#   (tools/zest_scale.py says what each means); ZEST_INSECURE=1 for plaintext gRPC.
set -eu
cd "$(dirname "$0")/.."
ZEST_BUILD=$(cd "${1:-build}" && pwd)
export ZEST_BUILD
exec python3 tools/zest_scale.py
