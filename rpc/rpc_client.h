/*
 * rpc_client: the zest.Datanode client over the gRPC core C API (rpc.h has the messages,
 * status and errors it shares with the server).
 *
 * Threading: stream and unary callbacks run on the client's completion-queue threads
 * (rpc_client_opts.cq_threads); with cq_threads > 1 a Write stream's `writable` may
 * overlap its `done`, with the default single thread nothing overlaps. Functions
 * documented "any thread" may be called from anywhere, including callbacks; the blocking
 * rpc_client_call never from a client callback.
 */
#ifndef ZEST_RPC_CLIENT_H
#define ZEST_RPC_CLIENT_H

#include "rpc.h"

/* ------------------------------------------------------------------ client */

struct rpc_client;
struct rpc_cwrite; /* a client Write stream */
struct rpc_cread;  /* a client Read stream */

#define RPC_UNARY_RETRY_MS 3000

struct rpc_client_opts {
	const char *target;  /* "127.0.0.1:7481" */
	unsigned cq_threads; /* 0: 1 */
	size_t max_message;  /* 0: RPC_DEFAULT_MAX_MESSAGE (+ header room) */
	size_t max_inflight; /* per Write stream; 0: 4 MiB */
	unsigned channels;   /* TCP connections, calls spread round-robin; 0: 1, max 16 */
	/* HTTP/2 receive window per stream, fixed (BDP probing off): what a paused Read
	 * stream can still buffer in gRPC. 0: gRPC's default, which BDP probing grows to
	 * tens of MiB per stream. */
	size_t stream_window;
	/* mTLS (rpc_tls.h); plaintext only with tls.insecure. Ignored for a "unix:PATH"
	 * target, which gets local credentials (rpc_unix_is_target). */
	struct rpc_tls tls;
	/* With TLS: the name the server's certificate must carry (a subjectAltName DNS
	 * entry, rpc_tls_cert_names) instead of target's host; a cluster node's name, its
	 * identity. Borrowed for rpc_client_create. NULL: target's host or IP. */
	const char *peer_name;
	/* Every unary call ends with DEADLINE_EXCEEDED this long after it started; 0: none.
	 * Streams never get one: a long Write or Read (a slow client's) is not stuck. */
	unsigned unary_deadline_ms;
	/* Unary retry policy (the client's only one; callers do not loop). A call that fails
	 * because the peer could not be reached (UNAVAILABLE without a zest error: the
	 * channel is connecting, e.g. in its reconnect backoff after the datanode started
	 * late or restarted) is sent again, waiting for the channel to be ready (inside gRPC,
	 * on the completion queue: no sleeping), until the call's deadline, or without one
	 * this many ms after it started (0: RPC_UNARY_RETRY_MS). Retried: the read-only
	 * methods (Stat, List, HeadBucket, ListBuckets) on any such failure; the others only
	 * when their channel was not connected when the call was made, so the request was
	 * not sent. A retry that runs out of time reports the first failure. */
	unsigned unary_retry_ms;
	/* Streams time out on progress instead: a Write or Read whose peer owes it something
	 * (to take a queued message, i.e. reopen its flow-control window; a message; the
	 * reply or status) and gives nothing for this long is cancelled, and its `done` gets
	 * UNAVAILABLE, err ZC_E(ZC_UNAVAILABLE), "no progress from the peer for N ms". Each
	 * message taken or received restarts the clock, so a slow but moving stream is never
	 * cut; time the caller spends (between its sends, a Read paused by its chunk callback)
	 * never counts. After a Write's commit is taken the reply is the next progress: the
	 * timeout must cover what the peer needs to drain the bytes its windows let us send
	 * ahead (up to MiBs) and to commit. The default of every stream of the client
	 * (rpc_cwrite_progress_timeout and rpc_cread_progress_timeout set one stream's); 0: none. A
	 * stream is cut between its timeout and about 100 ms later (one watchdog thread per
	 * client). */
	unsigned progress_timeout_ms;
};

/* Connect lazily to target (calls grpc_init). Returns 0 and *out, -EINVAL / -ENOMEM, or
 * what rpc_tls_pem_load returns for bad TLS settings (logged with the reason). With TLS
 * the server's certificate must name target's host (DNS or IP subjectAltName), or
 * opts->peer_name when set. */
int rpc_client_create(const struct rpc_client_opts *opts, struct rpc_client **out);
/* Cancel nothing: every stream must be done before. Joins threads. NULL: no-op. */
void rpc_client_destroy(struct rpc_client *c);
/*
 * Wait until every channel of c is connected (TCP and TLS), at most timeout_ms: 0, or
 * ZC_E(ZC_UNAVAILABLE) when a channel failed to connect (or waits to reconnect after a
 * failure) or the time passed. Connected channels answer at once. For a caller that has
 * somewhere else to go (the gateway trying the next coordinator before it streams a
 * byte). Blocks; never from a client callback.
 */
int rpc_client_connect(struct rpc_client *c, unsigned timeout_ms);
/*
 * At program end, after every rpc object (client, server) is destroyed: wait until gRPC
 * has finished its own clean-up, at most timeout_ms. A channel destroyed while it still
 * reconnects (to a node that is down) lets go of the library later, on a gRPC thread, and
 * exit() must not run OpenSSL's clean-up under that thread. Waits on an event (every line
 * gRPC logs, through a log hook installed here, rpc_exit.c), not on a timer. Returns 1 when
 * gRPC is no longer initialized, 0 when the time ran out first (logged). Main thread only.
 */
int rpc_shutdown_wait(unsigned timeout_ms);

/*
 * Write stream callbacks (client CQ thread).
 *  writable: in-flight bytes fell below max_inflight after a send returned -EAGAIN.
 *  done:     the call is over; st has the status, res the result when OK (borrowed for
 *            the callback). Called exactly once. Afterwards rpc_cwrite_destroy().
 */
struct rpc_cwrite_cbs {
	void (*writable)(void *arg, struct rpc_cwrite *w);
	void (*done)(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
	             const struct rpc_write_result *res);
};

/* Start a Write call with this open (borrowed; packed at once). Returns 0 and *out. */
int rpc_cwrite_open(struct rpc_client *c, const struct rpc_write_open *open,
                    const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out);
/*
 * Start a WriteCell call (open borrowed; packed at once). The stream is then driven like a
 * Write, and `done` gets the CellResult as res->size (the cell's length) and res->crc32c
 * (of the whole cell; etag NULL, mtime_ns 0): rpc_cwrite_send for the cell's bytes, by reference
 * (a coordinator forwards its gRPC receive slices as they are), and rpc_cwrite_commit
 * with commit NULL to end it. Returns 0 and *out, -EINVAL, -ENOMEM, -EIO.
 */
int rpc_cwrite_open_cell(struct rpc_client *c, const struct rpc_cell_open *open,
                         const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out);
/*
 * Queue one WriteChunk (CellChunk on a WriteCell stream) carrying segs (the next bytes of the
 * object; the client tracks the offset and computes the CRC32C). The bytes are not copied: each
 * segment's ref is taken and put once gRPC is done with it. Returns 0; -EAGAIN when in-flight bytes
 * are at max_inflight (nothing queued: wait for `writable`); -EINVAL when the message would exceed
 * max_message; -ECANCELED after commit or cancel, or once the call has failed (its status then
 * arrives through `done`). Any thread.
 */
int rpc_cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs);
/* The same, with crc32c the CRC32C of the segments' bytes, computed by a caller that read
 * them anyway (the gateway, in its one pass over a span's digests): rpc reads nothing. */
int rpc_cwrite_send_crc(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
                        uint32_t crc32c);
/*
 * Queue the last WriteChunk (commit = true, optional final data, and commit's etag,
 * attrs and condition; commit borrowed, NULL: none of them) and half-close. Never
 * -EAGAIN (the cap is not applied). A WriteCell stream takes commit NULL (-EINVAL
 * otherwise). Any thread.
 */
int rpc_cwrite_commit(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
                      const struct rpc_commit *commit);
/* Cancel the call; `done` follows with CANCELLED (unless already done). Any thread. */
void rpc_cwrite_cancel(struct rpc_cwrite *w);
/* Set this stream's progress timeout (rpc_client_opts.progress_timeout_ms; 0: none), in
 * place of the client's default, from now on. Returns 0 or -EAGAIN (no thread for the
 * watchdog: the stream is then not watched). Any thread, before rpc_cwrite_destroy. */
int rpc_cwrite_progress_timeout(struct rpc_cwrite *w, unsigned timeout_ms);
/* Free a stream after its `done` callback ran (may be called inside `done`). */
void rpc_cwrite_destroy(struct rpc_cwrite *w);

/* Test builds (zc_fault.h, ZC_FAULTS) fault a WriteCell stream's messages at the point
 * "peer.send", instance this client's target, hit = the stream's message number (the
 * open's is 1, the commit's the last): delay (each message, as a slow link), drop (never
 * sent; the peer sees an offset gap or a stream that never ends), reset (the call is
 * cancelled instead, as a reset connection would end it). */

/*
 * Read stream callbacks (client CQ thread).
 *  chunk: one ReadChunk; segs point into gRPC's receive slices (zero-copy), borrowed for
 *         the callback unless zc_ref_get. info is set on the first chunk. The CRC was
 *         verified. Return 0 to continue or 1 to pause until rpc_cread_resume() (any
 *         thread; a resume that comes while the callback still runs cancels its pause).
 *  done:  exactly once; afterwards rpc_cread_destroy().
 */
struct rpc_cread_cbs {
	int (*chunk)(void *arg, struct rpc_cread *r, const struct rpc_object_info *info,
	             uint64_t offset, const struct zc_seg *segs, size_t n_segs, size_t len);
	void (*done)(void *arg, struct rpc_cread *r, const struct rpc_status *st);
};

/* Start a Read call (req borrowed; packed at once). Returns 0 and *out. */
int rpc_cread_open(struct rpc_client *c, const struct rpc_read_req *req,
                   const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out);
/* Start a ReadCell call: the same callbacks, info always NULL. */
int rpc_cread_open_cell(struct rpc_client *c, const struct rpc_cell_read_req *req,
                        const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out);
void rpc_cread_resume(struct rpc_cread *r);
void rpc_cread_cancel(struct rpc_cread *r);
/* As rpc_cwrite_progress_timeout, for a Read stream (a paused one is never cut). */
int rpc_cread_progress_timeout(struct rpc_cread *r, unsigned timeout_ms);
void rpc_cread_destroy(struct rpc_cread *r);

/*
 * Unary call of method m with its request (the union member m names; NULL for
 * ListBuckets), borrowed and packed at once. cb runs once on a client thread with the
 * status and, when OK, the response (borrowed for the callback; NULL otherwise).
 * Returns 0, or -EINVAL (not a unary method, no cb) / -ENOMEM / -EIO with no callback.
 */
typedef void (*rpc_unary_cb)(void *arg, const struct rpc_status *st,
                             const struct rpc_unary_resp *resp);
int rpc_client_call_async(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
                          rpc_unary_cb cb, void *arg);

/*
 * Blocking unary call (never from a client callback). On OK *resp is the response,
 * owned by the caller until rpc_unary_resp_fini(resp); otherwise *resp is zeroed
 * (fini is still safe). Returns 0 when the status is OK, else its error
 * (struct rpc_status) (st, optional, has the details).
 */
int rpc_client_call(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
                    struct rpc_unary_resp *resp, struct rpc_status *st);

#endif
