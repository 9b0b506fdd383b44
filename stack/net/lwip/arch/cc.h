// lwIP port definitions for Linux/x86-64 with gcc or clang (lwIP's arch.h
// includes this first).
#ifndef SOFTRDMA_LWIP_ARCH_CC_H
#define SOFTRDMA_LWIP_ARCH_CC_H

#include <stdio.h>
#include <stdlib.h>
// glibc's htons & co. are macros too: keep them, lwIP's core uses lwip_htons.
#include <sys/types.h>
#define LWIP_DONT_PROVIDE_BYTEORDER_FUNCTIONS 1
// lwIP's own byte swaps, inline: otherwise every header field read or
// written is a function call.
#define lwip_htons(x) ((unsigned short)__builtin_bswap16((unsigned short)(x)))
#define lwip_htonl(x) ((unsigned int)__builtin_bswap32((unsigned int)(x)))

#define LWIP_ERRNO_STDINCLUDE 1
#define LWIP_TIMEVAL_PRIVATE 0
#include <sys/time.h>

// Release builds (NDEBUG) drop lwIP's internal asserts: they sit on every
// pbuf and pcb operation. Debug builds keep them and abort with a message.
#ifdef NDEBUG
#define LWIP_NOASSERT 1
#endif
#define LWIP_PLATFORM_DIAG(x) \
  do {                        \
    printf x;                 \
  } while (0)
#define LWIP_PLATFORM_ASSERT(x)                                                                \
  do {                                                                                         \
    fprintf(stderr, "lwIP assertion \"%s\" failed at line %d in %s\n", x, __LINE__, __FILE__); \
    fflush(stderr);                                                                            \
    abort();                                                                                   \
  } while (0)

// Randomises the first ephemeral port (tcp_init); see sys_arch.c.
#ifdef __cplusplus
extern "C" unsigned int softrdma_lwip_rand(void);
#else
unsigned int softrdma_lwip_rand(void);
#endif
#define LWIP_RAND() ((u32_t)softrdma_lwip_rand())

typedef unsigned int sys_prot_t;

#endif  // SOFTRDMA_LWIP_ARCH_CC_H
