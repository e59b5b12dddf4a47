// kiln::nn: modules, initializers, activations, losses and metrics. See docs/training.md.
#pragma once

#include "kiln/nn/activations.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/gpt2.h"
#include "kiln/nn/initializers.h"
#include "kiln/nn/layer.h"
#include "kiln/nn/losses.h"
#include "kiln/nn/module.h"
#include "kiln/nn/remat_span.h"
