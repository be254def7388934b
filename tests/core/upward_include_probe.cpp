// Compiled against the ground floor's view of the tree (build/floors/core) by the
// floor_view_refuses_upward test: the include below points upward, so it must not be found.
#include "core/error.h"
#include "engine/layer.h"
