// srdma_perf's two roles; each returns the process's exit code.
#pragma once

#include "stack/tools/perf_options.h"
#include "stack/tools/tool_common.h"

namespace softrdma::perf {

int run_client(const Options& o, tools::Clock::time_point deadline);
// Serves one client; requests outside the protocol's limits are rejected
// and the server waits on for the next.
int run_server(const Options& o, tools::Clock::time_point deadline);

}  // namespace softrdma::perf
