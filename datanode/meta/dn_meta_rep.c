/*
 * dn_meta_rep: the replica set (open, resync, rebuild, revive) and write transactions
 * applied to every live replica, the replicas' commits at the same time (one committer
 * thread per replica).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_meta_internal.h"

/* Under wlock (or before the store runs): publish how many replicas take writes. */
static void
meta_count_live(struct dn_meta *m)
{
	unsigned n = 0;

	for (unsigned i = 0; i < m->nrep; i++)
		n += m->rep[i].ok;
	atomic_store(&m->nlive, n);
}

char *
dn_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ---- open / replicate ---- */
static int
rep_open(struct dn_meta *m, struct rep *r)
{
	MDB_txn *txn;
	MDB_val k = { 3, "gen" }, v;
	int rc;

	if (mkdir(r->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	rc = mdb_env_create(&r->env);
	if (rc)
		return dn_meta_mdb_err(rc);
	mdb_env_set_maxdbs(r->env, 8);
	mdb_env_set_mapsize(r->env, m->o.map_size);
	rc = mdb_env_open(r->env, r->dir, MDB_NOTLS, 0644);
	if (rc)
		goto close_env;
	rc = mdb_txn_begin(r->env, NULL, 0, &txn);
	if (rc)
		goto close_env;
	if ((rc = mdb_dbi_open(txn, "buckets", MDB_CREATE, &r->buckets)) ||
	    (rc = mdb_dbi_open(txn, "objects", MDB_CREATE, &r->objects)) ||
	    (rc = mdb_dbi_open(txn, "extents", MDB_CREATE, &r->extents)) ||
	    (rc = mdb_dbi_open(txn, "info", MDB_CREATE, &r->info)) ||
	    (rc = mdb_dbi_open(txn, "cells", MDB_CREATE, &r->cells))) {
		mdb_txn_abort(txn);
		goto close_env;
	}
	r->gen = 0;
	if (mdb_get(txn, r->info, &k, &v) == 0 && v.mv_size == 8)
		memcpy(&r->gen, v.mv_data, 8);
	/*
	 * Which names are bundled depends on LMDB's key limit: it is part of the format. A
	 * replica written under another limit would be misread, so refuse it; one with none
	 * recorded (older, or new) cannot hold a bundle yet and takes ours.
	 */
	r->maxkey = (size_t)mdb_env_get_maxkeysize(r->env);
	if (r->maxkey <= BUCKET_MAX + 1 || r->maxkey > NAME_MAX_LEN) {
		ZC_ERR("meta", "replica=%s lmdb_max_key=%zu unsupported", r->dir, r->maxkey);
		mdb_txn_abort(txn);
		rc = MDB_INCOMPATIBLE;
		goto close_env;
	}
	{
		MDB_val mk = { 6, "keymax" }, mv;
		uint32_t want = (uint32_t)r->maxkey, have = 0;

		rc = mdb_get(txn, r->info, &mk, &mv);
		if (rc == MDB_NOTFOUND) {
			mv = (MDB_val){ 4, &want };
			rc = mdb_put(txn, r->info, &mk, &mv, 0);
		} else if (rc == 0) {
			if (mv.mv_size == 4)
				memcpy(&have, mv.mv_data, 4);
			if (mv.mv_size != 4 || have != want) {
				ZC_ERR("meta",
				       "replica=%s written with another LMDB key limit "
				       "(not %u): refused",
				       r->dir, want);
				rc = MDB_INCOMPATIBLE;
			}
		}
		if (rc) {
			mdb_txn_abort(txn);
			goto close_env;
		}
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto close_env;
	r->ok = true;
	return 0;
close_env:
	mdb_env_close(r->env);
	r->env = NULL;
	return dn_meta_mdb_err(rc);
}

/* Replace replica r with a copy of the primary. */
static int
rep_resync(struct dn_meta *m, struct rep *r)
{
	struct rep *p = &m->rep[m->primary];
	char tmp[4200], from[4300], to[4300];
	int rc;

	if (r->env)
		mdb_env_close(r->env);
	r->env = NULL;
	r->ok = false;
	snprintf(tmp, sizeof(tmp), "%s.tmp", r->dir);
	snprintf(from, sizeof(from), "%s/data.mdb", tmp);
	unlink(from);
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	rc = mdb_env_copy(p->env, tmp);
	if (rc) {
		/* A partial copy on a drive that filled up again: give the space back. */
		unlink(from);
		rmdir(tmp);
		return dn_meta_mdb_err(rc);
	}
	snprintf(to, sizeof(to), "%s/data.mdb", r->dir);
	if (mkdir(r->dir, 0755) < 0 && errno != EEXIST) /* a replaced, empty drive folder */
		return -errno;
	if (rename(from, to) < 0)
		return -errno;
	rmdir(tmp);
	snprintf(to, sizeof(to), "%s/lock.mdb", r->dir);
	unlink(to);
	return rep_open(m, r);
}

static int committers_start(struct dn_meta *m);

int
dn_meta_open(const struct dn_meta_opts *o, struct dn_meta **out)
{
	struct dn_meta *m = calloc(1, sizeof(*m));
	uint64_t best = 0;
	bool any = false;
	int err;

	if (!m)
		return -ENOMEM;
	m->o = *o;
	pthread_mutex_init(&m->wlock, NULL);
	pthread_mutex_init(&m->tlock, NULL);
	pthread_cond_init(&m->tdone, NULL);
	for (unsigned i = 0; i < MAX_REPS; i++)
		pthread_cond_init(&m->rep[i].cond, NULL);
	{
		pthread_rwlockattr_t a;

		/* Writers (moving the primary, closing a replica) hold wlock meanwhile: they must
		 * not starve behind a stream of overlapping readers. No reader nests read_txn. */
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&m->envlock, &a);
		pthread_rwlockattr_destroy(&a);
	}
	m->nrep = o->replicas < o->ndrives ? o->replicas : o->ndrives;
	for (unsigned i = 0; i < m->nrep; i++) {
		struct rep *r = &m->rep[i];

		snprintf(r->dir, sizeof(r->dir), "%s/meta", o->drives[i].root);
		err = rep_open(m, r);
		if (err) {
			ZC_WARN("meta", "replica=%s unusable err=%s", r->dir, strerror(-err));
			continue;
		}
		if (!any || r->gen > best) {
			best = r->gen;
			m->primary = i;
			any = true;
		}
	}
	if (!any) {
		ZC_ERR("meta", "no usable metadata replica");
		dn_meta_close(m);
		return -EIO;
	}
	for (unsigned i = 0; i < m->nrep; i++) {
		struct rep *r = &m->rep[i];

		if (i == m->primary || (r->ok && r->gen == best))
			continue;
		ZC_INFO("meta", "replica=%s gen=%llu behind gen=%llu: copying", r->dir,
		        (unsigned long long)r->gen, (unsigned long long)best);
		err = rep_resync(m, r);
		if (err)
			ZC_WARN("meta", "replica=%s resync failed err=%s", r->dir, strerror(-err));
	}
	{
		struct rep *p = &m->rep[m->primary];
		MDB_txn *txn;
		MDB_val k = { 7, "next_id" }, v;
		uint64_t id = 1;

		if (mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn) == 0) {
			if (mdb_get(txn, p->info, &k, &v) == 0 && v.mv_size == 8)
				memcpy(&id, v.mv_data, 8);
			mdb_txn_abort(txn);
		}
		atomic_store(&m->next_id, id);
	}
	meta_count_live(m);
	err = committers_start(m);
	if (err) {
		dn_meta_close(m);
		return err;
	}
	*out = m;
	return 0;
}

void
dn_meta_close(struct dn_meta *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->tlock);
	m->tstop = true;
	for (unsigned i = 0; i < m->nrep; i++)
		pthread_cond_signal(&m->rep[i].cond);
	pthread_mutex_unlock(&m->tlock);
	for (unsigned i = 0; i < m->nrep; i++)
		if (m->rep[i].thread_ok)
			pthread_join(m->rep[i].thread, NULL);
	for (unsigned i = 0; i < m->nrep; i++)
		if (m->rep[i].env)
			mdb_env_close(m->rep[i].env);
	for (unsigned i = 0; i < MAX_REPS; i++)
		pthread_cond_destroy(&m->rep[i].cond);
	pthread_cond_destroy(&m->tdone);
	pthread_mutex_destroy(&m->tlock);
	pthread_mutex_destroy(&m->wlock);
	pthread_rwlock_destroy(&m->envlock);
	free(m);
}

uint64_t
dn_meta_generation(struct dn_meta *m)
{
	uint64_t gen;

	pthread_mutex_lock(&m->wlock);
	gen = m->rep[m->primary].gen;
	pthread_mutex_unlock(&m->wlock);
	return gen;
}

int
dn_meta_rebuild_replica(struct dn_meta *m, unsigned drive)
{
	struct rep *r;
	int err = 0;

	if (drive >= m->nrep)
		return 0; /* this drive holds no replica */
	r = &m->rep[drive];
	pthread_mutex_lock(&m->wlock);
	pthread_rwlock_wrlock(&m->envlock);
	if (m->primary == drive) {
		/* Copy from another live replica: they all carry the same generation. */
		for (unsigned j = 1; j < m->nrep; j++)
			if (m->rep[(drive + j) % m->nrep].ok) {
				m->primary = (drive + j) % m->nrep;
				break;
			}
	}
	if (m->primary == drive) {
		/* The only live copy: keep it as it is. */
		pthread_rwlock_unlock(&m->envlock);
		pthread_mutex_unlock(&m->wlock);
		ZC_WARN("meta", "replica=%s is the only live copy: not rebuilt", r->dir);
		return 0;
	} else {
		err = rep_resync(m, r);
		if (!err)
			r->gen = m->rep[m->primary].gen;
	}
	meta_count_live(m);
	pthread_rwlock_unlock(&m->envlock);
	pthread_mutex_unlock(&m->wlock);
	if (err)
		ZC_ERR("meta", "replica=%s rebuild failed err=%s", r->dir, strerror(-err));
	else
		ZC_INFO("meta", "replica=%s rebuilt from the primary", r->dir);
	return err;
}

int
dn_meta_revive_replica(struct dn_meta *m, unsigned drive)
{
	const char *how = "rebuilt from the primary";
	struct rep *r;
	uint64_t gen;
	unsigned live;
	int err;

	if (drive >= m->nrep)
		return 0;
	r = &m->rep[drive];
	/* wlock: no write transaction runs while the live set changes, and the copy is
	 * exactly the primary's last generation. */
	pthread_mutex_lock(&m->wlock);
	if (r->ok) {
		pthread_mutex_unlock(&m->wlock);
		return 0;
	}
	if (m->primary == drive) {
		/*
		 * Every replica was dropped, this one last: it holds the newest commit (a failed
		 * LMDB commit leaves the last good one). Reopen it in place; readers use the
		 * primary's environment, so they are kept out by envlock meanwhile.
		 */
		pthread_rwlock_wrlock(&m->envlock);
		if (r->env)
			mdb_env_close(r->env);
		r->env = NULL;
		err = rep_open(m, r);
		pthread_rwlock_unlock(&m->envlock);
		how = "the newest: reopened in place";
	} else if (!m->rep[m->primary].ok) {
		err = -EAGAIN; /* no live primary yet to copy: the last dropped one comes first */
	} else {
		/*
		 * Not the primary; but it may have been until a failed write moved the primary
		 * on, and a reader that picked it before may still be in a transaction there:
		 * close it under envlock (waiting for those only). New readers pick the new
		 * primary, so the copy itself runs with wlock alone, readers going on.
		 */
		pthread_rwlock_wrlock(&m->envlock);
		if (r->env)
			mdb_env_close(r->env);
		r->env = NULL;
		pthread_rwlock_unlock(&m->envlock);
		err = rep_resync(m, r);
		if (!err)
			r->gen = m->rep[m->primary].gen;
	}
	if (err == -ENOSPC)
		dn_drive_mark_full(&m->o.drives[drive]); /* not yet room for the copy: wait */
	gen = r->gen;
	meta_count_live(m);
	live = atomic_load(&m->nlive);
	pthread_mutex_unlock(&m->wlock);
	if (err) {
		if (err != -EAGAIN)
			ZC_WARN("meta", "replica=%s rebuild failed err=%s: still dropped", r->dir,
			        strerror(-err));
		return err;
	}
	atomic_fetch_add(&m->revived, 1);
	ZC_INFO("meta", "replica=%s gen=%llu %s: live again (%u of %u)", r->dir,
	        (unsigned long long)gen, how, live, m->nrep);
	return 1;
}

unsigned
dn_meta_replicas(struct dn_meta *m, unsigned *live, uint64_t *revived)
{
	if (live)
		*live = (unsigned)atomic_load(&m->nlive);
	if (revived)
		*revived = atomic_load(&m->revived);
	return m->nrep;
}

uint64_t
dn_meta_txns(struct dn_meta *m)
{
	return atomic_load(&m->txns);
}

bool
dn_meta_replica_live(struct dn_meta *m, unsigned drive)
{
	bool ok;

	if (drive >= m->nrep)
		return false;
	pthread_mutex_lock(&m->wlock);
	ok = m->rep[drive].ok;
	pthread_mutex_unlock(&m->wlock);
	return ok;
}

uint64_t
dn_meta_replica_generation(struct dn_meta *m, unsigned drive)
{
	uint64_t gen;

	if (drive >= m->nrep)
		return 0;
	pthread_mutex_lock(&m->wlock);
	gen = m->rep[drive].gen;
	pthread_mutex_unlock(&m->wlock);
	return gen;
}

uint64_t
dn_meta_next_id(struct dn_meta *m)
{
	return atomic_fetch_add(&m->next_id, 1);
}

/* ---- transactions ---- */

/*
 * One replica's part of a write transaction, handed to its committer thread. LMDB wants a
 * write transaction begun and committed on one thread (the environment's writer lock), so
 * each non-primary replica runs its whole transaction on its own thread: the caller waits
 * until fn was applied there (so fn never runs on two replicas at once: the txn_fns write
 * their argument), then moves on, and the replicas' commits, each with its syncs, overlap
 * the primary's instead of following it.
 */
enum { JOB_POSTED, JOB_APPLIED, JOB_DONE };

struct rep_job {
	txn_fn fn;
	void *arg;
	int state; /* under tlock */
	int err;   /* < 0: this replica failed (it diverged or could not write) */
};

/*
 * Begin a transaction on r, apply fn and the generation and id counters. fn's result (>= 0)
 * with *out the open transaction, or < 0 with nothing left open; *refused: fn itself said
 * no (on the primary, a logical refusal: nothing changes anywhere).
 */
static int
rep_apply(struct dn_meta *m, struct rep *r, txn_fn fn, void *arg, bool first, MDB_txn **out,
          bool *refused)
{
	MDB_val k = { 3, "gen" }, v;
	uint64_t gen = r->gen + 1;
	MDB_txn *txn;
	int err, ret, rc;

	*refused = false;
	rc = mdb_txn_begin(r->env, NULL, 0, &txn);
	if (rc)
		return dn_meta_mdb_err(rc);
	ret = fn(r, txn, arg, first);
	if (ret < 0) {
		mdb_txn_abort(txn);
		*refused = true;
		return ret;
	}
	v = (MDB_val){ 8, &gen };
	rc = mdb_put(txn, r->info, &k, &v, 0);
	if (!rc) {
		MDB_val nk = { 7, "next_id" };
		uint64_t nid = atomic_load(&m->next_id);
		MDB_val nv = { 8, &nid };

		rc = mdb_put(txn, r->info, &nk, &nv, 0);
	}
	if (rc) {
		mdb_txn_abort(txn);
		return dn_meta_mdb_err(rc);
	}
	err = ZC_FAULT_IDX(ZC_FP_META_TXN, (unsigned)(r - m->rep), 0);
	if (err < 0) { /* test builds: as a drive that filled up */
		mdb_txn_abort(txn);
		return err;
	}
	*out = txn;
	return ret;
}

/* Commit a transaction rep_apply opened on r; the generation moves on success. */
static int
rep_commit(struct rep *r, MDB_txn *txn)
{
	int rc = mdb_txn_commit(txn);

	if (rc)
		return dn_meta_mdb_err(rc);
	r->gen++;
	return 0;
}

static void *
committer_main(void *arg)
{
	struct rep *r = arg;
	struct dn_meta *m = r->owner;

	pthread_mutex_lock(&m->tlock);
	for (;;) {
		struct rep_job *j = r->job;
		MDB_txn *txn = NULL;
		bool refused;
		int err;

		if (m->tstop)
			break;
		if (!j || j->state != JOB_POSTED) {
			pthread_cond_wait(&r->cond, &m->tlock);
			continue;
		}
		pthread_mutex_unlock(&m->tlock);
		err = rep_apply(m, r, j->fn, j->arg, false, &txn, &refused);
		pthread_mutex_lock(&m->tlock);
		j->state = JOB_APPLIED;
		pthread_cond_broadcast(&m->tdone);
		pthread_mutex_unlock(&m->tlock);
		if (err >= 0)
			err = rep_commit(r, txn);
		pthread_mutex_lock(&m->tlock);
		j->err = err;
		j->state = JOB_DONE;
		r->job = NULL;
		pthread_cond_broadcast(&m->tdone);
	}
	pthread_mutex_unlock(&m->tlock);
	return NULL;
}

static int
committers_start(struct dn_meta *m)
{
	for (unsigned i = 0; i < m->nrep; i++) {
		struct rep *r = &m->rep[i];
		char name[16];
		int err;

		r->owner = m;
		err = pthread_create(&r->thread, NULL, committer_main, r);
		if (err)
			return -err;
		r->thread_ok = true;
		snprintf(name, sizeof(name), "dn-meta%u", i & 0xff); /* i < MAX_REPS */
		pthread_setname_np(r->thread, name);
	}
	return 0;
}

static void
job_wait(struct dn_meta *m, struct rep_job *j, int state)
{
	pthread_mutex_lock(&m->tlock);
	while (j->state < state)
		pthread_cond_wait(&m->tdone, &m->tlock);
	pthread_mutex_unlock(&m->tlock);
}

/* Under wlock: replica i failed a write. Stale from now on: the healer (or the next open)
 * copies the primary over it once its drive is OK; a full drive is marked so, to wait for
 * room first. */
static void
rep_drop(struct dn_meta *m, unsigned i, int err)
{
	struct rep *r = &m->rep[i];

	ZC_ERR("meta", "replica=%s write failed err=%s: dropped until its drive is OK", r->dir,
	       strerror(-err));
	r->ok = false;
	if (err == -ENOSPC)
		dn_drive_mark_full(&m->o.drives[i]);
	if (m->o.on_drop)
		m->o.on_drop(m->o.arg);
}

/* Under wlock: make the next live replica after the primary the primary; false if none. */
static bool
promote(struct dn_meta *m)
{
	bool found = false;

	/* Readers pick m->primary under envlock: move it under the write lock. */
	pthread_rwlock_wrlock(&m->envlock);
	for (unsigned j = 1; j < m->nrep && !found; j++)
		if (m->rep[(m->primary + j) % m->nrep].ok) {
			m->primary = (m->primary + j) % m->nrep;
			found = true;
		}
	pthread_rwlock_unlock(&m->envlock);
	return found;
}

/*
 * Apply fn to every live replica; the primary decides the outcome. fn runs on the primary
 * first (on the caller's thread), then on each other replica in turn (on its committer);
 * the commits, each with its own LMDB syncs, run at the same time: one sync round per
 * transaction, not one per replica after the other. A primary that fails before its commit
 * is dropped and the next one tried from the start; one whose commit fails while another
 * replica committed hands over to that one (it holds the same transaction).
 */
int
dn_meta_write(struct dn_meta *m, txn_fn fn, void *arg)
{
	int result = -EIO;

	pthread_mutex_lock(&m->wlock);
	atomic_fetch_add(&m->txns, 1);
	for (;;) {
		struct rep_job jobs[MAX_REPS];
		bool posted[MAX_REPS] = { false }, committed = false, refused;
		unsigned p = m->primary;
		MDB_txn *txn = NULL;
		int err, ret;

		if (!m->rep[p].ok && !promote(m))
			break;
		p = m->primary;
		ret = err = rep_apply(m, &m->rep[p], fn, arg, true, &txn, &refused);
		if (err < 0 && refused) {
			result = err; /* a logical refusal: nothing changes anywhere */
			break;
		}
		if (err < 0) {
			rep_drop(m, p, err);
			if (!promote(m))
				break;
			continue; /* start over at the new primary */
		}
		for (unsigned n = 1; n < m->nrep; n++) {
			unsigned i = (p + n) % m->nrep;

			if (!m->rep[i].ok)
				continue;
			jobs[i] = (struct rep_job){ fn, arg, JOB_POSTED, 0 };
			pthread_mutex_lock(&m->tlock);
			m->rep[i].job = &jobs[i];
			pthread_cond_signal(&m->rep[i].cond);
			pthread_mutex_unlock(&m->tlock);
			posted[i] = true;
			job_wait(m, &jobs[i], JOB_APPLIED); /* fn is done with arg there */
		}
		err = rep_commit(&m->rep[p], txn);
		for (unsigned i = 0; i < m->nrep; i++) {
			if (!posted[i])
				continue;
			job_wait(m, &jobs[i], JOB_DONE);
			if (jobs[i].err) /* diverged from the primary, or could not write */
				rep_drop(m, i, jobs[i].err);
			else
				committed = true;
		}
		if (!err) {
			result = ret;
			break;
		}
		rep_drop(m, p, err);
		/* The live replicas left are the ones that committed: promote one of them. */
		if (committed && promote(m))
			result = ret;
		break;
	}
	meta_count_live(m);
	pthread_mutex_unlock(&m->wlock);
	return result;
}

/*
 * Readers use the primary's environment under a read lock: a heal that replaces a replica
 * (and may move the primary), a write that moves the primary, and the healer closing a
 * dropped replica (maybe a primary until lately) take it for writing, so no reader is
 * inside an environment being closed and m->primary only changes with no reader about.
 */
int
dn_meta_read_txn(struct dn_meta *m, MDB_txn **txn, struct rep **r)
{
	int err;

	pthread_rwlock_rdlock(&m->envlock);
	*r = &m->rep[m->primary];
	if (!(*r)->env) { /* every replica dropped and the primary's reopen failed */
		pthread_rwlock_unlock(&m->envlock);
		return -EIO;
	}
	err = dn_meta_mdb_err(mdb_txn_begin((*r)->env, NULL, MDB_RDONLY, txn));
	if (err)
		pthread_rwlock_unlock(&m->envlock);
	return err;
}

void
dn_meta_read_end(struct dn_meta *m, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&m->envlock);
}
