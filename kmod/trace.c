// SPDX-License-Identifier: GPL-2.0
/* The module's tracepoints (trace.h), instantiated once. */
#define CREATE_TRACE_POINTS
#include "trace.h"
