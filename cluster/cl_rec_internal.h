/* cl_rec's private half: the record rules (cl_rec_check.c) that the encoders and
 * decoders (cl_rec.c) share. Each returns 0, or -1 with the broken rule in why. */
#ifndef ZEST_CL_REC_INTERNAL_H
#define ZEST_CL_REC_INTERNAL_H

#include <stddef.h>

#include "cl_rec.h"

int cl_rec_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cl_rec_check_node(const struct cl_rec_node *v, char *why, size_t cap);
int cl_rec_check_member(const struct cl_rec_member *v, char *why, size_t cap);
int cl_rec_check_object(const struct cl_rec_object *v, char *why, size_t cap);

#endif
