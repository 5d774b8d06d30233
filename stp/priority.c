/*
 * priority.c: comparison of brokers and priority vectors (see priority.h for the order).
 * Every tie-break of MQTT-ST lives here so that the rules cannot drift apart between the
 * root election, the root-link choice and the designated/blocked labelling.
 */
#include "priority.h"

static int compare_higher_first(uint32_t a, uint32_t b)
{
    return (a < b) - (a > b);
}

static int compare_lower_first(uint32_t a, uint32_t b)
{
    return (a > b) - (a < b);
}

int stp_compare_broker(uint32_t capability_a, const struct stp_broker_id *id_a,
                       uint32_t capability_b, const struct stp_broker_id *id_b)
{
    int by_capability = compare_higher_first(capability_a, capability_b);
    if (by_capability != 0) return by_capability;
    return stp_broker_id_compare(id_a, id_b);
}

int stp_compare_root(const struct stp_priority *a, const struct stp_priority *b)
{
    return stp_compare_broker(a->root_capability, &a->root_id, b->root_capability, &b->root_id);
}

int stp_compare_priority(const struct stp_priority *a, const struct stp_priority *b)
{
    int result = stp_compare_root(a, b);
    if (result != 0) return result;
    result = compare_lower_first(a->root_cost_us, b->root_cost_us);
    if (result != 0) return result;
    return stp_compare_broker(a->sender_capability, &a->sender_id, b->sender_capability,
                              &b->sender_id);
}

bool stp_priority_equal(const struct stp_priority *a, const struct stp_priority *b)
{
    return stp_compare_priority(a, b) == 0;
}

uint32_t stp_cost_add(uint32_t a, uint32_t b)
{
    uint32_t sum = a + b;
    return sum < a ? UINT32_MAX : sum;
}
