/*
 * dn_meta_list: buckets and object listings.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_meta_internal.h"

/* ---- buckets ---- */
struct bucket_args {
	const char *name;
	uint64_t ctime;
};

static int
bcreate_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct bucket_args *a = arg;
	MDB_val k = { strlen(a->name), (void *)a->name }, v = { 8, &a->ctime };

	(void)first;
	if (dn_meta_bucket_exists_txn(r, txn, a->name))
		return ZC_E(ZC_BUCKET_EXISTS);
	return dn_meta_mdb_err(mdb_put(txn, r->buckets, &k, &v, 0));
}

int
dn_meta_bucket_create(struct dn_meta *m, const char *name, uint64_t *ctime)
{
	struct timespec ts;
	struct bucket_args a = { name, 0 };
	int err;

	if (!name || !*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	clock_gettime(CLOCK_REALTIME, &ts);
	a.ctime = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	err = dn_meta_write(m, bcreate_fn, &a);
	if (zc_err_is(err, ZC_BUCKET_EXISTS) && ctime)
		dn_meta_bucket_head(m, name, ctime);
	else if (!err && ctime)
		*ctime = a.ctime;
	return err;
}

static int
bdelete_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct bucket_args *a = arg;
	size_t bl = strlen(a->name);
	MDB_val k = { bl, (void *)a->name };
	struct obj_iter it;
	int got;

	(void)first;
	if (!dn_meta_bucket_exists_txn(r, txn, a->name))
		return ZC_E(ZC_NO_BUCKET);
	got = dn_meta_iter_open(&it, r, txn);
	if (got)
		return got;
	/* "name\0" comes before any of its objects' names. */
	got = dn_meta_iter_seek(&it, a->name, bl + 1);
	if (got > 0)
		got = it.len > bl && memcmp(it.name, a->name, bl + 1) == 0;
	dn_meta_iter_close(&it);
	if (got < 0)
		return got;
	if (got)
		return ZC_E(ZC_BUCKET_NOT_EMPTY);
	return dn_meta_mdb_err(mdb_del(txn, r->buckets, &k, NULL));
}

int
dn_meta_bucket_delete(struct dn_meta *m, const char *name)
{
	struct bucket_args a = { name, 0 };

	if (!name || !*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	return dn_meta_write(m, bdelete_fn, &a);
}

int
dn_meta_bucket_head(struct dn_meta *m, const char *name, uint64_t *ctime)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	MDB_txn *txn;
	struct rep *r;
	int err;

	if (!*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	err = dn_meta_read_txn(m, &txn, &r);
	if (err)
		return err;
	err = dn_meta_mdb_err(mdb_get(txn, r->buckets, &k, &v));
	if (zc_err_is(err, ZC_NO_KEY))
		err = ZC_E(ZC_NO_BUCKET);
	if (!err && ctime && v.mv_size == 8)
		memcpy(ctime, v.mv_data, 8);
	dn_meta_read_end(m, txn);
	return err;
}

int
dn_meta_bucket_list(struct dn_meta *m, struct dn_bucket_info **out, size_t *n)
{
	struct dn_bucket_info *v = NULL;
	size_t cnt = 0, cap = 0;
	MDB_cursor *cur = NULL;
	MDB_txn *txn;
	struct rep *r;
	MDB_val k, d;
	int err = dn_meta_read_txn(m, &txn, &r), rc;

	if (err)
		return err;
	rc = mdb_cursor_open(txn, r->buckets, &cur);
	for (int op = MDB_FIRST; !rc; op = MDB_NEXT) {
		rc = mdb_cursor_get(cur, &k, &d, op);
		if (rc)
			break;
		if (cnt == cap) {
			struct dn_bucket_info *nv;

			cap = cap ? cap * 2 : 8;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = ENOMEM;
				break;
			}
			v = nv;
		}
		v[cnt].name = strndup(k.mv_data, k.mv_size);
		v[cnt].ctime_ns = 0;
		if (d.mv_size == 8)
			memcpy(&v[cnt].ctime_ns, d.mv_data, 8);
		cnt++;
	}
	if (cur)
		mdb_cursor_close(cur);
	dn_meta_read_end(m, txn);
	if (rc != MDB_NOTFOUND) {
		dn_bucket_list_free(v, cnt);
		return dn_meta_mdb_err(rc);
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* ---- objects' info ---- */
void
dn_object_info_fini(struct dn_object_info *info)
{
	if (!info)
		return;
	free(info->key);
	free(info->etag);
	for (size_t i = 0; i < info->nattrs; i++) {
		free(info->attrs[i].name);
		free(info->attrs[i].value);
	}
	free(info->attrs);
	memset(info, 0, sizeof(*info));
}

void
dn_obj_take_info(struct dn_obj *o, const char *key, struct dn_object_info *info)
{
	memset(info, 0, sizeof(*info));
	info->key = dn_strdup(key);
	info->size = o->size;
	info->etag = o->etag;
	info->mtime_ns = o->mtime_ns;
	info->crc32c = o->crc32c;
	info->k = o->k;
	info->m = o->m;
	info->attrs = o->attrs;
	info->nattrs = o->nattrs;
	o->etag = NULL;
	o->attrs = NULL;
	o->nattrs = 0;
}

void
dn_bucket_list_free(struct dn_bucket_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* ---- list ---- */
static int
push_str(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(char *));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strndup(s, len);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

int
dn_meta_list(struct dn_meta *m, const char *bucket, const char *prefix, const char *start_after,
             unsigned limit, const char *delimiter, struct dn_list_result *out)
{
	size_t bl = strlen(bucket), pl = strlen(prefix ? prefix : ""),
	       dl = strlen(delimiter ? delimiter : ""), sl = strlen(start_after ? start_after : "");
	char seek[BUCKET_MAX + KEY_MAX + 8];
	const char *last = NULL;
	size_t last_len = 0, count = 0;
	struct obj_iter it;
	MDB_txn *txn;
	struct rep *r;
	int err, got;

	memset(out, 0, sizeof(*out));
	if (!bl || bl > BUCKET_MAX || pl > KEY_MAX || sl > KEY_MAX)
		return -EINVAL;
	if (limit == 0)
		limit = 1000;
	prefix = prefix ? prefix : "";
	start_after = start_after ? start_after : "";
	err = dn_meta_read_txn(m, &txn, &r);
	if (err)
		return err;
	if (!dn_meta_bucket_exists_txn(r, txn, bucket)) {
		dn_meta_read_end(m, txn);
		return ZC_E(ZC_NO_BUCKET);
	}
	memcpy(seek, bucket, bl + 1);
	got = dn_meta_iter_open(&it, r, txn);
	if (got)
		goto done;
	if (sl && strcmp(start_after, prefix) >= 0) { /* == : the key prefix itself is not after */
		memcpy(seek + bl + 1, start_after, sl);
		seek[bl + 1 + sl] = 0; /* the smallest name strictly after start_after */
		got = dn_meta_iter_seek(&it, seek, bl + 2 + sl);
	} else {
		memcpy(seek + bl + 1, prefix, pl);
		got = dn_meta_iter_seek(&it, seek, bl + 1 + pl);
	}
	while (got > 0) {
		const char *key = it.name + bl + 1;
		size_t kl = it.len - bl - 1;
		const char *d;

		if (it.len <= bl || memcmp(it.name, bucket, bl + 1) != 0 || kl < pl ||
		    memcmp(key, prefix, pl) != 0)
			break;
		d = dl ? memmem(key + pl, kl - pl, delimiter, dl) : NULL;
		if (d) {
			size_t cl = (size_t)(d - key) + dl;

			if (dn_meta_span_cmp(key, cl, start_after, sl) > 0 &&
			    !(last && last_len == cl && memcmp(last, key, cl) == 0)) {
				if (count == limit) {
					out->truncated = true;
					break;
				}
				got = push_str(&out->prefixes, &out->nprefixes, key, cl);
				if (got)
					break;
				last = out->prefixes[out->nprefixes - 1];
				last_len = cl;
				count++;
			}
			/* Skip every key under this common prefix (keys are UTF-8: no 0xff). */
			memcpy(seek + bl + 1, key, cl);
			seek[bl + 1 + cl] = (char)0xff;
			got = dn_meta_iter_seek(&it, seek, bl + 2 + cl);
			continue;
		}
		if (count == limit) {
			out->truncated = true;
			break;
		}
		{
			struct dn_object_info *nv =
			        realloc(out->entries, (out->nentries + 1) * sizeof(*nv));
			struct dn_obj o;

			if (!nv) {
				got = -ENOMEM;
				break;
			}
			out->entries = nv;
			got = dn_meta_obj_decode(&it.rec, &o);
			if (got)
				break;
			memset(&nv[out->nentries], 0, sizeof(*nv));
			nv[out->nentries].key = strndup(key, kl);
			nv[out->nentries].size = o.size;
			nv[out->nentries].etag = o.etag;
			o.etag = NULL;
			nv[out->nentries].mtime_ns = o.mtime_ns;
			nv[out->nentries].crc32c = o.crc32c;
			nv[out->nentries].k = o.k;
			nv[out->nentries].m = o.m;
			dn_obj_fini(&o);
			if (!nv[out->nentries].key) {
				got = -ENOMEM;
				break;
			}
			last = nv[out->nentries].key;
			last_len = kl;
			out->nentries++;
			count++;
		}
		got = dn_meta_iter_next(&it);
	}
	err = got < 0 ? got : 0;
	if (!err && out->truncated && last) {
		out->next_start_after = strndup(last, last_len);
		if (!out->next_start_after)
			err = -ENOMEM;
	}
done:
	if (got < 0)
		err = got;
	dn_meta_iter_close(&it);
	dn_meta_read_end(m, txn);
	if (err)
		dn_list_result_fini(out);
	return err;
}

void
dn_list_result_fini(struct dn_list_result *r)
{
	for (size_t i = 0; i < r->nentries; i++)
		dn_object_info_fini(&r->entries[i]);
	free(r->entries);
	for (size_t i = 0; i < r->nprefixes; i++)
		free(r->prefixes[i]);
	free(r->prefixes);
	free(r->next_start_after);
	memset(r, 0, sizeof(*r));
}
