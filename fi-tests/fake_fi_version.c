/* Preloaded (LD_PRELOAD) in front of libfabric: fi_version() answers a
 * release whose ofi_rxm flow-control layout the provider does not know, so
 * that its refusal to offer the ops can be tested under this libfabric. */
#include <rdma/fabric.h>

uint32_t fi_version(void) { return FI_VERSION(1, 99); }
