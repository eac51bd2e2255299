/* cl_meta's private half: what the commit (cl_meta.c), the listing and the extent index
 * (cl_meta_list.c) and compose (cl_meta_compose.c) share. */
#ifndef ZEST_CL_META_INTERNAL_H
#define ZEST_CL_META_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_meta.h"
#include "cl_index.h"

/* ---- helpers of the record files, also for tests (tests/lib/cmeta_test.h) */
/* The record a put describes, checked (quorum, the rules of cl_rec.h) and encoded: 0
 * with *buf (free() it) and *len, or -EINVAL / ZC_E(ZC_NO_QUORUM) with why (cap bytes). */
int cl_meta_encode(const struct cl_meta_put *p, uint8_t **buf, size_t *len, char *why, size_t cap);

/* The moved key of a part record's etcd key (/zest/objects/<bucket>/<prefix><name>):
 * /zest/moved/<bucket>/<prefix>, into buf (cap bytes): its length, or -EINVAL (not an
 * object key, or no '/' in its key) / -ENAMETOOLONG. */
int cl_meta_moved_key(const char *record_key, char *buf, size_t cap);

/* The index key of extent id into buf (CL_META_EXTENT_KEY_CAP bytes): its length. */
int cl_meta_extent_key(uint64_t id, char *buf, size_t cap);

#define CL_META_KEY_CAP 1400 /* "/zest/objects/" + a 63-byte bucket + "/" + a 1024-byte key */

/* One deadline for all the round trips of a call. */
struct cl_meta_deadline {
	uint64_t end_ns; /* zc_now_ns() */
	uint64_t not_after_real_ns;
};

void cl_meta_deadline_init(struct cl_meta_deadline *d, unsigned timeout_ms,
                           uint64_t not_after_real_ns);
/* Milliseconds left for the next call (never past not_after), or 0 when none are. */
unsigned cl_meta_deadline_left(const struct cl_meta_deadline *d);

/* The etcd client's errors as the gateway should see them: a deadline is 503 too. */
int cl_meta_etcd_err(int err);
bool cl_meta_bucket_ok(const char *b);
int cl_meta_bucket_key(const char *bucket, char *buf, size_t cap);

/* What a read (or a failure branch) saw: the bucket (keys only) and the object. */
struct cl_meta_seen {
	bool bucket;
	bool object;
	int64_t mod_revision;
	char *value;
	size_t value_len;
};

void cl_meta_seen_fini(struct cl_meta_seen *s);
int cl_meta_seen_take(struct cl_meta_seen *s, const struct cl_etcd_kvs *b,
                      const struct cl_etcd_kvs *o);
/* *old from the record base saw (decoded again) and the write's revision. */
int cl_meta_old_from(struct cl_meta_old *old, const struct cl_meta_seen *base, int64_t revision);

/*
 * The ops of one Txn branch, with room for the index keys they name (an op's key points
 * into keys[its slot]). Capacity fixed at init: pointers into it stay valid.
 */
struct cl_meta_ops {
	struct cl_etcd_op *v;
	size_t n, cap;
	char (*keys)[CL_META_EXTENT_KEY_CAP];
};

int cl_meta_ops_init(struct cl_meta_ops *o, size_t cap);
void cl_meta_ops_fini(struct cl_meta_ops *o);
/* An op on a key the caller keeps alive. */
void cl_meta_ops_add(struct cl_meta_ops *o, enum cl_etcd_op_type type, const char *key,
                     size_t key_len, const void *value, size_t value_len);
/* Put /zest/extents/<id> = record_key. */
void cl_meta_ops_ix_put(struct cl_meta_ops *o, uint64_t id, const char *record_key,
                        size_t record_key_len);
/* Delete /zest/extents/<id> for every extent of old that is not among keep[0..nkeep). */
void cl_meta_ops_ix_del(struct cl_meta_ops *o, const struct cl_rec_object *old,
                        const uint64_t *keep, size_t nkeep);

/* Delete the moved key old names (a completed upload's: cl_meta_compose_upload), if
 * any; the op points into old, which must outlive the Txn. One op of capacity. */
void cl_meta_ops_moved_del(struct cl_meta_ops *o, const struct cl_rec_object *old);

/* Append extent id to the to-do value buf holds (len bytes of CL_META_HEAL_VALUE_CAP):
 * the new length (unchanged when full). */
size_t cl_meta_heal_value_add(char *buf, size_t len, uint64_t id);

/* The to-do value of the record p describes into buf (CL_META_HEAL_VALUE_CAP bytes), as
 * cl_meta_heal_value: the extents with a cell missing or a group with two cells on one
 * node. 0: the commit writes no to-do key. */
size_t cl_meta_heal_value_put(const struct cl_meta_put *p, char *buf);

/* The record s saw has ETag want ("*": any record). */
bool cl_meta_etag_matches(const struct cl_meta_seen *s, const char *want);

/* No id twice among ids[0..n). */
bool cl_meta_ids_distinct(const uint64_t *ids, size_t n);

#endif
