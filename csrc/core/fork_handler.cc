// After fork() the child starts with empty rings of its own and recording off: it never writes
// the parent's events or the parent's files. A child that starts its own trace records normally.
#include <pthread.h>

#include <mutex>
#include <new>

#include "collector.h"
#include "string_table.h"
#include "thread_registry.h"

namespace stallscope {

namespace {

void after_fork_in_child() {
  // Locks held by parent threads that do not exist here would deadlock the child.
  new (&Collector::lock()) std::mutex();
  StringTable::instance().reinit_after_fork();
  g_registry.reset_after_fork();
}

}  // namespace

// Called from ThreadRegistry::configure(), i.e. before the first trace records. (Not a static
// initializer: the linker drops unreferenced objects of a static library.)
void install_fork_handler() noexcept {
  static const bool installed = [] {
    pthread_atfork(nullptr, nullptr, &after_fork_in_child);
    return true;
  }();
  (void)installed;
}

}  // namespace stallscope
