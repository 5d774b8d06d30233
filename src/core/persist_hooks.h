/*
 * persist_hooks.h: what the core (sessions, their outbound flow, the retained store) tells
 * persistence, without depending on it. persist.c points broker->shared->persist_hooks at its own
 * functions when persistence is on; each wrapper here does nothing without it. Packet
 * handlers, which sit above both, call persist.h directly.
 */
#ifndef ARBOR_PERSIST_HOOKS_H
#define ARBOR_PERSIST_HOOKS_H

#include "broker_shared.h"

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

static inline const struct persist_hooks *persist_hooks_of(const struct broker *broker)
{
    return broker->shared->persist_hooks;
}

static inline void persist_hook_retained_changed(struct broker *broker, const struct message *msg)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->retained_changed(broker, msg);
}

static inline void persist_hook_session_changed(struct broker *broker, struct session *session)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->session_changed(broker, session);
}

static inline void persist_hook_session_removed(struct broker *broker, struct session *session)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->session_removed(broker, session);
}

static inline void persist_hook_delivery_changed(struct broker *broker, struct session *session,
                                                 struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_changed(broker, session, delivery);
}

static inline void persist_hook_delivery_released(struct broker *broker, struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_released(broker, delivery);
}

static inline void persist_hook_delivery_drops_message(struct broker *broker,
                                                      struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_drops_message(broker, delivery);
}

#endif
