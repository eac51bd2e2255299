/*
 * s3_bcl: the cluster backend's frame: create and destroy (etcd client, membership view,
 * the reserved bucket), one rpc client per node address, the codec cache, attributes,
 * DeleteCells, and the gateway metric it adds. The design: s3_bcl_internal.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "s3_bcl_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ etcd deadline */

/* This thread's request (s3_rq_current), and whether one of its etcd calls went
 * unanswered. Only time spent waiting on etcd counts: a body streamed between two calls
 * (a CopyObject, a slow client's Complete) never spends the deadline. */
static _Thread_local uint64_t etcd_rq;
static _Thread_local bool etcd_spent;

unsigned
s3_bcl_etcd_ms(struct bcl *b)
{
	uint64_t rq = s3_rq_current();

	(void)b;
	if (!rq) /* not a request's (the start): a deadline of its own */
		return BCL_TIMEOUT_MS;
	if (rq != etcd_rq) {
		etcd_rq = rq;
		etcd_spent = false;
	}
	return etcd_spent ? 0 : BCL_TIMEOUT_MS;
}

int
s3_bcl_etcd_end(struct bcl *b, int rc)
{
	bool away =
	        rc == -ETIMEDOUT || zc_err_is(rc, ZC_NO_QUORUM) || zc_err_is(rc, ZC_UNAVAILABLE);

	if (!away) /* etcd answered: the next call may wait a whole deadline again */
		return rc;
	if (!s3_rq_current()) {
		atomic_fetch_add(&b->etcd_unanswered, 1);
	} else if (!etcd_spent) {
		atomic_fetch_add(&b->etcd_unanswered, 1);
		etcd_spent = true;
	}
	/* etcd away is backpressure: SlowDown, retried by every SDK (never the cells' write
	 * quorum, ServiceUnavailable) */
	return ZC_E(ZC_UNAVAILABLE);
}

/* ------------------------------------------------------------------ nodes */

/* The client of addr, whose certificate must name `name` (NULL: addr's host). Keyed by
 * "name@addr": a registration naming another node at the same address never shares it. */
static struct rpc_client *
client_of(struct bcl *b, const char *name, const char *addr)
{
	struct rpc_client_opts o = { 0 };
	struct rpc_client *cl = NULL;
	char key[CL_REC_MAX_NAME + 2 + 256];

	if (snprintf(key, sizeof(key), "%s%s%s", name ? name : "", name ? "@" : "", addr) >=
	    (int)sizeof(key))
		return NULL;
	pthread_mutex_lock(&b->mu);
	for (size_t i = 0; i < b->nnodes; i++)
		if (strcmp(b->nodes[i].addr, key) == 0) {
			cl = b->nodes[i].cl;
			goto out;
		}
	if (b->nnodes == b->capnodes) {
		size_t nc = b->capnodes ? b->capnodes * 2 : 16;
		struct bcl_node *nv = realloc(b->nodes, nc * sizeof(*nv));

		if (!nv)
			goto out;
		b->nodes = nv;
		b->capnodes = nc;
	}
	/* as the single-node backend's clients: two connections, a fixed stream window */
	o.target = addr;
	o.channels = 2;
	o.stream_window = GET_STREAM_WINDOW;
	/* DeleteCells to a hung node must not hold a DELETE; streams time out on progress
	 * (a PUT's Write on the coordinator; ReadCell sets its own, s3_bcl_cread.c) */
	o.unary_deadline_ms = BCL_CALL_MS;
	o.progress_timeout_ms = b->stream_timeout_ms;
	o.tls = b->tls;
	o.peer_name = name;
	b->nodes[b->nnodes].addr = strdup(key);
	if (!b->nodes[b->nnodes].addr)
		goto out;
	if (rpc_client_create(&o, &cl) < 0) {
		free(b->nodes[b->nnodes].addr);
		cl = NULL;
		goto out;
	}
	ZC_INFO("s3cl", "node client addr=%s name=%s", addr, name ? name : "-");
	b->nodes[b->nnodes++].cl = cl;
out:
	pthread_mutex_unlock(&b->mu);
	return cl;
}

struct rpc_client *
s3_bcl_client(struct bcl *b, const char *addr)
{
	return client_of(b, NULL, addr);
}

struct rpc_client *
s3_bcl_live_client(struct bcl *b, const struct cl_rec_node *n)
{
	if (b->local_name && strcmp(n->name, b->local_name) == 0)
		return s3_bcl_client(b, b->local_target);
	return client_of(b, n->name, n->address); /* its certificate names it */
}

struct rpc_client *
s3_bcl_node_client(struct bcl *b, const struct cl_members_view *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->nodes[i].name, name) == 0)
			return s3_bcl_live_client(b, &v->nodes[i]);
	return NULL;
}

/* "NAME=unix:PATH" (checked by the caller: s3_cli) into b->local_*: 0 or -ENOMEM. */
static int
local_node_parse(struct bcl *b, const char *spec)
{
	const char *eq = strchr(spec, '=');

	if (!eq)
		return -EINVAL;
	b->local_name = strndup(spec, (size_t)(eq - spec));
	b->local_target = strdup(eq + 1);
	return b->local_name && b->local_target ? 0 : -ENOMEM;
}

struct ec_codec *
s3_bcl_codec(struct bcl *b, unsigned k, unsigned m)
{
	struct ec_codec *c;

	if (k < 1 || m < 1 || k + m > CL_REC_MAX_CELLS)
		return NULL;
	pthread_mutex_lock(&b->mu);
	c = b->codecs[k][m];
	if (!c && ec_codec_create(k, m, &c) < 0)
		c = NULL;
	b->codecs[k][m] = c;
	pthread_mutex_unlock(&b->mu);
	return c;
}

/* ------------------------------------------------------------------ attrs */

int
s3_bcl_attrs_to(const char *s, size_t len, struct cl_rec_attr **out, size_t *n, char **buf)
{
	struct attrs at;
	struct cl_rec_attr *v;
	int rc;

	*out = NULL;
	*n = 0;
	*buf = NULL;
	rc = s3_brpc_attrs_parse(&at, s ? s : "", s ? len : 0);
	if (rc < 0)
		return rc;
	v = calloc(at.n ? at.n : 1, sizeof(*v));
	if (!v) {
		free(at.buf);
		return -ENOMEM;
	}
	/* the names and values point into at.buf, which the caller frees with v */
	for (size_t i = 0; i < at.n; i++) {
		v[i].name = (char *)at.a[i].name;
		v[i].value = (char *)at.a[i].value;
	}
	*out = v;
	*n = at.n;
	*buf = at.buf;
	return 0;
}

void
s3_bcl_info_from(const struct cl_rec_object *o, const char *key, struct s3_obj_info *out)
{
	size_t at = 0;

	memset(out, 0, offsetof(struct s3_obj_info, attrs));
	snprintf(out->key, sizeof(out->key), "%s", key);
	out->size = o->size;
	snprintf(out->etag, sizeof(out->etag), "%s", o->etag ? o->etag : "");
	out->mtime_ns = o->mtime_ns;
	for (size_t i = 0; i < o->nattrs; i++) {
		int w = snprintf(out->attrs + at, sizeof(out->attrs) - at, "%s:%s\n",
		                 o->attrs[i].name, o->attrs[i].value ? o->attrs[i].value : "");

		if (w < 0 || (size_t)w >= sizeof(out->attrs) - at)
			break;
		at += (size_t)w;
	}
	out->attrs[at] = 0;
	out->attrs_len = at;
}

/* ------------------------------------------------------------------ DeleteCells */

struct dcell_node {
	const char *name;
	struct rpc_cell_id *ids;
	size_t n, cap;
};

struct dcell_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left;
};

static void
dcell_done(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct dcell_wait *w = arg;

	(void)resp;
	if (st->err)
		ZC_DBG("s3cl", "DeleteCells failed err=%d msg=\"%s\"", st->err, st->msg);
	pthread_mutex_lock(&w->mu);
	w->left--;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void
s3_bcl_delete_cells(struct bcl *b, const struct cl_rec_object *o)
{
	struct dcell_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	const struct cl_members_view *v;
	struct dcell_node *dn = NULL;
	size_t ndn = 0, capdn = 0;

	/* the cells each node holds, named as the record names them */
	for (size_t x = 0; x < o->nextents; x++) {
		const struct cl_rec_extent *e = &o->extents[x];

		for (size_t g = 0; g < e->ngroups; g++)
			for (unsigned c = 0; c < e->k + e->m; c++) {
				const char *name = e->nodes[e->groups[g].cell[c]];
				struct dcell_node *d = NULL;

				if (e->groups[g].missing & (1u << c))
					continue;
				for (size_t i = 0; i < ndn && !d; i++)
					if (strcmp(dn[i].name, name) == 0)
						d = &dn[i];
				if (!d) {
					if (ndn == capdn) {
						size_t nc = capdn ? capdn * 2 : 8;
						void *nv = realloc(dn, nc * sizeof(*dn));

						if (!nv)
							goto out;
						dn = nv;
						capdn = nc;
					}
					d = &dn[ndn++];
					*d = (struct dcell_node){ .name = name };
				}
				if (d->n == d->cap) {
					size_t nc = d->cap ? d->cap * 2 : 16;
					void *nv = realloc(d->ids, nc * sizeof(*d->ids));

					if (!nv)
						goto out;
					d->ids = nv;
					d->cap = nc;
				}
				d->ids[d->n++] = (struct rpc_cell_id){ e->id, (uint32_t)g, c };
			}
	}
	/* a node that is not live now gets nothing: its collector removes the cells */
	v = cl_members_get(b->mem);
	for (size_t i = 0; i < ndn; i++) {
		struct rpc_client *cl = s3_bcl_node_client(b, v, dn[i].name);
		union rpc_unary_req req = { .cells = { .cells = dn[i].ids, .n_cells = dn[i].n } };

		if (!cl)
			continue;
		pthread_mutex_lock(&w.mu);
		w.left++;
		pthread_mutex_unlock(&w.mu);
		if (rpc_client_call_async(cl, RPC_DELETE_CELLS, &req, dcell_done, &w) < 0) {
			pthread_mutex_lock(&w.mu);
			w.left--;
			pthread_mutex_unlock(&w.mu);
		}
	}
	cl_members_view_put(v);
	/* wait: the callbacks use w, and the clients must be idle when destroyed */
	pthread_mutex_lock(&w.mu);
	while (w.left)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
out:
	for (size_t i = 0; i < ndn; i++)
		free(dn[i].ids);
	free(dn);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
}

/* ------------------------------------------------------------------ metrics */

void
s3_bcl_metrics(void *ctx, struct s3_buf *buf)
{
	struct bcl *b = ctx;
	const struct cl_members_view *v = cl_members_get(b->mem);

	s3_buf_printf(buf,
	              "# HELP zest_degraded_reads_total GET streams that read around a missing, "
	              "bad or unreachable cell (rebuilt from parity).\n"
	              "# TYPE zest_degraded_reads_total counter\n"
	              "zest_degraded_reads_total %lu\n"
	              "# HELP zest_cluster_live_nodes Datanodes in the gateway's membership view.\n"
	              "# TYPE zest_cluster_live_nodes gauge\n"
	              "zest_cluster_live_nodes %zu\n"
	              "# HELP zest_cluster_unverified_nodes Datanodes registered in etcd left out "
	              "of the view: no mTLS connection to a certificate of the CA naming them.\n"
	              "# TYPE zest_cluster_unverified_nodes gauge\n"
	              "zest_cluster_unverified_nodes %zu\n"
	              "# HELP zest_s3_etcd_unanswered_total Requests answered 503 SlowDown "
	              "because etcd did not answer within their deadline (5 s, one per "
	              "request).\n"
	              "# TYPE zest_s3_etcd_unanswered_total counter\n"
	              "zest_s3_etcd_unanswered_total %lu\n"
	              "# HELP zest_s3_bad_records_total Object records in etcd that do not "
	              "decode, met by a listing (left out of it), GET or HEAD (InternalError).\n"
	              "# TYPE zest_s3_bad_records_total counter\n"
	              "zest_s3_bad_records_total %lu\n"
	              "# HELP zest_s3_unreadable_gets_total GETs refused with 503 before any "
	              "header: a group of the range has fewer than k cells on live nodes.\n"
	              "# TYPE zest_s3_unreadable_gets_total counter\n"
	              "zest_s3_unreadable_gets_total %lu\n",
	              atomic_load(&b->degraded_reads), v->n, v->unverified,
	              atomic_load(&b->etcd_unanswered), atomic_load(&b->bad_records),
	              atomic_load(&b->unreadable_gets));
	cl_members_view_put(v);
}

/* ------------------------------------------------------------------ lifecycle */

void
s3_backend_cluster_destroy(struct s3_backend *be)
{
	struct bcl *b;

	if (!be)
		return;
	b = be->ctx;
	cl_members_destroy(b->mem);
	cl_etcd_destroy(b->etcd);
	for (size_t i = 0; i < b->nnodes; i++) {
		rpc_client_destroy(b->nodes[i].cl);
		free(b->nodes[i].addr);
	}
	free(b->nodes);
	free(b->local_name);
	free(b->local_target);
	for (unsigned k = 0; k <= CL_REC_MAX_CELLS; k++)
		for (unsigned m = 0; m <= CL_REC_MAX_CELLS; m++)
			ec_codec_destroy(b->codecs[k][m]);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

int
s3_backend_cluster_create(const char *endpoints, const struct rpc_tls *tls, const char *local_node,
                          unsigned stream_timeout_ms, struct s3_backend **out)
{
	struct cl_etcd_opts eo = { 0 };
	struct timespec ts;
	struct bcl *b;
	int rc;

	if (!endpoints || !*endpoints || !tls)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->mu, NULL);
	b->tls = *tls;
	b->stream_timeout_ms = stream_timeout_ms ? stream_timeout_ms : S3_STREAM_TIMEOUT_MS;
	b->read_timeout_ms = b->stream_timeout_ms < BCL_READ_PROGRESS_MS ? b->stream_timeout_ms
	                                                                 : BCL_READ_PROGRESS_MS;
	if (local_node && (rc = local_node_parse(b, local_node)) < 0)
		goto fail;
	b->be = (struct s3_backend){
		.ctx = b,
		.put_open = s3_bcl_put_open,
		.put_write = s3_bcl_put_write,
		.put_commit = s3_bcl_put_commit,
		.put_abort = s3_bcl_put_abort,
		.get_open = s3_bcl_get_open,
		.get_next = s3_bcl_get_next,
		.get_close = s3_bcl_get_close,
		.stat = s3_bcl_stat,
		.del = s3_bcl_del,
		.list = s3_bcl_list,
		.compose = s3_bcl_compose,
		.bucket_create = s3_bcl_bucket_create,
		.bucket_delete = s3_bcl_bucket_delete,
		.bucket_head = s3_bcl_bucket_head,
		.bucket_list = s3_bcl_bucket_list,
		.metrics = s3_bcl_metrics,
	};
	/* https:// endpoints: etcd's certificate checked against the cluster CA, and the
	 * gateway's certificate shown to it (etcd's --client-cert-auth) */
	eo.ca_file = tls->ca_file;
	eo.cert_file = tls->cert_file;
	eo.key_file = tls->key_file;
	rc = cl_etcd_create(endpoints, &eo, &b->etcd);
	if (rc < 0) {
		ZC_ERR("s3cl", "bad --cluster \"%s\": %s", endpoints,
		       zc_code_word(zc_err_code(rc)));
		goto fail;
	}
	/* the multipart records' bucket; one that exists is fine. This is also the start's
	 * check that etcd answers: a wrong --cluster shows at once, as on the datanode */
	clock_gettime(CLOCK_REALTIME, &ts);
	rc = cl_meta_bucket_create(b->etcd, S3_RESERVED_BUCKET,
	                           (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
	                           BCL_TIMEOUT_MS);
	if (rc == ZC_E(ZC_BUCKET_EXISTS))
		rc = 0;
	if (rc < 0) {
		ZC_ERR("s3cl", "cannot reach etcd at %s: %s", endpoints,
		       zc_code_word(zc_err_code(rc)));
		goto fail;
	}
	/* only nodes whose certificate names them are ranked or read from (cl_members.h) */
	rc = cl_members_create_opts(b->etcd, &(struct cl_members_opts){ .tls = tls }, &b->mem);
	if (rc < 0)
		goto fail;
	*out = &b->be;
	return 0;
fail:
	s3_backend_cluster_destroy(&b->be);
	return rc;
}
