/*
 * dn_rpc_unary: the unary calls (Stat, Delete, List, Compose, Create/Delete/Head/
 * ListBuckets), each one engine call, with its error code and message. The reads answer
 * on the CQ thread; the writes run on the store's commit thread (dn_mcall_submit).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_rpc_internal.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

/* ------------------------------------------------------------------ unary */

static void
attrs_from_rpc(const struct rpc_attr *in, size_t n, struct dn_attr *out)
{
	for (size_t i = 0; i < n; i++) {
		out[i].name = (char *)in[i].name; /* dn_compose_if only reads them */
		out[i].value = (char *)in[i].value;
	}
}

static int
unary_stat(struct dn_rpc *b, const struct rpc_object_req *req, struct rpc_reply *reply)
{
	struct dn_object_info info;
	struct rpc_object_info oi;
	struct rpc_attr *attrs;
	int err;

	err = dn_stat(b->s, req->bucket, req->key, &info);
	if (err) {
		rpc_reply_error(reply, "%s", dn_rpc_no_such_name(err, req->bucket, req->key));
		return err;
	}
	attrs = calloc(info.nattrs + 1, sizeof(*attrs));
	if (attrs) {
		dn_rpc_info_to_rpc(&info, &oi, attrs);
		err = rpc_reply_object_info(reply, &oi);
	} else {
		err = -ENOMEM;
	}
	free(attrs);
	dn_object_info_fini(&info);
	return err;
}

static int
unary_list(struct dn_rpc *b, const struct rpc_list_req *req, struct rpc_reply *reply)
{
	struct rpc_list_result res = { 0 };
	struct dn_list_result lr;
	struct rpc_object_info *ents = NULL;
	int err;

	err = dn_list(b->s, req->bucket, req->prefix, req->start_after,
	              req->limit ? req->limit : 1000, req->delimiter, &lr);
	if (err) {
		rpc_reply_error(reply, "list of %s", req->bucket);
		return err;
	}
	ents = calloc(lr.nentries + 1, sizeof(*ents));
	if (!ents) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < lr.nentries; i++)
		dn_rpc_info_to_rpc(&lr.entries[i], &ents[i], NULL);
	res.n_entries = lr.nentries;
	res.entries = ents;
	res.n_common_prefixes = lr.nprefixes;
	res.common_prefixes = (const char *const *)lr.prefixes;
	res.truncated = lr.truncated;
	res.next_start_after = lr.next_start_after;
	err = rpc_reply_list_result(reply, &res);
out:
	free(ents);
	dn_list_result_fini(&lr);
	return err;
}

/* A unary call that writes metadata, on the store's commit thread; its reply deferred. */
struct ujob {
	enum rpc_method m;
	const union rpc_unary_req *req; /* valid until rpc_reply_send */
	struct rpc_reply *reply;
	struct dn_mcall call;
	/* compose: what call points to */
	const char **parts, **part_buckets, **part_etags;
	struct dn_attr *attrs;
	struct dn_cond cond;
};

static void
ujob_free(struct ujob *j)
{
	free(j->parts);
	free(j->part_buckets);
	free(j->part_etags);
	free(j->attrs);
	free(j);
}

static int
compose_call(struct ujob *j, const struct rpc_compose_req *req)
{
	struct dn_mcall *c = &j->call;

	if (!req->bucket[0] || !req->key[0] || strlen(req->key) > 1024) {
		rpc_reply_error(j->reply, "compose needs a bucket and a key");
		return -EINVAL;
	}
	j->parts = calloc(req->n_parts + 1, sizeof(*j->parts));
	j->part_buckets = calloc(req->n_parts + 1, sizeof(*j->part_buckets));
	j->part_etags = calloc(req->n_parts + 1, sizeof(*j->part_etags));
	j->attrs = calloc(req->n_attrs + 1, sizeof(*j->attrs));
	if (!j->parts || !j->part_buckets || !j->part_etags || !j->attrs)
		return -ENOMEM;
	for (size_t i = 0; i < req->n_parts; i++) {
		const struct rpc_object_req *p = &req->parts[i];

		/* Empty: the target's bucket. */
		j->part_buckets[i] = p->bucket[0] ? p->bucket : req->bucket;
		j->parts[i] = p->key;
		j->part_etags[i] = p->etag;
	}
	attrs_from_rpc(req->attrs, req->n_attrs, j->attrs);
	if (req->cond) {
		j->cond.if_none_match = req->cond->if_none_match;
		j->cond.if_match = req->cond->if_match;
	}
	c->kind = DN_MC_COMPOSE;
	c->bucket = req->bucket;
	c->key = req->key;
	c->part_buckets = j->part_buckets;
	c->parts = j->parts;
	c->part_etags = j->part_etags;
	c->nparts = req->n_parts;
	c->delete_parts = req->delete_parts;
	c->etag = req->etag;
	c->attrs = j->attrs;
	c->nattrs = req->n_attrs;
	c->cond = req->cond ? &j->cond : NULL;
	return 0;
}

static int
compose_reply(struct ujob *j, int err, const struct dn_write_result *res)
{
	const struct rpc_compose_req *req = &j->req->compose;
	struct rpc_reply *reply = j->reply;
	char msg[RPC_STATUS_MSG_MAX];
	struct rpc_write_result wr;

	if (dn_rpc_cond_errmsg(req->bucket, req->key, err, msg, sizeof(msg))) {
		rpc_reply_error(reply, "%s", msg);
		return err;
	}
	if (zc_err_is(err, ZC_NO_BUCKET)) {
		rpc_reply_error(reply, "%s, or the bucket of a part", req->bucket);
		return err;
	}
	if (zc_err_is(err, ZC_NO_KEY)) {
		rpc_reply_error(reply, "a part of %s is missing", req->key);
		return err;
	}
	if (err == -EINVAL) {
		rpc_reply_error(reply, "compose of %s refused", req->key);
		return err;
	}
	if (zc_err_is(err, ZC_CHANGED)) {
		/* its own code, not SlowDown: the caller named a part version that is gone
		 * (the gateway's Complete answers InvalidPart) */
		rpc_reply_error(reply, "a part of %s changed during the compose", req->key);
		return err;
	}
	if (err)
		return err;
	wr.size = res->size;
	wr.crc32c = res->crc32c;
	wr.etag = res->etag ? res->etag : req->etag;
	wr.mtime_ns = res->mtime_ns;
	return rpc_reply_write_result(reply, &wr);
}

/* One unary call that only reads, on the CQ thread. */
static int
unary_run(struct dn_rpc *b, enum rpc_method m, const union rpc_unary_req *req,
          struct rpc_reply *reply)
{
	int err;

	switch (m) {
	case RPC_STAT:
		return unary_stat(b, &req->object, reply);
	case RPC_LIST:
		return unary_list(b, &req->list, reply);
	case RPC_HEAD_BUCKET: {
		const struct rpc_bucket_req *br = &req->bucket;
		struct rpc_bucket_info bi;
		uint64_t ctime = 0;

		err = dn_bucket_head(b->s, br->bucket, &ctime);
		if (err == -EINVAL)
			rpc_reply_error(reply, "bad bucket name '%s'", br->bucket);
		else if (err)
			rpc_reply_error(reply, "%s", br->bucket);
		if (err)
			return err;
		bi.name = br->bucket;
		bi.ctime_ns = ctime;
		return rpc_reply_bucket_info(reply, &bi);
	}
	case RPC_LIST_BUCKETS: {
		struct rpc_bucket_list bl;
		struct dn_bucket_info *v = NULL;
		struct rpc_bucket_info *bis = NULL;
		size_t n = 0;

		err = dn_bucket_list(b->s, &v, &n);
		if (err)
			return err;
		bis = calloc(n + 1, sizeof(*bis));
		if (bis) {
			for (size_t i = 0; i < n; i++) {
				bis[i].name = v[i].name;
				bis[i].ctime_ns = v[i].ctime_ns;
			}
			bl.n_buckets = n;
			bl.buckets = bis;
			err = rpc_reply_bucket_list(reply, &bl);
		} else {
			err = -ENOMEM;
		}
		free(bis);
		dn_bucket_list_free(v, n);
		return err;
	}
	default:
		return -ENOSYS;
	}
}

/* The commit thread: the deferred call is done; answer it. */
static void
ujob_done(void *arg, int err, const struct dn_mcall_result *res)
{
	struct ujob *j = arg;
	struct rpc_reply *reply = j->reply;

	switch (j->m) {
	case RPC_DELETE: {
		const struct rpc_object_req *o = &j->req->object;
		struct rpc_delete_result dr;

		if (zc_err_is(err, ZC_NO_BUCKET)) {
			rpc_reply_error(reply, "%s", o->bucket);
		} else if (!err) {
			dr.existed = res->existed;
			err = rpc_reply_delete_result(reply, &dr);
		}
		break;
	}
	case RPC_COMPOSE:
		err = compose_reply(j, err, &res->wr);
		break;
	case RPC_CREATE_BUCKET:
	case RPC_DELETE_BUCKET: {
		const struct rpc_bucket_req *br = &j->req->bucket;
		struct rpc_bucket_info bi;

		if (err == -EINVAL) {
			rpc_reply_error(reply, "bad bucket name '%s'", br->bucket);
		} else if (err) {
			rpc_reply_error(reply, "%s", br->bucket);
		} else if (j->m == RPC_CREATE_BUCKET) {
			bi.name = br->bucket;
			bi.ctime_ns = res->ctime_ns;
			err = rpc_reply_bucket_info(reply, &bi);
		} else {
			err = rpc_reply_empty(reply);
		}
		break;
	}
	default:
		err = -ENOSYS;
		break;
	}
	rpc_reply_send(reply, err < 0 ? err : 0);
	ujob_free(j);
}

/*
 * The CQ threads never block: the calls that write metadata (an fsynced LMDB transaction,
 * file unlinks) go to the store's commit thread with their reply deferred, where the
 * Deletes and Composes that arrive together share one transaction with each other and
 * with the Write commits (dn_mcall_submit); Stat, List and the bucket reads answer at once.
 */
int
dn_rpc_on_unary(void *ctx, enum rpc_method m, const union rpc_unary_req *req,
                struct rpc_reply *reply)
{
	struct dn_rpc *b = ctx;
	struct ujob *j;
	int err;

	err = dn_rpc_names_unary(m, req, reply);
	if (err)
		return err; /* refused here, before anything is queued */
	if (m != RPC_DELETE && m != RPC_COMPOSE && m != RPC_CREATE_BUCKET && m != RPC_DELETE_BUCKET)
		return unary_run(b, m, req, reply);
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM; /* SlowDown: the client retries */
	j->m = m;
	j->req = req;
	j->reply = reply;
	if (m == RPC_COMPOSE) {
		err = compose_call(j, &req->compose);
	} else if (m == RPC_DELETE) {
		j->call.kind = DN_MC_DELETE;
		j->call.bucket = req->object.bucket;
		j->call.key = req->object.key;
	} else {
		j->call.kind = m == RPC_CREATE_BUCKET ? DN_MC_BUCKET_CREATE : DN_MC_BUCKET_DELETE;
		j->call.bucket = req->bucket.bucket;
	}
	if (!err)
		err = dn_mcall_submit(b->s, &j->call, ujob_done, j);
	if (err) {
		ujob_free(j);
		return err;
	}
	return RPC_REPLY_LATER;
}
