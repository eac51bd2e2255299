/* cl_members: the membership view, refreshed by a Range of /zest/nodes/ (cl_members.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_members_internal.h"
#include "rpc_tls.h"
#include "zc.h"

struct view {
	struct cl_members_view pub; /* first: the public pointer is the view's */
	atomic_long refs;
	struct cl_rec_node *nodes;
	const char **names;
	struct cl_members_mark *marks; /* owned by a full view, borrowed by a placement one */
	struct view *parent; /* a placement view: its nodes are the parent's (referenced) */
};

/* What this process knows of one registered node's identity. */
enum id_state { ID_PROBING, ID_OK, ID_FAILED };

struct ident {
	struct ident *next;
	char *name, *address;
	uint64_t incarnation;
	enum id_state st;
	uint64_t retry_ns; /* ID_FAILED: probe again from then */
	bool logged;       /* its failure was logged (once per incarnation) */
	bool seen;         /* in the latest read */
};

/* A probe's argument: which registration it checks. */
struct probe_arg {
	struct cl_members *m;
	char *name, *address;
	uint64_t incarnation;
};

struct cl_members {
	struct cl_etcd *c;
	unsigned refresh_ms;
	pthread_mutex_t mu; /* cur, stop, kick, ids, probing; refresh_mu orders refreshes */
	pthread_mutex_t refresh_mu;
	pthread_cond_t cv;
	bool stop;
	bool kick; /* a probe ended: refresh now */
	pthread_t thread;
	struct view *cur;
	struct view *place;            /* cur without the marked nodes (cur itself when none) */
	int64_t logged_rev;            /* bad values at or below this mod_revision were logged */
	struct rpc_tls_prober *prober; /* NULL: no identity check */
	uint64_t retry_ns;
	struct ident *ids;
	unsigned probing; /* idents in ID_PROBING */
};

static struct view *
view_new(size_t n)
{
	struct view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->nodes = calloc(n ? n : 1, sizeof(*v->nodes));
	v->names = calloc(n ? n : 1, sizeof(*v->names));
	if (!v->nodes || !v->names) {
		free(v->nodes);
		free(v->names);
		free(v);
		return NULL;
	}
	atomic_init(&v->refs, 1);
	v->pub.nodes = v->nodes;
	v->pub.names = v->names;
	return v;
}

void
cl_members_view_put(const struct cl_members_view *pub)
{
	struct view *v = (struct view *)pub;

	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	if (v->parent) {
		struct view *parent = v->parent;

		free(v->nodes);
		free(v->names);
		free(v);
		cl_members_view_put(&parent->pub);
		return;
	}
	for (size_t i = 0; i < v->pub.n; i++)
		cl_rec_node_fini(&v->nodes[i]);
	clm_marks_free(v->marks, v->pub.nmarks);
	free(v->nodes);
	free(v->names);
	free(v);
}

const struct cl_members_view *
cl_members_get(struct cl_members *m)
{
	struct view *v;

	pthread_mutex_lock(&m->mu);
	v = m->cur;
	atomic_fetch_add(&v->refs, 1);
	pthread_mutex_unlock(&m->mu);
	return &v->pub;
}

const struct cl_members_view *
cl_members_get_place(struct cl_members *m)
{
	struct view *v;

	pthread_mutex_lock(&m->mu);
	v = m->place;
	atomic_fetch_add(&v->refs, 1);
	pthread_mutex_unlock(&m->mu);
	return &v->pub;
}

/* v's placement view (a new reference): v itself when nothing is marked, else one that
 * borrows v's nodes, holding a reference on v. NULL without memory. */
static struct view *
place_view(struct view *v)
{
	struct view *p;

	if (!v->pub.nmarks) {
		atomic_fetch_add(&v->refs, 1);
		return v;
	}
	p = view_new(v->pub.n);
	if (!p)
		return NULL;
	for (size_t i = 0; i < v->pub.n; i++) {
		if (!cl_members_placeable(&v->pub, v->nodes[i].name))
			continue;
		p->nodes[p->pub.n] = v->nodes[i]; /* shallow: the parent owns the strings */
		p->names[p->pub.n++] = v->nodes[i].name;
	}
	p->pub.unverified = v->pub.unverified;
	p->pub.revision = v->pub.revision;
	p->pub.read_ns = v->pub.read_ns;
	p->pub.marks = v->pub.marks;
	p->pub.nmarks = v->pub.nmarks;
	p->parent = v;
	atomic_fetch_add(&v->refs, 1);
	return p;
}

static void
publish(struct cl_members *m, struct view *v, struct view *place)
{
	struct view *old, *old_place;

	pthread_mutex_lock(&m->mu);
	old = m->cur;
	old_place = m->place;
	m->cur = v;
	m->place = place;
	pthread_mutex_unlock(&m->mu);
	cl_members_view_put(old_place ? &old_place->pub : NULL);
	cl_members_view_put(old ? &old->pub : NULL);
}

static void
ident_free(struct ident *id)
{
	free(id->name);
	free(id->address);
	free(id);
}

static void
probe_done(void *arg, bool ok)
{
	struct probe_arg *pa = arg;
	struct cl_members *m = pa->m;
	struct ident *id;

	pthread_mutex_lock(&m->mu);
	for (id = m->ids; id; id = id->next)
		if (!strcmp(id->name, pa->name))
			break;
	/* a registration replaced meanwhile has its own probe */
	if (id && id->st == ID_PROBING && id->incarnation == pa->incarnation &&
	    !strcmp(id->address, pa->address)) {
		m->probing--;
		if (ok) {
			if (id->logged)
				ZC_INFO("members", "node=%s address=%s verified; live again",
				        id->name, id->address);
			id->st = ID_OK;
		} else {
			if (!id->logged)
				ZC_WARN("members",
				        "node=%s address=%s incarnation=%016llx left out of the "
				        "view: no mutual TLS connection to a certificate of the "
				        "cluster CA naming it (another CA, another node's "
				        "certificate, or unreachable); probing again every %llu ms",
				        id->name, id->address, (unsigned long long)id->incarnation,
				        (unsigned long long)(m->retry_ns / 1000000u));
			id->logged = true;
			id->st = ID_FAILED;
			id->retry_ns = zc_now_ns() + m->retry_ns;
		}
		m->kick = true;
		pthread_cond_broadcast(&m->cv);
	}
	pthread_mutex_unlock(&m->mu);
	free(pa->name);
	free(pa->address);
	free(pa);
}

/*
 * Mark in keep[] the nodes of v whose identity was verified; queue probes for the new
 * ones and those due again (added to *todo, started by the caller outside m->mu).
 * Returns the count of nodes left out because their probe failed, or -ENOMEM.
 */
static int
judge(struct cl_members *m, const struct view *v, bool *keep, struct probe_arg **todo,
      size_t *ntodo)
{
	uint64_t now = zc_now_ns();
	struct ident **pp, *id;
	int failed = 0;

	for (id = m->ids; id; id = id->next)
		id->seen = false;
	for (size_t i = 0; i < v->pub.n; i++) {
		const struct cl_rec_node *nd = &v->nodes[i];
		bool start = false;

		for (id = m->ids; id; id = id->next)
			if (!strcmp(id->name, nd->name))
				break;
		if (id &&
		    (id->incarnation != nd->incarnation || strcmp(id->address, nd->address))) {
			/* a new start of the node (or a new address): check it again */
			char *a = strdup(nd->address);

			if (!a)
				return -ENOMEM;
			free(id->address);
			id->address = a;
			id->incarnation = nd->incarnation;
			id->logged = false;
			/* a probe in flight is for the old one: probe_done drops its result */
			if (id->st == ID_PROBING)
				m->probing--;
			start = true;
		} else if (!id) {
			id = calloc(1, sizeof(*id));
			if (!id || !(id->name = strdup(nd->name)) ||
			    !(id->address = strdup(nd->address))) {
				if (id)
					ident_free(id);
				return -ENOMEM;
			}
			id->incarnation = nd->incarnation;
			id->next = m->ids;
			m->ids = id;
			start = true;
		} else if (id->st == ID_FAILED && now >= id->retry_ns) {
			start = true;
		}
		id->seen = true;
		if (start) {
			struct probe_arg *pa = calloc(1, sizeof(*pa));

			if (!pa || !(pa->name = strdup(id->name)) ||
			    !(pa->address = strdup(id->address))) {
				if (pa)
					free(pa->name);
				free(pa);
				return -ENOMEM;
			}
			pa->m = m;
			pa->incarnation = id->incarnation;
			todo[(*ntodo)++] = pa;
			id->st = ID_PROBING;
			m->probing++;
		}
		keep[i] = id->st == ID_OK;
		failed += id->st == ID_FAILED;
	}
	/* forget the nodes that left etcd: a return is a new incarnation anyway */
	for (pp = &m->ids; (id = *pp);) {
		if (id->seen) {
			pp = &id->next;
			continue;
		}
		*pp = id->next;
		if (id->st == ID_PROBING)
			m->probing--;
		ident_free(id);
	}
	return failed;
}

int
cl_members_refresh(struct cl_members *m)
{
	static const char prefix[] = CL_MEMBERS_NODES_PREFIX;
	struct cl_etcd_range r = { .key = prefix, .key_len = sizeof(prefix) - 1, .prefix = true };
	struct cl_etcd_kvs kvs = { 0 };
	int64_t bad_rev = 0;
	struct view *v, *place;
	int rc;

	pthread_mutex_lock(&m->refresh_mu);
	rc = cl_etcd_range(m->c, &r, &kvs, 0);
	if (rc < 0)
		goto out;
	v = view_new(kvs.n);
	if (!v) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < kvs.n; i++) {
		const struct cl_etcd_kv *kv = &kvs.kv[i];
		const char *name = kv->key + sizeof(prefix) - 1;
		struct cl_rec_node *nd = &v->nodes[v->pub.n];
		char why[CL_REC_WHY_MAX] = "";
		int drc = cl_rec_node_decode(kv->value, kv->value_len, nd, why, sizeof(why));

		if (drc == 0 && strcmp(nd->name, name) != 0) {
			snprintf(why, sizeof(why),
			         "NodeInfo.name \"%.64s\" under another name's key", nd->name);
			cl_rec_node_fini(nd);
			drc = -EBADMSG;
		}
		if (drc == -ENOMEM) {
			rc = drc;
			cl_members_view_put(&v->pub);
			goto out;
		}
		if (drc) {
			if (kv->mod_revision > m->logged_rev)
				ZC_WARN("members", "key=%s mod_revision=%lld left out: %s", kv->key,
				        (long long)kv->mod_revision, why);
			if (kv->mod_revision > bad_rev)
				bad_rev = kv->mod_revision;
			continue;
		}
		v->names[v->pub.n++] = nd->name;
	}
	if (bad_rev > m->logged_rev)
		m->logged_rev = bad_rev;
	if (m->prober) {
		struct probe_arg **todo = calloc(v->pub.n ? v->pub.n : 1, sizeof(*todo));
		bool *keep = calloc(v->pub.n ? v->pub.n : 1, sizeof(*keep));
		size_t ntodo = 0, j = 0;
		int failed = -ENOMEM;

		if (todo && keep) {
			pthread_mutex_lock(&m->mu);
			failed = judge(m, v, keep, todo, &ntodo);
			pthread_mutex_unlock(&m->mu);
		}
		/* the view keeps the verified nodes, in their order */
		for (size_t i = 0; failed >= 0 && i < v->pub.n; i++) {
			if (!keep[i]) {
				cl_rec_node_fini(&v->nodes[i]);
				continue;
			}
			if (j != i) {
				v->nodes[j] = v->nodes[i];
				memset(&v->nodes[i], 0, sizeof(v->nodes[i]));
			}
			v->names[j] = v->nodes[j].name;
			j++;
		}
		if (failed >= 0)
			v->pub.n = j;
		free(keep);
		/* the probes start outside the lock: their callbacks take it */
		for (size_t i = 0; i < ntodo; i++)
			if (rpc_tls_probe(m->prober, todo[i]->address, todo[i]->name, probe_done,
			                  todo[i]))
				probe_done(todo[i], false);
		free(todo);
		if (failed < 0) {
			rc = failed;
			cl_members_view_put(&v->pub);
			goto out;
		}
		v->pub.unverified = (size_t)failed;
	}
	/* the marks at the same revision: a read that fails keeps the old view whole */
	rc = clm_marks_read(m->c, kvs.revision, &v->marks, &v->pub.nmarks);
	if (rc) {
		cl_members_view_put(&v->pub);
		goto out;
	}
	v->pub.marks = v->marks;
	v->pub.revision = kvs.revision;
	v->pub.read_ns = zc_now_ns();
	place = place_view(v);
	if (!place) {
		rc = -ENOMEM;
		cl_members_view_put(&v->pub);
		goto out;
	}
	rc = (int)v->pub.n;
	publish(m, v, place);
out:
	pthread_mutex_unlock(&m->refresh_mu);
	cl_etcd_kvs_fini(&kvs);
	return rc;
}

static void *
run(void *arg)
{
	struct cl_members *m = arg;
	int last = 0;

	pthread_mutex_lock(&m->mu);
	while (!m->stop) {
		struct timespec ts;
		int rc;

		zc_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)m->refresh_ms * 1000000u);
		while (!m->stop && !m->kick)
			if (pthread_cond_timedwait(&m->cv, &m->mu, &ts) == ETIMEDOUT)
				break;
		if (m->stop)
			break;
		m->kick = false;
		pthread_mutex_unlock(&m->mu);
		rc = cl_members_refresh(m);
		/* the etcd client logs each failure; say only when the view starts or stops
		 * going stale */
		if (rc < 0 && last >= 0)
			ZC_WARN("members", "cannot read membership err=%d; keeping the last view",
			        rc);
		else if (rc >= 0 && last < 0)
			ZC_INFO("members", "membership read again nodes=%d", rc);
		last = rc;
		pthread_mutex_lock(&m->mu);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

int
cl_members_create(struct cl_etcd *c, unsigned refresh_ms, struct cl_members **out)
{
	return cl_members_create_opts(c, &(struct cl_members_opts){ .refresh_ms = refresh_ms },
	                              out);
}

int
cl_members_create_opts(struct cl_etcd *c, const struct cl_members_opts *o, struct cl_members **out)
{
	struct cl_members *m = calloc(1, sizeof(*m));
	char err[RPC_TLS_ERR_MAX];
	pthread_condattr_t ca;
	unsigned probe_ms = o->probe_ms ? o->probe_ms : CL_MEMBERS_DEFAULT_PROBE_MS;
	int rc;

	if (!m)
		return -ENOMEM;
	m->c = c;
	m->refresh_ms = o->refresh_ms ? o->refresh_ms : CL_MEMBERS_DEFAULT_REFRESH_MS;
	m->retry_ns =
	        (uint64_t)(o->retry_ms ? o->retry_ms : CL_MEMBERS_DEFAULT_RETRY_MS) * 1000000u;
	m->cur = view_new(0);
	if (!m->cur) {
		free(m);
		return -ENOMEM;
	}
	m->place = place_view(m->cur);
	if (o->tls && !o->tls->insecure) {
		rc = rpc_tls_prober_create(o->tls, probe_ms, &m->prober, err, sizeof(err));
		if (rc) {
			ZC_ERR("members", "no identity check: %s", err);
			cl_members_view_put(&m->place->pub);
			cl_members_view_put(&m->cur->pub);
			free(m);
			return rc;
		}
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->refresh_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = cl_members_refresh(m);
	if (rc < 0 && rc != -ENOMEM)
		ZC_WARN("members", "cannot read membership at start err=%d; retrying", rc);
	if (rc >= 0 && m->prober) {
		/* the first read's probes: the first view holds the nodes that passed (each
		 * probe ends within probe_ms; no network call here, a wait for their ends) */
		struct timespec ts;

		zc_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)probe_ms * 1000000u + 500000000u);
		pthread_mutex_lock(&m->mu);
		while (m->probing)
			if (pthread_cond_timedwait(&m->cv, &m->mu, &ts) == ETIMEDOUT)
				break;
		m->kick = false;
		pthread_mutex_unlock(&m->mu);
		rc = cl_members_refresh(m);
	}
	rc = pthread_create(&m->thread, NULL, run, m);
	if (rc) {
		m->thread = 0;
		cl_members_destroy(m);
		return -EAGAIN;
	}
	pthread_setname_np(m->thread, "cl-members");
	*out = m;
	return 0;
}

void
cl_members_destroy(struct cl_members *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	pthread_cond_signal(&m->cv);
	pthread_mutex_unlock(&m->mu);
	if (m->thread)
		pthread_join(m->thread, NULL);
	/* its callbacks take m->mu: done before the idents go */
	rpc_tls_prober_destroy(m->prober);
	while (m->ids) {
		struct ident *id = m->ids;

		m->ids = id->next;
		ident_free(id);
	}
	cl_members_view_put(&m->place->pub);
	cl_members_view_put(&m->cur->pub);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->refresh_mu);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
