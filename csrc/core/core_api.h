// The C ABI through which code outside the _core extension (the NCCL profiler plugin, which NCCL
// dlopens on its own) writes into the same core. The extension exports stallscope_core_api();
// a backend finds it with dlopen(getenv("STALLSCOPE_CORE_LIBRARY"), RTLD_NOLOAD | RTLD_LAZY) and
// dlsym, so it attaches to the copy Python already loaded and never loads a second one.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STALLSCOPE_CORE_API_VERSION 1
#define STALLSCOPE_CORE_API_SYMBOL "stallscope_core_api"
#define STALLSCOPE_CORE_LIBRARY_ENV "STALLSCOPE_CORE_LIBRARY"

// Same layout as stallscope::EventRecord (event_record.h); a static_assert keeps them equal.
typedef struct stallscope_event {
  int64_t start_ns;     // start, ns, process clock
  int64_t end_ns;       // end, ns, process clock
  int64_t correlation;  // correlation id / sequence number; 0 = none
  int64_t bytes;        // payload bytes
  uint32_t name_id;     // from intern()
  uint32_t detail_id;   // from intern(); 0 = none
  int32_t lane;         // thread id or stream id
  int16_t device;       // GPU ordinal, -1 = host
  uint8_t kind;         // stallscope::Kind
  uint8_t category;     // stallscope::Category
} stallscope_event;

typedef struct stallscope_core_api_t {
  uint32_t version;         // STALLSCOPE_CORE_API_VERSION
  uint32_t size;            // sizeof(stallscope_core_api_t): fields are only ever appended
  int64_t (*now_ns)(void);  // the process clock, ns
  uint32_t (*intern)(const char* s, size_t len);  // string id; takes a lock: cache the result
  int (*record)(const stallscope_event* e);       // 1 recorded; 0 off or dropped (counted)
  int (*recording)(void);                         // 1 while a trace records
  int32_t (*current_lane)(void);                  // OS thread id of the caller
} stallscope_core_api_t;

typedef const stallscope_core_api_t* (*stallscope_core_api_fn)(void);

#ifdef __cplusplus
}
#endif
