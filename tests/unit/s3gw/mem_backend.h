/*
 * TEST DOUBLE: an in-memory struct s3_backend for the gateway's tests. It copies every
 * payload byte it is given (it is a stand-in for the datanodes, not part of zest) and
 * serialises all calls with one mutex (a GET copies its range out under it and writes
 * without it). Never used by the real gateway.
 * Buckets named "zc-*" keep each put_write segment by reference (zc_ref_get) until
 * commit, as the zero-copy rpc client will.
 * Buckets named "discard-*" keep no payload (objects are stored empty), so tests can
 * stream huge bodies and measure the gateway's own memory.
 * Buckets named "xdev-*" stand for objects on another datanode: compose between such a
 * bucket and any other one fails with -EXDEV (the gateway then streams a copy).
 * Write conditions (struct s3_cond) are checked under the lock, with the commit.
 */
#ifndef ZEST_TEST_MEM_BACKEND_H
#define ZEST_TEST_MEM_BACKEND_H

#include "s3.h"

/* Create the backend; free with mem_backend_destroy(). NULL on ENOMEM. */
struct s3_backend *mem_backend_create(void);
void mem_backend_destroy(struct s3_backend *be);
/* Objects stored across all buckets (the reserved one included). */
size_t mem_backend_count(const struct s3_backend *be);

#endif
