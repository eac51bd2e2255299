/* dn_health: the cluster health gauge over the small keys (dn_health.h). */
#include <stdio.h>

#include "dn_health.h"
#include "cl_health.h"
#include "zc.h"

#define DN_HEALTH_TIMEOUT_MS 2000 /* per Range: a scrape never waits long on etcd */

static void
refresh(struct dn_health *d, struct cl_etcd *etcd, unsigned group_cells)
{
	struct cl_health h;
	int rc;

	cl_health_init(&h);
	/* no record is read: the nodes, the cellcheck keys and the to-do keys decide. A
	 * failed read is no knowledge, so never OK. */
	rc = cl_health_read_keys(etcd, &h, DN_HEALTH_TIMEOUT_MS);
	d->state = CL_HEALTH_WARN;
	d->absent = d->checking = 0;
	if (rc == 0) {
		d->state = (int)cl_health_state(&h);
		d->absent = (unsigned long long)cl_health_nodes_absent(&h);
		d->checking = (unsigned long long)cl_health_nodes_checking(&h);
		/* too few nodes for node-distinct groups: a doubled group written now has no
		 * to-do key the gauge could count */
		if (d->state == CL_HEALTH_OK && cl_health_nodes_live(&h) < group_cells)
			d->state = CL_HEALTH_WARN;
	} else {
		ZC_DBG("health", "etcd unreadable for zest_cluster_health err=%d", rc);
	}
	cl_health_fini(&h);
	d->read_ns = zc_now_ns();
}

void
dn_health_metrics(struct dn_health *d, struct cl_etcd *etcd, unsigned group_cells, FILE *out)
{
	uint64_t now = zc_now_ns();

	if (!d->read_ns || now - d->read_ns >= (uint64_t)DN_HEALTH_REUSE_MS * 1000000u)
		refresh(d, etcd, group_cells);
	fprintf(out,
	        "# HELP zest_cluster_health The cluster's health from the membership, the "
	        "cellcheck keys and the heal to-do keys: 0 OK, 1 WARN (or etcd unreadable), "
	        "2 ERR; zest-admin status reads every record.\n"
	        "# TYPE zest_cluster_health gauge\n"
	        "zest_cluster_health %d\n"
	        "# HELP zest_cluster_nodes_absent Members with no live registration.\n"
	        "# TYPE zest_cluster_nodes_absent gauge\n"
	        "zest_cluster_nodes_absent %llu\n"
	        "# HELP zest_cluster_nodes_checking Live nodes whose store is not yet checked "
	        "against the records.\n"
	        "# TYPE zest_cluster_nodes_checking gauge\n"
	        "zest_cluster_nodes_checking %llu\n",
	        d->state, d->absent, d->checking);
}
