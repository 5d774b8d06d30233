/*
 * bridge_marks.h: the names of the bridges messages entered the tree over, as small numbers
 * (message_origin.bridge). A message that came in from a bridge's remote broker must never be
 * sent to a bridge of the same name, on this broker or on any other of the tree
 * (docs/mqtt-st-protocol.md 7.5), so the name travels with it between peers and is kept here
 * once: this broker's bridges first (so a bridge's number is its 1-based index), then the
 * names peers send. Shared state of the broker; a handful of names, searched in order.
 */
#ifndef ARBOR_BRIDGE_MARKS_H
#define ARBOR_BRIDGE_MARKS_H

#include <stddef.h>
#include <stdint.h>

#define BRIDGE_MARKS_MAX 1024 /* names kept at most; past that a peer's new name is not */

struct bridge_marks {
    char **names; /* names[i] is mark i + 1 */
    uint32_t count, cap;
};

/* The mark of name (added if new); 0 when out of memory or BRIDGE_MARKS_MAX are kept. */
uint32_t bridge_marks_intern(struct bridge_marks *marks, const char *name, size_t len);
/* The name of mark (1-based), or NULL for 0 and unknown marks. */
const char *bridge_marks_name(const struct bridge_marks *marks, uint32_t mark);
void bridge_marks_free(struct bridge_marks *marks);

#endif
