/*
 * s3_bcl_meta: the cluster backend's calls besides GET: a PUT stream of known length opened
 * on the coordinator (the first live node of zc_place_rank that connects; the stream itself
 * is s3_brpc_put.c's, wrapped by s3_bcl_put.c), deletes (the record in etcd, then DeleteCells), listings (etcd Ranges
 * with the delimiter applied here, as a datanode applies it in single-node mode), compose
 * (metadata only, in etcd) and buckets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "s3_bcl_internal.h"
#include "zc.h"
#include "zc_place.h"

static uint64_t
realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ PUT */

/* A live local node (--local-node) moves to the front of the coordinator order: its PUT
 * stream stays on the host (the local link, no TLS), and only the cells of other nodes
 * cross the network, once. The rest keep zc_place_rank's order for the fallback. */
static void
local_first(const struct bcl *b, const struct cl_members_view *v, unsigned *order)
{
	size_t at = 0;
	unsigned first;

	if (!b->local_name)
		return;
	while (at < v->n && strcmp(v->nodes[order[at]].name, b->local_name) != 0)
		at++;
	if (at == 0 || at == v->n) /* first already, or not live */
		return;
	first = order[at];
	memmove(order + 1, order, at * sizeof(*order));
	order[0] = first;
}

int
s3_bcl_put_direct(struct bcl *b, const char *bucket, const char *key, uint64_t size,
                  void **stream)
{
	const struct cl_members_view *v;
	unsigned *order = NULL;
	int rc = ZC_E(ZC_UNAVAILABLE);

	v = cl_members_get(b->mem);
	if (!v->n) {
		ZC_WARN("s3cl", "no live datanode in the membership view: PUT refused (503)");
		goto out;
	}
	order = malloc(v->n * sizeof(*order));
	if (!order) {
		rc = -ENOMEM;
		goto out;
	}
	rc = zc_place_rank(s3_obj_hash(bucket, key), v->names, (unsigned)v->n, order);
	if (rc < 0)
		goto out;
	local_first(b, v, order);
	rc = ZC_E(ZC_UNAVAILABLE);
	/* any live node can coordinate: one that does not connect is passed over before a
	 * byte of the body is sent, so the client never sees it */
	for (size_t i = 0; i < v->n; i++) {
		const struct cl_rec_node *n = &v->nodes[order[i]];
		struct rpc_client *cl = s3_bcl_live_client(b, n);

		if (!cl) {
			rc = -ENOMEM;
			continue;
		}
		rc = rpc_client_connect(cl, BCL_CONNECT_MS);
		if (rc < 0) {
			ZC_DBG("s3cl", "coordinator node=%s addr=%s does not connect: next",
			       n->name, n->address);
			continue;
		}
		rc = s3_brpc_put_open_on(cl, bucket, key, size, true, stream);
		if (rc == 0)
			break;
	}
out:
	free(order);
	cl_members_view_put(v);
	return rc;
}

/* ------------------------------------------------------------------ delete */

int
s3_bcl_del(void *ctx, const char *bucket, const char *key, bool *existed)
{
	struct bcl *b = ctx;
	struct cl_meta_old old = { 0 };
	unsigned ms;
	int rc;

	*existed = false;
	ms = s3_bcl_etcd_ms(b);
	if (!ms)
		return ZC_E(ZC_UNAVAILABLE);
	rc = s3_bcl_etcd_end(b, cl_meta_delete(b->etcd, bucket, key, 0, &old, ms));
	if (rc < 0)
		return rc;
	if (rc == 1) {
		*existed = true;
		/* the record is gone: its cells are garbage, the nodes' collector is the net */
		s3_bcl_delete_cells(b, &old.o);
	}
	cl_meta_old_fini(&old);
	return 0;
}

/* ------------------------------------------------------------------ list */

/* "cp" + 0xff: sorts after every key under the common prefix cp (keys are UTF-8). */
static char *
past_prefix(const char *cp, size_t len)
{
	char *s = malloc(len + 2);

	if (s) {
		memcpy(s, cp, len);
		s[len] = (char)0xff;
		s[len + 1] = 0;
	}
	return s;
}

int
s3_bcl_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
            const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	struct bcl *b = ctx;
	size_t pl = strlen(prefix ? prefix : ""), dl = strlen(delimiter ? delimiter : "");
	const char *sa0 = start_after ? start_after : "";
	char *sa = strdup(sa0), *last = NULL;
	unsigned count = 0;
	int rc = 0;
	bool stop = false;

	memset(out, 0, sizeof(*out));
	if (!sa)
		return -ENOMEM;
	if (!limit)
		limit = 1000;
	/* as a datanode lists (dn_meta_list.c): keys and common prefixes strictly after
	 * start_after, limit counting both, the last item given back to go on from */
	while (!stop && rc == 0) {
		struct cl_meta_listing l = { 0 };
		char *next_sa = NULL;

		/* linearizable, as GET: a listing right after a PUT or DELETE shows it */
		unsigned ms = s3_bcl_etcd_ms(b);

		rc = ms ? s3_bcl_etcd_end(b, cl_meta_list(b->etcd, bucket, prefix, sa,
		                                          CL_META_LIST_MAX, false, &l, ms))
		        : ZC_E(ZC_UNAVAILABLE);
		if (rc < 0) {
			cl_meta_listing_fini(&l);
			break;
		}
		for (size_t i = 0; i < l.n && !stop && rc == 0; i++) {
			const struct cl_meta_entry *e = &l.v[i];
			size_t kl = strlen(e->key);
			const char *d =
			        dl && kl >= pl ? memmem(e->key + pl, kl - pl, delimiter, dl) : NULL;

			if (d) {
				size_t cl = (size_t)(d - e->key) + dl;
				char *cp = strndup(e->key, cl);

				if (!cp) {
					rc = -ENOMEM;
					break;
				}
				if (strcmp(cp, sa0) > 0 && !(last && strcmp(last, cp) == 0)) {
					if (count == limit) {
						out->truncated = true;
						stop = true;
						free(cp);
						break;
					}
					rc = s3_list_result_add_prefix(out, cp);
					count++;
					free(last);
					last = strdup(cp);
					if (!last)
						rc = -ENOMEM;
				}
				/* skip the rest of the prefix's keys, here or in the next Range */
				while (i + 1 < l.n && strncmp(l.v[i + 1].key, cp, cl) == 0)
					i++;
				free(next_sa);
				next_sa = i + 1 == l.n ? past_prefix(cp, cl) : NULL;
				free(cp);
				if (i + 1 == l.n && !next_sa)
					rc = -ENOMEM;
				continue;
			}
			if (count == limit) {
				out->truncated = true;
				stop = true;
				break;
			}
			rc = s3_list_result_add(out, e->key, e->size, e->etag, e->mtime_ns);
			count++;
			free(last);
			last = strdup(e->key);
			if (!last)
				rc = -ENOMEM;
			if (i + 1 == l.n) {
				free(next_sa);
				next_sa = strdup(e->key);
				if (!next_sa)
					rc = -ENOMEM;
			}
		}
		atomic_fetch_add(&b->bad_records, l.bad);
		/* go on after the last record read: records that do not decode may follow
		 * the last one listed (or be every record of this call) */
		if (!stop && rc == 0 && l.more && l.last &&
		    (!next_sa || strcmp(l.last, next_sa) > 0)) {
			free(next_sa);
			next_sa = strdup(l.last);
			if (!next_sa)
				rc = -ENOMEM;
		}
		if (!stop && (!l.more || !next_sa))
			stop = true;
		if (next_sa) {
			free(sa);
			sa = next_sa;
		}
		cl_meta_listing_fini(&l);
	}
	if (rc == 0 && out->truncated && last) {
		out->next_start_after = last;
		last = NULL;
	}
	free(last);
	free(sa);
	if (rc < 0)
		s3_list_result_fini(out);
	return rc;
}

/* ------------------------------------------------------------------ compose */

/* A multipart Complete's parts are "p/<upload-id>/<nnnnn>" of S3_RESERVED_BUCKET and its
 * record "u/<bucket>/<upload-id>" (s3_mpu.c): then the compose costs O(1) etcd ops
 * (cl_meta_compose_upload). 1 with *up filled, 0 for other parts. */
static int
upload_of(const char *bucket, const struct s3_objref *parts, size_t nparts, char *prefix,
          size_t pcap, char *fence, size_t fcap, struct cl_meta_upload *up)
{
	const char *k, *slash;
	size_t pl;

	if (!nparts || strcmp(parts[0].bucket, S3_RESERVED_BUCKET) != 0)
		return 0;
	k = parts[0].key;
	if (strncmp(k, "p/", 2) != 0 || !(slash = strchr(k + 2, '/')) || slash == k + 2)
		return 0;
	pl = (size_t)(slash + 1 - k);
	if (pl >= pcap)
		return 0;
	for (size_t i = 1; i < nparts; i++)
		if (strcmp(parts[i].bucket, S3_RESERVED_BUCKET) != 0 ||
		    strncmp(parts[i].key, k, pl) != 0)
			return 0;
	memcpy(prefix, k, pl);
	prefix[pl] = 0;
	if ((size_t)snprintf(fence, fcap, "u/%s/%.*s", bucket, (int)(pl - 3), k + 2) >= fcap)
		return 0;
	*up = (struct cl_meta_upload){ S3_RESERVED_BUCKET, prefix, fence };
	return 1;
}

/* The compose of s3_bcl_compose; up: the parts are all of one prefix (O(1) etcd ops),
 * NULL: named one by one. */
static int
compose(struct bcl *b, const char *bucket, const char *key, const struct s3_objref *parts,
        size_t nparts, const struct cl_meta_upload *up, const char *etag, const char *attrs,
        size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct cl_meta_part *pv;
	struct cl_meta_cond cc = { 0 };
	struct cl_meta_old old = { 0 };
	struct cl_rec_attr *av = NULL;
	size_t nav = 0;
	char *abuf = NULL;
	uint64_t size = 0, mtime = realtime_ns();
	unsigned ms;
	int rc;

	pv = calloc(nparts ? nparts : 1, sizeof(*pv));
	if (!pv)
		return -ENOMEM;
	for (size_t i = 0; i < nparts; i++)
		pv[i] = (struct cl_meta_part){ parts[i].bucket, parts[i].key, parts[i].etag };
	rc = s3_bcl_attrs_to(attrs, attrs_len, &av, &nav, &abuf);
	if (rc < 0)
		goto out;
	if (cond) {
		cc.if_none_match = cond->if_none_match;
		cc.if_match = cond->if_match[0] ? cond->if_match : NULL;
	}
	ms = s3_bcl_etcd_ms(b);
	if (!ms)
		rc = ZC_E(ZC_UNAVAILABLE);
	else if (up)
		rc = s3_bcl_etcd_end(b, cl_meta_compose_upload(b->etcd, bucket, key, up, pv, nparts,
		                                               etag, av, nav, &cc, mtime, ms, &size,
		                                               &old));
	else
		rc = s3_bcl_etcd_end(b, cl_meta_compose(b->etcd, bucket, key, pv, nparts, etag, av,
		                                        nav, &cc, mtime, ms, &size, &old));
	if (rc < 0)
		goto out;
	if (old.had)
		s3_bcl_delete_cells(b, &old.o);
	cl_meta_old_fini(&old);
	if (out) {
		memset(out, 0, offsetof(struct s3_obj_info, attrs));
		snprintf(out->key, sizeof(out->key), "%s", key);
		out->size = size;
		snprintf(out->etag, sizeof(out->etag), "%s", etag);
		out->mtime_ns = mtime;
	}
out:
	free(av);
	free(abuf);
	free(pv);
	return rc;
}

int
s3_bcl_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
               size_t nparts, bool delete_parts, const char *etag, const char *attrs,
               size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct cl_meta_upload up;
	char prefix[128], fence[160];

	/* a record owns its cells: a copy that keeps the source is the caller's to stream */
	if (!delete_parts)
		return -EXDEV;
	return compose(ctx, bucket, key, parts, nparts,
	               upload_of(bucket, parts, nparts, prefix, sizeof(prefix), fence,
	                         sizeof(fence), &up)
	                       ? &up
	                       : NULL,
	               etag, attrs, attrs_len, cond, out);
}

int
s3_bcl_compose_prefix(struct bcl *b, const char *bucket, const char *key, const char *pbucket,
                      const char *prefix, const struct s3_objref *parts, size_t nparts,
                      const char *etag, const char *attrs, size_t attrs_len,
                      const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct cl_meta_upload up = { pbucket, prefix, NULL };

	return compose(b, bucket, key, parts, nparts, &up, etag, attrs, attrs_len, cond, out);
}

/* ------------------------------------------------------------------ buckets */

int
s3_bcl_bucket_create(void *ctx, const char *bucket)
{
	struct bcl *b = ctx;
	unsigned ms = s3_bcl_etcd_ms(b);

	return ms ? s3_bcl_etcd_end(b, cl_meta_bucket_create(b->etcd, bucket, realtime_ns(), ms))
	          : ZC_E(ZC_UNAVAILABLE);
}

int
s3_bcl_bucket_delete(void *ctx, const char *bucket)
{
	struct bcl *b = ctx;
	unsigned ms = s3_bcl_etcd_ms(b);

	return ms ? s3_bcl_etcd_end(b, cl_meta_bucket_delete(b->etcd, bucket, ms))
	          : ZC_E(ZC_UNAVAILABLE);
}

int
s3_bcl_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out)
{
	struct bcl *b = ctx;
	struct cl_rec_bucket cb = { 0 };
	unsigned ms = s3_bcl_etcd_ms(b);
	int rc;

	rc = ms ? s3_bcl_etcd_end(b, cl_meta_bucket_head(b->etcd, bucket, &cb, ms))
	        : ZC_E(ZC_UNAVAILABLE);
	if (rc < 0)
		return rc;
	snprintf(out->name, sizeof(out->name), "%s", bucket);
	out->ctime_ns = cb.ctime_ns;
	return 0;
}

int
s3_bcl_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap)
{
	struct bcl *b = ctx;
	struct cl_meta_bucket_entry *v = NULL;
	size_t n = 0, got = 0;
	unsigned ms = s3_bcl_etcd_ms(b);
	int rc;

	rc = ms ? s3_bcl_etcd_end(b, cl_meta_bucket_list(b->etcd, &v, &n, ms))
	        : ZC_E(ZC_UNAVAILABLE);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && got < cap; i++) {
		snprintf(out[got].name, sizeof(out[got].name), "%s", v[i].name);
		out[got].ctime_ns = v[i].ctime_ns;
		got++;
	}
	cl_meta_bucket_list_free(v, n);
	return (int)got;
}
