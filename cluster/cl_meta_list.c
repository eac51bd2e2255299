/*
 * Listings (cl_meta.h): a bucket's records are the etcd range
 * [/zest/objects/<bucket>/<prefix>, the prefix's end), read from just after start_after.
 * The first page is read in one Txn with the bucket key (one snapshot says "no bucket" or
 * the records); later pages are pinned to its revision. Pages are small because a record
 * holds a multipart object's every extent (up to ~1 MiB for 10000 parts). A record that
 * does not decode is skipped (counted, logged once per key): the rest of the bucket lists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cl_meta_internal.h"
#include "zc.h"

#define PAGE 64 /* records per etcd read */

/* Bad records' log: each key once (the last BAD_KEYS keys remembered by hash), and at
 * most BAD_LINES lines per BAD_WINDOW_NS whatever the keys (the rest counted, and said in
 * the next line), so a bucket full of garbage cannot flood the log. */
#define BAD_KEYS      256
#define BAD_LINES     10
#define BAD_WINDOW_NS (60ull * 1000000000u)

static struct {
	pthread_mutex_t mu;
	uint64_t seen[BAD_KEYS];
	unsigned next, lines;
	uint64_t window_ns;
	unsigned long quiet; /* lines left out since the last one */
} bad_log = { .mu = PTHREAD_MUTEX_INITIALIZER };

static uint64_t
key_hash(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 0x100000001b3ull;
	return h | 1; /* never 0: 0 is an empty slot */
}

static void
bad_record_log(const char *key, size_t len, const char *why)
{
	uint64_t h = key_hash(key, len), now = zc_now_ns();
	unsigned long quiet = 0;
	bool say = true;

	pthread_mutex_lock(&bad_log.mu);
	for (unsigned i = 0; i < BAD_KEYS && say; i++)
		if (bad_log.seen[i] == h)
			say = false;
	if (say) {
		bad_log.seen[bad_log.next] = h;
		bad_log.next = (bad_log.next + 1) % BAD_KEYS;
		if (now - bad_log.window_ns >= BAD_WINDOW_NS) {
			bad_log.window_ns = now;
			bad_log.lines = 0;
		}
		if (bad_log.lines < BAD_LINES) {
			bad_log.lines++;
			quiet = bad_log.quiet;
			bad_log.quiet = 0;
		} else {
			bad_log.quiet++;
			say = false;
		}
	}
	pthread_mutex_unlock(&bad_log.mu);
	if (say && quiet)
		ZC_ERR("cmeta",
		       "record key=%.*s does not decode why=\"%s\": left out of listings "
		       "(GET/HEAD of it: InternalError); bad records not logged since the last "
		       "line: %lu",
		       (int)len, key, why, quiet);
	else if (say)
		ZC_ERR("cmeta",
		       "record key=%.*s does not decode why=\"%s\": left out of listings "
		       "(GET/HEAD of it: InternalError)",
		       (int)len, key, why);
}

void
cl_meta_listing_fini(struct cl_meta_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; l->v && i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].etag);
	}
	free(l->v);
	free(l->last);
	memset(l, 0, sizeof(*l));
}

/* The first key after every key starting with k[0..n) (the prefix's range end), in
 * place: its new length, 0 when no key follows (all bytes 0xff). */
static size_t
prefix_end(char *k, size_t n)
{
	while (n && (unsigned char)k[n - 1] == 0xff)
		n--;
	if (n)
		k[n - 1]++;
	return n;
}

static int
bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	return r ? r : al < bl ? -1 : al > bl;
}

/* Append the records of kvs (keys under the bucket's prefix of pl bytes) to out; one that
 * does not decode is counted in out->bad instead. out->last: the last key read. */
static int
take(struct cl_meta_listing *out, const struct cl_etcd_kvs *kvs, size_t pl)
{
	if (kvs->n) {
		const struct cl_etcd_kv *kv = &kvs->kv[kvs->n - 1];

		if (kv->key_len <= pl)
			return -EIO;
		free(out->last);
		out->last = strndup(kv->key + pl, kv->key_len - pl);
		if (!out->last)
			return -ENOMEM;
	}
	for (size_t i = 0; i < kvs->n; i++) {
		const struct cl_etcd_kv *kv = &kvs->kv[i];
		struct cl_meta_entry *e = &out->v[out->n];
		struct cl_rec_object o;
		char why[CL_REC_WHY_MAX];
		int err;

		if (kv->key_len <= pl)
			return -EIO; /* etcd answered outside the range */
		err = cl_rec_object_decode(kv->value, kv->value_len, &o, why, sizeof(why));
		if (err == -EBADMSG) {
			bad_record_log(kv->key, kv->key_len, why);
			out->bad++;
			continue;
		}
		if (err)
			return err;
		e->key = strndup(kv->key + pl, kv->key_len - pl);
		e->etag = o.etag;
		o.etag = NULL;
		e->size = o.size;
		e->mtime_ns = o.mtime_ns;
		cl_rec_object_fini(&o);
		if (!e->key) {
			free(e->etag);
			return -ENOMEM;
		}
		out->n++;
	}
	return 0;
}

int
cl_meta_list(struct cl_etcd *c, const char *bucket, const char *prefix, const char *start_after,
             unsigned limit, bool serializable, struct cl_meta_listing *out, unsigned timeout_ms)
{
	char bk[CL_META_KEY_CAP], start[CL_META_KEY_CAP + 1], end[CL_META_KEY_CAP];
	struct cl_etcd_txn_result res = { 0 };
	struct cl_meta_deadline d;
	size_t pl, sl, el, want;
	int bkl, n, err;
	unsigned left;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!c || !out)
		return -EINVAL;
	bkl = cl_meta_bucket_key(bucket, bk, sizeof(bk));
	if (bkl < 0)
		return bkl;
	prefix = prefix ? prefix : "";
	start_after = start_after ? start_after : "";
	want = !limit || limit > CL_META_LIST_MAX ? CL_META_LIST_MAX : limit;
	/* start: the bucket's prefix + the client's prefix, or just past start_after when
	 * that sorts later ("\0" appended: the first key after it) */
	n = snprintf(end, sizeof(end), CL_META_OBJECTS "%s/", bucket);
	if (n < 0 || (size_t)n >= sizeof(end))
		return -ENAMETOOLONG;
	pl = (size_t)n;
	n = snprintf(end + pl, sizeof(end) - pl, "%s", prefix);
	if (n < 0 || (size_t)n >= sizeof(end) - pl)
		return -ENAMETOOLONG;
	el = pl + (size_t)n;
	memcpy(start, end, el);
	sl = el;
	if (strcmp(start_after, prefix) >= 0) {
		n = snprintf(start + pl, sizeof(start) - pl - 1, "%s", start_after);
		if (n < 0 || (size_t)n >= sizeof(start) - pl - 1)
			return -ENAMETOOLONG;
		sl = pl + (size_t)n;
		start[sl++] = '\0';
	}
	el = prefix_end(end, el);
	out->v = calloc(want, sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	cl_meta_deadline_init(&d, timeout_ms, 0);
	/* start_after past the prefix's every key: nothing to list, but the bucket's
	 * existence is still read */
	bool empty = el && bytes_cmp(start, sl, end, el) >= 0;
	struct cl_etcd_op ops[2] = {
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = bk,
		         .key_len = (size_t)bkl,
		         .keys_only = true,
		         .serializable = serializable } },
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = start,
		         .key_len = sl,
		         .end = el ? end : "\0",
		         .end_len = el ? el : 1,
		         .limit = (int64_t)(want < PAGE ? want : PAGE),
		         .serializable = serializable } },
	};
	struct cl_etcd_txn txn = { .then = ops, .n_then = empty ? 1 : 2 };

	left = cl_meta_deadline_left(&d);
	err = left ? cl_meta_etcd_err(cl_etcd_txn(c, &txn, &res, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err)
		goto fail;
	if (res.n_op != txn.n_then) {
		err = -EIO;
		goto fail;
	}
	if (!res.op[0].kvs.n) {
		err = ZC_E(ZC_NO_BUCKET);
		goto fail;
	}
	out->revision = res.revision;
	if (empty) {
		cl_etcd_txn_result_fini(&res);
		return 0;
	}
	err = take(out, &res.op[1].kvs, pl);
	out->more = res.op[1].kvs.more;
	cl_etcd_txn_result_fini(&res);
	while (!err && out->more && out->n < want && out->last) {
		struct cl_etcd_kvs kvs = { 0 };
		struct cl_etcd_range r = { .key = start,
			                   .end = ops[1].r.end,
			                   .end_len = ops[1].r.end_len,
			                   .revision = out->revision,
			                   .serializable = serializable };
		size_t kl = strlen(out->last), rem = want - out->n;

		if (pl + kl + 1 > sizeof(start)) {
			err = -ENAMETOOLONG;
			break;
		}
		memcpy(start + pl, out->last, kl);
		start[pl + kl] = '\0';
		r.key_len = pl + kl + 1;
		r.limit = (int64_t)(rem < PAGE ? rem : PAGE);
		left = cl_meta_deadline_left(&d);
		err = left ? cl_meta_etcd_err(cl_etcd_range(c, &r, &kvs, left))
		           : ZC_E(ZC_UNAVAILABLE);
		if (err)
			break;
		err = take(out, &kvs, pl);
		out->more = kvs.more;
		cl_etcd_kvs_fini(&kvs);
	}
	if (!err)
		return 0;
fail:
	cl_etcd_txn_result_fini(&res);
	cl_meta_listing_fini(out);
	return err;
}
