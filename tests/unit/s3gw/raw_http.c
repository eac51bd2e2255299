/* The unit tests' raw S3 client and SigV4 signer (raw_http.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "raw_http.h"

static void *
gw_run(void *arg)
{
	s3_server_run(arg);
	return NULL;
}

void
raw_gw_start(struct raw_gw *g, const struct s3_config *cfg, const struct s3_backend *be)
{
	assert_int_equal(s3_server_create(cfg, be, &g->srv), 0);
	g->port = s3_server_port(g->srv);
	assert_int_equal(pthread_create(&g->thr, NULL, gw_run, g->srv), 0);
}

void
raw_gw_stop(struct raw_gw *g)
{
	s3_server_stop(g->srv);
	pthread_join(g->thr, NULL);
	s3_server_destroy(g->srv);
	g->srv = NULL;
}

int
raw_dial(int port, int rcvbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { 60, 0 }; /* a hang fails the test; a slow machine does not */
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

void
raw_send_all(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		assert_true(w > 0);
		b += w;
		n -= (size_t)w;
	}
}

int
raw_recv_resp(int fd, struct raw_resp *r, bool head_only_body)
{
	size_t hl = 0, want = 0;
	bool end = false;
	const char *cl;

	memset(r, 0, sizeof(*r));
	while (!end) {
		ssize_t n = recv(fd, r->head + hl, 1, 0); /* byte at a time: never read past */

		if (n <= 0)
			return -1;
		hl += (size_t)n;
		r->head[hl] = '\0';
		end = hl >= 4 && memcmp(r->head + hl - 4, "\r\n\r\n", 4) == 0;
		assert_true(hl < sizeof(r->head) - 1);
	}
	r->status = atoi(r->head + 9);
	cl = strcasestr(r->head, "\r\nContent-Length: ");
	if (cl && !head_only_body)
		want = strtoull(cl + 18, NULL, 10);
	r->body = calloc(1, want + 1);
	assert_non_null(r->body);
	while (r->blen < want) {
		ssize_t n = recv(fd, r->body + r->blen, want - r->blen, 0);

		if (n <= 0)
			break;
		r->blen += (size_t)n;
	}
	return 0;
}

void
raw_resp_free(struct raw_resp *r)
{
	free(r->body);
	r->body = NULL;
}

void
raw_sha_hex(const void *p, size_t n, char out[65])
{
	uint8_t d[32];

	SHA256(p, n, d);
	s3_hex(d, 32, out);
}

void
raw_amz_now(char date[17], time_t skew)
{
	time_t t = time(NULL) + skew;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(date, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* SignedHeaders as the SDKs make it: host and every x-amz-* header, lower case, sorted
 * (the gateway refuses a request that leaves one unsigned). */
static void
signed_headers(const struct s3_http_req *req, char *out, size_t cap)
{
	char names[S3_HTTP_MAX_HEADERS][128], *sorted[S3_HTTP_MAX_HEADERS];
	unsigned n = 0;
	size_t len = 0;

	for (unsigned h = 0; h < req->nhdr; h++) {
		const struct s3_hdr *hd = &req->hdr[h];
		bool dup = false;

		if (hd->name_len >= 128 ||
		    !((hd->name_len == 4 && !strncasecmp(hd->name, "host", 4)) ||
		      (hd->name_len > 6 && !strncasecmp(hd->name, "x-amz-", 6))))
			continue;
		for (size_t i = 0; i < hd->name_len; i++)
			names[n][i] = (char)tolower((unsigned char)hd->name[i]);
		names[n][hd->name_len] = '\0';
		for (unsigned i = 0; i < n; i++)
			dup = dup || strcmp(sorted[i], names[n]) == 0;
		if (!dup) {
			sorted[n] = names[n];
			n++;
		}
	}
	qsort(sorted, n, sizeof(*sorted), str_cmp);
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ";" : "", sorted[i]);
}

char *
raw_sign(const struct raw_signer *s, const char *method, const char *target, const char *extra,
         const char *payload_hash, time_t skew, bool corrupt, struct s3_auth *auth)
{
	char date[17], d8[9], head[16384], sig[65], chash[65], sh[1024];
	struct s3_http_req req;
	struct s3_buf canon, sts;
	struct s3_auth a = { 0 };
	char *out;
	int n;

	raw_amz_now(date, skew);
	n = snprintf(head, sizeof(head),
	             "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nx-amz-date: %s\r\n"
	             "x-amz-content-sha256: %s\r\n%s\r\n",
	             method, target, s->port, date, payload_hash, extra ? extra : "");
	assert_true(n > 0 && (size_t)n < sizeof(head));
	assert_int_equal(s3_http_parse(&req, head, (size_t)n, sizeof(head)), 0);
	signed_headers(&req, sh, sizeof(sh));
	s3_buf_init(&canon, 1 << 20);
	assert_int_equal(s3_sigv4_canonical(&req, sh, strlen(sh), payload_hash, false, &canon), 0);
	raw_sha_hex(canon.p, canon.len, chash);
	memcpy(a.amz_date, date, 17);
	snprintf(a.scope, sizeof(a.scope), "%.8s/%s/s3/aws4_request", date, s->region);
	memcpy(d8, date, 8);
	d8[8] = '\0';
	s3_sigv4_key(s->secret_key, d8, s->region, "s3", a.key);
	s3_buf_init(&sts, 4096);
	s3_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, a.scope, chash);
	s3_sigv4_sign(a.key, sts.p, sts.len, sig);
	if (corrupt)
		sig[0] = sig[0] == 'a' ? 'b' : 'a';
	memcpy(a.seed_sig, sig, 65);
	if (auth)
		*auth = a;
	out = malloc((size_t)n + strlen(sh) + 256);
	assert_non_null(out);
	memcpy(out, head, (size_t)n - 2);
	snprintf(out + n - 2, strlen(sh) + 258,
	         "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s,"
	         " SignedHeaders=%s, Signature=%s\r\n\r\n",
	         s->access_key, a.scope, sh, sig);
	s3_buf_fini(&canon);
	s3_buf_fini(&sts);
	return out;
}
