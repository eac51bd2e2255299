/*
 * The store's counters (dn_counters_get) and their Prometheus text exposition on GET
 * /metrics, from one small thread with a blocking accept loop (poll on the socket and a
 * stop pipe). One request per connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dn_internal.h"
#include "zc_net.h"

void
dn_metrics_set_hook(struct dn_store *s, dn_metrics_hook hook, void *arg)
{
	s->hook = hook;
	s->hook_arg = arg;
}

/* Each drive's filesystem size and the space left to zest (f_bavail: what an unprivileged
 * writer gets), a statvfs per drive per scrape. A drive that cannot be asked is left out. */
static void
render_capacity(struct dn_store *s, FILE *f)
{
	struct statvfs sv[DN_MAX_DRIVES];
	bool ok[DN_MAX_DRIVES];

	for (unsigned d = 0; d < s->ndrives; d++)
		ok[d] = statvfs(s->drives[d].root, &sv[d]) == 0;
	fprintf(f, "# HELP zest_drive_capacity_bytes Size of each drive's filesystem.\n"
	           "# TYPE zest_drive_capacity_bytes gauge\n");
	for (unsigned d = 0; d < s->ndrives; d++)
		if (ok[d])
			fprintf(f, "zest_drive_capacity_bytes{drive=\"%u\"} %llu\n", d,
			        (unsigned long long)sv[d].f_blocks * sv[d].f_frsize);
	fprintf(f, "# HELP zest_drive_free_bytes Bytes still free for zest on each drive's "
	           "filesystem.\n"
	           "# TYPE zest_drive_free_bytes gauge\n");
	for (unsigned d = 0; d < s->ndrives; d++)
		if (ok[d])
			fprintf(f, "zest_drive_free_bytes{drive=\"%u\"} %llu\n", d,
			        (unsigned long long)sv[d].f_bavail * sv[d].f_frsize);
}

void
dn_metrics_render(struct dn_store *s, FILE *f)
{
	struct dn_counters c;

	dn_counters_get(s, &c);
	if (s->hook) {
		s->hook(f, s->hook_arg);
	} else {
		/* The rpc binding owns these; until it installs its hook they read zero. */
		fprintf(f, "# HELP zest_payload_received_bytes_total Payload bytes received.\n"
		           "# TYPE zest_payload_received_bytes_total counter\n"
		           "zest_payload_received_bytes_total 0\n"
		           "# HELP zest_payload_copied_bytes_total Payload bytes copied in user "
		           "space.\n"
		           "# TYPE zest_payload_copied_bytes_total counter\n"
		           "zest_payload_copied_bytes_total{stage=\"marshal\"} 0\n");
	}
	fprintf(f,
	        "# HELP zest_objects_committed_total Objects whose write committed.\n"
	        "# TYPE zest_objects_committed_total counter\nzest_objects_committed_total %llu\n",
	        (unsigned long long)c.objects_committed);
	fprintf(f, "# HELP zest_drive_write_bytes_total Bytes written to each drive (data and "
	           "parity cells).\n"
	           "# TYPE zest_drive_write_bytes_total counter\n");
	for (unsigned d = 0; d < s->ndrives; d++)
		fprintf(f, "zest_drive_write_bytes_total{drive=\"%u\"} %llu\n", d,
		        (unsigned long long)atomic_load(&s->drives[d].write_bytes));
	fprintf(f, "# HELP zest_drive_write_seconds Latency of cell writes per drive, submit to "
	           "completion.\n"
	           "# TYPE zest_drive_write_seconds histogram\n");
	for (unsigned d = 0; d < s->ndrives; d++) {
		struct dn_drive *dr = &s->drives[d];
		uint64_t cum = 0;

		for (unsigned b = 0; b < DN_HIST_BUCKETS; b++) {
			cum += atomic_load(&dr->hist[b]);
			fprintf(f, "zest_drive_write_seconds_bucket{drive=\"%u\",le=\"%g\"} %llu\n",
			        d, dn_hist_bounds_s[b], (unsigned long long)cum);
		}
		cum += atomic_load(&dr->hist[DN_HIST_BUCKETS]);
		fprintf(f, "zest_drive_write_seconds_bucket{drive=\"%u\",le=\"+Inf\"} %llu\n", d,
		        (unsigned long long)cum);
		fprintf(f, "zest_drive_write_seconds_sum{drive=\"%u\"} %.9f\n", d,
		        (double)atomic_load(&dr->hist_sum_ns) / 1e9);
		fprintf(f, "zest_drive_write_seconds_count{drive=\"%u\"} %llu\n", d,
		        (unsigned long long)atomic_load(&dr->hist_count));
	}
	fprintf(f, "# HELP zest_drive_state 0 ok, 1 failed (until heal), 2 full (ENOSPC).\n"
	           "# TYPE zest_drive_state gauge\n");
	for (unsigned d = 0; d < s->ndrives; d++) {
		/* A full drive the operator made room on reads 0 at the next scrape, not only
		 * after the next write (the re-probe is rate-limited: one statvfs a second). */
		if (atomic_load(&s->drives[d].state) == DN_DRIVE_FULL)
			dn_drive_reprobe(&s->drives[d]);
		fprintf(f, "zest_drive_state{drive=\"%u\"} %d\n", d,
		        atomic_load(&s->drives[d].state));
	}
	render_capacity(s, f);
	fprintf(f,
	        "# HELP zest_admission_level Admission control: 0 ok, 1 pacing, 2 queueing, 3 "
	        "refusing new writes.\n"
	        "# TYPE zest_admission_level gauge\nzest_admission_level %d\n",
	        dn_admission_level(s));
	fprintf(f,
	        "# HELP zest_admission_parked Writes paced or queued by admission now (they hold "
	        "no thread).\n"
	        "# TYPE zest_admission_parked gauge\nzest_admission_parked %u\n",
	        c.admission_parked);
	fprintf(f,
	        "# HELP zest_admission_buffer_waits_total Writes that waited in admission for "
	        "their cell buffers.\n"
	        "# TYPE zest_admission_buffer_waits_total counter\n"
	        "zest_admission_buffer_waits_total %llu\n"
	        "# HELP zest_pool_waits_total Cell buffer gets that found the pool empty and "
	        "waited (for an io in flight).\n"
	        "# TYPE zest_pool_waits_total counter\nzest_pool_waits_total %llu\n"
	        "# HELP zest_pool_timeouts_total Of those, gave up after the wait (-EAGAIN, "
	        "SlowDown).\n"
	        "# TYPE zest_pool_timeouts_total counter\nzest_pool_timeouts_total %llu\n",
	        (unsigned long long)c.admission_bufwaits, (unsigned long long)c.pool_waits,
	        (unsigned long long)c.pool_timeouts);
	fprintf(f,
	        "# HELP zest_meta_calls_total Deletes, Composes and bucket calls run on the commit "
	        "thread.\n"
	        "# TYPE zest_meta_calls_total counter\nzest_meta_calls_total %llu\n"
	        "# HELP zest_meta_call_txns_total Metadata transactions they took (batched: "
	        "fewer than calls).\n"
	        "# TYPE zest_meta_call_txns_total counter\nzest_meta_call_txns_total %llu\n",
	        (unsigned long long)c.mcalls, (unsigned long long)c.mcall_txns);
	fprintf(f,
	        "# HELP zest_meta_txns_total Metadata write transactions (Write commits and calls "
	        "batched together); each syncs every live replica once, the replicas at the "
	        "same time.\n"
	        "# TYPE zest_meta_txns_total counter\nzest_meta_txns_total %llu\n"
	        "# HELP zest_drive_syncs_total Sync requests on the drives' rings: fdatasyncs of "
	        "cell files, fsyncs of their folders, and cell writes that carried their own sync "
	        "(RWF_DSYNC: a file's only write).\n"
	        "# TYPE zest_drive_syncs_total counter\n"
	        "zest_drive_syncs_total{kind=\"file\"} %llu\n"
	        "zest_drive_syncs_total{kind=\"dir\"} %llu\n"
	        "zest_drive_syncs_total{kind=\"write\"} %llu\n",
	        (unsigned long long)c.meta_txns, (unsigned long long)c.file_syncs,
	        (unsigned long long)c.dir_syncs, (unsigned long long)c.dsync_writes);
	fprintf(f,
	        "# HELP zest_degraded_reads_total Stripes read by rebuilding missing or bad "
	        "cells.\n"
	        "# TYPE zest_degraded_reads_total counter\nzest_degraded_reads_total %llu\n",
	        (unsigned long long)c.degraded_reads);
	fprintf(f,
	        "# HELP zest_cells_healed_total Cells rebuilt by heal.\n"
	        "# TYPE zest_cells_healed_total counter\nzest_cells_healed_total %llu\n",
	        (unsigned long long)c.cells_healed);
	fprintf(f,
	        "# HELP zest_cells_swept_total Cell files of unfinished writes removed: at open "
	        "(none of its entries named them) or when their write failed or was cancelled.\n"
	        "# TYPE zest_cells_swept_total counter\n"
	        "zest_cells_swept_total{at=\"open\"} %llu\n"
	        "zest_cells_swept_total{at=\"failed\"} %llu\n",
	        (unsigned long long)c.cells_swept_open, (unsigned long long)c.cells_swept_failed);
	fprintf(f,
	        "# HELP zest_meta_replicas_live Metadata replicas taking writes; below "
	        "zest_meta_replicas when a write dropped one (full drive) until the healer "
	        "rebuilds it.\n"
	        "# TYPE zest_meta_replicas_live gauge\nzest_meta_replicas_live %u\n"
	        "# HELP zest_meta_replicas Metadata replicas configured.\n"
	        "# TYPE zest_meta_replicas gauge\nzest_meta_replicas %u\n"
	        "# HELP zest_meta_replicas_rebuilt_total Metadata replicas rebuilt from the "
	        "primary.\n"
	        "# TYPE zest_meta_replicas_rebuilt_total counter\n"
	        "zest_meta_replicas_rebuilt_total %llu\n",
	        c.meta_replicas_live, c.meta_replicas, (unsigned long long)c.meta_replicas_rebuilt);
	fprintf(f,
	        "# HELP zest_inflight_bytes Payload bytes received and not yet durable.\n"
	        "# TYPE zest_inflight_bytes gauge\nzest_inflight_bytes %llu\n",
	        (unsigned long long)c.inflight_bytes);
	fprintf(f,
	        "# HELP zest_checksum_mismatches_total Cells read from a drive with a chunk that "
	        "failed its CRC32C.\n"
	        "# TYPE zest_checksum_mismatches_total counter\n");
	for (unsigned d = 0; d < s->ndrives; d++)
		fprintf(f, "zest_checksum_mismatches_total{drive=\"%u\"} %llu\n", d,
		        (unsigned long long)atomic_load(&s->drives[d].crc_mismatches));
}

void
dn_counters_get(struct dn_store *s, struct dn_counters *c)
{
	c->objects_committed = atomic_load(&s->objects_committed);
	c->degraded_reads = atomic_load(&s->degraded_reads);
	c->cells_healed = atomic_load(&s->cells_healed);
	c->cells_swept_open = atomic_load(&s->cells_swept_open);
	c->cells_swept_failed = atomic_load(&s->cells_swept_failed);
	c->align_copied_bytes = atomic_load(&s->align_copied);
	c->file_syncs = c->dir_syncs = c->dsync_writes = 0;
	for (unsigned d = 0; d < s->ndrives; d++) {
		c->file_syncs += atomic_load(&s->drives[d].file_syncs);
		c->dir_syncs += atomic_load(&s->drives[d].dir_syncs);
		c->dsync_writes += atomic_load(&s->drives[d].dsync_writes);
	}
	c->meta_txns = dn_meta_txns(s->meta);
	pthread_mutex_lock(&s->credit_lock);
	c->inflight_bytes = s->inflight;
	pthread_mutex_unlock(&s->credit_lock);
	c->admission_refused = atomic_load(&s->adm_refused);
	c->admission_paced = atomic_load(&s->adm_paced);
	c->admission_queued = atomic_load(&s->adm_queued);
	c->admission_parked = atomic_load(&s->adm.parked);
	c->admission_bufwaits = atomic_load(&s->adm_bufwaits);
	c->pool_waits = c->pool_timeouts = 0;
	for (unsigned d = 0; d < s->ndrives; d++) {
		c->pool_waits += atomic_load(&s->drives[d].pool_waits);
		c->pool_timeouts += atomic_load(&s->drives[d].pool_timeouts);
	}
	c->mcalls = atomic_load(&s->mcalls);
	c->mcall_txns = atomic_load(&s->mcall_txns);
	c->meta_replicas =
	        dn_meta_replicas(s->meta, &c->meta_replicas_live, &c->meta_replicas_rebuilt);
}

static void
serve_one(struct dn_store *s, int fd)
{
	char req[2048] = "", *body = NULL, head[256];
	size_t blen = 0, got = 0;
	struct pollfd p = { fd, POLLIN, 0 };
	FILE *f;
	int n, hl;
	bool ok;

	/* Read the request head (bounded; we only look at the first line). */
	while (got < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
		if (poll(&p, 1, 1000) <= 0)
			return;
		n = (int)read(fd, req + got, sizeof(req) - 1 - got);
		if (n <= 0)
			return;
		got += (size_t)n;
		req[got] = 0;
	}
	ok = strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET /metrics?", 13) == 0;
	f = open_memstream(&body, &blen);
	if (!f)
		return;
	if (ok)
		dn_metrics_render(s, f);
	else
		fputs("not found\n", f);
	fclose(f);
	hl = snprintf(head, sizeof(head),
	              "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
	              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	              ok ? "200 OK" : "404 Not Found", blen);
	if (write(fd, head, (size_t)hl) == hl && blen)
		if (write(fd, body, blen) < 0)
			ZC_DBG("metrics", "write failed err=%s", strerror(errno));
	free(body);
}

static void *
metrics_main(void *arg)
{
	struct dn_store *s = arg;

	for (;;) {
		struct pollfd p[2] = { { s->metrics_fd, POLLIN, 0 },
			               { s->metrics_pipe[0], POLLIN, 0 } };
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(s->metrics_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve_one(s, fd);
		close(fd);
	}
	return NULL;
}

int
dn_metrics_serve(struct dn_store *s, const char *spec, unsigned *port)
{
	int fd, err;

	if (s->metrics_on)
		return -EEXIST;
	fd = zc_listen(spec, 16, false, port);
	if (fd < 0)
		return fd;
	if (pipe2(s->metrics_pipe, O_CLOEXEC) < 0) {
		err = -errno;
		goto close_fd;
	}
	s->metrics_fd = fd;
	err = pthread_create(&s->metrics_thread, NULL, metrics_main, s);
	if (!err)
		pthread_setname_np(s->metrics_thread, "dn-metrics");
	if (err) {
		err = -err;
		close(s->metrics_pipe[0]);
		close(s->metrics_pipe[1]);
		s->metrics_pipe[0] = s->metrics_pipe[1] = -1;
		s->metrics_fd = -1;
		goto close_fd;
	}
	s->metrics_on = true;
	return 0;
close_fd:
	close(fd);
	return err;
}

void
dn_metrics_stop(struct dn_store *s)
{
	if (!s->metrics_on)
		return;
	if (write(s->metrics_pipe[1], "x", 1) < 0)
		ZC_ERR("metrics", "stop pipe write failed");
	pthread_join(s->metrics_thread, NULL);
	close(s->metrics_fd);
	close(s->metrics_pipe[0]);
	close(s->metrics_pipe[1]);
	s->metrics_on = false;
}
