/*
 * dn_rpc: the gRPC binding of the storage engine: create and destroy, the handlers
 * table and the metrics hook (dn_rpc_internal.h says which file holds what). See dn_rpc.h
 * for the threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_rpc_internal.h"
#include "rpc_stats.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

/* ------------------------------------------------------------------ lifecycle */

#define CELL_WORKERS 2 /* dn-cell: WriteCell, DeleteCells, CommitCells */

void
dn_rpc_metrics(FILE *out, void *arg)
{
	struct rpc_stats st;

	rpc_stats_get(&st);
	if (arg) {
		/* One ledger: the store's copy into aligned write buffers (--data-io direct) is
		 * the same kind of copy as the copy marshaller's. */
		struct dn_counters c;

		dn_counters_get(arg, &c);
		st.copied_bytes[RPC_STAGE_ALIGN] += c.align_copied_bytes;
	}
	fprintf(out,
	        "# HELP zest_payload_received_bytes_total Payload bytes received in WriteChunks.\n"
	        "# TYPE zest_payload_received_bytes_total counter\n"
	        "zest_payload_received_bytes_total %llu\n"
	        "# HELP zest_payload_copied_bytes_total Payload bytes copied in user space.\n"
	        "# TYPE zest_payload_copied_bytes_total counter\n",
	        (unsigned long long)st.received_bytes);
	for (int s = 0; s < RPC_STAGE_COUNT; s++)
		fprintf(out, "zest_payload_copied_bytes_total{stage=\"%s\"} %llu\n",
		        rpc_stage_name(s), (unsigned long long)st.copied_bytes[s]);
	fprintf(out,
	        "# HELP zest_payload_messages_total Chunk messages parsed.\n"
	        "# TYPE zest_payload_messages_total counter\n"
	        "zest_payload_messages_total %llu\n"
	        "# HELP zest_rpc_live_buffers Received gRPC buffers still referenced.\n"
	        "# TYPE zest_rpc_live_buffers gauge\n"
	        "zest_rpc_live_buffers %ld\n",
	        (unsigned long long)st.messages, rpc_live_buffers());
}

void
dn_rpc_destroy(struct dn_rpc *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_cond_broadcast(&b->rcond);
	pthread_mutex_unlock(&b->mu);
	dn_exec_stop(&b->writes);
	for (unsigned i = 0; i < b->n_readers; i++)
		pthread_join(b->readers[i], NULL);
	dn_exec_stop(&b->cells);
	free(b->readers);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->rcond);
	free(b);
}

int
dn_rpc_create(struct dn_store *s, const struct dn_rpc_opts *opts, struct dn_rpc **out,
              struct rpc_server_handlers *h)
{
	struct dn_rpc *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->s = s;
	if (opts)
		b->o = *opts;
	if (!b->o.write_workers)
		b->o.write_workers = 4;
	if (!b->o.readers)
		b->o.readers = 4;
	if (!b->o.call_cap)
		b->o.call_cap = 8u << 20;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->rcond, NULL);
	if (dn_exec_start(&b->writes, "dn-write", b->o.write_workers, b->o.call_cap) ||
	    dn_exec_start(&b->cells, "dn-cell", CELL_WORKERS, b->o.call_cap))
		goto fail;
	b->readers = calloc(b->o.readers, sizeof(pthread_t));
	if (!b->readers)
		goto fail;
	for (; b->n_readers < b->o.readers; b->n_readers++) {
		if (pthread_create(&b->readers[b->n_readers], NULL, dn_rpc_read_worker, b))
			goto fail;
		pthread_setname_np(b->readers[b->n_readers], "dn-read");
	}
	memset(h, 0, sizeof(*h));
	h->write.open = dn_rpc_on_write_open;
	h->write.data = dn_rpc_on_write_data;
	h->write.commit = dn_rpc_on_write_commit;
	h->write.abort = dn_rpc_on_write_abort;
	h->write.handler_verifies_crc = true;
	h->read.start = dn_rpc_on_read_start;
	h->read.sent = dn_rpc_on_read_sent;
	h->read.abort = dn_rpc_on_read_abort;
	h->unary = dn_rpc_on_unary;
	dn_rpc_cells_handlers(h);
	h->ctx = b;
	*out = b;
	return 0;
fail:
	dn_rpc_destroy(b);
	return -ENOMEM;
}

void
dn_rpc_set_coord(struct dn_rpc *b, struct dn_coord *coord)
{
	pthread_mutex_lock(&b->mu);
	b->coord = coord;
	pthread_mutex_unlock(&b->mu);
}
