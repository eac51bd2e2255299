/* cl_members' private parts: the mark keys' reader (cl_members_marks.c). */
#ifndef ZEST_CL_MEMBERS_INTERNAL_H
#define ZEST_CL_MEMBERS_INTERNAL_H

#include "cl_members.h"

/* Read /zest/drain/ and /zest/maintenance/ at revision rev (serializable; 0: newest,
 * linearizable) into *out (*n entries; names owned, free with clm_marks_free). A value
 * that does not parse is left out. Returns 0 or the etcd error. */
int clm_marks_read(struct cl_etcd *c, int64_t rev, struct cl_members_mark **out, size_t *n);
void clm_marks_free(struct cl_members_mark *marks, size_t n);

#endif
