/*
 * stp_changes.h: what `arbor_stp watch` reports: the meaningful differences between two views
 * of one broker (stp_view.h): its identity or capability, its root (or only its root link),
 * its epoch and topology change count, a peer link appearing or disappearing, a link's state,
 * role or forwarding. Counters, RTTs and costs are not changes. Pure: lines go to a callback,
 * without timestamps (the caller adds them).
 */
#ifndef ARBOR_STP_CHANGES_H
#define ARBOR_STP_CHANGES_H

#include <stddef.h>

#include "stp_view.h"

typedef void (*stp_change_fn)(void *ctx, const char *line);

/* Calls emit once per change from before to after, broker-wide changes first, then the peers
 * in identity order; returns how many lines it emitted (0 also when memory ran out). */
size_t stp_changes(const struct stp_view *before, const struct stp_view *after,
                   stp_change_fn emit, void *ctx);

/* One line describing a view as a whole (where a watch starts from): identity, root and path,
 * epoch and every peer link. A string to free, or NULL when memory ran out. */
char *stp_changes_describe(const struct stp_view *v);

#endif
