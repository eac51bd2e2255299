/*
 * Metadata in LMDB, one environment per replica on the first m + 1 drives
 * (<drive>/meta/). Every write transaction is applied to each live replica under one lock
 * (the primary first; the replicas' commits and their syncs overlap, each on its own
 * committer thread), and bumps a generation number in each; on open the replica with the
 * highest generation wins and is copied over the others, so losing any m drives loses
 * nothing.
 * A replica whose write fails is dropped from the live set (on ENOSPC its drive is marked
 * full); the background healer copies the primary over it once its drive is OK again
 * (dn_meta_revive_replica) and it takes writes again, with no restart.
 *
 * Tables: buckets (name -> ctime), objects (bucket \0 key -> object record, so LMDB's
 * byte order is S3's key order; names too long for an LMDB key share a bundle, see
 * dn_meta_key.c), extents (big-endian id -> extent record), info (gen, next_id, keymax),
 * cells (big-endian id, group, cell -> a cluster cell's entry, dn_meta_cell.c).
 * Records are a small little-endian binary encoding (dn_wbuf_/dn_rbuf_ helpers).
 *
 * dn_meta_internal.h: what the metadata files share. Private to dn_meta_*.c.
 *   dn_meta_rec.c   record codec: objects and extents, the byte buffers they use
 *   dn_meta_key.c   object names as LMDB keys, long-name bundles, the object iterator
 *   dn_meta_rep.c   the replica set: open, resync, rebuild, revive; write transactions
 *   dn_meta_obj.c   objects and extents: get, put (with conditions), batch, delete
 *   dn_meta_list.c  buckets and object listings
 *   dn_meta_cell.c  cluster mode's cell entries
 */
#ifndef ZEST_DN_META_INTERNAL_H
#define ZEST_DN_META_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>

#include "dn_meta.h"
#include "zc.h"
#include "zc_crc.h"

#define MAX_REPS   EC_MAX_CELLS
#define OBJ_VER    1
#define EXT_VER    2           /* 1: parity cells always full (no short_parity) */
#define BUNDLE_VER 0x42000001u /* bundle format 1; never an OBJ_VER (dn_meta_key.c) */
#define KEY_MAX    1024
#define BUCKET_MAX 255
/* An object's name: bucket \0 key (dn_meta_key.c) */
#define NAME_MAX_LEN (BUCKET_MAX + 1 + KEY_MAX)

struct rep_job;

struct rep {
	MDB_env *env;
	MDB_dbi buckets, objects, extents, info;
	MDB_dbi cells; /* cluster mode's cell entries (dn_meta_cell.c) */
	bool ok;
	char dir[4096];
	uint64_t gen;
	size_t maxkey; /* mdb_env_get_maxkeysize: a key this long is a bundle's */
	/* Its committer thread (dn-meta<i>): runs this replica's part of a write transaction
	 * when it is not the primary, so the replicas' syncs overlap (dn_meta_rep.c). */
	struct dn_meta *owner;
	pthread_t thread;
	bool thread_ok;
	pthread_cond_t cond; /* job posted, or stop */
	struct rep_job *job; /* under dn_meta.tlock */
};

struct dn_meta {
	struct dn_meta_opts o;
	struct rep rep[MAX_REPS];
	unsigned nrep;
	unsigned primary;
	pthread_mutex_t wlock;
	pthread_rwlock_t envlock;
	atomic_uint_fast64_t next_id;
	/* For /metrics without wlock: written under wlock. */
	atomic_uint nlive;
	atomic_uint_fast64_t revived;
	atomic_uint_fast64_t txns; /* write transactions (each one sync round per replica) */
	/* The replicas' committer threads: a job handed over and its progress. */
	pthread_mutex_t tlock;
	pthread_cond_t tdone;
	bool tstop;
};

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

struct rbuf {
	const uint8_t *p;
	size_t len, at;
	int err;
};

struct bundle_rd {
	struct rbuf b;
	uint32_t left;
	bool plain; /* an object record stored before bundles existed: one entry, rest "" */
};

/*
 * Walk the objects table in name order, bundles expanded: after a seek or next returns 1,
 * name[0..len) and rec (LMDB's memory, valid in the transaction) are the current object.
 * Every iteration over objects goes through here.
 */
struct obj_iter {
	struct rep *r;
	MDB_cursor *cur;
	bool bundle; /* the cursor sits on a bundle with entries left in br */
	struct bundle_rd br;
	char name[NAME_MAX_LEN];
	size_t len;
	MDB_val rec;
};

typedef int (*txn_fn)(struct rep *r, MDB_txn *txn, void *arg, bool first);

/* ---- dn_meta_rec.c */
void dn_wbuf_bytes(struct wbuf *b, const void *v, size_t n);
void dn_wbuf_u32(struct wbuf *b, uint32_t v);
const uint8_t *dn_rbuf_span(struct rbuf *b, size_t n);
uint32_t dn_rbuf_u32(struct rbuf *b);
int dn_meta_obj_encode(const struct dn_obj *o, struct wbuf *b);
int dn_meta_obj_decode(const MDB_val *v, struct dn_obj *o);
int dn_meta_ext_encode(const struct dn_extent *e, struct wbuf *b);
int dn_meta_ext_decode(const MDB_val *v, uint64_t id, struct dn_extent *e);
int dn_meta_mdb_err(int rc);

/* ---- dn_meta_key.c */
int dn_meta_obj_name(const char *bucket, const char *key, char *buf, size_t *len);
void dn_meta_ext_key(uint64_t id, uint8_t *buf, MDB_val *k);
int dn_meta_span_cmp(const char *a, size_t al, const char *b, size_t bl);
int dn_meta_rec_get(struct rep *r, MDB_txn *txn, const char *name, size_t len, MDB_val *rec);
int dn_meta_rec_set(struct rep *r, MDB_txn *txn, const char *name, size_t len, const MDB_val *rec);
int dn_meta_iter_open(struct obj_iter *it, struct rep *r, MDB_txn *txn);
void dn_meta_iter_close(struct obj_iter *it);
int dn_meta_iter_next(struct obj_iter *it);
int dn_meta_iter_seek(struct obj_iter *it, const char *name, size_t len);

/* ---- dn_meta_rep.c */
int dn_meta_write(struct dn_meta *m, txn_fn fn, void *arg);
int dn_meta_read_txn(struct dn_meta *m, MDB_txn **txn, struct rep **r);
void dn_meta_read_end(struct dn_meta *m, MDB_txn *txn);

/* ---- dn_meta_obj.c */
int dn_meta_bucket_exists_txn(struct rep *r, MDB_txn *txn, const char *bucket);

#endif
