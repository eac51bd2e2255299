/*
 * dn_rpc_unary: the unary calls (Stat, Delete, List, Compose, Create/Delete/Head/
 * ListBuckets), each one engine call, with its error code and message.
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

static int
unary_compose(struct dn_rpc *b, const struct rpc_compose_req *req, struct rpc_reply *reply)
{
	struct rpc_write_result wr;
	struct dn_write_result res;
	struct dn_attr *attrs = NULL;
	const char **parts, **part_buckets, **part_etags;
	char msg[RPC_STATUS_MSG_MAX];
	struct dn_cond cond = { 0 };
	int err;

	if (!req->bucket[0] || !req->key[0] || strlen(req->key) > 1024) {
		rpc_reply_error(reply, "compose needs a bucket and a key");
		return -EINVAL;
	}
	parts = calloc(req->n_parts + 1, sizeof(*parts));
	part_buckets = calloc(req->n_parts + 1, sizeof(*part_buckets));
	part_etags = calloc(req->n_parts + 1, sizeof(*part_etags));
	attrs = calloc(req->n_attrs + 1, sizeof(*attrs));
	if (!parts || !part_buckets || !part_etags || !attrs) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < req->n_parts; i++) {
		const struct rpc_object_req *p = &req->parts[i];

		/* Empty: the target's bucket. */
		part_buckets[i] = p->bucket[0] ? p->bucket : req->bucket;
		parts[i] = p->key;
		part_etags[i] = p->etag;
	}
	attrs_from_rpc(req->attrs, req->n_attrs, attrs);
	if (req->cond) {
		cond.if_none_match = req->cond->if_none_match;
		cond.if_match = req->cond->if_match;
	}
	err = dn_compose_if(b->s, req->bucket, req->key, part_buckets, parts, part_etags,
	                    req->n_parts, req->delete_parts, req->etag, attrs, req->n_attrs,
	                    req->cond ? &cond : NULL, &res);
	if (dn_rpc_cond_errmsg(req->bucket, req->key, err, msg, sizeof(msg))) {
		rpc_reply_error(reply, "%s", msg);
		goto out;
	}
	if (err == ZC_E(ZC_NO_BUCKET)) {
		rpc_reply_error(reply, "%s, or the bucket of a part", req->bucket);
		goto out;
	}
	if (err == -ENOENT) {
		rpc_reply_error(reply, "a part of %s is missing", req->key);
		goto out;
	}
	if (err == -EINVAL) {
		rpc_reply_error(reply, "compose of %s refused", req->key);
		goto out;
	}
	if (err == -EAGAIN) {
		rpc_reply_error(reply, "a part of %s changed during the compose", req->key);
		goto out;
	}
	if (err)
		goto out;
	wr.size = res.size;
	wr.crc32c = res.crc32c;
	wr.etag = res.etag ? res.etag : req->etag;
	wr.mtime_ns = res.mtime_ns;
	err = rpc_reply_write_result(reply, &wr);
out:
	free(parts);
	free(part_buckets);
	free(part_etags);
	free(attrs);
	return err;
}

/* One unary call, synchronously (a dn-unary thread, or the CQ thread for reads). */
static int
unary_run(struct dn_rpc *b, enum rpc_method m, const union rpc_unary_req *req,
          struct rpc_reply *reply)
{
	int err;

	switch (m) {
	case RPC_STAT:
		return unary_stat(b, &req->object, reply);
	case RPC_DELETE: {
		const struct rpc_object_req *o = &req->object;
		struct rpc_delete_result dr;

		err = dn_delete(b->s, o->bucket, o->key);
		if (err == ZC_E(ZC_NO_BUCKET)) {
			rpc_reply_error(reply, "%s", o->bucket);
			return err;
		}
		if (err < 0)
			return err;
		dr.existed = err == 1;
		return rpc_reply_delete_result(reply, &dr);
	}
	case RPC_LIST:
		return unary_list(b, &req->list, reply);
	case RPC_COMPOSE:
		return unary_compose(b, &req->compose, reply);
	case RPC_CREATE_BUCKET:
	case RPC_HEAD_BUCKET: {
		const struct rpc_bucket_req *br = &req->bucket;
		struct rpc_bucket_info bi;
		uint64_t ctime = 0;

		err = m == RPC_CREATE_BUCKET ? dn_bucket_create(b->s, br->bucket, &ctime)
		                             : dn_bucket_head(b->s, br->bucket, &ctime);
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
	case RPC_DELETE_BUCKET: {
		const struct rpc_bucket_req *br = &req->bucket;

		err = dn_bucket_delete(b->s, br->bucket);
		if (err == -EINVAL)
			rpc_reply_error(reply, "bad bucket name '%s'", br->bucket);
		else if (err)
			rpc_reply_error(reply, "%s", br->bucket);
		if (err)
			return err;
		return rpc_reply_empty(reply);
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

/*
 * The CQ threads never block: the calls that write metadata (an fsynced LMDB transaction,
 * file unlinks) go to the dn-unary threads with their reply deferred; Stat, List and the
 * bucket reads answer at once.
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
		return err; /* refused here, before a thread is woken */
	if (m != RPC_DELETE && m != RPC_COMPOSE && m != RPC_CREATE_BUCKET && m != RPC_DELETE_BUCKET)
		return unary_run(b, m, req, reply);
	j = calloc(1, sizeof(*j));
	if (!j)
		return unary_run(b, m, req, reply); /* no memory to defer: answer here */
	j->m = m;
	j->req = req;
	j->reply = reply;
	pthread_mutex_lock(&b->mu);
	if (b->uq_tail)
		b->uq_tail->next = j;
	else
		b->uq_head = j;
	b->uq_tail = j;
	pthread_cond_signal(&b->ucond);
	pthread_mutex_unlock(&b->mu);
	return RPC_REPLY_LATER;
}

void *
dn_rpc_unary_worker(void *arg)
{
	struct dn_rpc *b = arg;

	pthread_mutex_lock(&b->mu);
	for (;;) {
		struct ujob *j;
		int rc;

		while (!b->uq_head && !b->stop)
			pthread_cond_wait(&b->ucond, &b->mu);
		j = b->uq_head;
		if (!j)
			break; /* stopping, and every deferred call was answered */
		b->uq_head = j->next;
		if (!b->uq_head)
			b->uq_tail = NULL;
		pthread_mutex_unlock(&b->mu);
		rc = unary_run(b, j->m, j->req, j->reply);
		rpc_reply_send(j->reply, rc < 0 ? rc : 0);
		free(j);
		pthread_mutex_lock(&b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}
