#include "stack/tools/tool_die.h"

#include <cstdarg>
#include <cstdlib>

namespace softrdma::tools {
namespace {
const char* g_tool_name = "tool";
}  // namespace

void set_tool_name(const char* name) { g_tool_name = name; }
const char* tool_name() { return g_tool_name; }

void die(int code, const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s: ", g_tool_name);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

void bad_usage(const char* program, const char* what, const char* arg, void (*usage)(FILE*)) {
  std::fprintf(stderr, "%s: %s: '%s'\n", program, what, arg);
  usage(stderr);
  std::exit(kExitError);
}

}  // namespace softrdma::tools
