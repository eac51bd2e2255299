/* rpc client: placeholder until the next commit. */
#include "rpc_internal.h"
