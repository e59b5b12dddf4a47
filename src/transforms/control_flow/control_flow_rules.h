// Registration of the control-flow primitives' impl, VJP, batching and cost rules, one
// function per primitive (scan_rules.cc, cond_rules.cc, while_rules.cc) and one for the
// costs (cost_rules.cc); register.cc calls them.
#pragma once

#include "prims/registry.h"

namespace kiln::control_flow {

void register_scan_rules(PrimTable& table);
void register_cond_rules(PrimTable& table);
void register_while_rules(PrimTable& table);
// Cost rules (cost_rules.cc).
void register_control_flow_costs(PrimTable& table);

}  // namespace kiln::control_flow
