// How the tools stop: a message under the tool's name and an exit code.
#pragma once

#include <cstdio>

namespace softrdma::tools {

inline constexpr int kExitMismatch = 1;  // data verification failed (soak: or memory grew)
inline constexpr int kExitError = 2;     // usage, connection or completion error, timeout

// The prefix of die() and of the diagnostics that name the tool
// ("srdma_perf", "srdma_soak server", ...).
void set_tool_name(const char* name);
const char* tool_name();

[[noreturn]] __attribute__((format(printf, 2, 3))) void die(int code, const char* fmt, ...);

// "<program>: <what>: '<arg>'", the usage text on stderr, exit kExitError.
[[noreturn]] void bad_usage(const char* program, const char* what, const char* arg,
                            void (*usage)(FILE*));

}  // namespace softrdma::tools
