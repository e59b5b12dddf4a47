#!/usr/bin/env python3
"""kiln's RDP accountant (kiln/privacy.h) against Google's dp-accounting and Opacus, for
tests/optim/privacy_accountant_test.cc, which writes FILE: for each case the sampling rate
q, the noise multiplier sigma, the steps and delta; kiln's epsilon at each of
dp-accounting's default orders with its series (kUpperBound: the binomial coefficients'
magnitudes added), the smallest and its order; and kiln's epsilon at each of Opacus'
default orders with Opacus' series (kExact: the coefficients' signs kept). The two peers
differ where sigma is small (up to 4% at sigma = 0.5), so each is compared with kiln's
computation of its own definition.

dp-accounting: the RDP its RdpAccountant composes for a PoissonSampledDpEvent of a
GaussianDpEvent (_compute_rdp_poisson_subsampled_gaussian, times the steps), each order's
epsilon by its compute_epsilon, and the accountant's get_epsilon_and_optimal_order. It
gives up on a fractional order whose series has not converged in 1000 terms and leaves the
order out (infinite RDP); kiln sums on to convergence, so where dp-accounting left out the
order that is best for kiln, kiln's epsilon is the smaller: such cases are compared over
the orders both computed, and counted. Opacus: its RDP analysis module
(opacus/accountants/analysis/rdp.py: compute_rdp and get_privacy_spent), loaded from the
installed package's file, since importing the package would import PyTorch, which the
peers' environment does not hold and the module does not use.

Agreement: every order's epsilon within 1e-6 relative (plus 1e-12 absolute, for
epsilons of 0) of each peer's where the peer computed it, and the smallest over those
orders equal to the peer's epsilon.

  privacy_crosscheck.py FILE    exit 0 when everything agrees, 1 naming each difference,
                                2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import importlib.util
import json
import os
import sys

import peers

RTOL, ATOL = 1e-6, 1e-12


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("privacy_crosscheck.py")
    try:
        import numpy as np
        from dp_accounting import dp_event
        from dp_accounting.rdp import rdp_privacy_accountant as rdp_module
        from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant
        opacus_spec = importlib.util.find_spec("opacus")
        if opacus_spec is None:
            raise ImportError(name="opacus")
    except ImportError as error:
        peers.fail("privacy_crosscheck.py",
                   f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    from importlib import metadata
    peers.require("privacy_crosscheck.py", {"dp-accounting": metadata.version("dp-accounting"),
                                           "opacus": metadata.version("opacus")})
    rdp_file = os.path.join(os.path.dirname(opacus_spec.origin), "accountants", "analysis",
                            "rdp.py")
    spec = importlib.util.spec_from_file_location("opacus_rdp", rdp_file)
    opacus_rdp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(opacus_rdp)
    opacus_orders = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))

    def close(kiln_value, peer_value):
        return abs(kiln_value - peer_value) <= ATOL + RTOL * abs(peer_value)

    with open(argv[1]) as f:
        record = json.load(f)
    failed, worst, left_out = [], 0.0, 0
    for case in record["cases"]:
        q, sigma, steps, delta = case["q"], case["sigma"], case["steps"], case["delta"]
        what = f"q {q:g}, sigma {sigma:g}, {steps} steps, delta {delta:g}"
        if list(case["orders"]) != list(rdp_module.DEFAULT_RDP_ORDERS):
            failed.append(f"{what}: kiln's default orders are not dp-accounting's")
            continue
        # dp-accounting, order by order, then its accountant's answer.
        rdp = np.asarray(rdp_module._compute_rdp_poisson_subsampled_gaussian(
            q, sigma, case["orders"])) * steps
        common = []
        for order, kiln_value, order_rdp in zip(case["orders"], case["epsilons"], rdp):
            if not np.isfinite(order_rdp):
                continue
            peer_value = float(rdp_module.compute_epsilon([order], [order_rdp], delta)[0])
            common.append((kiln_value, order))
            worst = max(worst, abs(kiln_value - peer_value) / max(abs(peer_value), 1e-300))
            if not close(kiln_value, peer_value):
                failed.append(f"{what}, order {order}: kiln epsilon {kiln_value!r}, "
                              f"dp-accounting {peer_value!r}")
        accountant = RdpAccountant()
        accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)),
                           steps)
        google, google_order = accountant.get_epsilon_and_optimal_order(delta)
        best_common, best_order = min(common)
        if not close(max(best_common, 0.0), float(google)) or best_order != float(google_order):
            failed.append(f"{what}: kiln's best over dp-accounting's orders {best_common!r} at "
                          f"{best_order}, dp-accounting {float(google)!r} at {google_order}")
        if len(common) < len(case["orders"]):
            left_out += 1
            if case["epsilon"] > float(google) * (1 + RTOL) + ATOL:
                failed.append(f"{what}: kiln's epsilon {case['epsilon']!r} above "
                              f"dp-accounting's {float(google)!r} with more orders")
        elif not close(case["epsilon"], float(google)) or case["order"] != float(google_order):
            failed.append(f"{what}: kiln epsilon {case['epsilon']!r} at {case['order']}, "
                          f"dp-accounting {float(google)!r} at {float(google_order)}")
        # Opacus, order by order, then over its orders.
        opacus_orders = case["opacus_orders"]
        opacus_rdp_values = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps,
                                                   orders=opacus_orders)
        for order, kiln_value, order_rdp in zip(opacus_orders, case["epsilons_exact"],
                                                opacus_rdp_values):
            peer_value = float(opacus_rdp.get_privacy_spent(orders=[order], rdp=[order_rdp],
                                                            delta=delta)[0])
            worst = max(worst, abs(kiln_value - peer_value) / max(abs(peer_value), 1e-300))
            if not close(kiln_value, peer_value):
                failed.append(f"{what}, order {order}: kiln epsilon {kiln_value!r} (exact "
                              f"series), opacus {peer_value!r}")
        opacus, _ = opacus_rdp.get_privacy_spent(orders=opacus_orders, rdp=opacus_rdp_values,
                                                 delta=delta)
        if not close(max(min(case["epsilons_exact"]), 0.0), float(opacus)):
            failed.append(f"{what}: kiln's best over Opacus' orders "
                          f"{min(case['epsilons_exact'])!r}, opacus {float(opacus)!r}")
    for line in failed[:40]:
        print("FAILED", line)
    print(f"privacy_crosscheck: {len(record['cases'])} cases against dp-accounting "
          f"{metadata.version('dp-accounting')} and opacus {metadata.version('opacus')}, order "
          f"by order: largest relative difference {worst:.3g}; {left_out} cases where "
          f"dp-accounting left out orders whose series it stopped at 1000 terms; "
          f"{len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
