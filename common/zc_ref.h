/*
 * zc_ref: the one ownership currency of the data path.
 *
 * Payload bytes live where they arrived (a gRPC receive slice, an HTTP read buffer). A
 * struct zc_seg names such bytes and carries a counted reference on whatever keeps them
 * alive. Whoever holds a segment holds one reference; a module that hands bytes to
 * another (for example one io_uring SQE per segment) takes its own reference with
 * zc_ref_get() and drops it with zc_ref_put() when done, in the same module. The last
 * put calls the owner's release callback (which, for gRPC, unrefs the slices).
 *
 * zc_ref_live() counts references alive in the whole process: tests assert it returns
 * to zero at shutdown, so any leak or double release fails a test.
 *
 * Thread-safe: get and put are atomic; the release runs on the thread of the last put.
 */
#ifndef ZEST_ZC_REF_H
#define ZEST_ZC_REF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct zc_ref {
	atomic_long refs;
	void (*release)(struct zc_ref *ref); /* frees the holder; called once */
};

/* Process-wide count of references taken and not yet put. */
extern atomic_long zc_ref_live_count;

/* Start a holder with one reference, owned by the caller. */
static inline void
zc_ref_init(struct zc_ref *ref, void (*release)(struct zc_ref *))
{
	atomic_init(&ref->refs, 1);
	ref->release = release;
	atomic_fetch_add_explicit(&zc_ref_live_count, 1, memory_order_relaxed);
}

static inline void
zc_ref_get(struct zc_ref *ref)
{
	atomic_fetch_add_explicit(&ref->refs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&zc_ref_live_count, 1, memory_order_relaxed);
}

static inline void
zc_ref_put(struct zc_ref *ref)
{
	atomic_fetch_sub_explicit(&zc_ref_live_count, 1, memory_order_relaxed);
	if (atomic_fetch_sub_explicit(&ref->refs, 1, memory_order_acq_rel) == 1)
		ref->release(ref);
}

static inline long
zc_ref_live(void)
{
	return atomic_load(&zc_ref_live_count);
}

/* A span of payload and the reference that keeps it alive (NULL: static memory). */
struct zc_seg {
	const uint8_t *ptr;
	size_t len;
	struct zc_ref *ref;
};

#endif
