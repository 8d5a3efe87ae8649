/* timer.h — connection timeouts as intrusive FIFO lists, one per duration.
 *
 * Every connection waiting on the same kind of timeout waits the same length
 * of time, so arming appends at the tail and the list stays sorted by
 * deadline: arm, disarm and "what expires next" are all O(1), with no heap
 * and no allocation (the nginx/libev "timer list" idea). */
#ifndef CSERVE_TIMER_H
#define CSERVE_TIMER_H

#include <stddef.h>
#include <stdint.h>

struct timer_link {
    struct timer_link *prev, *next;
    struct timer_list *list; /* NULL when not armed */
    uint64_t deadline_ms;
};

struct timer_list {
    struct timer_link head; /* sentinel */
    uint64_t timeout_ms;
};

static inline void timer_list_init(struct timer_list *l, uint64_t timeout_ms)
{
    l->head.prev = l->head.next = &l->head;
    l->head.list = l;
    l->timeout_ms = timeout_ms;
}

static inline void timer_disarm(struct timer_link *t)
{
    if (!t->list)
        return;
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->list = NULL;
}

/* (Re)arm t on l to expire timeout_ms after now_ms. */
static inline void timer_arm(struct timer_list *l, struct timer_link *t, uint64_t now_ms)
{
    timer_disarm(t);
    t->deadline_ms = now_ms + l->timeout_ms;
    t->list = l;
    t->prev = l->head.prev;
    t->next = &l->head;
    l->head.prev->next = t;
    l->head.prev = t;
}

/* The first link whose deadline has passed, or NULL. */
static inline struct timer_link *timer_expired(struct timer_list *l, uint64_t now_ms)
{
    struct timer_link *t = l->head.next;
    return (t != &l->head && t->deadline_ms <= now_ms) ? t : NULL;
}

/* Milliseconds until the list's first deadline (0 if passed), or UINT64_MAX. */
static inline uint64_t timer_next_ms(const struct timer_list *l, uint64_t now_ms)
{
    const struct timer_link *t = l->head.next;
    if (t == &l->head)
        return UINT64_MAX;
    return t->deadline_ms > now_ms ? t->deadline_ms - now_ms : 0;
}

#endif
