/*
 * rpc_tls and mutual TLS over real gRPC on 127.0.0.1:0. Certificates come from
 * tools/zest-certs.sh (argv[1]) in a temp dir: cluster A (CA, a datanode server cert with
 * SAN IP:127.0.0.1,DNS:localhost, a client cert) and an unrelated cluster B.
 *  - PEM checks: each refusal with its errno and a message naming the file.
 *  - The good path: puts through the zero-copy marshaller copy nothing although gRPC
 *    decrypts TLS records into its own slices; unary and Read calls work.
 *  - Refusals at the handshake: plaintext, no client certificate, a client certificate
 *    of cluster B, a server certificate of cluster B; the handler never sees a call.
 *  - Identity: rpc_tls_cert_names reads the subjectAltName DNS entries; rpc_tls_probe
 *    and a client with peer_name pass only a server of our CA whose certificate names
 *    the node asked for.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_test_sink.h"
#include "rpc_stats.h"

static char dir[256], ca_a[300], dn_a[300], dnk_a[300], cl_a[300], clk_a[300];
static char ca_b[300], dn_b[300], dnk_b[300], cl_b[300], clk_b[300], ca_ab[300];

static void
path(char *out, const char *sub, const char *name)
{
	snprintf(out, 300, "%s/%s/%s", dir, sub, name);
}

static void
write_file(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
cat_files(const char *out, const char *a, const char *b)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cat '%s' '%s' > '%s'", a, b, out);
	assert_int_equal(system(cmd), 0);
}

static struct rpc_tls
tls(const char *ca, const char *cert, const char *key)
{
	return (struct rpc_tls){ .ca_file = ca, .cert_file = cert, .key_file = key };
}

/* ------------------------------------------------------------------ PEM checks */

static void
expect_load(struct rpc_tls t, int rc, const char *needle)
{
	char err[RPC_TLS_ERR_MAX] = "";

	assert_int_equal(rpc_tls_check(&t, err, sizeof(err)), rc);
	if (needle && !strstr(err, needle))
		fail_msg("message '%s' lacks '%s'", err, needle);
}

static void
test_pem_checks(void **state)
{
	struct rpc_tls t = { 0 };
	struct rpc_tls_pem pem;
	char garbage[300], empty[300], err[RPC_TLS_ERR_MAX];

	(void)state;
	snprintf(garbage, sizeof(garbage), "%s/garbage.pem", dir);
	snprintf(empty, sizeof(empty), "%s/empty.pem", dir);
	write_file(garbage, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
	                    "-----END CERTIFICATE-----\n");
	write_file(empty, "");
	expect_load(t, -EINVAL, "plaintext asked for explicitly"); /* neither */
	t.insecure = true;
	expect_load(t, 0, NULL);
	t.ca_file = ca_a;
	expect_load(t, -EINVAL, "exclude");
	expect_load(tls(ca_a, cl_a, NULL), -EINVAL, "missing: key");
	expect_load(tls(ca_a, cl_a, clk_a), 0, NULL);
	expect_load(tls(ca_a, dn_a, dnk_a), 0, NULL);
	expect_load(tls(ca_ab, dn_b, dnk_b), 0, NULL); /* a bundle of two CAs */
	expect_load(tls("/nonexistent/ca.pem", cl_a, clk_a), -ENOENT, "/nonexistent/ca.pem");
	expect_load(tls(dir, cl_a, clk_a), -EINVAL, "not a regular file");
	expect_load(tls(garbage, cl_a, clk_a), -EINVAL, garbage);
	expect_load(tls(empty, cl_a, clk_a), -EINVAL, "no PEM certificate");
	expect_load(tls(ca_a, clk_a, clk_a), -EINVAL, "no PEM certificate"); /* a key as cert */
	expect_load(tls(ca_a, cl_a, garbage), -EINVAL, garbage);
	expect_load(tls(ca_a, cl_a, dnk_a), -EINVAL, "does not belong to certificate");
	expect_load(tls(ca_a, cl_b, clk_b), -EINVAL, "is not valid under CA");
	/* loaded texts are the files' */
	t = tls(ca_a, cl_a, clk_a);
	assert_int_equal(rpc_tls_pem_load(&t, &pem, err, sizeof(err)), 0);
	assert_non_null(strstr(pem.ca, "BEGIN CERTIFICATE"));
	assert_non_null(strstr(pem.key, "PRIVATE KEY"));
	rpc_tls_pem_fini(&pem);
	assert_null(pem.ca);
	rpc_tls_pem_fini(&pem); /* twice is harmless */
}

/* ------------------------------------------------------------------ calls */

static atomic_long unary_calls; /* calls that reached a handler */

static int
counting_unary(void *ctx, enum rpc_method m, const union rpc_unary_req *req, struct rpc_reply *r)
{
	atomic_fetch_add(&unary_calls, 1);
	return sink_unary(ctx, m, req, r);
}

struct env {
	struct sink sink;
	struct rpc_server *srv;
	char target[64];
};

static int
env_up(struct env *e, struct rpc_tls st, const char *host)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0", .tls = st };
	struct rpc_server_handlers h;
	int rc;

	sink_init(&e->sink, true, false);
	sink_handlers(&e->sink, &h);
	h.unary = counting_unary;
	atomic_store(&unary_calls, 0);
	rc = rpc_server_create(&so, &h, &e->srv);
	if (rc) {
		sink_fini(&e->sink);
		return rc;
	}
	snprintf(e->target, sizeof(e->target), "%s:%d", host, rpc_server_port(e->srv));
	return 0;
}

static void
env_down(struct env *e)
{
	rpc_server_destroy(e->srv, 1000);
	sink_fini(&e->sink);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
	assert_int_equal(atomic_load(&e->sink.bad_bytes), 0);
}

/* One CreateBucket through rpc_client with t; returns the call's error. */
static int
create_bucket(const char *target, struct rpc_tls t, struct rpc_status *st)
{
	struct rpc_client_opts co = { .target = target, .tls = t };
	union rpc_unary_req q = { .bucket = { .bucket = "b" } };
	struct rpc_unary_resp resp;
	struct rpc_client *cl;
	int rc;

	assert_int_equal(rpc_client_create(&co, &cl), 0);
	rc = rpc_client_call(cl, RPC_CREATE_BUCKET, &q, &resp, st);
	rpc_unary_resp_fini(&resp);
	rpc_client_destroy(cl);
	return rc;
}

static void
test_good_path_zerocopy(void **state)
{
	static const size_t sizes[] = { 1, 65536, 1000003, 5u << 20, 33u << 20 };
	struct rpc_tls ct = tls(ca_a, cl_a, clk_a);
	struct rpc_client_opts co = { .tls = ct };
	struct rpc_status st;
	struct rpc_client *cl;
	uint64_t total = 0, received, copied;
	struct env e;

	(void)state;
	assert_int_equal(env_up(&e, tls(ca_a, dn_a, dnk_a), "127.0.0.1"), 0);
	assert_int_equal(create_bucket(e.target, ct, &st), 0);
	co.target = e.target;
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	assert_int_equal(sink_put_sizes(cl, "tls", sizes, 5, &received, &copied), 0);
	for (size_t i = 0; i < 5; i++)
		total += sizes[i];
	/* TLS records are decrypted into gRPC's slices; the marshaller still points into
	 * them instead of copying */
	assert_int_equal(received, total);
	assert_int_equal(copied, 0);
	assert_int_equal(atomic_load(&e.sink.committed), 5);
	rpc_client_destroy(cl);
	/* the DNS SAN works too */
	snprintf(e.target, sizeof(e.target), "localhost:%d", rpc_server_port(e.srv));
	assert_int_equal(create_bucket(e.target, ct, &st), 0);
	env_down(&e);
}

/* A raw call on a channel whose credentials carry no client certificate. */
static grpc_status_code
call_without_client_cert(const char *target)
{
	struct rpc_tls t = tls(ca_a, cl_a, clk_a);
	struct rpc_tls_pem pem;
	char err[RPC_TLS_ERR_MAX];
	grpc_channel_credentials *creds;
	grpc_channel *ch;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice method = grpc_slice_from_static_string("/zest.Datanode/CreateBucket");
	grpc_call *call;
	grpc_metadata_array md;
	grpc_status_code code = GRPC_STATUS_OK;
	grpc_slice details;
	grpc_op ops[3];

	assert_int_equal(rpc_tls_pem_load(&t, &pem, err, sizeof(err)), 0);
	creds = grpc_ssl_credentials_create(pem.ca, NULL, NULL, NULL);
	rpc_tls_pem_fini(&pem);
	ch = grpc_channel_create(target, creds, NULL);
	grpc_channel_credentials_release(creds);
	call = grpc_channel_create_call(
	        ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
	        gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(10, GPR_TIMESPAN)),
	        NULL);
	grpc_metadata_array_init(&md);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[2].data.recv_status_on_client.trailing_metadata = &md;
	ops[2].data.recv_status_on_client.status = &code;
	ops[2].data.recv_status_on_client.status_details = &details;
	assert_int_equal(grpc_call_start_batch(call, ops, 3, (void *)1, NULL), GRPC_CALL_OK);
	grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
	               .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return code;
}

static void
test_refused(void **state)
{
	struct rpc_tls insecure = { .insecure = true };
	struct rpc_status st;
	struct env e;

	(void)state;
	assert_int_equal(env_up(&e, tls(ca_a, dn_a, dnk_a), "127.0.0.1"), 0);
	/* plaintext to a TLS port */
	assert_int_not_equal(create_bucket(e.target, insecure, &st), 0);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	/* a client certificate from another cluster (the server itself is trusted) */
	assert_int_not_equal(create_bucket(e.target, tls(ca_ab, cl_b, clk_b), &st), 0);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	/* no client certificate at all */
	assert_int_equal(call_without_client_cert(e.target), GRPC_STATUS_UNAVAILABLE);
	/* nothing reached a handler; then a good client's call does */
	assert_int_equal(atomic_load(&unary_calls), 0);
	assert_int_equal(create_bucket(e.target, tls(ca_a, cl_a, clk_a), &st), 0);
	assert_int_equal(atomic_load(&unary_calls), 1);
	env_down(&e);

	/* a server whose certificate another CA signed: the client refuses it */
	assert_int_equal(env_up(&e, tls(ca_ab, dn_b, dnk_b), "127.0.0.1"), 0);
	assert_int_not_equal(create_bucket(e.target, tls(ca_a, cl_a, clk_a), &st), 0);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	assert_int_equal(atomic_load(&unary_calls), 0);
	env_down(&e);

	/* a server with bad settings does not start */
	struct rpc_server_opts so = { .listen = "127.0.0.1:0" };
	struct rpc_server_handlers h = { 0 };
	struct rpc_server *srv = NULL;
	struct rpc_client_opts co = { .target = "127.0.0.1:1" };
	struct rpc_client *cl = NULL;

	assert_int_equal(rpc_server_create(&so, &h, &srv), -EINVAL); /* neither */
	so.tls = tls(ca_a, dn_a, "/nonexistent/key");
	assert_int_equal(rpc_server_create(&so, &h, &srv), -ENOENT);
	assert_null(srv);
	assert_int_equal(rpc_client_create(&co, &cl), -EINVAL);
	assert_null(cl);
}

/* ------------------------------------------------------------------ identity */

static void
expect_names(struct rpc_tls t, const char *name, int rc, const char *needle)
{
	char err[RPC_TLS_ERR_MAX] = "";

	assert_int_equal(rpc_tls_cert_names(&t, name, err, sizeof(err)), rc);
	if (needle && !strstr(err, needle))
		fail_msg("message '%s' lacks '%s'", err, needle);
}

struct probe_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, ok;
};

static void
probe_cb(void *arg, bool ok)
{
	struct probe_wait *w = arg;

	pthread_mutex_lock(&w->mu);
	w->done++;
	w->ok += ok;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Probe target for name n times side by side: how many passed. */
static int
probe(struct rpc_tls_prober *p, const char *target, const char *name, int n)
{
	struct probe_wait w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

	for (int i = 0; i < n; i++)
		assert_int_equal(rpc_tls_probe(p, target, name, probe_cb, &w), 0);
	pthread_mutex_lock(&w.mu);
	while (w.done < n)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	return w.ok;
}

static void
test_identity(void **state)
{
	struct rpc_tls insecure = { .insecure = true }, ct = tls(ca_a, cl_a, clk_a);
	struct rpc_tls_prober *p;
	char err[RPC_TLS_ERR_MAX];
	struct env e;

	(void)state;
	/* zest-certs.sh names the certificate's NAME in its subjectAltName */
	expect_names(tls(ca_a, dn_a, dnk_a), "datanode", 0, NULL);
	expect_names(tls(ca_a, dn_a, dnk_a), "DataNode", 0, NULL); /* as DNS: case ignored */
	expect_names(tls(ca_a, dn_a, dnk_a), "localhost", 0, NULL);
	expect_names(tls(ca_a, dn_a, dnk_a), "datanod", -EINVAL, "localhost,datanode");
	expect_names(tls(ca_a, dn_a, dnk_a), "dn-9", -EINVAL, "does not name node \"dn-9\"");
	expect_names(tls(ca_a, cl_a, clk_a), "gateway", -EINVAL, "entries: none"); /* no SAN */
	expect_names(insecure, "datanode", -EINVAL, NULL);
	expect_names(tls(ca_a, "/nonexistent.pem", clk_a), "datanode", -ENOENT, "/nonexistent");
	assert_int_equal(rpc_tls_prober_create(&insecure, 0, &p, err, sizeof(err)), -EINVAL);

	assert_int_equal(rpc_tls_prober_create(&ct, 3000, &p, err, sizeof(err)), 0);
	/* a server of our CA: passes for the name its certificate carries only, whatever the
	 * address says (the IP SAN is not the identity) */
	assert_int_equal(env_up(&e, tls(ca_a, dn_a, dnk_a), "127.0.0.1"), 0);
	assert_int_equal(probe(p, e.target, "datanode", 3), 3);
	assert_int_equal(probe(p, e.target, "dn-9", 2), 0);
	assert_int_equal(probe(p, e.target, "127.0.0.1", 1), 1); /* an IP name: the IP SAN */
	assert_int_equal(atomic_load(&unary_calls), 0);           /* a probe makes no call */
	/* a client expecting a node's name (rpc_client_opts.peer_name) checks it on every
	 * channel: the right name passes at an address, another one is refused */
	{
		struct rpc_client_opts co = { .target = e.target, .tls = ct };
		union rpc_unary_req q = { .bucket = { .bucket = "b" } };
		struct rpc_unary_resp resp;
		struct rpc_status st;
		struct rpc_client *cl;

		co.peer_name = "datanode";
		assert_int_equal(rpc_client_create(&co, &cl), 0);
		assert_int_equal(rpc_client_call(cl, RPC_CREATE_BUCKET, &q, &resp, &st), 0);
		rpc_unary_resp_fini(&resp);
		rpc_client_destroy(cl);
		co.peer_name = "dn-9";
		assert_int_equal(rpc_client_create(&co, &cl), 0);
		assert_int_not_equal(rpc_client_call(cl, RPC_CREATE_BUCKET, &q, &resp, &st), 0);
		assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
		rpc_unary_resp_fini(&resp);
		rpc_client_destroy(cl);
		assert_int_equal(atomic_load(&unary_calls), 1);
	}
	env_down(&e);
	/* the name right but another CA's certificate */
	assert_int_equal(env_up(&e, tls(ca_ab, dn_b, dnk_b), "127.0.0.1"), 0);
	assert_int_equal(probe(p, e.target, "datanode", 2), 0);
	env_down(&e);
	/* nobody there */
	assert_int_equal(probe(p, "127.0.0.1:1", "datanode", 1), 0);
	rpc_tls_prober_destroy(p);
	rpc_tls_prober_destroy(NULL);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pem_checks),
		cmocka_unit_test(test_good_path_zerocopy),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_identity),
	};
	char cmd[1024];
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: test_rpc_tls PATH/zest-certs.sh\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "/tmp/zest-tls-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(cmd, sizeof(cmd), "'%s' '%s/a' && '%s' '%s/b'", argv[1], dir, argv[1], dir);
	if (system(cmd)) {
		fprintf(stderr, "test_rpc_tls: %s failed\n", cmd);
		return 1;
	}
	path(ca_a, "a", "ca.pem");
	path(dn_a, "a", "datanode.pem");
	path(dnk_a, "a", "datanode.key");
	path(cl_a, "a", "gateway.pem");
	path(clk_a, "a", "gateway.key");
	path(ca_b, "b", "ca.pem");
	path(dn_b, "b", "datanode.pem");
	path(dnk_b, "b", "datanode.key");
	path(cl_b, "b", "gateway.pem");
	path(clk_b, "b", "gateway.key");
	snprintf(ca_ab, sizeof(ca_ab), "%s/ca-ab.pem", dir);
	cat_files(ca_ab, ca_a, ca_b);
	grpc_init();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	grpc_shutdown();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		rc = rc ? rc : 1;
	return rc;
}
