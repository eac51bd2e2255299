#include <errno.h>

#include "zc_err.h"

enum zc_code
zc_err_code(int err)
{
	if (err >= 0)
		return ZC_OK;
	if (err <= -ZC_ERR_BASE && err > -(ZC_ERR_BASE + ZC_CODE_COUNT))
		return (enum zc_code)(-err - ZC_ERR_BASE);
	switch (err) {
	case -EINVAL:
	case -E2BIG:
	case -EMSGSIZE:
	case -ENAMETOOLONG:
		return ZC_INVALID;
	case -EBADMSG:
		return ZC_BAD_DIGEST;
	case -ENOENT:
		return ZC_NO_KEY;
	case -EEXIST:
		return ZC_BUCKET_EXISTS;
	case -ENOTEMPTY:
		return ZC_BUCKET_NOT_EMPTY;
	case -EAGAIN:
	case -ENOMEM:
		return ZC_SLOW_DOWN;
	case -ENOSPC:
		return ZC_NO_SPACE;
	case -ECANCELED:
		return ZC_CANCELED;
	case -EOPNOTSUPP:
	case -ENOSYS:
		return ZC_NOT_IMPLEMENTED;
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EPIPE:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
		return ZC_UNAVAILABLE;
	default:
		return ZC_INTERNAL;
	}
}

const char *
zc_code_word(enum zc_code code)
{
	static const char *const words[ZC_CODE_COUNT] = {
		[ZC_OK] = "OK",
		[ZC_NO_BUCKET] = "NoSuchBucket",
		[ZC_NO_KEY] = "NoSuchKey",
		[ZC_BUCKET_EXISTS] = "BucketAlreadyOwnedByYou",
		[ZC_BUCKET_NOT_EMPTY] = "BucketNotEmpty",
		[ZC_INVALID] = "InvalidArgument",
		[ZC_BAD_DIGEST] = "BadDigest",
		[ZC_PRECONDITION] = "PreconditionFailed",
		[ZC_SLOW_DOWN] = "SlowDown",
		[ZC_NO_SPACE] = "InsufficientStorage",
		[ZC_NO_QUORUM] = "ServiceUnavailable",
		[ZC_CHANGED] = "SlowDown",
		[ZC_CANCELED] = "RequestCanceled",
		[ZC_NOT_IMPLEMENTED] = "NotImplemented",
		[ZC_UNAVAILABLE] = "ServiceUnavailable",
		[ZC_INTERNAL] = "InternalError",
		[ZC_CELL_EXISTS] = "CellExists",
	};

	return (unsigned)code < ZC_CODE_COUNT ? words[code] : "InternalError";
}
