/*
 * PUTs framed with HTTP Transfer-Encoding: chunked at their edges, over the real server on
 * loopback and the in-memory TEST DOUBLE backend: an empty body (only the last-chunk), a
 * last-chunk with an extension and trailer fields, a body that stops (connection closed)
 * mid-chunk, after a whole chunk, or inside the trailers, and a chunked head with no body
 * at all. That last one is what `curl -T emptyfile -H 'Transfer-Encoding: chunked'` sends:
 * curl never writes the last-chunk for a zero-byte upload, so nothing tells the gateway the
 * body is over; it must answer RequestTimeout at the idle timeout and close, not hang, and
 * store nothing. Every cut-short body is a 400 with nothing stored.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mem_backend.h"
#include "raw_http.h"
#include "zc.h"

#define AK      "testkey"
#define SK      "testsecret"
#define IDLE_MS 1500

static struct s3_backend *be;
static struct raw_gw gw;
static int port;

static int
setup(void **state)
{
	struct s3_config cfg = { .listen = "127.0.0.1:0",
		                 .access_key = AK,
		                 .secret_key = SK,
		                 .region = "us-east-1",
		                 .threads = 1,
		                 .header_timeout_ms = 800,
		                 .idle_timeout_ms = IDLE_MS,
		                 .max_header = 8192 };

	(void)state;
	be = mem_backend_create();
	raw_gw_start(&gw, &cfg, be);
	port = gw.port;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	raw_gw_stop(&gw);
	mem_backend_destroy(be);
	assert_int_equal(zc_ref_live(), 0); /* every read-buffer reference was put back */
	return 0;
}

static char *
head(const char *method, const char *target, const char *extra)
{
	struct raw_signer sg = { port, "us-east-1", AK, SK };

	return raw_sign(&sg, method, target, extra, "UNSIGNED-PAYLOAD", 0, false, NULL);
}

/* One request on its own connection: the head, then body (NUL-terminated), then, when
 * half_close, the end of our sending side (a client that went away mid-body). */
static void
send_req(const char *method, const char *target, const char *extra, const char *body,
         bool half_close, struct raw_resp *r)
{
	char *h = head(method, target, extra);
	int fd = raw_dial(port, 0);

	raw_send_all(fd, h, strlen(h));
	if (*body)
		raw_send_all(fd, body, strlen(body));
	if (half_close)
		shutdown(fd, SHUT_WR);
	assert_int_equal(raw_recv_resp(fd, r, strcmp(method, "HEAD") == 0), 0);
	free(h);
	close(fd);
}

static void
chunked_put(const char *target, const char *body, bool half_close, struct raw_resp *r)
{
	send_req("PUT", target, "Transfer-Encoding: chunked\r\n", body, half_close, r);
}

static void
expect_status(const struct raw_resp *r, int status, const char *code)
{
	char want[128];

	if (r->status != status)
		fail_msg("status %d want %d: %s %s", r->status, status, r->head,
		         r->body ? r->body : "");
	if (!code)
		return;
	snprintf(want, sizeof(want), "<Code>%s</Code>", code);
	if (!r->body || !strstr(r->body, want))
		fail_msg("want %s in %s", code, r->body ? r->body : "(null)");
}

/* The object's stored size through HEAD, or -1 when HEAD says 404. */
static long
stored_size(const char *target)
{
	struct raw_resp r;
	const char *cl;
	long n = -1;

	send_req("HEAD", target, "", "", false, &r);
	if (r.status == 200) {
		cl = strcasestr(r.head, "\r\nContent-Length: ");
		assert_non_null(cl);
		n = strtol(cl + 18, NULL, 10);
	} else {
		assert_int_equal(r.status, 404);
	}
	raw_resp_free(&r);
	return n;
}

static void
make_bucket(const char *target)
{
	struct raw_resp r;

	send_req("PUT", target, "Content-Length: 0\r\n", "", false, &r);
	expect_status(&r, 200, NULL);
	raw_resp_free(&r);
}

/* An empty body is the last-chunk alone, with or without an extension and trailers. */
static void
test_empty_bodies(void **state)
{
	static const char *const bodies[] = {
		"0\r\n\r\n",
		"0;name=value\r\n\r\n",
		"0\r\nx-trailer-one: 1\r\nx-trailer-two: two\r\n\r\n",
		"000\r\n\r\n",
	};
	struct raw_resp r;
	char target[64];

	(void)state;
	make_bucket("/chunk");
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		snprintf(target, sizeof(target), "/chunk/empty%zu", i);
		chunked_put(target, bodies[i], false, &r);
		expect_status(&r, 200, NULL);
		/* the MD5 of nothing */
		assert_non_null(strcasestr(r.head, "ETag: \"d41d8cd98f00b204e9800998ecf8427e\""));
		raw_resp_free(&r);
		assert_int_equal(stored_size(target), 0);
	}
	/* and data followed by trailers */
	chunked_put("/chunk/data", "3\r\nabc\r\n2\r\nde\r\n0\r\nx-t: 1\r\n\r\n", false, &r);
	expect_status(&r, 200, NULL);
	raw_resp_free(&r);
	assert_int_equal(stored_size("/chunk/data"), 5);
}

/* A body cut short by the client closing its side: 400 IncompleteBody, nothing stored. */
static void
test_cut_short(void **state)
{
	static const char *const bodies[] = {
		"",                          /* nothing after the head */
		"0",                         /* inside the last-chunk's size line */
		"0\r\n",                     /* the last-chunk without its final CRLF */
		"0\r\nx-t: 1\r\n",           /* inside the trailers */
		"10\r\nabc",                 /* mid-chunk */
		"3\r\nabc\r\n",              /* after a whole chunk */
		"3\r\nabc\r\n0\r\nx-t: 1\r", /* inside the last trailer's CRLF */
	};
	struct raw_resp r;
	char target[64];
	size_t before;

	(void)state;
	make_bucket("/cut");
	before = mem_backend_count(be);
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		snprintf(target, sizeof(target), "/cut/k%zu", i);
		chunked_put(target, bodies[i], true, &r);
		expect_status(&r, 400, "IncompleteBody");
		assert_non_null(strstr(r.body, "The request body terminated unexpectedly"));
		raw_resp_free(&r);
		assert_int_equal(stored_size(target), -1);
	}
	assert_int_equal(mem_backend_count(be), before);
}

/* curl's zero-byte chunked upload: a head and no last-chunk, the connection kept open. The
 * gateway cannot know the body is empty; the idle timeout ends it, with nothing stored. */
static void
test_no_last_chunk_times_out(void **state)
{
	struct timespec t0, t1;
	struct raw_resp r;
	size_t before;
	long ms;

	(void)state;
	make_bucket("/stall");
	before = mem_backend_count(be);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	chunked_put("/stall/k", "", false, &r); /* raw_dial's 60 s receive timeout bounds it */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	expect_status(&r, 400, "RequestTimeout");
	assert_non_null(strcasestr(r.head, "Connection: close"));
	raw_resp_free(&r);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= IDLE_MS - 100); /* not a premature answer */
	assert_int_equal(stored_size("/stall/k"), -1);
	assert_int_equal(mem_backend_count(be), before);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_bodies),
		cmocka_unit_test(test_cut_short),
		cmocka_unit_test(test_no_last_chunk_times_out),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
