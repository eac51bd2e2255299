/*
 * s3_mpu_state: who ends a multipart upload. An Abort and a Complete of one upload race
 * for its record (u/<bucket>/<upload-id>): each first rewrites the record with its mark
 * ("zest-state:aborting" or "zest-state:completing") under If-Match on the ETag it read,
 * which the backend checks atomically with the write (a datanode's commit transaction; in
 * cluster mode the commit Txn's compare on the record's mod_revision). Every mark draws a
 * new random ETag, so of two requests that read the same record exactly one mark goes in
 * and the other reads the record again and finds the winner's. Only the winner touches
 * the parts: an Abort deletes nothing before its mark is in, and a Complete composes
 * nothing before its own. In cluster mode the Complete's Txn is fenced on the record's
 * mod_revision as well (cl_meta_compose_upload), so a record changed after the mark (a
 * stale mark taken over, below) fences the compose off.
 *
 * A mark is not forever: a Complete that fails after its mark (a part changed, the target's
 * condition, a 503) puts the record back to open, and a Complete whose gateway died after
 * it marked leaves "completing", which a retried Complete continues and which an Abort
 * takes over once it is older than MPU_STALE_NS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "s3_ops_internal.h"
#include "zc.h"

/* A "completing" mark older than this is a Complete that died: an Abort may take it. Far
 * past any Complete's own deadlines (its backend calls give up after seconds). */
#define MPU_STALE_NS (10ull * 60 * 1000000000)

static const char *const state_name[] = {
	[S3_MPU_OPEN] = "", [S3_MPU_COMPLETING] = "completing", [S3_MPU_ABORTING] = "aborting"
};

enum s3_mpu_state
s3_mpu_rec_state(const struct mpu_rec *r)
{
	const char *v;
	int n = s3_attr_get(r->info.attrs, r->info.attrs_len, "zest-state", &v);

	if (n == 10 && strncmp(v, "completing", 10) == 0)
		return S3_MPU_COMPLETING;
	if (n == 8 && strncmp(v, "aborting", 8) == 0)
		return S3_MPU_ABORTING;
	return S3_MPU_OPEN;
}

int
s3_mpu_read(struct s3_req *rq, const char *uid, struct mpu_rec *r)
{
	char rk[160];
	int rc;

	s3_buf_fini(&r->key);
	memset(r, 0, sizeof(*r));
	s3_buf_init(&r->key, S3_MAX_KEY + 1);
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
	rc = s3_backend_get(rq->be, S3_RESERVED_BUCKET, rk, 0, 0, false, s3_mpu_rec_info,
	                    s3_mpu_rec_emit, r);
	if (rc < 0)
		return s3_err_from_errno(rc) == S3E_NO_SUCH_KEY ? S3_E(S3E_NO_SUCH_UPLOAD) : rc;
	if (!r->key.p)
		return S3_E(S3E_NO_SUCH_UPLOAD);
	return 0;
}

/* A fresh record ETag: 32 random hex digits, never an earlier one of the record. */
int
s3_mpu_rec_etag(char out[33])
{
	uint8_t rnd[16];

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	s3_hex(rnd, sizeof(rnd), out);
	return 0;
}

/*
 * Rewrite the record with state st, if it still has the ETag r holds. 0: written, r now
 * holds the new ETag and attrs; ZC_E(ZC_PRECONDITION) or a missing key: another request
 * changed or removed it first; < 0 other errors.
 */
static int
mpu_mark(struct s3_req *rq, const char *uid, struct mpu_rec *r, enum s3_mpu_state st)
{
	char rk[160], etag[33];
	struct s3_cond cond = { 0 };
	struct s3_obj_info *info = NULL;
	struct s3_buf attrs;
	size_t kl = r->key.len;
	int rc;

	if (s3_mpu_rec_etag(etag) < 0)
		return -EIO;
	/* A record written before marks existed has no ETag: nothing to fence on, so the
	 * mark is unconditional (such uploads race as they always did). */
	snprintf(cond.if_match, sizeof(cond.if_match), "%s", r->info.etag);
	s3_buf_init(&attrs, S3_ATTRS_MAX);
	for (size_t i = 0; i < r->info.attrs_len;) {
		const char *a = r->info.attrs + i;
		const char *eol = memchr(a, '\n', r->info.attrs_len - i);
		size_t ll = eol ? (size_t)(eol - a) : r->info.attrs_len - i;

		if (!(ll >= 11 && strncmp(a, "zest-state:", 11) == 0)) {
			s3_buf_add(&attrs, a, ll);
			s3_buf_add(&attrs, "\n", 1);
		}
		i += ll + 1;
	}
	if (st != S3_MPU_OPEN)
		s3_attr_add(&attrs, "zest-state", 10, state_name[st], strlen(state_name[st]));
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
	info = malloc(sizeof(*info));
	rc = attrs.err ? attrs.err : info ? 0 : -ENOMEM;
	if (rc == 0)
		rc = s3_mpu_put_record(rq, rk, r->key.p, kl, etag, attrs.p ? attrs.p : "",
		                       attrs.len, cond.if_match[0] ? &cond : NULL, info);
	if (rc == 0 && attrs.len < sizeof(r->info.attrs)) {
		snprintf(r->info.etag, sizeof(r->info.etag), "%s", etag);
		memcpy(r->info.attrs, attrs.p ? attrs.p : "", attrs.len);
		r->info.attrs_len = attrs.len;
		r->info.mtime_ns = info->mtime_ns;
	}
	free(info);
	s3_buf_fini(&attrs);
	ZC_DBG("s3", "mpu_mark upload=%s state=%s rc=%d", uid, st ? state_name[st] : "open", rc);
	return rc;
}

static bool
stale(const struct mpu_rec *r)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return r->info.mtime_ns && now > r->info.mtime_ns + MPU_STALE_NS;
}

int
s3_mpu_take(struct s3_req *rq, const char *uid, struct mpu_rec *r, enum s3_mpu_state want)
{
	for (int tries = 0; tries < 8; tries++) {
		enum s3_mpu_state st = s3_mpu_rec_state(r);
		enum s3_err e;
		int rc;

		if (st == want)
			return 0; /* a retry, or a concurrent request of the same kind */
		if (st != S3_MPU_OPEN && !(want == S3_MPU_ABORTING && stale(r)))
			return S3_E(S3E_NO_SUCH_UPLOAD); /* the other kind holds it */
		if (st != S3_MPU_OPEN)
			ZC_WARN("s3", "mpu_takeover upload=%s (a Complete's mark left 10 min ago)",
			        uid);
		rc = mpu_mark(rq, uid, r, want);
		if (rc == 0)
			return 1;
		e = s3_err_from_errno(rc);
		if (e != S3E_PRECONDITION_FAILED && e != S3E_NO_SUCH_KEY)
			return rc;
		/* another request's mark (or the record's delete) went in first: look again */
		rc = s3_mpu_read(rq, uid, r);
		if (rc < 0)
			return rc;
	}
	return ZC_E(ZC_SLOW_DOWN);
}

void
s3_mpu_release(struct s3_req *rq, const char *uid, struct mpu_rec *r)
{
	int rc = mpu_mark(rq, uid, r, S3_MPU_OPEN);

	if (rc < 0)
		ZC_WARN("s3",
		        "mpu_release upload=%s err=%d (stays completing: a retried Complete "
		        "continues it)",
		        uid, rc);
}
