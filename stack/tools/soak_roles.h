// srdma_soak's two roles; each returns the process's exit code.
#pragma once

#include "stack/tools/soak_options.h"

namespace softrdma::soak {

int run_client(const Options& o);
int run_server(const Options& o);

}  // namespace softrdma::soak
