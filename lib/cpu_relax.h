/* cpu_relax.h — the pause between two looks at a word another thread will change:
 * it tells the core (and a hypervisor) that this is a spin, so the sibling
 * hyperthread or vCPU gets the pipeline meanwhile. */
#ifndef CSERVE_CPU_RELAX_H
#define CSERVE_CPU_RELAX_H

#include <stdatomic.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif
