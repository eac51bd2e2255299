/*
 * zc_err: zest's error vocabulary, one enum from the engine to the S3 answer.
 *
 * Functions return >= 0 or a negative error: either -errno (system errors: -EIO, -ENOMEM,
 * -EINVAL for a bad argument, ...) or ZC_E(code) for what only zest can say (no such
 * bucket as against no such key, write quorum lost, a condition that failed). The datanode
 * sends the code across gRPC in the trailing metadata "zest-err" (never as text to parse;
 * the status message is for people), the rpc client gives it back as ZC_E(code), and the
 * gateway maps codes to S3 errors in one table (s3_err_from_errno).
 */
#ifndef ZEST_ZC_ERR_H
#define ZEST_ZC_ERR_H

enum zc_code {
	ZC_OK = 0,
	ZC_NO_BUCKET,        /* NoSuchBucket */
	ZC_NO_KEY,           /* NoSuchKey */
	ZC_BUCKET_EXISTS,    /* BucketAlreadyOwnedByYou */
	ZC_BUCKET_NOT_EMPTY, /* BucketNotEmpty */
	ZC_INVALID,          /* InvalidArgument: a request the store refuses */
	ZC_BAD_DIGEST,       /* BadDigest: a checksum did not match */
	ZC_PRECONDITION,     /* PreconditionFailed: If-Match / If-None-Match did not hold */
	ZC_SLOW_DOWN,        /* SlowDown: busy (admission, memory), retry later */
	ZC_NO_SPACE,         /* InsufficientStorage: too few drives have room */
	ZC_NO_QUORUM,        /* ServiceUnavailable: too few writable drives (failed ones) */
	ZC_CHANGED,          /* a Compose part changed under the call: retry */
	ZC_CANCELED,         /* RequestCanceled */
	ZC_NOT_IMPLEMENTED,  /* NotImplemented */
	ZC_UNAVAILABLE,      /* the node cannot be reached */
	ZC_INTERNAL,         /* InternalError */
	ZC_CELL_EXISTS,      /* CellExists: a cluster cell of that name is on the node */
	ZC_CODE_COUNT
};

/* zest's errors sit below every errno value; ZC_E(code) is a constant expression. */
#define ZC_ERR_BASE 4096
#define ZC_E(code)  (-(ZC_ERR_BASE + (int)(code)))

/* The code an error carries: its own for ZC_E(), the nearest one for -errno (-ENOENT:
 * ZC_NO_KEY, -EAGAIN: ZC_SLOW_DOWN, ...), ZC_OK for err >= 0. */
enum zc_code zc_err_code(int err);

/* Whether err means code: the one way a caller tests an error's meaning
 * (zc_err_is(err, ZC_NO_KEY), never err == -ENOENT || err == ZC_E(ZC_NO_KEY)). */
static inline int
zc_err_is(int err, enum zc_code code)
{
	return zc_err_code(err) == code;
}

/* A word for people and logs: "NoSuchBucket", "SlowDown", ...; "InternalError" if unknown. */
const char *zc_code_word(enum zc_code code);

#endif
