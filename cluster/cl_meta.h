/*
 * cl_meta: cluster mode's metadata in etcd (docs/cluster.md, "Write and commit"): the
 * coordinator's commit of an object record, the deletion of a record, listings, compose
 * (a multipart Complete), the extent index, and buckets. The datanode (the coordinator, the
 * collector) and the gateway (reads, deletes, lists, composes, buckets) link it. Each
 * write is one etcd Txn that compares the bucket and the caller's condition and fences on
 * the record's mod_revision, so a call the etcd client repeats on another member, or a
 * concurrent writer, can never make a commit land twice or undo a newer one.
 *
 * Every call has a deadline (timeout_ms, 0: CL_ETCD_DEFAULT_TIMEOUT_MS) for all of its
 * etcd round trips together.
 *
 * Errors (>= 0 on success):
 *   ZC_E(ZC_NO_BUCKET)         the bucket does not exist
 *   ZC_E(ZC_PRECONDITION)      the caller's condition did not hold (nothing changed)
 *   ZC_E(ZC_NO_KEY)            If-Match (not "*") on a key that does not exist
 *   ZC_E(ZC_NO_QUORUM)         a group has fewer durable cells than the write quorum, or
 *                              no etcd member answered
 *   ZC_E(ZC_UNAVAILABLE)       the deadline (or not_after_ns) passed. With NO_QUORUM from
 *                              etcd this is the one ambiguous outcome: the Txn may have
 *                              been applied. The caller answers 503 and leaves its cells
 *                              pending: the collector (dn_cgc.h) commits them if the
 *                              record names them, else deletes them after the grace.
 *   ZC_E(ZC_BUCKET_EXISTS), ZC_E(ZC_BUCKET_NOT_EMPTY)  bucket calls
 *   ZC_E(ZC_INVALID), ZC_E(ZC_SLOW_DOWN), ZC_E(ZC_CHANGED)  compose (see there)
 *   -EINVAL                    bad arguments (a record cl_rec.h would refuse)
 *   -EBADMSG                   a value in etcd that does not decode
 *   -ENOMEM, -EIO, ...         as cl_etcd.h
 *
 * Threads: any, any number at once; the etcd client is borrowed for the call.
 */
#ifndef ZEST_CL_META_H
#define ZEST_CL_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_rec.h"
#include "cl_etcd.h"

#define CL_META_BUCKETS "/zest/buckets/"
#define CL_META_OBJECTS "/zest/objects/"
#define CL_META_EXTENTS "/zest/extents/"
#define CL_META_MOVED   "/zest/moved/"
#define CL_META_HEAL    "/zest/heal/"
#define CL_META_FENCES  "/zest/fences/" /* cl_meta_extent_fence: collected, never to commit;
                                        * or committed already (a lease's mark, below) */
/* A commit that found its key absent marks its extents' fences under a shared lease of
 * this TTL, granted anew every RENEW (cl_etcd_lease_shared): a late copy of its Txn fails. */
#define CL_META_MARK_TTL_S   3600
#define CL_META_MARK_RENEW_S 600

/* "/zest/extents/" + 16 hex digits + NUL */
#define CL_META_EXTENT_KEY_CAP (sizeof(CL_META_EXTENTS) + 16)

/* One block group: the node of each of its k + m cells, and the cells that are not durable
 * on their node (bit i: cell i). */
struct cl_meta_group {
	const char *node[CL_REC_MAX_CELLS];
	uint32_t missing;
};

struct cl_meta_extent {
	uint64_t id; /* non-zero */
	uint64_t size;
	unsigned k, m;
	uint64_t cell_size;
	unsigned stripes_per_group;
	const struct cl_meta_group *groups; /* cl_rec_extent_groups() of them */
	size_t ngroups;
};

/* A condition on the record a commit replaces (S3 conditional writes). */
struct cl_meta_cond {
	bool if_none_match;   /* the key must not exist */
	const char *if_match; /* NULL/"": none; else the record's ETag, or "*": any record */
};

struct cl_meta_put {
	const char *bucket, *key;
	uint64_t size; /* the sum of the extents' sizes */
	const char *etag;
	uint32_t crc32c;
	uint64_t mtime_ns;
	const struct cl_rec_attr *attrs;
	size_t nattrs;
	const struct cl_meta_extent *extents;
	size_t nextents;
	unsigned write_quorum; /* durable cells each group needs; 0: k + 1 (capped at k + m) */
	struct cl_meta_cond cond;
	/* CLOCK_REALTIME after which no Txn is sent (0: none): the coordinator passes the time
	 * of its first cell + gc_grace / 2, so the collector never deletes the cells of a
	 * commit still in flight. A Txn that reaches etcd later all the same (held in a
	 * partitioned connection) fails on the collector's fence (cl_meta_extent_fence). */
	uint64_t not_after_ns;
	unsigned timeout_ms;
};

/* What a commit or delete replaced. Owned: release with cl_meta_old_fini. */
struct cl_meta_old {
	bool had;               /* a record was replaced (or deleted) */
	struct cl_rec_object o; /* it, decoded (zeroed when !had) */
	int64_t mod_revision;   /* its mod_revision */
	int64_t revision;       /* the store's revision after the write: the new record's
	                         * mod_revision after a commit */
};
void cl_meta_old_fini(struct cl_meta_old *old);

/*
 * Commit p's record as /zest/objects/<bucket>/<key> with one Txn (docs/cluster.md has the
 * compares and ops), with the index keys of its extents, deleting those of the record it
 * replaces. 0 with *old (what it replaced; fini it), or an error above (*old empty).
 * Repeats itself only when another writer changed the key between its read and its Txn
 * and p has no condition (last writer wins), bounded by the deadline. A replaced record
 * with more extents than etcd takes ops in one Txn (a big multipart object, etcd's
 * --max-txn-ops) is replaced without deleting its index keys: they are left to the
 * collector (cl_meta_extent_unlink), so the overwrite still goes in.
 */
int cl_meta_commit(struct cl_etcd *c, const struct cl_meta_put *p, struct cl_meta_old *old);

/*
 * Delete the record of bucket/key and its extents' index keys. if_mod_revision (0: none)
 * fences it: the record must still be the one the caller read. Returns 1 with *old (fini
 * it) when a record went, 0 when there was none (S3 answers 204 either way),
 * ZC_E(ZC_NO_BUCKET), ZC_E(ZC_PRECONDITION) (the fence failed), or an error above.
 */
int cl_meta_delete(struct cl_etcd *c, const char *bucket, const char *key, int64_t if_mod_revision,
                   struct cl_meta_old *old, unsigned timeout_ms);

/* Read the record of bucket/key: 0 with *out (fini it) and *mod_revision (may be NULL),
 * ZC_E(ZC_NO_KEY) or ZC_E(ZC_NO_BUCKET) when absent, or an error. */
int cl_meta_get(struct cl_etcd *c, const char *bucket, const char *key, bool serializable,
                struct cl_rec_object *out, int64_t *mod_revision, unsigned timeout_ms);

/* Create bucket if absent: 0, ZC_E(ZC_BUCKET_EXISTS), -EINVAL (a name with '/'). */
int cl_meta_bucket_create(struct cl_etcd *c, const char *bucket, uint64_t ctime_ns,
                          unsigned timeout_ms);
/* Delete bucket if no object key exists under it, in one Txn: 0, ZC_E(ZC_NO_BUCKET),
 * ZC_E(ZC_BUCKET_NOT_EMPTY). */
int cl_meta_bucket_delete(struct cl_etcd *c, const char *bucket, unsigned timeout_ms);
/* 0 with *out (may be NULL), ZC_E(ZC_NO_BUCKET). Linearizable. */
int cl_meta_bucket_head(struct cl_etcd *c, const char *bucket, struct cl_rec_bucket *out,
                        unsigned timeout_ms);

struct cl_meta_bucket_entry {
	char *name;
	uint64_t ctime_ns;
};
/* Every bucket in name order: 0 with *out (free with cl_meta_bucket_list_free) and *n. */
int cl_meta_bucket_list(struct cl_etcd *c, struct cl_meta_bucket_entry **out, size_t *n,
                        unsigned timeout_ms);
void cl_meta_bucket_list_free(struct cl_meta_bucket_entry *v, size_t n);

/* ------------------------------------------------------------------ listing */

/* One record of a listing, decoded. */
struct cl_meta_entry {
	char *key; /* the object key (without /zest/objects/<bucket>/), NUL-terminated */
	uint64_t size;
	char *etag;
	uint64_t mtime_ns;
};

/* Owned by the caller: release with cl_meta_listing_fini. */
struct cl_meta_listing {
	struct cl_meta_entry *v; /* in key order */
	size_t n;
	bool more;        /* more records lie under the prefix after `last` */
	int64_t revision; /* the store's revision the listing saw (one snapshot) */
	/* the key (as v[].key) of the last record read, decoded or not (NULL: none): a
	 * listing goes on from here, never from v[n - 1], which may lie before it */
	char *last;
	size_t bad; /* records skipped because they do not decode (each logged) */
};
void cl_meta_listing_fini(struct cl_meta_listing *l);

#define CL_META_LIST_MAX 1000 /* records per call, as S3's max-keys */

/*
 * The records of bucket whose keys start with prefix (NULL/"": all) and sort after
 * start_after (NULL/"": from the first), in key order (bytewise, as S3), at most limit
 * (0 or more than CL_META_LIST_MAX: CL_META_LIST_MAX) of them, out->more set when more
 * follow. One snapshot: the bucket's existence and every record are read at one revision
 * (records are fetched in pages of a few dozen, the later pages pinned to the first's
 * revision, so a listing of big records never makes one huge reply). serializable: the
 * member's own copy (no quorum round trip; may miss the latest commits). The delimiter
 * logic is the caller's (list again with start_after past a common prefix).
 * A record that does not decode is skipped and counted in out->bad (its key logged at
 * error level, once per key and at most a few lines a minute): one bad value must not
 * hide a bucket's every other key. limit counts the records returned.
 * 0 with *out (fini it, also after an error), ZC_E(ZC_NO_BUCKET), -EINVAL (bucket name),
 * or an etcd error.
 */
int cl_meta_list(struct cl_etcd *c, const char *bucket, const char *prefix, const char *start_after,
                 unsigned limit, bool serializable, struct cl_meta_listing *out,
                 unsigned timeout_ms);

/* ------------------------------------------------------------------ compose */

/* A part of a compose: an object record, and the ETag the caller saw (as s3_objref). */
struct cl_meta_part {
	const char *bucket, *key;
	const char *etag; /* NULL/"": any; else the part must still have it (ZC_CHANGED) */
};

/*
 * bucket/key = the parts' extents in order, metadata only (Complete of a multipart upload):
 * the new record has every extent of every part in order, size the sum of theirs, CRC32C
 * combined from theirs, the caller's etag, attrs and mtime_ns; the parts' records are
 * deleted and their extents' index keys point at the target, so their cells now belong to
 * it. The parts are read first (one snapshot, with the bucket and the target), then one
 * Txn compares version(bucket) > 0, every part's mod_revision as read and the target's
 * fence (the caller's cond as cl_meta_commit takes it: If-None-Match, If-Match an ETag
 * or "*"); a concurrent change of a part fails the Txn and nothing changes.
 *
 * Returns 0 with *size (may be NULL: the target's size) and *old (what the target's record
 * replaced, as cl_meta_commit: the caller collects its cells; fini it), or:
 *   ZC_E(ZC_CHANGED)      a part has another ETag than parts[i].etag (the caller looks
 *                         again; a part that changes between the read and the Txn is
 *                         read again, within the deadline)
 *   ZC_E(ZC_NO_KEY)       a part does not exist (or If-Match on a missing target)
 *   ZC_E(ZC_NO_BUCKET)    the target's bucket (or a part's) does not exist
 *   ZC_E(ZC_PRECONDITION) cond did not hold on the target
 *   ZC_E(ZC_INVALID)      no parts, a part named twice, the target among the parts, or
 *                         more parts than etcd takes in one Txn (its --max-txn-ops,
 *                         default 128, caps the compares and the ops of a branch
 *                         each: a compose needs nparts + 2 of both, plus one op per
 *                         extent of the parts and of the replaced record; its
 *                         --max-request-bytes, default 1.5 MiB, ~300 bytes per part).
 *                         Nothing changed. docs/cluster.md says how to raise them.
 *   ZC_E(ZC_SLOW_DOWN)    etcd busy or out of space (RESOURCE_EXHAUSTED) on a Txn
 *                         smaller than etcd's default request limit
 *   ZC_E(ZC_UNAVAILABLE), ZC_E(ZC_NO_QUORUM), -EBADMSG, -ENOMEM as above
 * Server-side copy (S3's delete_parts = false) is not this call: two records never share
 * an extent, so the caller copies the bytes. The parts of one multipart upload are better
 * composed by cl_meta_compose_upload, whose cost in etcd ops does not grow with them.
 */
int cl_meta_compose(struct cl_etcd *c, const char *bucket, const char *key,
                    const struct cl_meta_part *parts, size_t nparts, const char *etag,
                    const struct cl_rec_attr *attrs, size_t nattrs, const struct cl_meta_cond *cond,
                    uint64_t mtime_ns, unsigned timeout_ms, uint64_t *size,
                    struct cl_meta_old *old);

/* The parts of one multipart upload: the records of bucket whose keys are prefix + a name
 * without '/' (the gateway's "p/<upload-id>/<nnnnn>" of .zest-mpu). */
struct cl_meta_upload {
	const char *bucket;
	const char *prefix; /* non-empty, ends in '/' */
	const char *fence;  /* NULL, or a key of bucket outside prefix (the upload's own
	                     * record) that must exist and be unchanged from read to Txn */
};

/*
 * cl_meta_compose of an upload's parts at a cost in etcd ops that does not grow with
 * their number (S3's 10000 parts through an etcd with default limits): the parts are read
 * by Ranges of the prefix (pages, one snapshot at revision R), and the Txn fences them all
 * with one compare (mod_revision of every key under the prefix < R + 1: no part written
 * since the read) plus up->fence's mod_revision (a part deleted since the read, by an
 * Abort, is not seen by a range compare: the upload's record is), deletes every record
 * under the prefix with one DeleteRange (S3 discards the parts a Complete does not list),
 * and puts one moved key, /zest/moved/<bucket>/<prefix> = the target's etcd key, instead
 * of re-pointing each extent's index key: those keep naming the part records, and the
 * collector (cl_meta_extent_record) follows the moved key when the part record is
 * gone. The target record names its moved key (cl_rec_object.moved), so the Txn that
 * replaces or deletes it deletes the moved key too. Every part must be in up->bucket
 * under up->prefix (else ZC_INVALID). Returns as cl_meta_compose, plus ZC_E(ZC_NO_KEY)
 * when up->fence is absent, or changed between the read and the Txn (rewritten by an
 * Abort's mark, or deleted: never read again then, the parts are no longer this call's).
 * The record itself must fit etcd's --max-request-bytes (1.5 MiB by default; 10000
 * one-group parts are ~720 kB).
 */
int cl_meta_compose_upload(struct cl_etcd *c, const char *bucket, const char *key,
                           const struct cl_meta_upload *up, const struct cl_meta_part *parts,
                           size_t nparts, const char *etag, const struct cl_rec_attr *attrs,
                           size_t nattrs, const struct cl_meta_cond *cond, uint64_t mtime_ns,
                           unsigned timeout_ms, uint64_t *size, struct cl_meta_old *old);

#ifdef ZC_FAULTS
/* Test builds only (ZC_FAULTS: meson -Dtest_faults=true): fn(arg, attempt) runs
 * in every cl_meta_compose (and _compose_upload) between its read and its Txn (attempt
 * from 1), so a test can change a part there. NULL: none. Not for concurrent composes. */
void cl_meta_compose_fault(void (*fn)(void *arg, unsigned attempt), void *arg);
#endif

/* The etcd key of an object record into buf (cap bytes): its length, or -EINVAL (a bucket
 * name empty or with '/', an empty key) / -ENAMETOOLONG. */
int cl_meta_object_key(const char *bucket, const char *key, char *buf, size_t cap);

#endif
