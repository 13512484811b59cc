// The Arrow C data interface: our own declarations of its two structs, from the documented layout
// (arrow.apache.org/docs/format/CDataInterface.html). A producer fills both and hands them out in
// PyCapsules named "arrow_schema" and "arrow_array" (the PyCapsule interface); the consumer moves
// them out and calls release() once it no longer needs the buffers.
#pragma once

#include <cstdint>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

extern "C" {

struct ArrowSchema {
  const char* format;    // type, e.g. "l" int64, "g" float64, "vu" utf8 view
  const char* name;      // UTF-8, may be null
  const char* metadata;  // binary key-value pairs, may be null
  int64_t flags;         // ARROW_FLAG_*
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);  // null once released (or moved out)
  void* private_data;
};

struct ArrowArray {
  int64_t length;      // logical length, elements
  int64_t null_count;  // -1 when unknown
  int64_t offset;      // first element, in elements
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;  // buffers[0]: validity bitmap (may be null when null_count == 0)
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

}  // extern "C"

#endif  // ARROW_C_DATA_INTERFACE

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

extern "C" {

// The C stream interface: a producer's chunks one by one (PyCapsule "arrow_array_stream").
// Callbacks return 0 or an errno value; get_next sets array->release to null at the end.
struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);  // valid until the next call
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

}  // extern "C"

#endif  // ARROW_C_STREAM_INTERFACE
