/*
 * s3_metrics: the gateway's request, latency, byte and copy counters, and their
 * Prometheus text for /metrics.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "zc.h"
#include "zc_net.h"
#include "s3_server_internal.h"

static const double lat_bounds[LAT_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025,
	                                        0.05,  0.1,    0.5,   1.0,  5.0 };

/* ------------------------------------------------------------------ metrics */

struct s3_gw_metrics s3_metrics;

static const char *const op_names[S3_OP_COUNT] = {
	"unknown",       "list_buckets",   "create_bucket", "delete_bucket", "head_bucket",
	"bucket_meta",   "list_objects",   "put_object",    "get_object",    "head_object",
	"delete_object", "delete_objects", "mpu_create",    "mpu_part",      "mpu_complete",
	"mpu_abort",     "mpu_list",
};

static const char *const copy_stage_names[S3_COPY_STAGES] = { "rbuf_carry", "xml_collect",
	                                                      "md5_carry" };

const char *
s3_op_name(enum s3_op op)
{
	return (unsigned)op < S3_OP_COUNT ? op_names[op] : "unknown";
}

void
s3_metric_copied(enum s3_copy_stage stage, uint64_t bytes)
{
	atomic_fetch_add_explicit(&s3_metrics.copied[stage], bytes, memory_order_relaxed);
}

void
s3_metric_payload(enum s3_payload mode)
{
	if ((unsigned)mode < 5)
		atomic_fetch_add_explicit(&s3_metrics.payload_mode[mode], 1, memory_order_relaxed);
}

void
s3_metric_request(enum s3_op op, int status, uint64_t ns)
{
	double s = (double)ns / 1e9;
	unsigned b = 0;

	if (status >= 100 && status < 600)
		atomic_fetch_add_explicit(&s3_metrics.req[op][status / 100], 1,
		                          memory_order_relaxed);
	while (b < LAT_BUCKETS && s > lat_bounds[b])
		b++;
	atomic_fetch_add_explicit(&s3_metrics.lat[op][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s3_metrics.lat_sum_us[op], ns / 1000, memory_order_relaxed);
}

void
s3_metrics_render_md5(struct s3_buf *b, struct s3_md5mb *mb)
{
	struct s3_md5mb_stats st = { 0 };

	if (mb)
		s3_md5mb_stats(mb, &st);
	s3_buf_printf(
	        b,
	        "# HELP zest_s3_md5_blocks_total 64-byte MD5 blocks hashed by the multi-buffer "
	        "service: in AVX2 lanes with data, lanes run empty, serially by the hasher, by the "
	        "upload's own worker (the only upload).\n"
	        "# TYPE zest_s3_md5_blocks_total counter\n"
	        "zest_s3_md5_blocks_total{path=\"x8\"} %lu\n"
	        "zest_s3_md5_blocks_total{path=\"x8_idle\"} %lu\n"
	        "zest_s3_md5_blocks_total{path=\"serial\"} %lu\n"
	        "zest_s3_md5_blocks_total{path=\"inline\"} %lu\n"
	        "# HELP zest_s3_md5_waits_total Uploads that waited for room in their MD5 queue.\n"
	        "# TYPE zest_s3_md5_waits_total counter\n"
	        "zest_s3_md5_waits_total %lu\n",
	        st.x8_blocks, st.x8_idle_blocks, st.serial_blocks, st.inline_bytes / 64, st.waits);
}

void
s3_metrics_render(struct s3_buf *b)
{
	s3_buf_adds(b, "# HELP zest_s3_requests_total S3 requests answered, by operation and "
	               "status class.\n"
	               "# TYPE zest_s3_requests_total counter\n");
	for (unsigned op = 0; op < S3_OP_COUNT; op++)
		for (unsigned c = 1; c < 6; c++) {
			unsigned long v = atomic_load(&s3_metrics.req[op][c]);

			if (v)
				s3_buf_printf(
				        b, "zest_s3_requests_total{op=\"%s\",code=\"%ux\"} %lu\n",
				        op_names[op], c, v);
		}
	s3_buf_adds(b, "# HELP zest_s3_request_seconds S3 request latency, head received to "
	               "response sent, by operation.\n"
	               "# TYPE zest_s3_request_seconds histogram\n");
	for (unsigned op = 0; op < S3_OP_COUNT; op++) {
		unsigned long cum = 0;

		for (unsigned k = 0; k <= LAT_BUCKETS; k++)
			cum += atomic_load(&s3_metrics.lat[op][k]);
		if (!cum)
			continue;
		cum = 0;
		for (unsigned k = 0; k <= LAT_BUCKETS; k++) {
			cum += atomic_load(&s3_metrics.lat[op][k]);
			if (k < LAT_BUCKETS)
				s3_buf_printf(
				        b,
				        "zest_s3_request_seconds_bucket{op=\"%s\",le=\"%g\"} %lu\n",
				        op_names[op], lat_bounds[k], cum);
			else
				s3_buf_printf(b,
				              "zest_s3_request_seconds_bucket{op=\"%s\",le=\"+"
				              "Inf\"} %lu\n",
				              op_names[op], cum);
		}
		s3_buf_printf(b, "zest_s3_request_seconds_sum{op=\"%s\"} %.6f\n", op_names[op],
		              (double)atomic_load(&s3_metrics.lat_sum_us[op]) / 1e6);
		s3_buf_printf(b, "zest_s3_request_seconds_count{op=\"%s\"} %lu\n", op_names[op],
		              cum);
	}
	s3_buf_adds(b, "# HELP zest_payload_copied_bytes_total Payload bytes copied in user space, "
	               "by stage.\n"
	               "# TYPE zest_payload_copied_bytes_total counter\n");
	for (unsigned s = 0; s < S3_COPY_STAGES; s++)
		s3_buf_printf(b, "zest_payload_copied_bytes_total{stage=\"%s\"} %lu\n",
		              copy_stage_names[s], atomic_load(&s3_metrics.copied[s]));
	s3_buf_printf(b,
	              "# HELP zest_s3_payload_bytes_total Object payload bytes received (in) and "
	              "sent (out).\n"
	              "# TYPE zest_s3_payload_bytes_total counter\n"
	              "zest_s3_payload_bytes_total{dir=\"in\"} %lu\n"
	              "zest_s3_payload_bytes_total{dir=\"out\"} %lu\n",
	              atomic_load(&s3_metrics.bytes_in), atomic_load(&s3_metrics.bytes_out));
	{
		static const char *const modes[5] = { "sha256", "unsigned", "streaming-signed",
			                              "streaming-signed-trailer",
			                              "streaming-unsigned-trailer" };

		s3_buf_adds(b, "# HELP zest_s3_uploads_by_payload_total Uploads by "
		               "x-amz-content-sha256 mode.\n"
		               "# TYPE zest_s3_uploads_by_payload_total counter\n");
		for (unsigned i = 0; i < 5; i++)
			s3_buf_printf(b, "zest_s3_uploads_by_payload_total{mode=\"%s\"} %lu\n",
			              modes[i], atomic_load(&s3_metrics.payload_mode[i]));
	}
	s3_buf_printf(b,
	              "# HELP zest_s3_connections Open client connections.\n"
	              "# TYPE zest_s3_connections gauge\nzest_s3_connections %ld\n",
	              atomic_load(&s3_metrics.conns));
	s3_buf_printf(
	        b,
	        "# HELP zest_zc_refs_live Payload references alive in the gateway (0 when idle).\n"
	        "# TYPE zest_zc_refs_live gauge\nzest_zc_refs_live %ld\n",
	        zc_ref_live());
}
