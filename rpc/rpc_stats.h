/*
 * rpc_stats: the transport's payload ledger, for /metrics and zest-prof: bytes received,
 * bytes the copy marshaller copied in user space by stage, buffers still referenced; and
 * the heap tuning a zero-copy server wants.
 *
 * Threading: every function here is safe from any thread (atomic counters).
 */
#ifndef ZEST_RPC_STATS_H
#define ZEST_RPC_STATS_H

#include <stdint.h>

enum rpc_copy_stage {
	RPC_STAGE_GATHER, /* copy mode: the message gathered into one buffer */
	RPC_STAGE_UNPACK, /* copy mode: protobuf-c unpack copies `data` into the heap */
	RPC_STAGE_ALIGN,  /* copy mode: the copy into aligned write buffers */
	RPC_STAGE_COUNT
};

/* Process-wide payload counters (monotonic; atomically updated). */
struct rpc_stats {
	uint64_t received_bytes;                /* `data` bytes received by servers */
	uint64_t copied_bytes[RPC_STAGE_COUNT]; /* user-space copies of payload */
	uint64_t messages;                      /* chunk messages parsed */
};

/* Snapshot the counters (any thread). Exported by the datanode as
 * zest_payload_received_bytes_total and zest_payload_copied_bytes_total{stage=...}. */
void rpc_stats_get(struct rpc_stats *out);

/* "gather", "unpack", "align". */
const char *rpc_stage_name(enum rpc_copy_stage stage);

/* Received byte buffers / messages still referenced (0 when nothing leaks). */
long rpc_live_buffers(void);

/*
 * Keep freed heap memory in the process (glibc: mmap threshold 32 MiB, no trimming
 * below 1 GiB). Call once at program start in a server that holds receive slices for a
 * while (the zero-copy datanode): with glibc's defaults the transport's fresh read
 * buffers are page-faulted in again and again (measured: 830k minor faults and
 * 0.71 sys CPU-s/GiB, against 44k and 0.36 with this). Returns 0 or -EINVAL.
 */
int rpc_tune_malloc(void);

#endif
