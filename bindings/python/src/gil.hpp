// The GIL rules of the mcdma Python binding.
//
//  * Every call into libmcdma that can wait (a transfer, a call, a gRPC
//    control request, connect, close) runs inside WithoutGil, so other Python
//    threads keep running meanwhile.
//  * No library thread (progress, stream) takes the GIL, and a handler thread
//    only for a service served inline (Client.serve(..., inline=True)). Other
//    work that needs Python is queued (queues.hpp) and picked up by Python
//    threads the package starts (mcdma/_dispatch.py). An inline handler
//    takes the GIL (KeptThreadGil) only while the interpreter is not
//    finalizing (else it answers CANCELLED); atexit closes every client,
//    which joins the handler threads, before finalization starts; and
//    Client.close releases the GIL while it joins them. So a library thread
//    never deadlocks on the GIL nor enters a finalizing interpreter.
//
// WithoutGil is deliberately not RAII (unlike py::gil_scoped_release): on
// Python 3.11, a thread that takes the GIL back while the interpreter
// finalizes is ended with pthread_exit, a forced unwind. From a destructor
// (noexcept) that unwind is std::terminate; from a plain call it unwinds
// cleanly through pybind11 (which rethrows abi::__forced_unwind).
#pragma once

#include <Python.h>

#include <optional>
#include <type_traits>
#include <utility>

namespace mcdma::python {

// True once the interpreter has started to finalize.
inline bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Runs fn() with the GIL released and returns its result. The caller must
// hold the GIL; fn must not touch Python objects.
template <typename F>
auto WithoutGil(F&& fn) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  PyThreadState* saved = PyEval_SaveThread();
  if constexpr (std::is_void_v<R>) {
    try {
      fn();
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
  } else {
    std::optional<R> result;
    try {
      result.emplace(fn());
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    return std::move(*result);
  }
}

// A library thread that runs Python often (an inline handler's) takes the
// GIL through this: the thread keeps one Python thread state for its life
// instead of PyGILState_Ensure making and deleting one per call. Call only
// while the interpreter runs (Py_IsInitialized, !Finalizing). The state is
// deleted when the thread ends, if the interpreter still runs then (a
// client's handler threads end in Client.close, before finalization).
class KeptThreadGil {
 public:
  KeptThreadGil() {
    Keep();
    state_ = PyGILState_Ensure();
  }
  KeptThreadGil(const KeptThreadGil&) = delete;
  KeptThreadGil& operator=(const KeptThreadGil&) = delete;
  ~KeptThreadGil() { PyGILState_Release(state_); }

 private:
  struct Kept {
    bool kept = false;
    ~Kept() {
      if (!kept || Py_IsInitialized() == 0 || Finalizing()) return;
      // Take the GIL (count 2), drop one count keeping it (count 1), then
      // the last: PyGILState deletes the thread state and the GIL goes.
      (void)PyGILState_Ensure();
      PyGILState_Release(PyGILState_LOCKED);
      PyGILState_Release(PyGILState_UNLOCKED);
    }
  };
  static void Keep() {
    thread_local Kept kept;
    if (kept.kept) return;
    // A thread state with one count that no Release matches: it outlives
    // every Ensure/Release pair after it. The GIL is dropped at once.
    (void)PyGILState_Ensure();
    (void)PyEval_SaveThread();
    kept.kept = true;
  }
  PyGILState_STATE state_;
};

// For destructors: runs fn() without the GIL when this thread holds it and
// the interpreter is not finalizing (then it keeps the GIL: see above). A
// finalization that starts on another thread while fn() runs (one gRPC
// request) would still end this thread badly; atexit closes every client
// first (mcdma/_client.py), so by then no library call is in progress.
template <typename F>
void WithoutGilIfHeld(F&& fn) {
  if (Py_IsInitialized() == 0 || Finalizing() || PyGILState_Check() == 0) {
    fn();
    return;
  }
  PyThreadState* saved = PyEval_SaveThread();
  fn();
  PyEval_RestoreThread(saved);
}

}  // namespace mcdma::python
