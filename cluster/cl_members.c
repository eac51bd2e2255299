/* cl_members: the membership view, refreshed by a Range of /zest/nodes/ (cl_members.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_members.h"
#include "zc.h"

struct view {
	struct cl_members_view pub; /* first: the public pointer is the view's */
	atomic_long refs;
	struct cl_rec_node *nodes;
	const char **names;
};

struct cl_members {
	struct cl_etcd *c;
	unsigned refresh_ms;
	pthread_mutex_t mu; /* cur, stop; refresh_mu orders whole refreshes */
	pthread_mutex_t refresh_mu;
	pthread_cond_t cv;
	bool stop;
	pthread_t thread;
	struct view *cur;
	int64_t logged_rev; /* bad values at or below this mod_revision were logged */
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
	for (size_t i = 0; i < v->pub.n; i++)
		cl_rec_node_fini(&v->nodes[i]);
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

static void
publish(struct cl_members *m, struct view *v)
{
	struct view *old;

	pthread_mutex_lock(&m->mu);
	old = m->cur;
	m->cur = v;
	pthread_mutex_unlock(&m->mu);
	cl_members_view_put(old ? &old->pub : NULL);
}

int
cl_members_refresh(struct cl_members *m)
{
	static const char prefix[] = CL_MEMBERS_NODES_PREFIX;
	struct cl_etcd_range r = { .key = prefix, .key_len = sizeof(prefix) - 1, .prefix = true };
	struct cl_etcd_kvs kvs = { 0 };
	int64_t bad_rev = 0;
	struct view *v;
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
	v->pub.revision = kvs.revision;
	v->pub.read_ns = zc_now_ns();
	rc = (int)v->pub.n;
	publish(m, v);
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
		pthread_cond_timedwait(&m->cv, &m->mu, &ts);
		if (m->stop)
			break;
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
	struct cl_members *m = calloc(1, sizeof(*m));
	pthread_condattr_t ca;
	int rc;

	if (!m)
		return -ENOMEM;
	m->c = c;
	m->refresh_ms = refresh_ms ? refresh_ms : CL_MEMBERS_DEFAULT_REFRESH_MS;
	m->cur = view_new(0);
	if (!m->cur) {
		free(m);
		return -ENOMEM;
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
	cl_members_view_put(&m->cur->pub);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->refresh_mu);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
