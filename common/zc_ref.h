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
 * to zero at shutdown, so any leak or double release fails a test. The count is kept in
 * per-thread slots (a reference taken on one thread and put on another leaves +1 and -1
 * that sum to zero), so get and put never share a cache line between threads.
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

/* References taken and not yet put, in slots of 64 bytes; a thread uses its own slot
 * (threads beyond ZC_REF_SLOTS share one, still correctly). */
#define ZC_REF_SLOTS 64
struct zc_ref_slot {
	atomic_long n;
	char pad[64 - sizeof(atomic_long)];
};
extern struct zc_ref_slot zc_ref_live_slots[ZC_REF_SLOTS];
extern _Thread_local atomic_long *zc_ref_my_slot;
atomic_long *zc_ref_slot_take(void);

static inline void
zc_ref_count(long delta)
{
	atomic_long *slot = zc_ref_my_slot;

	if (!slot)
		slot = zc_ref_slot_take();
	atomic_fetch_add_explicit(slot, delta, memory_order_relaxed);
}

/* Start a holder with one reference, owned by the caller. */
static inline void
zc_ref_init(struct zc_ref *ref, void (*release)(struct zc_ref *))
{
	atomic_init(&ref->refs, 1);
	ref->release = release;
	zc_ref_count(1);
}

static inline void
zc_ref_get(struct zc_ref *ref)
{
	atomic_fetch_add_explicit(&ref->refs, 1, memory_order_relaxed);
	zc_ref_count(1);
}

static inline void
zc_ref_put(struct zc_ref *ref)
{
	zc_ref_count(-1);
	if (atomic_fetch_sub_explicit(&ref->refs, 1, memory_order_acq_rel) == 1)
		ref->release(ref);
}

/* The sum over all slots; exact once the threads that hold references are quiet. */
long zc_ref_live(void);

/* A span of payload and the reference that keeps it alive (NULL: static memory). */
struct zc_seg {
	const uint8_t *ptr;
	size_t len;
	struct zc_ref *ref;
};

#endif
