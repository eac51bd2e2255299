/*
 * s3_brpc_meta: the rpc backend's other calls: stat, delete, compose (across nodes:
 * -EXDEV), listings merged over every node, and bucket calls sent to every node.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ unary */

static int
call(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
     struct rpc_unary_resp *resp)
{
	struct rpc_status st;

	/* a datanode that cannot be reached yet (started late, restarted) is the rpc client's
	 * retry policy's business (rpc_client.h); on failure resp holds nothing */
	if (rpc_client_call(c, m, req, resp, &st) == 0)
		return 0;
	return rpc_status_err(&st);
}

int
s3_brpc_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out)
{
	struct rbe *b = ctx;
	union rpc_unary_req req = { .object = { .bucket = bucket, .key = key } };
	struct rpc_unary_resp resp;
	int rc;

	rc = call(s3_brpc_place(b, bucket, key), RPC_STAT, &req, &resp);
	if (rc < 0)
		return rc;
	s3_brpc_info_from_rpc(&resp.info, key, out);
	rpc_unary_resp_fini(&resp);
	return 0;
}

int
s3_brpc_del(void *ctx, const char *bucket, const char *key, bool *existed)
{
	struct rbe *b = ctx;
	union rpc_unary_req req = { .object = { .bucket = bucket, .key = key } };
	struct rpc_unary_resp resp;
	int rc;

	*existed = false;
	rc = call(s3_brpc_place(b, bucket, key), RPC_DELETE, &req, &resp);
	if (rc < 0)
		return rc;
	*existed = resp.del.existed;
	rpc_unary_resp_fini(&resp);
	return 0;
}

/* One node's listing of one bucket, as the datanode answers it. */
static int
list_one(struct rpc_client *c, const char *bucket, const char *prefix, const char *start_after,
         const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	union rpc_unary_req req = { .list = { .bucket = bucket,
		                              .prefix = prefix,
		                              .start_after = start_after,
		                              .limit = limit,
		                              .delimiter = delimiter } };
	const struct rpc_list_result *lr;
	struct rpc_unary_resp resp;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = call(c, RPC_LIST, &req, &resp);
	if (rc < 0)
		return rc;
	lr = &resp.list;
	out->truncated = lr->truncated;
	for (size_t i = 0; i < lr->n_entries && rc == 0; i++) {
		const struct rpc_object_info *e = &lr->entries[i];

		rc = s3_list_result_add(out, e->key, e->size, e->etag, e->mtime_ns);
	}
	for (size_t i = 0; i < lr->n_common_prefixes && rc == 0; i++) {
		rc = s3_list_result_add_prefix(out, lr->common_prefixes[i]);
	}
	if (rc == 0 && out->truncated) {
		out->next_start_after = strdup(lr->next_start_after);
		if (!out->next_start_after)
			rc = -ENOMEM;
	}
	rpc_unary_resp_fini(&resp);
	if (rc < 0)
		s3_list_result_fini(out);
	return rc;
}

int
s3_brpc_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
             const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	struct rbe *b = ctx;
	struct s3_list_result *parts;
	const struct s3_list_result **pp;
	int rc = 0;
	unsigned done = 0, missing = 0;

	if (!limit)
		limit = 1000;
	if (b->n == 1)
		return list_one(b->cl[0], bucket, prefix, start_after, delimiter, limit, out);
	memset(out, 0, sizeof(*out));
	parts = calloc(b->n, sizeof(*parts));
	pp = calloc(b->n, sizeof(*pp));
	if (!parts || !pp) {
		rc = -ENOMEM;
		goto out;
	}
	/* A node without the bucket (restarted empty, or a create that reached only some)
	 * holds none of its keys: it lists as empty, unless no node has the bucket. */
	for (; done < b->n; done++) {
		rc = list_one(b->cl[done], bucket, prefix, start_after, delimiter, limit,
		              &parts[done]);
		if (rc == ZC_E(ZC_NO_BUCKET)) {
			missing++;
			rc = 0;
		}
		if (rc < 0)
			break;
		pp[done] = &parts[done];
	}
	if (rc == 0 && missing == b->n)
		rc = ZC_E(ZC_NO_BUCKET);
	if (rc == 0)
		rc = s3_list_merge(pp, b->n, limit, out);
	for (unsigned i = 0; i < done; i++)
		s3_list_result_fini(&parts[i]);
out:
	free(parts);
	free(pp);
	return rc;
}

int
s3_brpc_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
                size_t nparts, bool delete_parts, const char *etag, const char *attrs,
                size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct rbe *b = ctx;
	struct rpc_client *target = s3_brpc_place(b, bucket, key);
	struct rpc_write_cond rc_cond;
	union rpc_unary_req req;
	struct rpc_object_req *pr = NULL;
	struct rpc_unary_resp resp;
	struct attrs at = { 0 };
	int rc;

	/* A datanode composes only what it holds: the caller moves the bytes otherwise */
	for (size_t i = 0; i < nparts; i++)
		if (s3_brpc_place(b, parts[i].bucket, parts[i].key) != target)
			return -EXDEV;
	pr = calloc(nparts ? nparts : 1, sizeof(*pr));
	if (!pr) {
		rc = -ENOMEM;
		goto out;
	}
	rc = s3_brpc_attrs_parse(&at, attrs, attrs_len);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < nparts; i++) {
		pr[i].bucket = parts[i].bucket;
		pr[i].key = parts[i].key;
		pr[i].etag = parts[i].etag;
	}
	req.compose = (struct rpc_compose_req){ .bucket = bucket,
		                                .key = key,
		                                .parts = pr,
		                                .n_parts = nparts,
		                                .delete_parts = delete_parts,
		                                .etag = etag,
		                                .attrs = at.a,
		                                .n_attrs = at.n,
		                                .cond = s3_brpc_cond_to_rpc(cond, &rc_cond) };
	rc = call(target, RPC_COMPOSE, &req, &resp);
	if (rc < 0)
		goto out;
	if (out) {
		memset(out, 0, offsetof(struct s3_obj_info, attrs));
		snprintf(out->key, sizeof(out->key), "%s", key);
		out->size = resp.write.size;
		snprintf(out->etag, sizeof(out->etag), "%s", etag);
		out->mtime_ns = resp.write.mtime_ns;
	}
	rpc_unary_resp_fini(&resp);
out:
	free(at.buf);
	free(pr);
	return rc;
}

/* ------------------------------------------------------------------ buckets */

/*
 * Bucket calls go to every datanode so each can place any key of the bucket. Partial
 * states (a node restarted empty, a broadcast cut short) are repaired in the direction
 * of the request: create creates where missing, delete deletes where present.
 */
static int
bucket_call(struct rpc_client *c, enum rpc_method m, const char *bucket, uint64_t *ctime)
{
	union rpc_unary_req req = { .bucket = { .bucket = bucket } };
	struct rpc_unary_resp resp;
	int rc;

	rc = call(c, m, &req, &resp);
	if (rc < 0)
		return rc;
	if (ctime && (m == RPC_CREATE_BUCKET || m == RPC_HEAD_BUCKET))
		*ctime = resp.bucket.ctime_ns;
	rpc_unary_resp_fini(&resp);
	return 0;
}

int
s3_brpc_bucket_create(void *ctx, const char *bucket)
{
	struct rbe *b = ctx;
	unsigned created = 0;

	for (unsigned i = 0; i < b->n; i++) {
		int rc = bucket_call(b->cl[i], RPC_CREATE_BUCKET, bucket, NULL);

		if (rc == 0)
			created++;
		else if (rc != ZC_E(ZC_BUCKET_EXISTS))
			return rc;
	}
	return created ? 0 : ZC_E(ZC_BUCKET_EXISTS);
}

int
s3_brpc_bucket_delete(void *ctx, const char *bucket)
{
	struct rbe *b = ctx;
	unsigned deleted = 0;
	int rc;

	/* every node must be empty first, or a delete would leave the bucket half gone */
	for (unsigned i = 0; i < b->n && b->n > 1; i++) {
		struct s3_list_result lr;

		rc = list_one(b->cl[i], bucket, "", "", "", 1, &lr);
		if (rc == ZC_E(ZC_NO_BUCKET))
			continue;
		if (rc < 0)
			return rc;
		rc = lr.n || lr.nprefix ? ZC_E(ZC_BUCKET_NOT_EMPTY) : 0;
		s3_list_result_fini(&lr);
		if (rc < 0)
			return rc;
	}
	for (unsigned i = 0; i < b->n; i++) {
		rc = bucket_call(b->cl[i], RPC_DELETE_BUCKET, bucket, NULL);
		if (rc == 0)
			deleted++;
		else if (rc != ZC_E(ZC_NO_BUCKET))
			return rc;
	}
	return deleted ? 0 : ZC_E(ZC_NO_BUCKET);
}

int
s3_brpc_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out)
{
	struct rbe *b = ctx;
	unsigned found = 0, missing = 0;
	uint64_t ctime = 0, t;

	for (unsigned i = 0; i < b->n; i++) {
		int rc = bucket_call(b->cl[i], RPC_HEAD_BUCKET, bucket, &t);

		if (rc == ZC_E(ZC_NO_BUCKET)) {
			missing++;
			continue;
		}
		if (rc < 0)
			return rc;
		if (!found++ || t < ctime)
			ctime = t;
	}
	if (!found)
		return ZC_E(ZC_NO_BUCKET);
	if (missing) /* a node lost it (restarted empty): recreate, keys may land there */
		for (unsigned i = 0; i < b->n; i++)
			(void)bucket_call(b->cl[i], RPC_CREATE_BUCKET, bucket, NULL);
	snprintf(out->name, sizeof(out->name), "%s", bucket);
	out->ctime_ns = ctime;
	return 0;
}

static int
binfo_cmp(const void *a, const void *b)
{
	return strcmp(((const struct s3_bucket_info *)a)->name,
	              ((const struct s3_bucket_info *)b)->name);
}

/* The union over the datanodes, sorted, each name once (oldest ctime). */
int
s3_brpc_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap)
{
	struct rbe *b = ctx;
	size_t n = 0;

	for (unsigned i = 0; i < b->n; i++) {
		const struct rpc_bucket_list *bl;
		struct rpc_unary_resp resp;
		int rc;

		rc = call(b->cl[i], RPC_LIST_BUCKETS, NULL, &resp);
		if (rc < 0)
			return rc;
		bl = &resp.buckets;
		for (size_t k = 0; k < bl->n_buckets; k++) {
			size_t j;

			for (j = 0; j < n; j++)
				if (strcmp(out[j].name, bl->buckets[k].name) == 0)
					break;
			if (j < n) {
				if (bl->buckets[k].ctime_ns < out[j].ctime_ns)
					out[j].ctime_ns = bl->buckets[k].ctime_ns;
				continue;
			}
			if (n == cap)
				continue;
			snprintf(out[n].name, sizeof(out[n].name), "%s", bl->buckets[k].name);
			out[n].ctime_ns = bl->buckets[k].ctime_ns;
			n++;
		}
		rpc_unary_resp_fini(&resp);
	}
	qsort(out, n, sizeof(*out), binfo_cmp);
	return (int)n;
}
