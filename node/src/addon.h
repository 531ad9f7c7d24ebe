/* What the addon's files share: the reading of a call (calls.h) and the state of one Node
 * environment (instance.h). Everything here runs on that environment's JavaScript thread, which
 * is its loop's thread; so do the bridge's callbacks. addon.c, the module's entry, declares
 * nothing: it is the top, and no file calls it; exports.c, the export table, is the one file below
 * it. */
#ifndef CUV_NODE_ADDON_H
#define CUV_NODE_ADDON_H

#include "calls.h"
#include "instance.h"

#endif
