// Every family's ids, for the few files that handle every primitive by name (the registry,
// the default elementwise batching rule). Other files include the families they name.
#pragma once

#include "prims/ids/binary.h"
#include "prims/ids/contract.h"
#include "prims/ids/control_flow.h"
#include "prims/ids/convert.h"
#include "prims/ids/custom.h"
#include "prims/ids/index.h"
#include "prims/ids/random.h"
#include "prims/ids/reduce.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"
#include "prims/ids/sort.h"
#include "prims/ids/spmd.h"
#include "prims/ids/unary.h"
#include "prims/ids/window.h"
