/* rpc_cmeta's private half: what the commit (rpc_cmeta.c), the listing and the extent index
 * (rpc_cmeta_list.c) and compose (rpc_cmeta_compose.c) share. */
#ifndef ZEST_RPC_CMETA_INTERNAL_H
#define ZEST_RPC_CMETA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc_cmeta.h"

#define RPC_CMETA_KEY_CAP 1400 /* "/zest/objects/" + a 63-byte bucket + "/" + a 1024-byte key */

/* One deadline for all the round trips of a call. */
struct rpc_cmeta_deadline {
	uint64_t end_ns; /* zc_now_ns() */
	uint64_t not_after_real_ns;
};

void rpc_cmeta_deadline_init(struct rpc_cmeta_deadline *d, unsigned timeout_ms,
                             uint64_t not_after_real_ns);
/* Milliseconds left for the next call, or 0 when none are. */
unsigned rpc_cmeta_deadline_left(const struct rpc_cmeta_deadline *d);

/* The etcd client's errors as the gateway should see them: a deadline is 503 too. */
int rpc_cmeta_etcd_err(int err);
bool rpc_cmeta_bucket_ok(const char *b);
int rpc_cmeta_bucket_key(const char *bucket, char *buf, size_t cap);

/* What a read (or a failure branch) saw: the bucket (keys only) and the object. */
struct rpc_cmeta_seen {
	bool bucket;
	bool object;
	int64_t mod_revision;
	char *value;
	size_t value_len;
};

void rpc_cmeta_seen_fini(struct rpc_cmeta_seen *s);
int rpc_cmeta_seen_take(struct rpc_cmeta_seen *s, const struct rpc_etcd_kvs *b,
                        const struct rpc_etcd_kvs *o);
/* *old from the record base saw (decoded again) and the write's revision. */
int rpc_cmeta_old_from(struct rpc_cmeta_old *old, const struct rpc_cmeta_seen *base,
                       int64_t revision);

/*
 * The ops of one Txn branch, with room for the index keys they name (an op's key points
 * into keys[its slot]). Capacity fixed at init: pointers into it stay valid.
 */
struct rpc_cmeta_ops {
	struct rpc_etcd_op *v;
	size_t n, cap;
	char (*keys)[RPC_CMETA_EXTENT_KEY_CAP];
};

int rpc_cmeta_ops_init(struct rpc_cmeta_ops *o, size_t cap);
void rpc_cmeta_ops_fini(struct rpc_cmeta_ops *o);
/* An op on a key the caller keeps alive. */
void rpc_cmeta_ops_add(struct rpc_cmeta_ops *o, enum rpc_etcd_op_type type, const char *key,
                       size_t key_len, const void *value, size_t value_len);
/* Put /zest/extents/<id> = record_key. */
void rpc_cmeta_ops_ix_put(struct rpc_cmeta_ops *o, uint64_t id, const char *record_key,
                          size_t record_key_len);
/* Delete /zest/extents/<id> for every extent of old that is not among keep[0..nkeep). */
void rpc_cmeta_ops_ix_del(struct rpc_cmeta_ops *o, const struct rpc_cl_object *old,
                          const uint64_t *keep, size_t nkeep);

/* Delete the moved key old names (a completed upload's: rpc_cmeta_compose_upload), if
 * any; the op points into old, which must outlive the Txn. One op of capacity. */
void rpc_cmeta_ops_moved_del(struct rpc_cmeta_ops *o, const struct rpc_cl_object *old);

/* Append extent id to the to-do value buf holds (len bytes of RPC_CMETA_HEAL_VALUE_CAP):
 * the new length (unchanged when full). */
size_t rpc_cmeta_heal_value_add(char *buf, size_t len, uint64_t id);

/* The record s saw has ETag want ("*": any record). */
bool rpc_cmeta_etag_matches(const struct rpc_cmeta_seen *s, const char *want);

/* No id twice among ids[0..n). */
bool rpc_cmeta_ids_distinct(const uint64_t *ids, size_t n);

#endif
