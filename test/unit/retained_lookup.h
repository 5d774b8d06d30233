/*
 * retained_lookup.h: for unit tests, the message the retained store holds for one topic,
 * found the way the broker finds it for a plain filter (retain_for_each_match), checking
 * that there is at most one. Test helpers only: nothing here is linked into the broker.
 */
#ifndef ARBOR_TEST_RETAINED_LOOKUP_H
#define ARBOR_TEST_RETAINED_LOOKUP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "retain.h"

struct retained_lookup {
    const struct message *msg;
    int calls;
};

static inline void retained_lookup_note(struct message *msg, void *ctx)
{
    struct retained_lookup *lookup = ctx;
    lookup->msg = msg;
    lookup->calls++;
}

/* What the store holds for topic, or NULL. */
static inline const struct message *retained_held(struct retained_store *store,
                                                  const char *topic)
{
    struct retained_lookup lookup = {0};
    retain_for_each_match(store, topic, strlen(topic), retained_lookup_note, &lookup);
    assert_true(lookup.calls <= 1);
    return lookup.msg;
}

#endif
