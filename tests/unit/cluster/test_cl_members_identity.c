/*
 * cl_members' identity check against a real etcd 3.4 (tests/lib/etcd_test.h) and raw gRPC
 * TLS servers on 127.0.0.1 (certificates from tools/zest-certs.sh, argv[1]):
 *  - a registration whose address serves a certificate of the CA naming it is in the
 *    view; one at the same address claiming another name, and one whose server has a
 *    certificate of another CA, are left out and counted in `unverified`;
 *  - the claimant re-registered (new incarnation) at a server whose certificate names it
 *    joins the view;
 *  - a failed node is probed again: once its address serves the right certificate it
 *    joins without any change in etcd;
 *  - a node gone from etcd leaves the view.
 * Skips (77) without /usr/bin/etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "cl_rec.h"
#include "cl_etcd.h"
#include "cl_members.h"
#include "rpc_tls_internal.h"
#include "zc.h"
#include "etcd_test.h"
#include "t_check.h"

#define S(x) x, strlen(x)

static char dir[256];

struct srv {
	grpc_server *s;
	grpc_completion_queue *cq;
	int port;
};

/* A gRPC server with the TLS files of cert NAME in sub-folder sub (no methods: the probe
 * only connects), on port (0: any). */
static void
srv_up(struct srv *v, const char *sub, const char *name, int port)
{
	char ca[512], pem[512], key[512], addr[64], err[RPC_TLS_ERR_MAX];
	struct rpc_tls t = { .ca_file = ca, .cert_file = pem, .key_file = key };
	grpc_server_credentials *sc;

	snprintf(ca, sizeof(ca), "%s/%s/ca.pem", dir, sub);
	snprintf(pem, sizeof(pem), "%s/%s/%s.pem", dir, sub, name);
	snprintf(key, sizeof(key), "%s/%s/%s.key", dir, sub, name);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CHECK_EQ(rpc_tls_server_creds(&t, &sc, err, sizeof(err)), 0);
	v->s = grpc_server_create(NULL, NULL);
	v->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(v->s, v->cq, NULL);
	v->port = grpc_server_add_http2_port(v->s, addr, sc);
	grpc_server_credentials_release(sc);
	CHECK(v->port > 0);
	grpc_server_start(v->s);
}

static void
srv_down(struct srv *v)
{
	grpc_server_shutdown_and_notify(v->s, v->cq, v);
	grpc_server_cancel_all_calls(v->s);
	while (grpc_completion_queue_next(v->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).tag != v)
		;
	grpc_server_destroy(v->s);
	grpc_completion_queue_shutdown(v->cq);
	while (grpc_completion_queue_next(v->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(v->cq);
}

static void
put_node(struct cl_etcd *c, const char *name, int port, uint64_t incarnation)
{
	char key[128], addr[64];
	struct cl_rec_node n = { .name = (char *)name,
		                 .address = addr,
		                 .incarnation = incarnation,
		                 .state = CL_REC_NODE_UP };
	uint8_t *buf;
	size_t len;

	snprintf(key, sizeof(key), CL_MEMBERS_NODES_PREFIX "%s", name);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CHECK_EQ(cl_rec_node_encode(&n, &buf, &len, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S(key), buf, len, 0, NULL, 0), 0);
	free(buf);
}

static void
wait_ready(struct cl_etcd *c)
{
	uint64_t end = zc_now_ns() + 60000000000ull;

	while (cl_etcd_put(c, S("ready"), S("1"), 0, NULL, 1000) != 0) {
		CHECK(zc_now_ns() < end);
		usleep(100 * 1000);
	}
}

/* The view's names joined with ',' and its unverified count. */
static size_t
view_names(struct cl_members *m, char *out, size_t cap)
{
	const struct cl_members_view *v = cl_members_get(m);
	size_t n = 0, unverified = v->unverified;

	out[0] = 0;
	for (size_t i = 0; i < v->n; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "," : "", v->names[i]);
	cl_members_view_put(v);
	return unverified;
}

/* Until the view is names with that many unverified (the refresh thread and the probes
 * get there on their own; a hang check of 30 s, not a speed bound). */
static void
wait_view(struct cl_members *m, const char *names, size_t unverified)
{
	uint64_t end = zc_now_ns() + 30000000000ull;
	char got[256];
	size_t u;

	while ((u = view_names(m, got, sizeof(got))) != unverified || strcmp(got, names)) {
		if (zc_now_ns() > end) {
			fprintf(stderr, "view \"%s\" unverified %zu, want \"%s\" %zu\n", got, u,
			        names, unverified);
			CHECK(0);
		}
		usleep(20 * 1000);
	}
}

int
main(int argc, char **argv)
{
	char cmd[2048], ca[512], pem[512], key[512], got[256];
	struct rpc_tls client = { .ca_file = ca, .cert_file = pem, .key_file = key };
	struct srv a, b, c2, foreign;
	struct cl_members *m;
	struct cl_etcd *c;
	struct t_etcd e;
	struct cl_etcd_range del = { .key = "/zest/nodes/dn-a", .key_len = 16 };
	int cport;

	zc_log_init();
	if (argc < 2) {
		fprintf(stderr, "usage: test_cl_members_identity PATH/zest-certs.sh\n");
		return 2;
	}
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	snprintf(dir, sizeof(dir), "/tmp/zest-clid-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	/* cluster CA a: dn-a, dn-b, dn-c, a client; another CA o: its own dn-c */
	snprintf(cmd, sizeof(cmd),
	         "set -e; s='%s'; d='%s'; \"$s\" ca \"$d/a\"; \"$s\" server \"$d/a\" dn-a; "
	         "\"$s\" server \"$d/a\" dn-b; \"$s\" server \"$d/a\" dn-c; "
	         "\"$s\" client \"$d/a\" gw; \"$s\" ca \"$d/o\"; \"$s\" server \"$d/o\" dn-c",
	         argv[1], dir);
	CHECK_EQ(system(cmd), 0);
	snprintf(ca, sizeof(ca), "%s/a/ca.pem", dir);
	snprintf(pem, sizeof(pem), "%s/a/gw.pem", dir);
	snprintf(key, sizeof(key), "%s/a/gw.key", dir);
	grpc_init();
	t_etcd_start(&e, 1);
	CHECK_EQ(cl_etcd_create(e.endpoints, NULL, &c), 0);
	wait_ready(c);

	srv_up(&a, "a", "dn-a", 0);
	srv_up(&foreign, "o", "dn-c", 0);
	cport = foreign.port;
	put_node(c, "dn-a", a.port, 1);
	put_node(c, "dn-b", a.port, 2); /* dn-a's server: its certificate names dn-a */
	put_node(c, "dn-c", cport, 3);  /* the right name, another CA */

	/* create waits for the first probes: the first view is already judged */
	CHECK_EQ(cl_members_create_opts(c,
	                                &(struct cl_members_opts){ .refresh_ms = 100,
	                                                           .tls = &client,
	                                                           .probe_ms = 3000,
	                                                           .retry_ms = 200 },
	                                &m),
	         0);
	CHECK_EQ(view_names(m, got, sizeof(got)), 2);
	CHECK(!strcmp(got, "dn-a"));

	/* dn-b starts again (new incarnation) where a certificate names it */
	srv_up(&b, "a", "dn-b", 0);
	put_node(c, "dn-b", b.port, 4);
	wait_view(m, "dn-a,dn-b", 1);

	/* dn-c's address now serves the cluster CA's dn-c: the retry lets it in, with no
	 * change in etcd */
	srv_down(&foreign);
	srv_up(&c2, "a", "dn-c", cport);
	wait_view(m, "dn-a,dn-b,dn-c", 0);

	/* gone from etcd: gone from the view */
	CHECK_EQ(cl_etcd_delete(c, &del, NULL, NULL, 0), 0);
	wait_view(m, "dn-b,dn-c", 0);

	cl_members_destroy(m);
	srv_down(&a);
	srv_down(&b);
	srv_down(&c2);
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
	grpc_shutdown();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	printf("ok\n");
	return 0;
}
