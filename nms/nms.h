// The NMS rules are part of the public API: include/scenelab/nms.h.
#pragma once
#include "scenelab/nms.h"
