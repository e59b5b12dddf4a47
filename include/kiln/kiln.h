// Everything kiln offers, for users' convenience. kiln's own sources include the specific
// headers they need instead.
#pragma once

#include "kiln/array.h"
#include "kiln/checkpoint.h"
#include "kiln/control_flow.h"
#include "kiln/cost.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/index_mode.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/profile.h"
#include "kiln/promotion.h"
#include "kiln/random.h"
#include "kiln/safetensors.h"
#include "kiln/shape.h"
#include "kiln/transforms.h"
#include "kiln/tree.h"
#include "kiln/vmap.h"
