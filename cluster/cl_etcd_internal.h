/*
 * cl_etcd internals, shared by the client's files. Private to cluster/.
 *   cl_etcd.c        endpoints, channels, the blocking call with failover, errors
 *   cl_etcd_tls.c    channel credentials for https:// endpoints
 *   cl_etcd_kv.c     get, range, put, delete, txn: zest structs <-> etcdserverpb
 *   cl_etcd_lease.c  lease grant and revoke, the keepalive thread
 */
#ifndef ZEST_CL_ETCD_INTERNAL_H
#define ZEST_CL_ETCD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "cl_etcd.h"
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

struct cl_etcd {
	struct etcd_endpoint ep[CL_ETCD_MAX_ENDPOINTS];
	unsigned n_ep;
	atomic_uint cur; /* the endpoint calls go to first */
	unsigned timeout_ms;
	grpc_completion_queue *cq; /* every call completes here */
	pthread_t thread;          /* serves cq, wakes the callers */
	bool thread_started;
	/* cl_etcd_lease_shared's lease and when it was granted (zc_now_ns), under lease_mu */
	pthread_mutex_t lease_mu;
	int64_t shared_lease;
	uint64_t shared_at_ns;
};

/*
 * One blocking call of method m: pack req, send it to the current endpoint, fail over on
 * UNAVAILABLE (cl_etcd.h), unpack the reply as resp_desc into *resp (the caller frees it
 * with protobuf_c_message_free_unpacked). LeaseKeepAlive, a bidi stream, goes through here
 * too as a stream of one request: etcd answers each request it reads, and a stream per
 * renewal gets each renewal its own deadline and failover. Returns 0 or the error.
 */
int cl_etcd_call(struct cl_etcd *c, enum etcd_method m, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                 unsigned timeout_ms);

/* Start a batch on a call made on c->cq and wait until it completes: 1 if it succeeded,
 * 0 if it completed without success, -EIO if it could not be started. */
int cl_etcd_batch(struct cl_etcd *c, grpc_call *call, const grpc_op *ops, size_t n);

/* msg packed into a new slice (unref it). */
grpc_slice cl_etcd_pack(const ProtobufCMessage *msg);

/* A received message as desc (NULL when missing or malformed); bb stays the caller's. */
ProtobufCMessage *cl_etcd_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb);

/* ---- cl_etcd_kv.c */
/* The [key, end) etcd wants for r (prefix ends computed); *owned (free it) holds a computed
 * end. 0, -EINVAL or -ENOMEM. */
int cl_etcd_range_bounds(const struct cl_etcd_range *r, ProtobufCBinaryData *key,
                         ProtobufCBinaryData *end, uint8_t **owned);

/* Copy etcd's kvs into out (one allocation, cl_etcd_kvs_fini). 0 or -ENOMEM. */
int cl_etcd_kvs_copy(Mvccpb__KeyValue **in, size_t n, struct cl_etcd_kvs *out);

/* ---- cl_etcd_tls.c */
/* Credentials for https:// endpoints from opts' PEM files; NULL files: system roots, no
 * client certificate. Returns 0 and *out (release with grpc_channel_credentials_release)
 * or -EINVAL (unreadable file, cert without key), -ENOMEM. */
int cl_etcd_tls_credentials(const struct cl_etcd_opts *opts, grpc_channel_credentials **out);

#endif
