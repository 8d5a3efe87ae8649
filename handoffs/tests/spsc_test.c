/* spsc_test.c — spsc_ring.h on its own, at its full path: a producer that
 * pushes as fast as the ring lets it (retrying while push says full) and a
 * consumer that pops, on a ring of capacity 2, so every slot is rewritten on
 * every lap while the consumer may still be reading it.
 *
 *   spsc_test [ITEMS]   (default 200000)
 *
 * Checks FIFO order with nothing lost or doubled, and that the producer's
 * write of an item's payload is visible to the consumer. Run under TSan it
 * also checks the two pairs of spsc_ring.h: R1/A1 (slot and payload written
 * before the consumer reads them) and R2/A2 (the consumer's read of a slot
 * before the producer's next write to it). In the server the second pair is
 * backed up by the capacity rule (a slot is reused only after its job came
 * back through the other ring); here nothing backs it up, which is why this
 * test and not the handoff stress catches the R2/A2 mutants. */
#include "../spsc_ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct job {
    unsigned long seq;
    unsigned long check; /* written by the producer before the push */
};

static struct spsc_ring ring;
static struct job *items;
static unsigned long n_items;

static void *producer(void *p)
{
    (void)p;
    for (unsigned long i = 0; i < n_items; i++) {
        items[i].seq = i;
        items[i].check = i * 2654435761u;
        while (!spsc_push(&ring, &items[i]))
            ; /* full: the consumer is behind */
    }
    return NULL;
}

static void *consumer(void *p)
{
    (void)p;
    for (unsigned long want = 0; want < n_items;) {
        struct job *j = spsc_pop(&ring);
        if (!j)
            continue;
        if (j->seq != want || j->check != want * 2654435761u) {
            fprintf(stderr, "spsc_test: FAIL: popped seq %lu (check %lu), expected %lu\n", j->seq,
                    j->check, want);
            exit(1);
        }
        want++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    n_items = argc > 1 ? strtoul(argv[1], NULL, 0) : 200000;
    items = calloc(n_items, sizeof *items);
    if (!items || spsc_init(&ring, 2) < 0) {
        perror("spsc_test");
        return 2;
    }
    pthread_t a, b;
    pthread_create(&a, NULL, producer, NULL);
    pthread_create(&b, NULL, consumer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (spsc_pop(&ring) != NULL) {
        fprintf(stderr, "spsc_test: FAIL: ring not empty at the end\n");
        return 1;
    }
    spsc_destroy(&ring);
    free(items);
    printf("spsc_test: %lu items through a 2-slot ring: OK\n", n_items);
    return 0;
}
