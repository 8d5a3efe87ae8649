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
 * test and not the handoff stress catches the R2/A2 mutants.
 *
 * Then the same through the batched push (spsc_stage/spsc_publish) on a
 * 4-slot ring, in batches of 1 to 4 that, over the run, start at every
 * offset of the ring (batch_size): the consumer must see every batch whole
 * (once its first job is there, the rest are, with no waiting) and in
 * order, and (checked on one thread first) nothing of a batch before its
 * publish. Under TSan this part also catches R3, the publish's release. */
#include "../spsc_ring.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct job {
    unsigned long seq;
    unsigned long check; /* written by the producer before the push */
};

static struct spsc_ring ring;
static struct job *items;
static unsigned long n_items;

/* Item i, its payload written before it is pushed (check_item reads it back). */
static struct job *fill_item(unsigned long i)
{
    items[i].seq = i;
    items[i].check = i * 2654435761u;
    return &items[i];
}

static void *producer(void *p)
{
    (void)p;
    for (unsigned long i = 0; i < n_items; i++) {
        struct job *item = fill_item(i);
        while (!spsc_push(&ring, item))
            ; /* full: the consumer is behind */
    }
    return NULL;
}

/* Batch k's size: 1, 2, 3, 4, 1, then again. A cycle is 11 jobs, so on a
 * 4-slot ring each cycle starts 3 slots on from the last, and over four
 * cycles every size starts at every offset. */
static unsigned batch_size(unsigned long k)
{
    static const unsigned sizes[] = {1, 2, 3, 4, 1};
    return sizes[k % 5];
}

/* The batched producer: each batch staged, then published at once. */
static void *batch_producer(void *p)
{
    (void)p;
    unsigned long i = 0;
    for (unsigned long k = 0; i < n_items; k++) {
        unsigned size = batch_size(k), staged = spsc_staged_start(&ring);
        for (unsigned j = 0; j < size && i + j < n_items; j++) {
            struct job *item = fill_item(i + j);
            while (!spsc_stage(&ring, &staged, item))
                ; /* full: the consumer is behind */
        }
        spsc_publish(&ring, staged);
        i += size;
    }
    return NULL;
}

static bool check_item(const struct job *j, unsigned long want)
{
    if (j->seq == want && j->check == want * 2654435761u)
        return true;
    fprintf(stderr, "spsc_test: FAIL: popped seq %lu (check %lu), expected %lu\n", j->seq, j->check, want);
    return false;
}

/* The batched consumer: waits for a batch's first job, then takes the rest
 * of it without waiting. */
static void *batch_consumer(void *p)
{
    (void)p;
    unsigned long want = 0;
    for (unsigned long k = 0; want < n_items; k++) {
        unsigned size = batch_size(k);
        struct job *j;
        while (!(j = spsc_pop(&ring)))
            ;
        if (!check_item(j, want++))
            exit(1);
        for (unsigned i = 1; i < size && want < n_items; i++) {
            if (!(j = spsc_pop(&ring))) {
                fprintf(stderr, "spsc_test: FAIL: batch %lu seen in part (%u of %u jobs)\n", k, i, size);
                exit(1);
            }
            if (!check_item(j, want++))
                exit(1);
        }
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
        if (!check_item(j, want))
            exit(1);
        want++;
    }
    return NULL;
}

static int run(const char *name, void *(*produce)(void *), void *(*consume)(void *), unsigned capacity)
{
    if (spsc_init(&ring, capacity) < 0) {
        perror("spsc_test");
        return 2;
    }
    pthread_t a, b;
    pthread_create(&a, NULL, produce, NULL);
    pthread_create(&b, NULL, consume, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (spsc_pop(&ring) != NULL) {
        fprintf(stderr, "spsc_test: FAIL: %s: ring not empty at the end\n", name);
        return 1;
    }
    spsc_destroy(&ring);
    printf("spsc_test: %lu items through a %u-slot ring, %s: OK\n", n_items, capacity, name);
    return 0;
}

/* One thread: staged jobs stay invisible until published, and a full ring
 * refuses a stage. */
static int staged_unseen(void)
{
    struct job a = {0}, b = {0}, c = {0};
    if (spsc_init(&ring, 2) < 0)
        return 2;
    unsigned staged = spsc_staged_start(&ring);
    int bad = !spsc_stage(&ring, &staged, &a) || !spsc_stage(&ring, &staged, &b) ||
              spsc_stage(&ring, &staged, &c) || spsc_pop(&ring) != NULL;
    spsc_publish(&ring, staged);
    bad = bad || spsc_pop(&ring) != &a || spsc_pop(&ring) != &b || spsc_pop(&ring) != NULL;
    spsc_destroy(&ring);
    if (bad)
        fprintf(stderr, "spsc_test: FAIL: a staged job was seen before its publish, or a full "
                        "ring took a stage\n");
    return bad;
}

int main(int argc, char **argv)
{
    n_items = argc > 1 ? strtoul(argv[1], NULL, 0) : 200000;
    items = calloc(n_items, sizeof *items);
    if (!items) {
        perror("spsc_test");
        return 2;
    }
    int rc = run("one push at a time", producer, consumer, 2);
    if (!rc)
        rc = staged_unseen();
    if (!rc)
        rc = run("batches staged and published", batch_producer, batch_consumer, 4);
    free(items);
    return rc;
}
