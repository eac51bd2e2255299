/* dn_health: the cluster health gauge over the small keys (dn_health.h). */
#include <stdio.h>

#include "dn_health.h"
#include "cl_health.h"

#define DN_HEALTH_TIMEOUT_MS 2000 /* per Range: a scrape never waits long on etcd */

void
dn_health_metrics(struct cl_etcd *etcd, unsigned group_cells, FILE *out)
{
	struct cl_health h;
	int state = CL_HEALTH_WARN, rc;

	cl_health_init(&h);
	/* no record is read: the nodes, the cellcheck keys and the to-do keys decide. A
	 * failed read is no knowledge, so never OK. */
	rc = cl_health_read_keys(etcd, &h, DN_HEALTH_TIMEOUT_MS);
	if (rc == 0)
		state = (int)cl_health_state(&h);
	/* too few nodes for node-distinct groups: the doubled groups written now have no
	 * to-do key the gauge could count */
	if (rc == 0 && state == CL_HEALTH_OK && cl_health_nodes_live(&h) < group_cells)
		state = CL_HEALTH_WARN;
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
	        state, rc ? 0ull : (unsigned long long)cl_health_nodes_absent(&h),
	        rc ? 0ull : (unsigned long long)cl_health_nodes_checking(&h));
	cl_health_fini(&h);
}
