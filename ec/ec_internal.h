/* Private to ec/: the codec's fields, shared by ec_codec.c and ec_stripe.c. */
#ifndef ZEST_EC_INTERNAL_H
#define ZEST_EC_INTERNAL_H

#include <pthread.h>

#include "ec.h"

/* ISA-L takes lengths as int; longer buffers are walked in steps of this size. */
#define EC_STEP (1u << 30)

#define EC_DECODE_CACHE 64 /* erasure patterns remembered per codec */

struct ec_decode_entry {
	uint32_t erased; /* 0 = empty slot (a pattern always erases something) */
	unsigned char *tables;
};

struct ec_codec {
	unsigned k, m;
	unsigned char *matrix;     /* (k + m) x k generator, identity on top */
	unsigned char *enc_tables; /* ec_init_tables of the m parity rows */
	unsigned char *col_tables; /* per data column: k=1 tables of its m coefficients */

	pthread_mutex_t cache_lock;
	struct ec_decode_entry cache[EC_DECODE_CACHE];
	unsigned cache_next; /* round-robin victim */
};

#endif
