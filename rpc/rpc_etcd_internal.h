/*
 * rpc_etcd internals, shared by the client's files. Private to rpc/.
 *   rpc_etcd.c        endpoints, channels, the blocking call with failover, errors
 *   rpc_etcd_tls.c    channel credentials for https:// endpoints
 *   rpc_etcd_kv.c     get, range, put, delete, txn: zest structs <-> etcdserverpb
 *   rpc_etcd_lease.c  lease grant and revoke, the keepalive thread
 */
#ifndef ZEST_RPC_ETCD_INTERNAL_H
#define ZEST_RPC_ETCD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "rpc_etcd.h"
#include "etcd.pb-c.h"

enum etcd_method {
	ETCD_RANGE,
	ETCD_PUT,
	ETCD_DELETE_RANGE,
	ETCD_TXN,
	ETCD_LEASE_GRANT,
	ETCD_LEASE_REVOKE,
	ETCD_LEASE_KEEPALIVE,
	ETCD_METHOD_COUNT
};

struct etcd_endpoint {
	char *target; /* host:port, without the scheme */
	grpc_channel *ch;
	void *method[ETCD_METHOD_COUNT]; /* grpc_channel_register_call handles */
};

struct rpc_etcd {
	struct etcd_endpoint ep[RPC_ETCD_MAX_ENDPOINTS];
	unsigned n_ep;
	atomic_uint cur; /* the endpoint calls go to first */
	unsigned timeout_ms;
	grpc_completion_queue *cq; /* every call completes here */
	pthread_t thread;          /* serves cq, wakes the callers */
	bool thread_started;
};

/*
 * One blocking call of method m: pack req, send it to the current endpoint, fail over on
 * UNAVAILABLE (rpc_etcd.h), unpack the reply as resp_desc into *resp (the caller frees it
 * with protobuf_c_message_free_unpacked). LeaseKeepAlive, a bidi stream, goes through here
 * too as a stream of one request: etcd answers each request it reads, and a stream per
 * renewal gets each renewal its own deadline and failover. Returns 0 or the error.
 */
int etcd_call(struct rpc_etcd *c, enum etcd_method m, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
              unsigned timeout_ms);

/* ---- rpc_etcd_tls.c */
/* Credentials for https:// endpoints from opts' PEM files; NULL files: system roots, no
 * client certificate. Returns 0 and *out (release with grpc_channel_credentials_release)
 * or -EINVAL (unreadable file, cert without key), -ENOMEM. */
int etcd_tls_credentials(const struct rpc_etcd_opts *opts, grpc_channel_credentials **out);

#endif
