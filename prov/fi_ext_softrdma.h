/* softrdma's libfabric extension: the engine's counters (packets, bytes,
 * drops, retransmits, FPDUs, Terminates, resources in use), read through
 * fi_open_ops on a softrdma fabric or domain:
 *
 *   struct fi_softrdma_counters_ops *ops;
 *   fi_open_ops(&fabric->fid, FI_SOFTRDMA_COUNTERS_OPS, 0, (void **)&ops, NULL);
 *   struct softrdma_counters c;
 *   ops->read(&fabric->fid, &c, sizeof(c));
 *
 * Installed as <softrdma/fi_ext_softrdma.h> beside <softrdma/counters.h>.
 * docs/counters.md describes every field. */
#ifndef FI_EXT_SOFTRDMA_H
#define FI_EXT_SOFTRDMA_H

#include <stddef.h>

#include <rdma/fabric.h>

#include "counters.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FI_SOFTRDMA_COUNTERS_OPS "softrdma_counters_v1"

struct fi_softrdma_counters_ops {
  size_t size; /* sizeof(struct fi_softrdma_counters_ops) */
  /* Copies min(out_size, sizeof(struct softrdma_counters)) bytes of a
   * snapshot of the counters of the engine behind fid (a softrdma fabric or
   * domain) to out; fields are only ever appended, so an older caller's
   * smaller struct gets the fields it knows. 0 or -FI_EINVAL. */
  int (*read)(struct fid *fid, struct softrdma_counters *out, size_t out_size);
};

#ifdef __cplusplus
}
#endif

#endif
