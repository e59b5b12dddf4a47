// The control-flow primitives' rules that run, differentiate and batch sub-programs (their
// shape rules are registered by src/prims/control_flow_rules.cc).
#include "transforms/control_flow/control_flow_rules.h"

namespace kiln {

void register_control_flow_transforms(PrimTable& table) {
  control_flow::register_scan_rules(table);
  control_flow::register_cond_rules(table);
  control_flow::register_while_rules(table);
  control_flow::register_control_flow_costs(table);
}

}  // namespace kiln
