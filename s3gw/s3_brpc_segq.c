/*
 * s3_brpc_segq: the queue of received segments of one datanode read stream (the rpc
 * backend's GET, the cluster backend's ReadCell), shared by both backends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3_backend_rpc_internal.h"

int
s3_segq_push(struct s3_segq *sq, const struct zc_seg *segs, size_t n)
{
	if (sq->head + sq->n + n > sq->cap) {
		/* compact, then grow */
		if (sq->n)
			memmove(sq->q, sq->q + sq->head, sq->n * sizeof(*sq->q));
		sq->head = 0;
		if (sq->n + n > sq->cap) {
			size_t nc = sq->cap ? sq->cap * 2 : 64;
			void *nq;

			while (nc < sq->n + n)
				nc *= 2;
			nq = realloc(sq->q, nc * sizeof(*sq->q));
			if (!nq)
				return -ENOMEM;
			sq->q = nq;
			sq->cap = nc;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (segs[i].ref)
			zc_ref_get(segs[i].ref);
		sq->q[sq->head + sq->n++] = segs[i];
	}
	return 0;
}

bool
s3_segq_pop(struct s3_segq *sq, struct zc_seg *out)
{
	if (!sq->n)
		return false;
	*out = sq->q[sq->head++];
	sq->n--;
	return true;
}

void
s3_segq_fini(struct s3_segq *sq)
{
	for (size_t i = 0; i < sq->n; i++)
		if (sq->q[sq->head + i].ref)
			zc_ref_put(sq->q[sq->head + i].ref);
	free(sq->q);
	*sq = (struct s3_segq){ 0 };
}
