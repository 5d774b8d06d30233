/*
 * persist_hooks.h: what the core (sessions, their outbound flow, the retained store) tells
 * persistence, without depending on it. persist.c points broker->persist_hooks at its own
 * functions when persistence is on; each wrapper here does nothing without it. Packet
 * handlers, which sit above both, call persist.h directly.
 */
#ifndef ARBOR_PERSIST_HOOKS_H
#define ARBOR_PERSIST_HOOKS_H

#include "broker.h"

struct persist_hooks {
    void (*retained_changed)(struct broker *broker, const struct message *msg);
    void (*session_changed)(struct broker *broker, struct session *session);
    void (*session_removed)(struct broker *broker, struct session *session);
    void (*delivery_changed)(struct broker *broker, struct session *session,
                             struct delivery *delivery);
    void (*delivery_released)(struct broker *broker, struct delivery *delivery);
    /* A QoS 2 delivery's PUBREC came: its message is released, the PUBREL flow stays. */
    void (*delivery_drops_message)(struct broker *broker, struct delivery *delivery);
};

static inline void persist_hook_retained_changed(struct broker *broker, const struct message *msg)
{
    if (broker->persist_hooks) broker->persist_hooks->retained_changed(broker, msg);
}

static inline void persist_hook_session_changed(struct broker *broker, struct session *session)
{
    if (broker->persist_hooks) broker->persist_hooks->session_changed(broker, session);
}

static inline void persist_hook_session_removed(struct broker *broker, struct session *session)
{
    if (broker->persist_hooks) broker->persist_hooks->session_removed(broker, session);
}

static inline void persist_hook_delivery_changed(struct broker *broker, struct session *session,
                                                 struct delivery *delivery)
{
    if (broker->persist_hooks) broker->persist_hooks->delivery_changed(broker, session, delivery);
}

static inline void persist_hook_delivery_released(struct broker *broker, struct delivery *delivery)
{
    if (broker->persist_hooks) broker->persist_hooks->delivery_released(broker, delivery);
}

static inline void persist_hook_delivery_drops_message(struct broker *broker,
                                                      struct delivery *delivery)
{
    if (broker->persist_hooks) broker->persist_hooks->delivery_drops_message(broker, delivery);
}

#endif
