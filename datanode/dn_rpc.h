/*
 * dn_rpc: the binding of the storage engine (dn.h) to the gRPC server (rpc.h), used by
 * zest-datanode's main.c. Private to the datanode binary (not part of libzest_datanode).
 *
 * Threads: the rpc server's CQ threads run the callbacks and never block on the engine;
 * a pool of write workers runs dn_write_begin/data/commit (which may block for pool
 * buffers and the in-flight cap) with each call's jobs in order; a call that admission
 * paces or queues is parked without a worker until the store's dn-admit thread hands it
 * back (dn_admission_try); a pool of reader
 * threads steps each Read (dn_read_next, ~1 MiB of whole stripes), hands the ReadChunk to
 * gRPC and takes the next call: the `sent` callback queues the call again, so a slow
 * client holds one message in flight and no thread. Commit callbacks run on the store's
 * commit thread and finish the call there. The unary calls that write metadata (Delete,
 * Compose, bucket create/delete) run on the commit thread too (dn_mcall_submit), batched,
 * their replies deferred.
 */
#ifndef ZEST_DN_RPC_H
#define ZEST_DN_RPC_H

#include "dn.h"
#include "rpc_server.h"

struct dn_rpc;

struct dn_rpc_opts {
	unsigned write_workers; /* 0: 4 */
	unsigned readers;       /* 0: 4 */
	size_t call_cap;        /* payload bytes queued per Write call before it pauses; 0: 8 MiB */
	/* Cluster mode: every Write is coordinated (dn_coord.h) once dn_rpc_set_coord gave the
	 * coordinator; before that Writes are refused (UNAVAILABLE). */
	bool cluster;
};

/* Create the binding over an open store; fills *h for rpc_server_create. Returns 0 or
 * -ENOMEM. */
int dn_rpc_create(struct dn_store *s, const struct dn_rpc_opts *opts, struct dn_rpc **out,
                  struct rpc_server_handlers *h);

/* Cluster mode: the coordinator that serves Writes from now on (borrowed; it must outlive
 * the server's calls). Any thread. */
struct dn_coord;
void dn_rpc_set_coord(struct dn_rpc *b, struct dn_coord *coord);

/* Stop the pools. Call after rpc_server_destroy (which waits for every call to be
 * finished by the binding) and before dn_store_close. NULL: no-op. */
void dn_rpc_destroy(struct dn_rpc *b);

/*
 * The status of a Write the engine failed with err (bucket/key, scheme k+m; k 0: the
 * store default): writes the message for people into buf and returns the error to send
 * (its zest code goes in the "zest-err" trailer): ZC_E(ZC_NO_QUORUM) "write quorum not met: N of
 * M drives (quorum Q)", -ENOSPC "No space: ...", -EIO (INTERNAL) "metadata I/O error ...",
 * ZC_NO_BUCKET the bucket, -EAGAIN busy drives, -EINVAL refused by the store.
 */
int dn_rpc_write_errmsg(struct dn_store *s, unsigned k, unsigned m, const char *bucket,
                        const char *key, int err, char *buf, size_t len);

/* The dn_metrics_hook exporting rpc_stats as zest_payload_* series; arg: the dn_store (or
 * NULL), whose data_direct copies are added to stage "align". */
void dn_rpc_metrics(FILE *out, void *arg);

#endif
