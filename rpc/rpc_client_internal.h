/*
 * rpc client: Write streams that put the caller's memory on the wire without a copy,
 * Read streams that hand back zero-copy segments, and unary calls, all completing on
 * the client's own completion-queue threads.
 *
 * Each stream object counts references: one for the caller (dropped by _destroy) and
 * one per batch outstanding, so a stream destroyed inside its done callback stays valid
 * until gRPC has returned every batch.
 *
 * rpc_client_internal.h: what the client's files share. Private to rpc/.
 *   rpc_client.c      channels, the completion-queue threads, create and destroy
 *   rpc_cli_write.c   Write streams: queued sends with an in-flight bound, commit, cancel
 *   rpc_cli_read.c    Read streams: one message received at a time, pause and resume
 *   rpc_cli_unary.c   unary calls (async and blocking) and the blocking rpc_client_put
 */
#ifndef ZEST_RPC_CLIENT_INTERNAL_H
#define ZEST_RPC_CLIENT_INTERNAL_H

#include <grpc/grpc.h>
#include <stdatomic.h>

#include "rpc_internal.h"

struct ctag {
	void (*fn)(void *obj, bool success);
	void *obj;
};

#define MAX_CHANNELS     16
#define RPC_RECONNECT_MS 1000 /* longest wait before reconnecting to a lost datanode */

struct rpc_client {
	grpc_channel *ch[MAX_CHANNELS];
	void *methods[MAX_CHANNELS][RPC_METHOD_COUNT];
	unsigned n_channels;
	atomic_uint next_channel;
	grpc_completion_queue *cq;
	pthread_t *threads;
	unsigned n_threads;
	size_t max_message, max_inflight;
	unsigned unary_deadline_ms; /* every unary call's; 0: none */
#ifdef RPC_FAULTS
	pthread_mutex_t fault_mu;
	struct rpc_fault fault; /* for WriteCell streams opened next */
#endif
};

/* ---- rpc_client.c */
grpc_call *rpc_client_new_call(struct rpc_client *c, enum rpc_method m);
void rpc_client_fill_status(struct rpc_status *st, grpc_status_code code, grpc_slice details,
                            const grpc_metadata_array *trailing);

#endif
