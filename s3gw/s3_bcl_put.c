/*
 * s3_bcl_put: the cluster backend's PUT stream. A body of known length goes straight to a
 * coordinator (s3_bcl_put_direct, s3_brpc_put.c's stream). One of unknown length (HTTP
 * chunked without x-amz-decoded-content-length) cannot go so: the coordinator lays every
 * cell out when the write opens. It is cut into pieces of BCL_PIECE bytes; a piece is held
 * here until a byte past it arrives (it is not the last), then written as an object of its
 * own, "c/<id>/<nnnnn>" of S3_RESERVED_BUCKET, so its groups are placed as the body comes.
 * The commit writes the last, short piece and composes all of them into the object in one
 * etcd Txn (the record gets the real size; the pieces' records go); a body that fit one
 * piece is written directly. At most BCL_PIECE bytes are held per such PUT, copied once.
 * A gateway that dies mid-body leaves its pieces as records of the reserved bucket.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "s3_backend_rpc_internal.h"
#include "s3_bcl_internal.h"
#include "zc.h"

#define BCL_PIECE     (8u << 20) /* bytes of each piece of a body of unknown length */
#define BCL_CHUNK     (1u << 20) /* held in chunks of this, each one message to the node */
#define BCL_PIECE_KEY 40

struct chunk {
	struct zc_ref ref; /* first: the release callback frees the chunk */
	size_t len;
	uint8_t data[BCL_CHUNK];
};

struct bput {
	struct bcl *b;
	void *direct; /* the coordinator's stream; NULL: in pieces */
	char *bucket, *key;
	uint64_t id;      /* names the pieces */
	unsigned npieces; /* written */
	struct chunk *ch[BCL_PIECE / BCL_CHUNK];
	unsigned nch;
	uint64_t held; /* bytes in ch */
};

static void
chunk_release(struct zc_ref *ref)
{
	free((struct chunk *)ref);
}

static void
piece_key(const struct bput *p, unsigned i, char *out)
{
	snprintf(out, BCL_PIECE_KEY, "c/%016" PRIx64 "/%05u", p->id, i);
}

static void
drop_held(struct bput *p)
{
	for (unsigned i = 0; i < p->nch; i++)
		zc_ref_put(&p->ch[i]->ref);
	p->nch = 0;
	p->held = 0;
}

/* The held bytes as object bucket/key (a piece, or the whole body), then none held. */
static int
write_held(struct bput *p, const char *bucket, const char *key, const char *etag, const char *attrs,
           size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out)
{
	void *st;
	int rc = s3_bcl_put_direct(p->b, bucket, key, p->held, &st);

	for (unsigned i = 0; rc == 0 && i < p->nch; i++) {
		struct zc_seg seg = { p->ch[i]->data, p->ch[i]->len, &p->ch[i]->ref };

		rc = s3_brpc_put_write(st, &seg);
		if (rc < 0)
			s3_brpc_put_abort(st);
	}
	if (rc == 0)
		rc = s3_brpc_put_commit(st, etag, attrs, attrs_len, cond, out);
	drop_held(p);
	return rc;
}

/* Every piece written so far: gone (the write failed or was abandoned). */
static void
drop_pieces(struct bput *p)
{
	for (unsigned i = 0; i < p->npieces; i++) {
		char k[BCL_PIECE_KEY];
		bool existed;

		piece_key(p, i, k);
		(void)s3_bcl_del(p->b, S3_RESERVED_BUCKET, k, &existed);
	}
	p->npieces = 0;
}

static void
bput_free(struct bput *p)
{
	drop_held(p);
	free(p->bucket);
	free(p->key);
	free(p);
}

int
s3_bcl_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
                void **stream)
{
	struct bput *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->b = ctx;
	if (size_known) {
		rc = s3_bcl_put_direct(p->b, bucket, key, size, &p->direct);
	} else {
		p->bucket = strdup(bucket);
		p->key = strdup(key);
		if (!p->bucket || !p->key)
			rc = -ENOMEM;
		while (!rc && !p->id)
			if (getrandom(&p->id, sizeof(p->id), 0) != sizeof(p->id))
				rc = -errno;
	}
	if (rc < 0) {
		bput_free(p);
		return rc;
	}
	*stream = p;
	return 0;
}

int
s3_bcl_put_write(void *stream, const struct zc_seg *seg)
{
	struct bput *p = stream;
	const uint8_t *b = seg->ptr;
	size_t n = seg->len;

	if (p->direct)
		return s3_brpc_put_write(p->direct, seg);
	while (n > 0) {
		struct chunk *c;
		size_t take;

		if (p->held == BCL_PIECE) { /* more follows: the held piece is not the last */
			char k[BCL_PIECE_KEY];
			int rc;

			piece_key(p, p->npieces, k);
			rc = write_held(p, S3_RESERVED_BUCKET, k, "piece", "", 0, NULL, NULL);
			if (rc < 0)
				return rc;
			p->npieces++;
		}
		c = p->nch ? p->ch[p->nch - 1] : NULL;
		if (!c || c->len == BCL_CHUNK) {
			c = malloc(sizeof(*c));
			if (!c)
				return -ENOMEM;
			zc_ref_init(&c->ref, chunk_release);
			c->len = 0;
			p->ch[p->nch++] = c;
		}
		take = BCL_CHUNK - c->len < n ? BCL_CHUNK - c->len : n;
		memcpy(c->data + c->len, b, take);
		c->len += take;
		p->held += take;
		b += take;
		n -= take;
	}
	return 0;
}

int
s3_bcl_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
                  const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct bput *p = stream;
	struct s3_objref *refs = NULL;
	char *keys = NULL; /* npieces x BCL_PIECE_KEY */
	char prefix[BCL_PIECE_KEY];
	int rc;

	if (p->direct) {
		rc = s3_brpc_put_commit(p->direct, etag, attrs, attrs_len, cond, out);
		p->direct = NULL;
		bput_free(p);
		return rc;
	}
	if (!p->npieces) { /* it fit one piece: one write, under the request's condition */
		rc = write_held(p, p->bucket, p->key, etag, attrs, attrs_len, cond, out);
		bput_free(p);
		return rc;
	}
	if (p->held) {
		char k[BCL_PIECE_KEY];

		piece_key(p, p->npieces, k);
		rc = write_held(p, S3_RESERVED_BUCKET, k, "piece", "", 0, NULL, NULL);
		if (rc < 0)
			goto out;
		p->npieces++;
	}
	refs = calloc(p->npieces, sizeof(*refs));
	keys = calloc(p->npieces, BCL_PIECE_KEY);
	rc = refs && keys ? 0 : -ENOMEM;
	for (unsigned i = 0; !rc && i < p->npieces; i++) {
		piece_key(p, i, keys + (size_t)i * BCL_PIECE_KEY);
		refs[i] = (struct s3_objref){ S3_RESERVED_BUCKET, keys + (size_t)i * BCL_PIECE_KEY,
			                      NULL };
	}
	snprintf(prefix, sizeof(prefix), "c/%016" PRIx64 "/", p->id);
	if (!rc)
		rc = s3_bcl_compose_prefix(p->b, p->bucket, p->key, S3_RESERVED_BUCKET, prefix,
		                           refs, p->npieces, etag, attrs, attrs_len, cond, out);
	if (rc == 0)
		p->npieces = 0; /* the object's now */
out:
	drop_pieces(p);
	free(refs);
	free(keys);
	bput_free(p);
	return rc;
}

void
s3_bcl_put_abort(void *stream)
{
	struct bput *p = stream;

	if (p->direct)
		s3_brpc_put_abort(p->direct);
	drop_pieces(p);
	bput_free(p);
}
