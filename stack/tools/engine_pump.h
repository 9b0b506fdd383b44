// One busy pass over an engine, as the engine tools run it between their own
// steps.
#pragma once

#include "stack/engine.h"

namespace softrdma::tools {

// I/O, then CM events and completions (up to kBatch at a time) handed to the
// callbacks.
template <int kBatch, class OnCm, class OnWc>
void pump_engine(Engine& eng, Cq* cq, OnCm on_cm, OnWc on_wc) {
  eng.progress(0);
  CmEvent ev;
  while (eng.poll_cm(&ev)) on_cm(ev);
  Wc buf[kBatch];
  for (int n; (n = eng.poll_cq(cq, buf, kBatch)) > 0;)
    for (int i = 0; i < n; ++i) on_wc(buf[i]);
}

}  // namespace softrdma::tools
