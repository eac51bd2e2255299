/*
 * raw_http: the unit tests' own S3 client — plain sockets, one request per connection or
 * several on one, and our SigV4 signer — so a test controls every byte the gateway sees.
 * Failures are cmocka assertions. Also the fixture that runs a gateway on a thread of its
 * own. Shared by test_s3_server.c, test_s3_refuse.c and test_s3_chunked_put.c.
 */
#ifndef ZEST_TEST_RAW_HTTP_H
#define ZEST_TEST_RAW_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "s3_sig_internal.h"

/* A gateway serving on a thread of its own (s3_server_run), on 127.0.0.1:port. */
struct raw_gw {
	struct s3_server *srv;
	pthread_t thr;
	int port;
};
/* Create the server over be (borrowed until raw_gw_stop) with cfg and start its thread. */
void raw_gw_start(struct raw_gw *g, const struct s3_config *cfg, const struct s3_backend *be);
/* Stop the server, join its thread and destroy it. */
void raw_gw_stop(struct raw_gw *g);

struct raw_resp {
	int status;
	char head[8192];
	char *body; /* NUL-terminated, blen bytes; raw_resp_free() */
	size_t blen;
};

/* Connect to 127.0.0.1:port with a 60 s receive timeout; rcvbuf > 0 sets SO_RCVBUF before
 * connect (set after, Linux can leave a reader on a window that never reopens). */
int raw_dial(int port, int rcvbuf);
void raw_send_all(int fd, const void *p, size_t n);
/* Read one Content-Length framed response (no body when head_only_body: HEAD). Returns 0,
 * or -1 on EOF before a whole head. */
int raw_recv_resp(int fd, struct raw_resp *r, bool head_only_body);
void raw_resp_free(struct raw_resp *r);
/* Lower-case hex SHA-256 of p. */
void raw_sha_hex(const void *p, size_t n, char out[65]);
/* X-Amz-Date for now + skew seconds. */
void raw_amz_now(char date[17], time_t skew);

struct raw_signer {
	int port;
	const char *region;
	const char *access_key, *secret_key;
};

/*
 * A SigV4-signed request head (malloc'd, ending in the blank line): method, target, the
 * extra header lines ("A: b\r\n", x-amz-* ones signed, as SDKs do), payload_hash as
 * x-amz-content-sha256, the date skewed by skew seconds; corrupt flips the signature.
 * auth (optional) receives the seed signature and key for chunk signing.
 */
char *raw_sign(const struct raw_signer *s, const char *method, const char *target,
               const char *extra, const char *payload_hash, time_t skew, bool corrupt,
               struct s3_auth *auth);

#endif
