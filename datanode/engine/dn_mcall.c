/*
 * Metadata calls on the commit thread (dn_mcall_submit): the Deletes and Composes a caller
 * hands over while the commit thread is busy with one sync pile up in its queue with the
 * Write commits, and the next turn commits the run in one transaction per replica
 * (dn_commit_batch, dn_meta_put_batch): a Delete is a put without an object, a Compose a
 * put of the new object that drops its parts.
 *
 * Ordering and conditions are those of the synchronous calls made one after the other in
 * queue order: each call is its own nested transaction inside the batch, so a compose's
 * condition (If-None-Match, If-Match) or its parts' extents are checked against the state
 * the calls and writes before it left, and a refused call changes nothing. One thing cannot
 * be checked inside the batch: a compose reads its parts before the transaction, so a part
 * that an earlier call or write of the same batch replaced or deleted fails its reference
 * check with -ESTALE; that compose then runs again on its own (dn_compose_if, which reads
 * the parts again, up to 5 times), after the batch. Bucket calls run alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_internal.h"

struct mjob {
	struct dn_job job;
	struct dn_store *s;
	struct dn_mcall c;
	dn_mcall_cb cb;
	void *arg;
	struct dn_obj o; /* compose: the new object, read from its parts */
};

static struct mjob *
mjob_of(struct dn_job *job)
{
	return (struct mjob *)((char *)job - offsetof(struct mjob, job));
}

static void
unlink_freed(struct dn_store *s, struct dn_extent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dn_extent_drop(s, &v[i]);
	free(v);
}

static void
mjob_end(struct mjob *m, int err, const struct dn_mcall_result *res)
{
	m->cb(m->arg, err, res);
	free(m->o.pieces);
	free(m);
}

/* A call with a transaction of its own: the bucket calls, a compose retried. */
static void
mjob_alone(struct dn_job *job)
{
	struct mjob *m = mjob_of(job);
	struct dn_mcall_result res = { 0 };
	const struct dn_mcall *c = &m->c;
	int err = -EINVAL;

	atomic_fetch_add(&m->s->mcall_txns, 1);
	switch (c->kind) {
	case DN_MC_BUCKET_CREATE:
		err = dn_bucket_create(m->s, c->bucket, &res.ctime_ns);
		break;
	case DN_MC_BUCKET_DELETE:
		err = dn_bucket_delete(m->s, c->bucket);
		break;
	case DN_MC_COMPOSE:
		err = dn_compose_if(m->s, c->bucket, c->key, c->part_buckets, c->parts,
		                    c->part_etags, c->nparts, c->delete_parts, c->etag, c->attrs,
		                    c->nattrs, c->cond, &res.wr);
		break;
	case DN_MC_DELETE:
		err = dn_delete(m->s, c->bucket, c->key);
		res.existed = err == 1;
		if (err > 0)
			err = 0;
		break;
	}
	mjob_end(m, err, &res);
}

bool
dn_mcall_job(const struct dn_job *job)
{
	return job->fn == mjob_alone;
}

bool
dn_mcall_prepare(struct dn_job *job, struct dn_meta_put *p, struct dn_store **s)
{
	const struct dn_mcall_result none = { 0 };
	struct mjob *m = mjob_of(job);
	const struct dn_mcall *c = &m->c;
	struct timespec ts;
	int err;

	memset(p, 0, sizeof(*p));
	if (!c->bucket || !c->key || (c->nparts && !c->parts)) {
		mjob_end(m, -EINVAL, &none);
		return false;
	}
	*s = m->s;
	p->bucket = c->bucket;
	p->key = c->key;
	if (c->kind == DN_MC_DELETE)
		return true; /* o NULL: a delete */
	err = dn_compose_parts(m->s, c->bucket, c->part_buckets, c->parts, c->part_etags, c->nparts,
	                       &m->o);
	if (err) {
		mjob_end(m, err, &none);
		return false;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	m->o.mtime_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	m->o.etag = (char *)(c->etag ? c->etag : "");
	m->o.attrs = (struct dn_attr *)c->attrs;
	m->o.nattrs = c->nattrs;
	p->o = &m->o;
	p->cond = c->cond;
	if (c->delete_parts) {
		p->drop_buckets = c->part_buckets;
		p->drop_keys = c->parts;
		p->ndrop = c->nparts;
	}
	return true;
}

void
dn_mcall_finish(struct dn_job *job, struct dn_meta_put *p)
{
	struct mjob *m = mjob_of(job);
	struct dn_mcall_result res = { 0 };
	int err = p->err;

	if (err == -ESTALE) {
		/* A part changed under it (maybe by a call before it here): alone. */
		free(m->o.pieces);
		m->o.pieces = NULL;
		mjob_alone(&m->job);
		return;
	}
	if (!err) {
		unlink_freed(m->s, p->freed, p->nfreed);
		if (m->c.kind == DN_MC_COMPOSE) {
			atomic_fetch_add(&m->s->objects_committed, 1);
			res.wr = (struct dn_write_result){ m->o.size, m->o.crc32c, m->c.etag,
				                           m->o.mtime_ns };
		} else {
			res.existed = p->existed;
		}
	}
	mjob_end(m, err, &res);
}

int
dn_mcall_submit(struct dn_store *s, const struct dn_mcall *call, dn_mcall_cb cb, void *arg)
{
	struct mjob *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->s = s;
	m->c = *call;
	m->cb = cb;
	m->arg = arg;
	m->job.fn = mjob_alone;
	if (call->kind == DN_MC_DELETE || call->kind == DN_MC_COMPOSE)
		m->job.batch = dn_commit_batch;
	atomic_fetch_add(&s->mcalls, 1);
	dn_store_defer(s, &m->job);
	return 0;
}
