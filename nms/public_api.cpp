// libscenelab_nms.so (scenelab::nms): NMS and the sliding-window head without the engine. Its
// code is the scenelab_nms archive, linked in whole; this file only gives the library a source
// of its own and checks that the public header stands alone.
#include "scenelab/nms.h"
