#include "zc_ref.h"

atomic_long zc_ref_live_count;
