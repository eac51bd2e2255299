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
 *   rpc_cli_watch.c   the progress watchdog: cancels streams whose peer stopped moving
 */
#ifndef ZEST_RPC_CLIENT_INTERNAL_H
#define ZEST_RPC_CLIENT_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rpc_client.h"
#include "rpc_internal.h"
#include "zc_fault.h"

struct ctag {
	void (*fn)(void *obj, bool success);
	void *obj;
};

/*
 * A stream's progress clock, watched by its client's watchdog thread (rpc_cli_watch.c).
 * since_ns is when the peer started to owe the stream something (a send to take, a message
 * or the status to come) or last gave it; 0 while the peer owes nothing (idle between the
 * caller's sends, paused by the caller, over). Set with atomic stores by the stream, under
 * its own lock or not; the watchdog only reads it, so the stream never waits for it.
 */
struct rpc_cli_timed {
	struct rpc_cli_timed *prev, *next; /* on the client's list while linked */
	grpc_call *call;
	_Atomic uint64_t since_ns;
	atomic_uint timeout_ms; /* 0: not watched */
	bool linked;            /* under the client's watch_mu */
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
	unsigned unary_deadline_ms;   /* every unary call's; 0: none */
	unsigned unary_retry_ms;      /* unary retries' budget without a deadline */
	unsigned progress_timeout_ms; /* the streams' default; 0: none */
	/* the watchdog: its list of watched streams, its thread (started by the first) */
	pthread_mutex_t watch_mu;
	pthread_cond_t watch_cv;
	struct rpc_cli_timed *watched;
	pthread_t watch_thread;
	bool watch_running, watch_stop;
#ifdef ZC_FAULTS
	char *fault_inst; /* the target: "peer.send"'s instance (zc_fault.h) */
#endif
};

/* ---- for tests and test tools (through the rpc include directory) */
/* Bytes queued and not yet handed to the transport. */
size_t rpc_cwrite_inflight(const struct rpc_cwrite *w);
/*
 * Blocking Write of one buffer (tests and their stand-in servers): open, chunks of `chunk` bytes,
 * commit. buf is borrowed until return (it waits until gRPC released every slice). res (optional)
 * receives size, crc32c and mtime_ns (etag NULL: nothing outlives the call). Returns 0 or the
 * -errno of the status (st has the details).
 */
int rpc_client_put(struct rpc_client *c, const struct rpc_write_open *open, const void *buf,
                   size_t len, size_t chunk, struct rpc_write_result *res, struct rpc_status *st);

/* ---- rpc_client.c */
grpc_call *rpc_client_new_call(struct rpc_client *c, enum rpc_method m);
/* A unary call with deadline dl on the next channel; *ready: that channel was connected
 * when the call was made (rpc_cli_unary.c's retry policy). */
grpc_call *rpc_client_new_unary(struct rpc_client *c, enum rpc_method m, gpr_timespec dl,
                                bool *ready);

/* ---- rpc_cli_watch.c */
void rpc_cli_watch_init(struct rpc_client *c);
void rpc_cli_watch_fini(struct rpc_client *c); /* every stream unlinked; joins the thread */
/* Watch t (t->call set) for timeout_ms (0: stop watching; it stays linked until unlink).
 * Returns 0, or -EAGAIN when the watchdog thread cannot be started. */
int rpc_cli_watch_set(struct rpc_client *c, struct rpc_cli_timed *t, unsigned timeout_ms);
/* Before the stream (and its call) is freed; a no-op when not linked. */
void rpc_cli_watch_unlink(struct rpc_client *c, struct rpc_cli_timed *t);
/* The peer owes the stream something from now (a new progress point) / owes nothing. */
void rpc_cli_timed_arm(struct rpc_cli_timed *t);
static inline void
rpc_cli_timed_idle(struct rpc_cli_timed *t)
{
	atomic_store_explicit(&t->since_ns, 0, memory_order_relaxed);
}

#endif
