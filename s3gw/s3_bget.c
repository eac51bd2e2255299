/* s3_backend_get: a backend's blocking read over its pulled form (s3_ops_internal.h). */
#include <errno.h>
#include <stdlib.h>

#include "s3_ops_internal.h"

int
s3_backend_get(const struct s3_backend *be, const char *bucket, const char *key, uint64_t off,
               uint64_t len, bool has_len, s3_info_fn on_info, s3_span_fn emit, void *arg)
{
	struct s3_obj_info *info;
	struct zc_seg seg;
	void *g = NULL;
	int rc, n;

	if (!be->get_open)
		return be->get(be->ctx, bucket, key, off, len, has_len, on_info, emit, arg);
	info = malloc(sizeof(*info)); /* ~4 KiB of attributes: not on a worker's stack */
	if (!info)
		return -ENOMEM;
	rc = be->get_open(be->ctx, bucket, key, off, len, has_len, info, &g);
	if (rc == 0)
		rc = on_info(arg, info);
	free(info);
	while (rc == 0 && g && (n = be->get_next(g, &seg)) != 0) {
		if (n < 0) {
			rc = n;
			break;
		}
		rc = emit(arg, seg.ptr, seg.len);
		if (seg.ref)
			zc_ref_put(seg.ref);
	}
	if (g)
		be->get_close(g);
	return rc;
}
