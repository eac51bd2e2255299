/*
 * rpc_chan: the gRPC channel arguments of zest's gRPC endpoints, built in one place: the
 * zest.Datanode client and server (rpc/) and the etcd client (cluster/cl_etcd.c). Part of
 * the small zest_rpc_tls library (with rpc_tls.h), which both modules link.
 *
 * Every client channel runs with gRPC's own retries off (the callers' failover and retry
 * policies are theirs, and the retry filter would hold sent messages), and with a short
 * reconnect backoff when asked (gRPC's default grows to 120 s, and every call to a
 * channel waiting to reconnect fails at once).
 *
 * Threading: no state; any thread. The arguments point into *a: keep it alive until the
 * channel or server is created (gRPC copies them).
 */
#ifndef ZEST_RPC_CHAN_H
#define ZEST_RPC_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

struct rpc_chan_opts {
	bool server;                 /* a server's arguments: no client-only ones */
	uint64_t max_message;        /* send and receive limit, bytes (clamped to INT32_MAX);
	                              * 0: gRPC's defaults */
	uint64_t max_recv;           /* receive limit only, if max_message is 0; 0: default */
	bool own_connection;         /* a channel-local subchannel pool */
	unsigned reconnect_first_ms; /* first reconnect backoff; 0: gRPC's */
	unsigned reconnect_max_ms;   /* its ceiling; 0: gRPC's */
	unsigned connect_ms;         /* floor of one connection attempt's deadline (gRPC's
	                              * MIN_RECONNECT_BACKOFF, TLS handshake included) */
	size_t stream_window;        /* fixed HTTP/2 stream window, no BDP probing; 0: gRPC's */
	bool no_reuseport;           /* server: a second process on the port fails */
	/* client with TLS: the name the server's certificate must carry (a subjectAltName
	 * DNS entry) instead of the target's host (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG);
	 * borrowed until the channel is created. NULL: the target's host or IP. */
	const char *peer_name;
};

#define RPC_CHAN_MAX_ARGS 12

struct rpc_chan_args {
	grpc_arg arg[RPC_CHAN_MAX_ARGS];
	grpc_channel_args args; /* pass &args to grpc_channel_create / grpc_server_create */
};

/* Fill a from o. */
void rpc_chan_args_init(struct rpc_chan_args *a, const struct rpc_chan_opts *o);

#endif
