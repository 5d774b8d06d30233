/*
 * priority.h: MQTT-ST priority vectors and the one place where they are compared.
 *
 * A priority vector says "through this sender, root R (with capability Cr) is reachable at cost
 * P". Vectors are compared field by field, first difference wins:
 *   1. root: higher root capability, then lower root identity (address, then port);
 *   2. lower root path cost (microseconds, the sum of smoothed RTTs);
 *   3. sender: higher sender capability, then lower sender identity.
 * This is a total order whenever identities are unique, so every broker reaches the same
 * answer. Pure functions only.
 */
#ifndef ARBOR_STP_PRIORITY_H
#define ARBOR_STP_PRIORITY_H

#include "identity.h"

struct stp_priority {
    uint32_t root_capability;
    struct stp_broker_id root_id;
    uint32_t root_cost_us;
    uint32_t sender_capability;
    struct stp_broker_id sender_id;
};

/* <0 when broker a would be the better root (higher capability, then lower identity). */
int stp_compare_broker(uint32_t capability_a, const struct stp_broker_id *id_a,
                       uint32_t capability_b, const struct stp_broker_id *id_b);

/* Compares only the root part (step 1). */
int stp_compare_root(const struct stp_priority *a, const struct stp_priority *b);

/* Compares whole vectors (steps 1 to 3); <0 when a is better. */
int stp_compare_priority(const struct stp_priority *a, const struct stp_priority *b);

bool stp_priority_equal(const struct stp_priority *a, const struct stp_priority *b);

/* Addition that sticks at UINT32_MAX, which means "unreachable". */
uint32_t stp_cost_add(uint32_t a, uint32_t b);

#endif
