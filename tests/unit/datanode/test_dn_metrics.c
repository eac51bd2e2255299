/* The /metrics endpoint: every series of issue 4 item 8, the rpc hook, 404 elsewhere. */
#include <arpa/inet.h>
#include <sys/socket.h>

#include "dn_test.h"

static char *
http_get(unsigned port, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	static char resp[65536];
	char req[256];
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	CHECK_EQ(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while ((n = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)n;
	resp[got] = 0;
	close(fd);
	return resp;
}

static void
hook(FILE *out, void *arg)
{
	fprintf(out, "zest_payload_received_bytes_total %d\n", *(int *)arg);
	fprintf(out, "zest_payload_copied_bytes_total{stage=\"marshal\"} 0\n");
}

int
main(void)
{
	struct t_env e;
	unsigned port = 0;
	uint8_t buf[40000];
	int recv = 12345;
	char *r;
	const char *series[] = {
		"zest_payload_received_bytes_total 12345",
		"zest_payload_copied_bytes_total{stage=\"marshal\"}",
		"zest_objects_committed_total 1",
		"zest_drive_write_bytes_total{drive=\"0\"}",
		"zest_drive_write_seconds_bucket{drive=\"5\",le=\"+Inf\"}",
		"zest_drive_write_seconds_count{drive=\"0\"}",
		"zest_drive_state{drive=\"2\"} 1",
		"zest_admission_level 0",
		"zest_degraded_reads_total 0",
		"zest_inflight_bytes 0",
		"zest_meta_replicas 3",
		"zest_meta_replicas_live 3",
		"zest_meta_replicas_rebuilt_total 0",
	};

	t_fill(buf, sizeof(buf));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "k", buf, sizeof(buf)), 0);
	CHECK_EQ(dn_drive_fail(e.s, 2), 0);
	dn_metrics_set_hook(e.s, hook, &recv);
	CHECK_EQ(dn_metrics_serve(e.s, "127.0.0.1:0", &port), 0);
	CHECK(port > 0);
	r = http_get(port, "/metrics");
	CHECK(strncmp(r, "HTTP/1.1 200 OK", 15) == 0);
	for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
		if (!strstr(r, series[i])) {
			fprintf(stderr, "missing series: %s\n%s", series[i], r);
			abort();
		}
	}
	r = http_get(port, "/other");
	CHECK(strncmp(r, "HTTP/1.1 404", 12) == 0);
	t_env_fini(&e);
	printf("ok\n");
	return 0;
}
