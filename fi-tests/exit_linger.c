// Loaded (dlopen) by fi_exit_test's client after libfabric: at exit its
// destructor runs after libfabric's, which has unloaded its providers by
// then, so the process lives on past its provider for as long as the test
// needs. It reports on FIT_LINGER_FD whether the provider is still mapped,
// waits until the test says the peer has exited, and gives DPDK's interrupt
// thread a second to tear the link to that peer down.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((destructor)) static void linger(void) {
  const char* fd_s = getenv("FIT_LINGER_FD");
  const char* prov = getenv("FIT_LINGER_PROVIDER");
  if (fd_s == NULL || prov == NULL) return;
  const int fd = atoi(fd_s);
  void* h = dlopen(prov, RTLD_NOW | RTLD_NOLOAD);
  char state = h != NULL ? 'k' : 'u';  // kept, unloaded
  if (h != NULL) dlclose(h);
  if (write(fd, &state, 1) != 1) return;
  char go;
  if (read(fd, &go, 1) != 1) return;
  sleep(1);
}
