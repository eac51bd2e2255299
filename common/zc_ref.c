#include "zc_ref.h"

struct zc_ref_slot zc_ref_live_slots[ZC_REF_SLOTS];
_Thread_local atomic_long *zc_ref_my_slot;

atomic_long *
zc_ref_slot_take(void)
{
	static atomic_uint next;

	zc_ref_my_slot = &zc_ref_live_slots[atomic_fetch_add(&next, 1) % ZC_REF_SLOTS].n;
	return zc_ref_my_slot;
}

long
zc_ref_live(void)
{
	long sum = 0;

	for (unsigned i = 0; i < ZC_REF_SLOTS; i++)
		sum += atomic_load_explicit(&zc_ref_live_slots[i].n, memory_order_relaxed);
	return sum;
}
