/* cl_health's private parts: the drain, maintenance and progress reasons (cl_health_drain.c). */
#ifndef ZEST_CL_HEALTH_INTERNAL_H
#define ZEST_CL_HEALTH_INTERNAL_H

#include "cl_health.h"

struct cl_health_node *clh_find(struct cl_health *h, const char *name);
/* The reasons' messages, into buf (cap bytes). */
void clh_maint_msg(const struct cl_health *h, char *buf, size_t cap);
void clh_drain_msg(const struct cl_health *h, char *buf, size_t cap);
void clh_progress_msg(const struct cl_health_progress *p, char *buf, size_t cap);

#endif
